//! `aquaregia models`: what the configured providers offer, as `provider:model` specs.

use anyhow::bail;
use aquaregia::Client;
use clap::Args;
use futures::future::join_all;
use serde_json::json;

use crate::output::{self, Styles};

#[derive(Debug, Args)]
#[command(after_help = models_after_help())]
pub(crate) struct ModelsArgs {
    /// Only these providers (see below).
    #[arg(value_name = "PROVIDER")]
    providers: Vec<String>,
    /// Print them as JSON: `[{"spec", "provider", "model", "default"}]`.
    #[arg(long)]
    json: bool,
}

/// The ids of every provider the SDK knows, comma-separated.
fn provider_list() -> String {
    Client::provider_key_vars()
        .iter()
        .map(|(id, _)| *id)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `--model` help of `run`, `chat` and `acp`: every provider, then `default`.
pub(crate) fn model_help(default: &str) -> String {
    format!(
        "The model, as provider:model (providers: {}). Default: {default}",
        provider_list()
    )
}

/// `models --help`'s closing text: how providers are chosen and asked, and each provider's
/// key variable.
fn models_after_help() -> String {
    let mut text = String::from(
        "Without PROVIDER, every provider whose API key is set is asked, plus the provider of \
         the\ndefault model (AQUAREGIA_MODEL, else the first provider with a key, else Ollama). \
         The default\nmodel is marked. OpenAI-compatible servers and Ollama are asked (GET \
         /models); Anthropic,\nGemini, Bedrock and Vertex answer from a built-in list.\n\nProviders \
         and the variable holding their key:\n",
    );
    for (id, vars) in Client::provider_key_vars() {
        let vars = if vars.is_empty() {
            "(no key)".to_owned()
        } else {
            vars.join(" or ")
        };
        text.push_str(&format!("  {id:<16} {vars}\n"));
    }
    let providers = Client::provider_key_vars();
    if providers.iter().any(|(id, _)| *id == "vertex") {
        text.push_str(
            "\nvertex and vertex-anthropic take an access token from GOOGLE_CLOUD_ACCESS_TOKEN, \
             else mint\none from GOOGLE_APPLICATION_CREDENTIALS (a service-account key) or \
             gcloud's application-default\ncredentials; the project is GOOGLE_CLOUD_PROJECT \
             (or the key's), the location\nGOOGLE_CLOUD_LOCATION (default global).\n",
        );
    }
    text
}

pub(crate) async fn run(args: ModelsArgs) -> anyhow::Result<()> {
    let default = Client::default_model_spec();
    let default_provider = default.split_once(':').map_or("", |(id, _)| id).to_owned();
    let known: Vec<(&str, &[&str])> = Client::provider_key_vars();
    for name in &args.providers {
        if !known.iter().any(|(id, _)| id == name) {
            let ids: Vec<&str> = known.iter().map(|(id, _)| *id).collect();
            bail!("unknown provider `{name}` (use one of {})", ids.join(", "));
        }
    }
    let asked: Vec<&str> = known
        .iter()
        .filter(|(id, vars)| {
            if args.providers.is_empty() {
                *id == default_provider
                    || vars
                        .iter()
                        .any(|var| std::env::var(var).is_ok_and(|value| !value.is_empty()))
            } else {
                args.providers.iter().any(|name| name == id)
            }
        })
        .map(|(id, _)| *id)
        .collect();
    let listings = join_all(asked.iter().map(|id| async move {
        // Any model name builds the client; only the provider matters here.
        let result = match Client::from_model_spec(&format!("{id}:list")) {
            Ok((client, _)) => client.list_models().await.map_err(anyhow::Error::from),
            Err(error) => Err(error.into()),
        };
        (*id, result)
    }))
    .await;

    let styles = Styles::stderr();
    let mut rows = Vec::new();
    let mut failures = 0;
    for (id, result) in listings {
        match result {
            Ok(models) => rows.extend(models.into_iter().map(|model| (id, model))),
            Err(error) => {
                failures += 1;
                eprintln!(
                    "{} {id}: {}",
                    styles.yellow("warning:"),
                    output::first_line(&output::clean(&format!("{error:#}")), 300)
                );
            }
        }
    }
    if rows.is_empty() && failures > 0 {
        bail!("no provider answered");
    }
    if args.json {
        let list: Vec<_> = rows
            .iter()
            .map(|(id, model)| {
                let spec = format!("{id}:{model}");
                json!({"spec": spec, "provider": id, "model": model, "default": spec == default})
            })
            .collect();
        return output::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&list)?));
    }
    let stdout = Styles::stdout();
    let mut out = String::new();
    for (id, model) in &rows {
        let spec = format!("{id}:{}", output::clean(model));
        if spec == default {
            out.push_str(&format!(
                "{} {}\n",
                stdout.bold(&spec),
                stdout.green("(default)")
            ));
        } else {
            out.push_str(&spec);
            out.push('\n');
        }
    }
    output::write_stdout(&out)
}

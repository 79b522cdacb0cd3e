//! `aquaregia acp`: serve an agent over ACP (Agent Client Protocol) on stdio.
//!
//! stdout carries only JSON-RPC; logs go to stderr. Without the model's API key the agent
//! still starts: it offers ACP auth methods and waits for `authenticate` (keys entered that
//! way are stored 0600 in the data dir, `AQUAREGIA_DATA_DIR` overriding it). The editor's MCP
//! servers' tools are pinned in the data dir's `pins.json`, the file `aquaregia mcp trust`
//! writes: a tool that changed since is withheld until approved, and only trusted servers'
//! read-only hints are believed.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::prompt_cache;
use crate::reaper;
use crate::telemetry;
use anyhow::Context;
use aquaregia::Client;
use aquaregia_acp::{AcpServer, ApiKeyAuth, Sandbox};
use aquaregia_mcp::{Connector, FileTokenStore, OAuth, PinFile};
use clap::Args;

/// The ACP SDK logs whole messages at TRACE: API keys from `authenticate`, headers and env
/// values from `session/new`. Its logs stop at DEBUG whatever `RUST_LOG` says (the cap is
/// added only when something logs at TRACE, so it never raises the SDK's level).
pub(crate) const LOG_CAP: &str = "agent_client_protocol=debug";

#[derive(Debug, Args)]
pub(crate) struct AcpArgs {
    // The model; its help lists every provider the SDK knows.
    #[arg(long, env = "AQUAREGIA_MODEL", value_name = "PROVIDER:MODEL",
          help = crate::models_cmd::model_help(
              "the provider whose API key is set, else a local Ollama."))]
    pub(crate) model: Option<String>,

    /// How long each MCP server of a session gets to start and finish its handshake.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub(crate) mcp_startup_timeout: u64,

    /// Hide tools from the model, by name or glob such as `fs__write_*` (repeatable).
    #[arg(long = "disable-tool", value_name = "NAME_OR_GLOB")]
    pub(crate) disabled_tools: Vec<String>,

    /// The most model calls per prompt turn.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_steps: u32,

    /// System instructions for the model.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,

    /// Read the model's API key from the terminal, store it in the data dir and exit (ACP
    /// terminal auth runs this).
    #[arg(long)]
    pub(crate) login: bool,

    /// Local commands (`run_command` when the editor has no terminal) may not open TCP
    /// connections or listen (Landlock, Linux 6.7 or later).
    #[arg(long)]
    pub(crate) no_network: bool,

    /// Decide tool calls with this Cedar policy file first: its forbids refuse, its permits
    /// run without asking whatever the mode, permits annotated @decision("ask") and calls it
    /// does not match are left to the session's mode.
    #[arg(long, value_name = "FILE.cedar")]
    pub(crate) policy: Option<std::path::PathBuf>,

    /// Evaluate this Cedar policy file in shadow mode: log (target aquaregia::policy) what it
    /// would decide for each call, without enforcing it.
    #[arg(long, value_name = "FILE.cedar")]
    pub(crate) policy_shadow: Option<std::path::PathBuf>,

    /// Believe the annotations of the editor's MCP servers named NAME (repeatable): their
    /// read-only tools run without asking. Other servers' read-only tools ask, offering to
    /// trust the server; `aquaregia mcp trust` trusts one for good.
    #[arg(long = "trust-server", value_name = "NAME")]
    pub(crate) trusted_servers: Vec<String>,
}

/// The hidden subcommand that confines a local command and runs it
/// ([`aquaregia_acp::sandbox::launcher_main`]).
pub(crate) const SANDBOX_SUBCOMMAND: &str = "__sandbox";

/// `$AQUAREGIA_DATA_DIR`, else `<platform data dir>/aquaregia`.
fn data_dir() -> anyhow::Result<PathBuf> {
    match std::env::var_os("AQUAREGIA_DATA_DIR") {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => dirs::data_dir()
            .map(|dir| dir.join("aquaregia"))
            .context("no data directory: set AQUAREGIA_DATA_DIR"),
    }
}

/// One API-key method per key variable (providers sharing a variable share the method).
fn auth(data_dir: PathBuf) -> ApiKeyAuth {
    let mut auth = ApiKeyAuth::new(data_dir).terminal_login(vec!["acp".into(), "--login".into()]);
    let mut seen = Vec::new();
    for (provider, vars) in Client::provider_key_vars() {
        let Some(var) = vars.first() else { continue };
        if seen.contains(var) {
            continue;
        }
        seen.push(var);
        auth = auth.method(provider, format!("{provider} API key ({var})"), *var);
    }
    auth
}

/// The model's client, built on first use with the key from the environment or the store.
struct Clients {
    spec: String,
    auth: ApiKeyAuth,
    /// The key it was built with, and the client.
    built: Mutex<Option<(Option<String>, Client)>>,
}

impl Clients {
    fn client(&self) -> Result<Client, aquaregia::Error> {
        let key = self.auth.required().and_then(|var| self.auth.api_key(var));
        let mut built = aquaregia::sync::lock(&self.built);
        if let Some((built_key, client)) = built.as_ref()
            && *built_key == key
        {
            return Ok(client.clone());
        }
        let (mut builder, _) = Client::builder_from_model_spec(&self.spec)?;
        if let Some(key) = &key {
            builder = builder.api_key(key.clone());
        }
        let client = builder.build()?;
        *built = Some((key, client.clone()));
        Ok(client)
    }
}

pub(crate) async fn run(args: AcpArgs, config: Option<&std::path::Path>) -> anyhow::Result<()> {
    let spec = args.model.unwrap_or_else(Client::default_model_spec);
    let (builder, model) = Client::builder_from_model_spec(&spec)
        .with_context(|| format!("cannot use model `{spec}`"))?;
    let data_dir = data_dir()?;
    let mut auth = auth(data_dir.clone());
    // A missing key is not fatal: the client is asked for it through ACP. The HTTP client
    // (TLS roots and all) is built on first use, not before the `initialize` answer.
    let required = match builder.check() {
        Ok(()) => None,
        Err(aquaregia::Error::MissingApiKey { env_var }) => {
            auth = auth.require(env_var);
            Some(env_var)
        }
        Err(error) => return Err(error).with_context(|| format!("cannot use model `{spec}`")),
    };
    if args.login {
        return login(&auth, required);
    }
    let policy =
        crate::permissions::acp_policy(args.policy.as_deref(), args.policy_shadow.as_deref())?;
    // Before `initialize` is answered: a store that cannot be opened is a start-up error.
    let sessions = crate::session_store::open(config, || Ok(data_dir.join("sessions"))).await?;
    tracing::info!(store = %sessions.place, "sessions");
    tracing::info!(model = %spec, key_needed = ?required.filter(|var| auth.api_key(var).is_none()), "aquaregia acp: serving ACP on stdio");
    let clients = Arc::new(Clients {
        spec,
        auth: auth.clone(),
        built: Mutex::new(None),
    });
    let (max_steps, system) = (args.max_steps as usize, args.system);
    let lister = clients.clone();
    let default_model = model.clone();
    let no_network = args.no_network;
    let server = AcpServer::try_new(move |session| {
        let picked = session.model.clone().unwrap_or_else(|| model.clone());
        let client = clients.client()?;
        let agent = client
            .agent(picked)
            .max_steps(max_steps)
            .prompt_caching(prompt_cache::for_session(&client, &session.cache_key))
            .telemetry(telemetry::agent_telemetry().conversation_id(&session.session_id));
        Ok(match &system {
            Some(system) => agent.instructions(system.clone()),
            None => agent,
        })
    })
    .auth(auth)
    .editor_tools(true)
    // Secrets are redacted from each turn before it is written.
    .session_store(sessions.store)
    .models(default_model, move || {
        let clients = lister.clone();
        Box::pin(async move {
            let client = clients.client().map_err(|error| error.to_string())?;
            client
                .list_models()
                .await
                .map_err(|error| error.to_string())
        })
    })
    // The editor started us: no terminal to authorize from. Tokens `mcp login` stored are
    // used and refreshed; a server without one says how to log in.
    .connector(
        Connector::new()
            .timeout(Duration::from_secs(args.mcp_startup_timeout))
            .oauth(
                OAuth::new("http://127.0.0.1/callback")
                    .store(FileTokenStore::new(data_dir.clone())),
            ),
    )
    .disable_tools(args.disabled_tools)
    // A reaper ends the servers' process groups if this process is killed outright.
    .on_process(reaper::on_process)
    // The editor's servers are pinned, and trusted, in the file `aquaregia mcp trust` and
    // `untrust` write: trusting a server there trusts it here, and the other way round.
    .pins(PinFile::new(data_dir.join("pins.json")));
    let server = args
        .trusted_servers
        .into_iter()
        .fold(server, AcpServer::trust_server);
    // Local commands are confined by this binary itself (`aquaregia __sandbox`).
    let server = match std::env::current_exe() {
        Ok(exe) => server.sandbox(
            Sandbox::launcher(exe)
                .arg(SANDBOX_SUBCOMMAND)
                .network(!no_network),
        ),
        Err(error) => {
            tracing::warn!(%error, "cannot find this binary: local commands run unconfined");
            server
        }
    };
    server
        .permission_policy(policy)
        .login_hint(|url| {
            format!(
                "run `aquaregia mcp login --http {url}` in a terminal, then start a new session"
            )
        })
        .serve_stdio()
        .await?;
    Ok(())
}

/// `--login`: one line from stdin becomes the stored key for the model's variable.
fn login(auth: &ApiKeyAuth, required: Option<&'static str>) -> anyhow::Result<()> {
    let Some(var) = required else {
        eprintln!("The model needs no API key, or its variable is set: nothing to store.");
        return Ok(());
    };
    eprint!("API key for {var}: ");
    let mut key = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut key)
        .context("reading the key")?;
    let key = key.trim();
    anyhow::ensure!(!key.is_empty(), "no key entered");
    auth.store_key(var, key)?;
    eprintln!("Stored.");
    Ok(())
}

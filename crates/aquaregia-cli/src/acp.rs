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
    #[command(flatten)]
    pub(crate) agent: AgentArgs,

    /// Read the model's API key from the terminal, store it in the data dir and exit (ACP
    /// terminal auth runs this).
    #[arg(long)]
    pub(crate) login: bool,
}

/// The agent `acp` and `serve` run.
#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
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

    /// The most model calls of one run of the `task` subagent (the built-in general
    /// subagent: the model hands it a self-contained task, a fresh agent with the session's
    /// tools works on it; a client that supports subagents shows it as a child session).
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) subagent_max_steps: u32,

    /// Don't offer the `task` subagent.
    #[arg(long)]
    pub(crate) no_subagents: bool,

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

/// The model the agent runs and where its key comes from.
pub(crate) struct ModelSetup {
    spec: String,
    model: String,
    data_dir: PathBuf,
    /// The key variables, offered as ACP auth methods.
    auth: ApiKeyAuth,
    /// The model's key variable when it is not set (the key may still be stored).
    required: Option<&'static str>,
}

impl ModelSetup {
    /// The model of `spec` (default: [`Client::default_model_spec`]). A missing key is not
    /// an error here: the editor's agent asks for it through ACP.
    pub(crate) fn new(spec: Option<String>) -> anyhow::Result<Self> {
        let spec = spec.unwrap_or_else(Client::default_model_spec);
        let (builder, model) = Client::builder_from_model_spec(&spec)
            .with_context(|| format!("cannot use model `{spec}`"))?;
        let data_dir = data_dir()?;
        let mut auth = auth(data_dir.clone());
        // The HTTP client (TLS roots and all) is built on first use, not before the
        // `initialize` answer.
        let required = match builder.check() {
            Ok(()) => None,
            Err(aquaregia::Error::MissingApiKey { env_var }) => {
                auth = auth.require(env_var);
                Some(env_var)
            }
            Err(error) => return Err(error).with_context(|| format!("cannot use model `{spec}`")),
        };
        Ok(Self {
            spec,
            model,
            data_dir,
            auth,
            required,
        })
    }

    /// The model's key variable when its key is neither set nor stored.
    #[cfg(feature = "serve")]
    pub(crate) fn missing_key(&self) -> Option<&'static str> {
        self.required.filter(|var| self.auth.api_key(var).is_none())
    }

    /// The `provider:model` spec.
    #[cfg(feature = "serve")]
    pub(crate) fn spec(&self) -> &str {
        &self.spec
    }
}

pub(crate) async fn run(args: AcpArgs, config: Option<&std::path::Path>) -> anyhow::Result<()> {
    let setup = ModelSetup::new(args.agent.model.clone())?;
    if args.login {
        return login(&setup.auth, setup.required);
    }
    let auth = setup.auth.clone();
    let server = agent_server(args.agent, config, setup).await?;
    tracing::info!("aquaregia acp: serving ACP on stdio");
    // Without a usable key, the client is asked for one through ACP.
    server.auth(auth).serve_stdio().await?;
    Ok(())
}

/// The ACP agent of `args` on `setup`'s model, with the session store of `config`, the data
/// dir's pins and OAuth tokens, the reaper, and the sandbox: what `acp` serves on stdio and
/// `serve` to each WebSocket client.
pub(crate) async fn agent_server(
    args: AgentArgs,
    config: Option<&std::path::Path>,
    setup: ModelSetup,
) -> anyhow::Result<AcpServer> {
    let ModelSetup {
        spec,
        model,
        data_dir,
        auth,
        required,
    } = setup;
    let policy =
        crate::permissions::acp_policy(args.policy.as_deref(), args.policy_shadow.as_deref())?;
    // Before `initialize` is answered: a store that cannot be opened is a start-up error.
    let sessions = crate::session_store::open(config, || Ok(data_dir.join("sessions"))).await?;
    tracing::info!(store = %sessions.place, "sessions");
    tracing::info!(model = %spec, key_needed = ?required.filter(|var| auth.api_key(var).is_none()), "the agent's model");
    let clients = Arc::new(Clients {
        spec,
        auth,
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
    .editor_tools(true)
    .task_subagent((!args.no_subagents).then_some(args.subagent_max_steps as usize))
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
    Ok(server.permission_policy(policy).login_hint(|url| {
        format!("run `aquaregia mcp login --http {url}` in a terminal, then start a new session")
    }))
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

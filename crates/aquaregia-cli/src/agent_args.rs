//! The flags `run` and `chat` share: servers, model, loop limits, permissions, sessions.

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::servers::InlineServers;

/// Everything that shapes an agent and its tools, for `run` and `chat`.
#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// Use this server of the config file (repeatable).
    #[arg(long = "server", value_name = "NAME")]
    pub(crate) servers: Vec<String>,

    #[command(flatten)]
    pub(crate) inline: InlineServers,

    // The model; its help lists every provider the SDK knows.
    #[arg(long, env = "AQUAREGIA_MODEL", value_name = "PROVIDER:MODEL",
          help = crate::models_cmd::model_help(
              "a resumed session's model, else the provider whose API key is set, else a local \
               Ollama."))]
    pub(crate) model: Option<String>,

    /// The most model calls per turn.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_steps: u32,

    /// System instructions for the model.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,

    /// Offer the `task` subagent: the model hands it a self-contained task, and a fresh agent
    /// with the same model and tools works on it and answers; its tool calls are shown
    /// indented under the `task` call and asked about as the turn's own are.
    #[arg(long)]
    pub(crate) subagents: bool,

    /// The most model calls of one run of the `task` subagent.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) subagent_max_steps: u32,

    /// Allow every tool call without asking (--deny still applies).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,

    /// Ask before read-only tools too (by default tools annotated read-only run without asking).
    #[arg(long)]
    pub(crate) ask_all: bool,

    /// Allow tools matching this name or glob without asking (repeatable; also the config's
    /// "permissions": {"allow": [...]}).
    #[arg(long = "allow", value_name = "GLOB")]
    pub(crate) allow: Vec<String>,

    /// Never run tools matching this name or glob (repeatable; also the config's
    /// "permissions": {"deny": [...]}). Wins over --allow and --yes.
    #[arg(long = "deny", value_name = "GLOB")]
    pub(crate) deny: Vec<String>,

    /// Decide tool calls with this Cedar policy file too (also the config's "policy"; this
    /// flag wins). Its forbids refuse after --deny; its permits allow, or ask when annotated
    /// @decision("ask"); calls it does not match go on to --yes, --allow and the read-only rule.
    #[arg(long, value_name = "FILE.cedar")]
    pub(crate) policy: Option<std::path::PathBuf>,

    /// Evaluate this Cedar policy file in shadow mode: log (target aquaregia::policy, at info,
    /// or warn when it differs) what it would decide for each call, without enforcing it.
    #[arg(long, value_name = "FILE.cedar")]
    pub(crate) policy_shadow: Option<std::path::PathBuf>,

    /// Hide tools from the model, by name or glob such as `fs__write_*` (repeatable).
    #[arg(long = "disable-tool", value_name = "NAME_OR_GLOB")]
    pub(crate) disabled_tools: Vec<String>,

    /// How long each MCP server gets to start and finish its handshake.
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) connect_timeout: u64,

    /// How long one tool call may take (default: the SDK's).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) call_timeout: Option<u64>,

    /// Don't show the model's reasoning (shown dimmed on stderr on a terminal by default).
    #[arg(long)]
    pub(crate) no_reasoning: bool,

    /// Stop when any server fails to start (by default the others are used and the failure
    /// reported).
    #[arg(long)]
    pub(crate) strict: bool,

    #[command(flatten)]
    pub(crate) session: SessionArgs,
}

impl AgentArgs {
    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout)
    }

    pub(crate) fn call_timeout(&self) -> Option<Duration> {
        self.call_timeout.map(Duration::from_secs)
    }
}

/// Which saved session to continue, if any.
#[derive(Debug, Args)]
pub(crate) struct SessionArgs {
    /// Continue the most recent session of this directory.
    #[arg(long = "continue", short = 'c', conflicts_with = "resume")]
    pub(crate) continue_latest: bool,

    /// Continue the session with this id (see `aquaregia sessions`).
    #[arg(long, value_name = "ID")]
    pub(crate) resume: Option<String>,

    /// With --resume or --continue: go on in a new session forked from that one (its history
    /// up to its latest turn, which stays as it was).
    #[arg(long)]
    pub(crate) fork: bool,

    /// Don't save this conversation.
    #[arg(long, conflicts_with_all = ["continue_latest", "resume", "fork"])]
    pub(crate) no_save: bool,
}

/// How `run` prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum OutputFormat {
    /// The answer as it streams; tool calls on stderr.
    #[default]
    Text,
    /// One JSON object at the end: answer, tool calls, usage, stop reason, session id.
    Json,
    /// One JSON event per line as they happen, the same object as `json` last.
    StreamJson,
}

//! `aquaregia acp`: serve an agent over ACP (Agent Client Protocol) on stdio.
//!
//! stdout carries only JSON-RPC; logs go to stderr.

use std::time::Duration;

use crate::prompt_cache;
use anyhow::Context;
use aquaregia::Client;
use aquaregia_acp::AcpServer;
use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct AcpArgs {
    /// The model, as provider:model (providers: openai, openai-chat, anthropic, ollama).
    /// Default: the provider whose API key is set, else a local Ollama.
    #[arg(long, env = "AQUAREGIA_MODEL", value_name = "PROVIDER:MODEL")]
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
}

pub(crate) async fn run(args: AcpArgs) -> anyhow::Result<()> {
    let spec = args.model.unwrap_or_else(Client::default_model_spec);
    let (client, model) =
        Client::from_model_spec(&spec).with_context(|| format!("cannot use model `{spec}`"))?;
    tracing::info!(model = %spec, "aquaregia acp: serving ACP on stdio");
    let (max_steps, system) = (args.max_steps as usize, args.system);
    AcpServer::new(move |session| {
        let agent = client
            .agent(model.clone())
            .max_steps(max_steps)
            .prompt_caching(prompt_cache::for_session(&client, &session.session_id));
        match &system {
            Some(system) => agent.instructions(system.clone()),
            None => agent,
        }
    })
    .mcp_startup_timeout(Duration::from_secs(args.mcp_startup_timeout))
    .disable_tools(args.disabled_tools)
    .serve_stdio()
    .await?;
    Ok(())
}

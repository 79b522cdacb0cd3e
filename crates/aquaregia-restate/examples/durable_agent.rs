//! A durable agent on Restate, and the command that approves its tool calls.
//!
//! ```text
//! durable_agent serve [ADDRESS]     serve the `AgentRun` workflow (default 127.0.0.1:9080)
//! durable_agent approve RUN_ID      approve every call run RUN_ID waits on
//! durable_agent deny RUN_ID REASON  deny them, telling the model why
//! ```
//!
//! The agent has two tools with side effects on a file (`DURABLE_AGENT_LOG`, default
//! `durable_agent.log`): `append_line` runs at once, `publish` only once approved.
//! Environment: the model as for every aquaregia example (`AQUAREGIA_MODEL`, e.g.
//! `openai:gpt-5-mini` with `OPENAI_API_KEY`); `AQUAREGIA_APPROVAL_KEY`, a secret of at least
//! 32 bytes shared by `serve` (which checks approvals) and `approve` (which signs them);
//! `RESTATE_INGRESS` for `approve`/`deny` (default `http://127.0.0.1:8080`);
//! `DURABLE_AGENT_MCP_URL`, optionally, a Streamable HTTP MCP server whose tools the agent has
//! too (a tool the server runs as a task is resumed, not called again, after a restart). See the README's
//! "Durable runs on Restate" for the whole walk-through.
#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::PathBuf;

use aquaregia::{ApprovalKey, Client, tool};
use aquaregia_restate::{DurableAgent, PendingApprovals, WORKFLOW_NAME};
use serde::Deserialize;

/// Arguments of both tools.
#[derive(Deserialize, schemars::JsonSchema)]
struct Line {
    /// The line of text.
    text: String,
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["serve"] => serve("127.0.0.1:9080").await,
        ["serve", address] => serve(address).await,
        ["approve", run_id] => decide(run_id, None).await,
        ["deny", run_id, reason] => decide(run_id, Some(reason)).await,
        _ => {
            Err("usage: durable_agent serve [ADDRESS] | approve RUN_ID | deny RUN_ID REASON".into())
        }
    };
    if let Err(error) = result {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn approval_key() -> Result<ApprovalKey> {
    let secret = std::env::var("AQUAREGIA_APPROVAL_KEY")
        .map_err(|_| "set AQUAREGIA_APPROVAL_KEY to a secret of at least 32 bytes")?;
    Ok(ApprovalKey::new(secret)?)
}

/// Appends `line` to the log file: the side effect a replay must not repeat.
fn append(path: &PathBuf, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(file, "{line}")
}

async fn serve(address: &str) -> Result<()> {
    let key = approval_key()?;
    let log = PathBuf::from(
        std::env::var("DURABLE_AGENT_LOG").unwrap_or_else(|_| "durable_agent.log".into()),
    );
    let (client, model) = Client::from_env()?;
    let append_log = log.clone();
    let append_line = tool("append_line")
        .description("Appends a line to the notes file")
        .input::<Line>()
        .execute(move |line: Line| {
            let log = append_log.clone();
            async move {
                append(&log, &line.text).map_err(|e| e.to_string())?;
                Ok("appended")
            }
        });
    let publish = tool("publish")
        .description("Publishes a line (needs a human's approval)")
        .input::<Line>()
        .execute(move |line: Line| {
            let log = log.clone();
            async move {
                append(&log, &format!("published: {}", line.text)).map_err(|e| e.to_string())?;
                Ok("published")
            }
        });
    let mut tools = vec![append_line, publish];
    // Kept open while the service runs.
    let mut mcp = None;
    if let Ok(url) = std::env::var("DURABLE_AGENT_MCP_URL") {
        let connection = aquaregia_mcp::Connector::new()
            .name("remote")
            .http(url, aquaregia_mcp::HttpOptions::new())
            .await?;
        tools.extend(connection.tools().await?);
        mcp = Some(connection);
    }
    let agent = client
        .agent(model)
        .instructions("Use the tools as asked, then answer in one sentence.")
        .tools(tools)
        .require_approval(key.clone(), ["publish"])
        .build()?;
    let listener = tokio::net::TcpListener::bind(address).await?;
    // The tests read the port from this line (the address may say port 0).
    eprintln!(
        "durable_agent listening on port {}",
        listener.local_addr()?.port()
    );
    DurableAgent::new(agent)
        .approval_key(key)
        .serve(listener, tokio::signal::ctrl_c())
        .await;
    if let Some(connection) = mcp {
        connection.close().await;
    }
    Ok(())
}

/// Signs a decision on every call run `run_id` waits on and sends it through the ingress.
async fn decide(run_id: &str, deny: Option<&str>) -> Result<()> {
    let key = approval_key()?;
    let ingress =
        std::env::var("RESTATE_INGRESS").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let base = format!("{}/{WORKFLOW_NAME}/{run_id}", ingress.trim_end_matches('/'));
    let http = reqwest::Client::new();
    let response = http.post(format!("{base}/pending")).send().await?;
    if !response.status().is_success() {
        return Err(format!("pending: {} {}", response.status(), response.text().await?).into());
    }
    let pending: PendingApprovals = response.json().await?;
    if pending.calls.is_empty() {
        return Err(format!("run `{run_id}` waits for no approval").into());
    }
    for call in &pending.calls {
        let approval = match deny {
            None => key.approve(call),
            Some(reason) => key.deny(call, reason),
        };
        let response = http
            .post(format!("{base}/approve"))
            .json(&approval)
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(
                format!("approve: {} {}", response.status(), response.text().await?).into(),
            );
        }
        let verb = if deny.is_some() { "denied" } else { "approved" };
        println!("{verb} {} {}({})", call.id, call.name, call.arguments);
    }
    Ok(())
}

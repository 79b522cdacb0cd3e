//! A real model server nobody here wrote: llama.cpp's own HTTP server serving
//! SmolLM2-135M-Instruct on 127.0.0.1 (`aquaregia_test_support::real_model`, one per test
//! binary), reached through all three of its APIs (Chat Completions, Responses, Anthropic
//! Messages), with the tools of a real MCP server (server-everything's `echo`, over stdio).
//!
//! The SDK's agent runs streamed and not; `aquaregia run` is the user-level proof. The model
//! is tiny: it calls tools reliably only on direct prompts, and its wording changes run to
//! run, so the tests check structure (a tool call with parseable arguments went out, its
//! result came back, an answer and usage arrived), never wording, and allow a few tries.

use crate::common;
use std::process::Stdio;
use std::time::{Duration, Instant};

use aquaregia::{AgentEvent, AgentOutput, Client, ContentPart, Role, StopReason};
use aquaregia_test_support::deps::dep;
use aquaregia_test_support::real_model::{API_KEY, MODEL, RealModel};
use common::{Scratch, cli};
use futures::StreamExt;
use serde_json::Value;

const PROMPT: &str = "Call the echo tool with message hello.";
/// Tries per case: the model's sampling differs run to run even at temperature 0.
const TRIES: usize = 3;
/// One try's bound: the machine may be loaded (the model then makes a few tokens a second).
const TRY_BOUND: Duration = Duration::from_secs(240);

/// server-everything's tools other than `echo`: fewer tools, a shorter prompt and a model
/// that is not distracted.
const OTHER_TOOLS: [&str; 5] = ["get-*", "gzip-*", "toggle-*", "trigger-*", "simulate-*"];

fn client(provider: &str, server: &RealModel) -> Client {
    let builder = match provider {
        "openai" => Client::openai().base_url(server.openai_base_url()),
        "openai-chat" => Client::openai_chat().base_url(server.openai_base_url()),
        "anthropic" => Client::anthropic().base_url(&server.base_url),
        other => panic!("no such provider {other}"),
    };
    builder
        .api_key(API_KEY)
        .timeout(TRY_BOUND)
        .max_retries(0)
        .build()
        .expect("client builds")
}

/// One agent run through `provider` with server-everything's `echo`; `Err` says what was
/// missing from it.
async fn agent_round_trip(provider: &str, streamed: bool) -> Result<(), String> {
    let server = RealModel::shared();
    let mut command = tokio::process::Command::new("node");
    command.args([dep("AQUAREGIA_SERVER_EVERYTHING"), "stdio".into()]);
    let connection = aquaregia_mcp::connect_stdio(command)
        .await
        .map_err(|e| format!("server-everything: {e}"))?;
    let tools = connection.tools().await.map_err(|e| e.to_string())?;
    let echo: Vec<_> = tools.into_iter().filter(|t| t.name() == "echo").collect();
    assert_eq!(echo.len(), 1, "server-everything has an echo tool");
    let agent = client(provider, server)
        .agent(MODEL)
        .tools(echo)
        .temperature(0.0)
        .max_output_tokens(128)
        .max_steps(4)
        .build()
        .map_err(|e| e.to_string())?;
    let outcome = if streamed {
        let mut stream = agent.stream(PROMPT);
        let (mut text, mut usage_events, mut finish) = (String::new(), 0, None);
        while let Some(event) = stream.next().await {
            match event.map_err(|e| e.to_string())? {
                AgentEvent::TextDelta(delta) => text.push_str(&delta),
                AgentEvent::Usage { .. } => usage_events += 1,
                AgentEvent::Finish(output) => finish = Some(output),
                _ => {}
            }
        }
        let output = finish.ok_or("the stream ended without a finish event")?;
        if usage_events < 2 {
            return Err(format!("{usage_events} usage events for two model calls"));
        }
        if text.trim().is_empty() {
            return Err("no answer text was streamed".into());
        }
        check_round_trip(&output)
    } else {
        let output = agent.run(PROMPT).await.map_err(|e| e.to_string())?;
        check_round_trip(&output)
    };
    connection.close().await;
    outcome
}

/// A call of `echo` with a string `message` ran and its result went back to the model, which
/// then answered; every model call counted tokens.
fn check_round_trip(output: &AgentOutput) -> Result<(), String> {
    let summary = || format!("{:#?}", output.messages);
    let (index, call) = output
        .steps
        .iter()
        .enumerate()
        .find_map(|(index, step)| {
            step.tool_calls
                .iter()
                .find(|outcome| outcome.call.name == "echo" && outcome.result.is_ok())
                .map(|outcome| (index, outcome))
        })
        .ok_or_else(|| format!("no echo call ran: {}", summary()))?;
    if !call.call.arguments["message"].is_string() {
        return Err(format!("echo arguments {}", call.call.arguments));
    }
    let sent_back = output.messages.iter().any(|message| {
        message.role == Role::Tool
            && message.content.iter().any(|part| {
                matches!(part, ContentPart::ToolResult(result)
                    if result.call_id == call.call.id && !result.is_error)
            })
    });
    if !sent_back || output.steps.len() <= index + 1 {
        return Err(format!("the echo result did not go back: {}", summary()));
    }
    if !matches!(
        output.stop_reason,
        StopReason::Finished | StopReason::Length
    ) || output.text.trim().is_empty()
    {
        return Err(format!(
            "no answer after the tool ({:?}): {}",
            output.stop_reason,
            summary()
        ));
    }
    for step in &output.steps {
        if step.usage.input_tokens == 0 || step.usage.output_tokens == 0 {
            return Err(format!(
                "step {} counted no tokens: {:?}",
                step.index, step.usage
            ));
        }
    }
    if output.usage.input_tokens < output.steps[0].usage.input_tokens {
        return Err(format!("run usage {:?}", output.usage));
    }
    Ok(())
}

/// Runs `case` until it succeeds, at most [`TRIES`] times, each bounded by [`TRY_BOUND`].
async fn with_tries<F, Fut>(what: &str, mut case: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    let mut failures = Vec::new();
    for _ in 0..TRIES {
        match tokio::time::timeout(TRY_BOUND, case()).await {
            Ok(Ok(())) => {
                eprintln!("{what}: ok in {:?}", started.elapsed());
                return;
            }
            Ok(Err(failure)) => {
                eprintln!("{what}: try failed after {:?}", started.elapsed());
                failures.push(failure);
            }
            Err(_) => failures.push(format!("no result within {TRY_BOUND:?}")),
        }
    }
    panic!(
        "{what} failed {TRIES} times:\n{}\nserver log:\n{}",
        failures.join("\n---\n"),
        RealModel::shared().log_tail()
    );
}

#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn agent_on_chat_completions() {
    with_tries("openai-chat", || agent_round_trip("openai-chat", false)).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn agent_on_chat_completions_streamed() {
    with_tries("openai-chat streamed", || {
        agent_round_trip("openai-chat", true)
    })
    .await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn agent_on_responses() {
    with_tries("openai", || agent_round_trip("openai", false)).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn agent_on_responses_streamed() {
    with_tries("openai streamed", || agent_round_trip("openai", true)).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn agent_on_anthropic_messages() {
    with_tries("anthropic", || agent_round_trip("anthropic", false)).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn agent_on_anthropic_messages_streamed() {
    with_tries("anthropic streamed", || agent_round_trip("anthropic", true)).await;
}

/// `aquaregia run --output json --model <provider>:smollm2` as a user runs it, with the base
/// URL and key variables at the server; `Err` says what was wrong.
async fn cli_round_trip(provider: &str) -> Result<(), String> {
    let server = RealModel::shared();
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    let server_everything = format!("node '{}' stdio", dep("AQUAREGIA_SERVER_EVERYTHING"));
    command.args([
        "run",
        "--yes",
        "--no-save",
        "--output",
        "json",
        "--max-steps",
        "4",
        "--model",
        &format!("{provider}:{MODEL}"),
        "--stdio",
        &server_everything,
    ]);
    for pattern in OTHER_TOOLS {
        command.args(["--disable-tool", pattern]);
    }
    command.arg(PROMPT);
    if provider == "anthropic" {
        command
            .env("ANTHROPIC_BASE_URL", &server.base_url)
            .env("ANTHROPIC_API_KEY", API_KEY);
    } else {
        command
            .env("OPENAI_BASE_URL", server.openai_base_url())
            .env("OPENAI_API_KEY", API_KEY);
    }
    let output = tokio::process::Command::from(command)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("start aquaregia: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("exit {:?}: {stderr}", output.status.code()));
    }
    let summary: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("stdout is not JSON ({e}): {stderr}"))?;
    let calls = summary["toolCalls"].as_array().cloned().unwrap_or_default();
    let ran = calls.iter().any(|call| {
        call["name"] == "echo"
            && call["arguments"]["message"].is_string()
            && call["isError"] == false
    });
    let answered = summary["text"]
        .as_str()
        .is_some_and(|text| !text.trim().is_empty())
        && summary["steps"].as_u64().is_some_and(|steps| steps >= 2)
        && matches!(summary["stopReason"].as_str(), Some("finished" | "length"));
    let counted = summary["usage"]["inputTokens"]
        .as_u64()
        .is_some_and(|n| n > 0)
        && summary["usage"]["outputTokens"]
            .as_u64()
            .is_some_and(|n| n > 0);
    if ran && answered && counted {
        Ok(())
    } else {
        Err(format!("{summary:#}\n{stderr}"))
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn cli_run_on_every_api() {
    for provider in ["openai-chat", "openai", "anthropic"] {
        with_tries(&format!("aquaregia run {provider}"), || {
            cli_round_trip(provider)
        })
        .await;
    }
}

/// A server of its own answers `/health` and is gone (killed with its process group and
/// reaped) once dropped. The shared one exits when the test process does: its stdin closes.
#[tokio::test]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
async fn a_dropped_server_leaves_no_process() {
    let server = tokio::task::spawn_blocking(RealModel::start)
        .await
        .expect("the server starts");
    let pid = server.pid();
    let health = reqwest::get(format!("{}/health", server.base_url))
        .await
        .expect("/health answers");
    assert_eq!(health.status(), 200);
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(server);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} is still there"
    );
}

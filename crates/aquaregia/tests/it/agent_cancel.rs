//! Cancellation: mid-stream, mid-tool and before the start, with generous time bounds.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aquaregia::{AgentEvent, CancellationToken, Role, StopReason, ToolExecError, tool};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_tool_calls, chat_tool_stream};
use common::chat_client;
use futures::StreamExt;
use serde_json::json;

/// Generous: the target is 100 ms (see BENCHMARKS.md); this only proves nothing hangs.
const BOUND: Duration = Duration::from_secs(2);

/// Sets its flag when dropped: proves a tool future was really stopped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn first_chunk(text: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    )
}

#[tokio::test]
async fn cancel_mid_stream_stops_the_model_and_keeps_partial_text() {
    let server = MockServer::start().await;
    server.push(Reply::SseThenHang {
        body: first_chunk("Once upon"),
    });
    let token = CancellationToken::new();
    let agent = chat_client(&server)
        .agent("m")
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    let mut stream = agent.stream("tell me a story");
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, AgentEvent::TextDelta("Once upon".into()));

    let started = Instant::now();
    token.cancel();
    let mut output = None;
    while let Some(event) = stream.next().await {
        if let AgentEvent::Finish(out) = event.unwrap() {
            output = Some(out);
        }
    }
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
    let output = output.expect("a Finish event");
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert_eq!(output.messages.last().unwrap().text(), "Once upon");
}

#[tokio::test]
async fn cancel_mid_tool_stops_the_tool_and_reports_cancelled() {
    let server = MockServer::start().await;
    server.push(Reply::json(chat_tool_calls(&[(
        "c1",
        "forever",
        json!({}),
    )])));
    let dropped = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(std::sync::Mutex::new(Some(started_tx)));
    let flag = dropped.clone();
    let forever = tool("forever").execute_raw(move |_| {
        let guard = DropFlag(flag.clone());
        let started = started_tx.lock().unwrap().take();
        async move {
            let _guard = guard;
            if let Some(started) = started {
                let _ = started.send(());
            }
            futures::future::pending::<()>().await;
            Ok(json!(null))
        }
    });
    let token = CancellationToken::new();
    let agent = chat_client(&server)
        .agent("m")
        .tool(forever)
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    let run = tokio::spawn(async move { agent.run("go").await });
    started_rx.await.unwrap();
    let started = Instant::now();
    token.cancel();
    let output = tokio::time::timeout(BOUND, run)
        .await
        .expect("run returned")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < BOUND);
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the tool future was dropped"
    );
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Err(ToolExecError::Cancelled)
    );
    // The conversation stays valid for a retry: the call has a result.
    let last = output.messages.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn cancel_while_waiting_for_the_model() {
    let server = Arc::new(MockServer::start().await);
    server.push(Reply::Hang);
    let token = CancellationToken::new();
    let agent = chat_client(&server)
        .agent("m")
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    // Cancel once the request is with the model (which never answers).
    let canceller = token.clone();
    let model = server.clone();
    let cancel = tokio::spawn(async move {
        model.wait_requests(1).await;
        canceller.cancel();
        Instant::now()
    });
    let output = agent.run("hello").await.unwrap();
    let cancelled = cancel.await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert!(cancelled.elapsed() < BOUND);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn already_cancelled_runs_make_no_request() {
    let server = MockServer::start().await;
    let token = CancellationToken::new();
    token.cancel();
    let agent = chat_client(&server)
        .agent("m")
        .cancellation_token(token)
        .build()
        .unwrap();
    let output = agent.run("hello").await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn cancelled_tool_calls_are_reported_in_the_stream() {
    let server = MockServer::start().await;
    server.push(Reply::sse(chat_tool_stream(&[(
        "c1",
        "forever",
        json!({}),
    )])));
    let forever = tool("forever").execute_raw(|_| async {
        futures::future::pending::<()>().await;
        Ok(json!(null))
    });
    let token = CancellationToken::new();
    let agent = chat_client(&server)
        .agent("m")
        .tool(forever)
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    let mut stream = agent.stream("go");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        if matches!(event, AgentEvent::ToolCallStart { .. }) {
            token.cancel();
        }
        events.push(event);
    }
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ToolCallFinish {
            result: Err(ToolExecError::Cancelled),
            ..
        }
    )));
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Finish(output)) if output.stop_reason == StopReason::Cancelled
    ));
}

#[tokio::test]
async fn dropping_the_stream_stops_the_run() {
    let server = MockServer::start().await;
    server.push(Reply::json(chat_tool_calls(&[(
        "c1",
        "forever",
        json!({}),
    )])));
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let forever = tool("forever").execute_raw(move |_| {
        let guard = DropFlag(flag.clone());
        async move {
            let _guard = guard;
            futures::future::pending::<()>().await;
            Ok(json!(null))
        }
    });
    let agent = chat_client(&server)
        .agent("m")
        .tool(forever)
        .build()
        .unwrap();
    let mut stream = agent.stream("go");
    while let Some(event) = stream.next().await {
        if matches!(event.unwrap(), AgentEvent::ToolCallStart { .. }) {
            break;
        }
    }
    // Let the tool start, then drop the stream.
    let _ = tokio::time::timeout(Duration::from_millis(50), stream.next()).await;
    drop(stream);
    assert!(dropped.load(Ordering::SeqCst));
}

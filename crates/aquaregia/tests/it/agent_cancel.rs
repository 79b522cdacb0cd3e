//! Cancellation: mid-stream, mid-tool and before the start, with generous time bounds. The
//! loop's logic runs on a scripted model; the mid-stream case keeps a real SSE response.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentEvent, CancellationToken, Role, StopReason, StreamEvent, ToolExecError, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{chat_client, scripted_agent};
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
    let model = ScriptedModel::new().tool_call("c1", "forever", json!({}));
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
    let agent = scripted_agent(&model)
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
    assert_eq!(model.call_count(), 1);
}

#[tokio::test]
async fn cancel_while_waiting_for_the_model() {
    let model = ScriptedModel::new().reply(ScriptedReply::Hang);
    let token = CancellationToken::new();
    let agent = scripted_agent(&model)
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    let run = tokio::spawn(async move { agent.run("hello").await });
    model.wait_calls(1).await;
    let started = Instant::now();
    token.cancel();
    let output = tokio::time::timeout(BOUND, run)
        .await
        .expect("run returned")
        .unwrap()
        .unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert!(started.elapsed() < BOUND);
    assert_eq!(model.call_count(), 1);
}

#[tokio::test]
async fn cancel_while_the_model_stalls_mid_answer_keeps_the_partial_text() {
    let model = ScriptedModel::new().reply(ScriptedReply::EventsThenHang(vec![
        StreamEvent::TextDelta("Once ".into()),
        StreamEvent::TextDelta("upon".into()),
    ]));
    let token = CancellationToken::new();
    let agent = scripted_agent(&model)
        .cancellation_token(token.clone())
        .build()
        .unwrap();
    let mut stream = agent.stream("tell me a story");
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        AgentEvent::TextDelta("Once ".into())
    );
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        AgentEvent::TextDelta("upon".into())
    );
    token.cancel();
    let mut output = None;
    while let Some(event) = stream.next().await {
        if let AgentEvent::Finish(out) = event.unwrap() {
            output = Some(out);
        }
    }
    let output = output.expect("a Finish event");
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert_eq!(output.messages.last().unwrap().text(), "Once upon");
}

#[tokio::test]
async fn already_cancelled_runs_make_no_request() {
    let model = ScriptedModel::new().text("never asked");
    let token = CancellationToken::new();
    token.cancel();
    let agent = scripted_agent(&model)
        .cancellation_token(token)
        .build()
        .unwrap();
    let output = agent.run("hello").await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert_eq!(model.call_count(), 0);
}

#[tokio::test]
async fn cancelled_tool_calls_are_reported_in_the_stream() {
    let model = ScriptedModel::new().tool_call("c1", "forever", json!({}));
    let forever = tool("forever").execute_raw(|_| async {
        futures::future::pending::<()>().await;
        Ok(json!(null))
    });
    let token = CancellationToken::new();
    let agent = scripted_agent(&model)
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
    let model = ScriptedModel::new().tool_call("c1", "forever", json!({}));
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let started = Arc::new(tokio::sync::Notify::new());
    let running = started.clone();
    let forever = tool("forever").execute_raw(move |_| {
        let guard = DropFlag(flag.clone());
        let running = running.clone();
        async move {
            let _guard = guard;
            running.notify_one();
            futures::future::pending::<()>().await;
            Ok(json!(null))
        }
    });
    let agent = scripted_agent(&model).tool(forever).build().unwrap();
    let mut stream = agent.stream("go");
    // Drive the run until the tool is running, then drop the stream.
    let mut tool_running = std::pin::pin!(started.notified());
    loop {
        tokio::select! {
            () = &mut tool_running => break,
            event = stream.next() => assert!(event.is_some(), "the run ended early"),
        }
    }
    assert!(!dropped.load(Ordering::SeqCst));
    drop(stream);
    assert!(dropped.load(Ordering::SeqCst));
}

//! Steering: a message sent while the agent works joins the conversation at the next tool
//! boundary (after the step's tool results, before the next model call), exactly once; one
//! sent after the last boundary stays queued for the next turn; a revoked one is never sent;
//! the stepper and a saved run take them the same way.

use std::sync::Arc;

use crate::common::scripted_agent;
use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentEvent, AgentHooks, AgentRun, ModelRequest, NextAction, Role, Steering, StepContext,
    StopReason, Tool, tool,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

/// A tool that says when it started and finishes only when released: the test acts while
/// it runs.
struct Gate {
    started: mpsc::UnboundedSender<()>,
    release: Arc<Notify>,
}

fn gated_tool() -> (Tool, mpsc::UnboundedReceiver<()>, Arc<Notify>) {
    let (started, started_rx) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let gate = Arc::new(Gate {
        started,
        release: release.clone(),
    });
    let tool = tool("wait")
        .description("Waits for the test")
        .raw_schema(json!({"type": "object", "properties": {}}))
        .execute_raw(move |_args: Value| {
            let gate = gate.clone();
            async move {
                let _ = gate.started.send(());
                gate.release.notified().await;
                Ok(json!("waited"))
            }
        });
    (tool, started_rx, release)
}

/// How many user messages of `request` say exactly `text`.
fn user_texts(request: &ModelRequest, text: &str) -> usize {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::User && m.text() == text)
        .count()
}

/// The position of the user message `text` in `request`, and whether the message before it
/// holds the tool results.
fn after_tool_results(request: &ModelRequest, text: &str) -> bool {
    let Some(at) = request
        .messages
        .iter()
        .position(|m| m.role == Role::User && m.text() == text)
    else {
        return false;
    };
    at > 0 && request.messages[at - 1].role == Role::Tool && at == request.messages.len() - 1
}

#[tokio::test]
async fn a_message_sent_while_a_tool_runs_reaches_the_next_request_exactly_once() {
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_call("c1", "wait", json!({})))
        .reply(ScriptedReply::tool_call("c2", "wait", json!({})))
        .reply(ScriptedReply::text("done"));
    let (wait, mut started, release) = gated_tool();
    let steering = Steering::new();
    let agent = scripted_agent(&model)
        .tool(wait)
        .steering(steering.clone())
        .build()
        .unwrap();
    let mut stream = agent.stream("start");
    let driver = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event.unwrap());
        }
        events
    });
    started.recv().await.unwrap();
    let id = steering.send("use the other file");
    assert_eq!(steering.pending().len(), 1);
    release.notify_one();
    started.recv().await.unwrap();
    assert!(steering.is_empty(), "taken at the boundary");
    release.notify_one();
    let events = driver.await.unwrap();

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(user_texts(&requests[0], "use the other file"), 0);
    assert_eq!(user_texts(&requests[1], "use the other file"), 1);
    assert!(
        after_tool_results(&requests[1], "use the other file"),
        "after the step's tool results, last: {:?}",
        requests[1].messages
    );
    assert_eq!(
        user_texts(&requests[2], "use the other file"),
        1,
        "never injected twice"
    );
    let steered: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Steered { id, step, message } => Some((*id, *step, message.text())),
            _ => None,
        })
        .collect();
    assert_eq!(steered, vec![(id, 1, "use the other file".to_owned())]);
    let Some(AgentEvent::Finish(output)) = events.last() else {
        panic!("the stream ends with Finish: {events:?}");
    };
    assert_eq!(
        output
            .messages
            .iter()
            .filter(|m| m.text() == "use the other file")
            .count(),
        1,
        "part of the output's conversation"
    );
    assert!(
        !steering.revoke(id),
        "an injected message cannot be revoked"
    );
}

/// Sends a message once the run's last step has started (after its boundary).
struct SendAtStep {
    step: usize,
    steering: Steering,
}

#[async_trait::async_trait]
impl AgentHooks for SendAtStep {
    async fn on_step_start(&self, ctx: &StepContext<'_>) {
        if ctx.step() == self.step {
            self.steering.send("and add tests");
        }
    }
}

#[tokio::test]
async fn a_message_sent_after_the_last_boundary_stays_queued_for_the_next_turn() {
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_call("c1", "wait", json!({})))
        .reply(ScriptedReply::text("first answer"))
        .reply(ScriptedReply::text("second answer"));
    let (wait, mut started, release) = gated_tool();
    let steering = Steering::new();
    let agent = scripted_agent(&model)
        .tool(wait)
        .hooks(SendAtStep {
            step: 1,
            steering: steering.clone(),
        })
        .steering(steering.clone())
        .build()
        .unwrap();
    let run = tokio::spawn({
        let agent = agent.clone();
        async move { agent.run("start").await }
    });
    started.recv().await.unwrap();
    release.notify_one();
    let output = run.await.unwrap().unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(output.text, "first answer");
    assert!(
        output.messages.iter().all(|m| m.text() != "and add tests"),
        "not in this turn"
    );
    let queued = steering.take_pending();
    assert_eq!(queued.len(), 1, "queued, not lost");
    assert_eq!(queued[0].message.role, Role::User);

    // The caller makes it the next turn.
    let mut next = output.messages.clone();
    next.extend(queued.into_iter().map(|q| q.message));
    let second = agent.run(next).await.unwrap();
    assert_eq!(second.text, "second answer");
    let requests = model.requests();
    assert_eq!(user_texts(&requests[2], "and add tests"), 1);
}

#[tokio::test]
async fn a_message_left_queued_joins_the_next_run_before_its_first_model_call() {
    let model = ScriptedModel::new().reply(ScriptedReply::text("ok"));
    let steering = Steering::new();
    let agent = scripted_agent(&model)
        .steering(steering.clone())
        .build()
        .unwrap();
    steering.send("queued earlier");
    let output = agent.run("now").await.unwrap();
    let requests = model.requests();
    assert_eq!(user_texts(&requests[0], "queued earlier"), 1);
    assert_eq!(
        output.messages[1].text(),
        "queued earlier",
        "after the prompt"
    );
}

#[tokio::test]
async fn a_revoked_message_is_never_sent() {
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_call("c1", "wait", json!({})))
        .reply(ScriptedReply::text("done"));
    let (wait, mut started, release) = gated_tool();
    let steering = Steering::new();
    let agent = scripted_agent(&model)
        .tool(wait)
        .steering(steering.clone())
        .build()
        .unwrap();
    let run = tokio::spawn({
        let agent = agent.clone();
        async move { agent.run("start").await }
    });
    started.recv().await.unwrap();
    let revoked = steering.send("never mind this");
    let kept = steering.send("but this");
    assert!(steering.revoke(revoked));
    assert!(!steering.revoke(revoked), "revoked once");
    release.notify_one();
    let output = run.await.unwrap().unwrap();
    let requests = model.requests();
    for request in &requests {
        assert_eq!(user_texts(request, "never mind this"), 0);
    }
    assert_eq!(user_texts(&requests[1], "but this"), 1);
    assert!(
        output
            .messages
            .iter()
            .all(|m| m.text() != "never mind this")
    );
    assert!(!steering.revoke(kept), "already injected");
}

#[tokio::test]
async fn the_stepper_injects_at_the_boundary_and_the_saved_run_keeps_the_message() {
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_call("c1", "echo", json!({})))
        .reply(ScriptedReply::tool_call("c2", "echo", json!({})))
        .reply(ScriptedReply::text("done"));
    let echo = || {
        tool("echo")
            .description("Echoes")
            .raw_schema(json!({"type": "object", "properties": {}}))
            .execute_raw(|_args: Value| async move { Ok(json!("echo")) })
    };
    let steering = Steering::new();
    let agent = scripted_agent(&model)
        .tool(echo())
        .steering(steering.clone())
        .build()
        .unwrap();
    let mut stepper = agent.stepper(agent.start("start"));
    let request = stepper.model_request().await.unwrap();
    let response = stepper.call_model(&request).await.unwrap();
    stepper.model_responded(response).await.unwrap();
    let NextAction::RunTools { calls, .. } = stepper.next_action() else {
        panic!("tool calls next");
    };
    // Sent in the middle of the step's tool calls: not part of the run yet.
    steering.send("steer while stepping");
    let result = stepper.execute_tool(&calls[0]).await;
    stepper.tool_finished(&calls[0].id, result).await.unwrap();
    assert!(
        stepper
            .run()
            .messages()
            .iter()
            .all(|m| m.text() != "steer while stepping")
    );
    let request = stepper.model_request().await.unwrap();
    assert_eq!(user_texts(&request, "steer while stepping"), 1);
    assert!(after_tool_results(&request, "steer while stepping"));

    // Saved and loaded on another agent (no steering of its own): the message is in the run.
    let saved = serde_json::to_string(stepper.run()).unwrap();
    let loaded: AgentRun = serde_json::from_str(&saved).unwrap();
    assert_eq!(
        loaded
            .messages()
            .iter()
            .filter(|m| m.text() == "steer while stepping")
            .count(),
        1
    );
    let other = scripted_agent(&model).tool(echo()).build().unwrap();
    let output = other.resume(loaded).await.unwrap();
    assert_eq!(output.text, "done");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(user_texts(&requests[1], "steer while stepping"), 1);
    assert_eq!(user_texts(&requests[2], "steer while stepping"), 1);
    assert!(steering.is_empty());
}

//! Subagents (`Agent::into_tool`), on scripted models for parent and child: the child's own
//! tools and step limit, its events nested under the parent's call, usage totals, its tool
//! calls decided by the parent's hooks, and cancellation of the child alone or with the
//! parent.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentEvent, AgentHooks, CancellationToken, StopReason, SubAgentSetup, Tool, ToolCall,
    ToolCallDecision, ToolExecError, ToolOutput, Usage, tool,
};
use common::{last_tool_results, scripted_agent};
use futures::StreamExt;
use serde_json::json;

/// Generous: only proves nothing hangs.
const BOUND: Duration = Duration::from_secs(10);

fn echo(name: &str) -> Tool {
    let tag = name.to_owned();
    tool(name).execute_raw(move |args| {
        let tag = tag.clone();
        async move {
            Ok(format!(
                "{tag}: {}",
                args["text"].as_str().unwrap_or_default()
            ))
        }
    })
}

/// Sends once when the tool starts, then waits until dropped; the drop is reported.
fn blocking_tool(
    name: &str,
    started: tokio::sync::mpsc::UnboundedSender<()>,
    dropped: tokio::sync::mpsc::UnboundedSender<()>,
) -> Tool {
    struct OnDrop(tokio::sync::mpsc::UnboundedSender<()>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    tool(name).execute_raw(move |_| {
        let started = started.clone();
        let guard = OnDrop(dropped.clone());
        async move {
            let _guard = guard;
            let _ = started.send(());
            std::future::pending::<()>().await;
            Ok("never")
        }
    })
}

#[tokio::test]
async fn the_child_runs_with_its_own_tools_and_step_limit_and_answers_the_parent() {
    let child_model = ScriptedModel::new()
        .tool_call("c1", "lookup", json!({"text": "a"}))
        .tool_call("c2", "lookup", json!({"text": "b"}))
        .text("never reached: the step limit is 2");
    let child = scripted_agent(&child_model)
        .tool(echo("lookup"))
        .max_steps(2)
        .build()
        .unwrap();
    let parent_model = ScriptedModel::new()
        .tool_call("p1", "helper", json!({"task": "look things up"}))
        .text("done");
    let parent = scripted_agent(&parent_model)
        .tool(child.into_tool("helper", "Looks things up"))
        .build()
        .unwrap();

    let output = parent.run("go").await.unwrap();
    assert_eq!(output.text, "done");
    // The child saw the task as its prompt and only its own tools.
    let child_requests = child_model.requests();
    assert_eq!(child_requests.len(), 2, "the child's step limit");
    assert_eq!(child_requests[0].messages[0].text(), "look things up");
    let child_tools: Vec<_> = child_requests[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(child_tools, ["lookup"]);
    let parent_tools: Vec<_> = parent_model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(parent_tools, ["helper"]);
    // The parent's tool result says the child stopped at its limit.
    let results = last_tool_results(&parent_model.requests()[1]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "p1");
    assert!(results[0].1.contains("max_steps"), "{results:?}");
    assert!(!results[0].2, "not an error");
    let outcome = &output.steps[0].tool_calls[0];
    let Ok(ToolOutput::Structured { structured, .. }) = &outcome.result else {
        panic!("a structured result: {outcome:?}");
    };
    assert_eq!(structured["stop_reason"], "max_steps");
    assert_eq!(structured["steps"], 2);
}

#[tokio::test]
async fn the_childs_events_arrive_nested_under_the_parent_call_in_order_and_usage_adds_up() {
    let child_model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_call("c1", "lookup", json!({"text": "x"}))
                .with_usage(Usage::new(100, 10)),
        )
        .reply(ScriptedReply::text("child answer").with_usage(Usage::new(200, 20)));
    let child = scripted_agent(&child_model)
        .tool(echo("lookup"))
        .build()
        .unwrap();
    let parent_model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_call("p1", "helper", json!({"task": "t"}))
                .with_usage(Usage::new(1000, 1)),
        )
        .reply(ScriptedReply::text("parent answer").with_usage(Usage::new(2000, 2)));
    let parent = scripted_agent(&parent_model)
        .tool(child.into_tool("helper", "Helps"))
        .build()
        .unwrap();

    let mut stream = parent.stream("go");
    let mut seen = Vec::new();
    let mut output = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            AgentEvent::ToolCallStart { id, .. } => seen.push(format!("start {id}")),
            AgentEvent::ToolCallFinish { id, .. } => seen.push(format!("finish {id}")),
            AgentEvent::SubAgent { id, name, event } => {
                assert_eq!(name, "helper");
                match *event {
                    AgentEvent::ToolCallStart { id: child_id, .. } => {
                        seen.push(format!("{id}> start {child_id}"));
                    }
                    AgentEvent::ToolCallFinish {
                        id: child_id,
                        result,
                        ..
                    } => {
                        assert_eq!(result.unwrap(), ToolOutput::text("lookup: x"));
                        seen.push(format!("{id}> finish {child_id}"));
                    }
                    AgentEvent::TextDelta(text) => seen.push(format!("{id}> text {text}")),
                    AgentEvent::StepFinish(step) => seen.push(format!("{id}> step {}", step.index)),
                    AgentEvent::Finish(_) => panic!("a child Finish is never passed on"),
                    _ => {}
                }
            }
            AgentEvent::StepFinish(step) => seen.push(format!("step {}", step.index)),
            AgentEvent::Finish(out) => output = Some(out),
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            "start p1",
            "p1> start c1",
            "p1> finish c1",
            "p1> step 0",
            "p1> text child answer",
            "p1> step 1",
            "finish p1",
            "step 0",
            "step 1",
        ]
    );
    let output = output.unwrap();
    assert_eq!(output.text, "parent answer");
    // The run's total counts the child's calls once; the steps keep their own calls.
    assert_eq!(output.usage, Usage::new(3300, 33));
    assert_eq!(output.steps[0].usage, Usage::new(1000, 1));
    assert_eq!(output.steps[1].usage, Usage::new(2000, 2));
    let Ok(ToolOutput::Structured { structured, .. }) = &output.steps[0].tool_calls[0].result
    else {
        panic!("a structured result");
    };
    assert_eq!(structured["usage"]["input_tokens"], 300);
    assert_eq!(structured["answer"], "child answer");
}

/// Decides calls like a permission handler and remembers what it was asked.
#[derive(Clone, Default)]
struct Gatekeeper {
    asked: Arc<Mutex<Vec<String>>>,
    subagents: Arc<Mutex<Vec<String>>>,
}

#[aquaregia::async_trait]
impl AgentHooks for Gatekeeper {
    async fn on_tool_call_start(&self, call: &ToolCall, _tool: Option<&Tool>) -> ToolCallDecision {
        self.asked.lock().unwrap().push(call.id.clone());
        if call.name == "delete" {
            ToolCallDecision::Deny("the user said no".into())
        } else {
            ToolCallDecision::Allow
        }
    }

    async fn on_subagent_start(&self, call: &ToolCall) -> SubAgentSetup {
        self.subagents.lock().unwrap().push(call.id.clone());
        SubAgentSetup::new()
    }
}

#[tokio::test]
async fn a_tool_call_of_the_child_is_decided_by_the_parents_hooks() {
    let ran = Arc::new(Mutex::new(false));
    let flag = ran.clone();
    let delete = tool("delete").execute_raw(move |_| {
        *flag.lock().unwrap() = true;
        async { Ok("deleted") }
    });
    let child_model = ScriptedModel::new()
        .tool_call("c1", "delete", json!({}))
        .text("could not delete");
    let child = scripted_agent(&child_model).tool(delete).build().unwrap();
    let parent_model = ScriptedModel::new()
        .tool_call("p1", "cleaner", json!({"task": "delete it"}))
        .text("ok");
    let gatekeeper = Gatekeeper::default();
    let parent = scripted_agent(&parent_model)
        .tool(child.into_tool("cleaner", "Cleans"))
        .hooks(gatekeeper.clone())
        .build()
        .unwrap();

    let output = parent.run("clean").await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(*gatekeeper.asked.lock().unwrap(), ["p1", "c1"]);
    assert_eq!(*gatekeeper.subagents.lock().unwrap(), ["p1"]);
    assert!(!*ran.lock().unwrap(), "the denied call never ran");
    // The child's model was told of the denial.
    let results = last_tool_results(&child_model.requests()[1]);
    assert!(results[0].1.contains("the user said no"), "{results:?}");
}

/// Gives each subagent the token it holds.
struct ChildToken(CancellationToken);

#[aquaregia::async_trait]
impl AgentHooks for ChildToken {
    async fn on_subagent_start(&self, _call: &ToolCall) -> SubAgentSetup {
        SubAgentSetup::new().cancellation(self.0.clone())
    }
}

#[tokio::test]
async fn cancelling_the_child_alone_gives_the_parent_a_tool_error_and_the_parent_goes_on() {
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let (dropped_tx, mut dropped) = tokio::sync::mpsc::unbounded_channel();
    let child_model = ScriptedModel::new().tool_call("c1", "wait", json!({}));
    let child = scripted_agent(&child_model)
        .tool(blocking_tool("wait", started_tx, dropped_tx))
        .build()
        .unwrap();
    let parent_model = ScriptedModel::new()
        .tool_call("p1", "waiter", json!({"task": "wait"}))
        .text("the helper was stopped");
    let token = CancellationToken::new();
    let parent = scripted_agent(&parent_model)
        .tool(child.into_tool("waiter", "Waits"))
        .hooks(ChildToken(token.clone()))
        .build()
        .unwrap();

    let run = tokio::spawn(async move { parent.run("go").await });
    tokio::time::timeout(BOUND, started.recv()).await.unwrap();
    token.cancel();
    let output = tokio::time::timeout(BOUND, run)
        .await
        .expect("the parent does not hang")
        .unwrap()
        .unwrap();
    tokio::time::timeout(BOUND, dropped.recv()).await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(output.text, "the helper was stopped");
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Err(ToolExecError::Cancelled)
    );
    let results = last_tool_results(&parent_model.requests()[1]);
    assert_eq!(results[0].0, "p1");
    assert!(results[0].2, "an error result: {results:?}");
    assert!(results[0].1.contains("cancelled"), "{results:?}");
}

#[tokio::test]
async fn cancelling_the_parent_stops_the_child() {
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let (dropped_tx, mut dropped) = tokio::sync::mpsc::unbounded_channel();
    let child_model = ScriptedModel::new().tool_call("c1", "wait", json!({}));
    let child = scripted_agent(&child_model)
        .tool(blocking_tool("wait", started_tx, dropped_tx))
        .build()
        .unwrap();
    let parent_model = ScriptedModel::new().tool_call("p1", "waiter", json!({"task": "wait"}));
    let token = CancellationToken::new();
    let parent = scripted_agent(&parent_model)
        .tool(child.into_tool("waiter", "Waits"))
        .cancellation_token(token.clone())
        .build()
        .unwrap();

    let run = tokio::spawn(async move { parent.run("go").await });
    tokio::time::timeout(BOUND, started.recv()).await.unwrap();
    token.cancel();
    tokio::time::timeout(BOUND, dropped.recv())
        .await
        .expect("the child's tool was stopped");
    let output = tokio::time::timeout(BOUND, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert_eq!(
        child_model.call_count(),
        1,
        "the child called its model no more"
    );
}

/// A durable runner's checkpoint is for the call it was set around: the subagent's own tool
/// calls inside that call see none (they would otherwise record their work as the parent
/// call's, and a resumed attempt would hand it to the wrong call).
#[tokio::test]
async fn the_calls_of_a_subagent_do_not_see_the_checkpoint_of_the_call_that_runs_it() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = {
        let seen = seen.clone();
        tool("probe").execute_raw(move |_| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(aquaregia::ToolCheckpoint::current().is_some());
                Ok("probed")
            }
        })
    };
    let child_model = ScriptedModel::new()
        .tool_call("c1", "probe", json!({}))
        .text("child done");
    let child = scripted_agent(&child_model).tool(probe).build().unwrap();
    let helper = child.into_tool("helper", "Probes");

    let checkpoint = aquaregia::ToolCheckpoint::new(None, |_| {});
    let output = checkpoint
        .scope(async {
            // The runner's call itself sees its checkpoint...
            assert!(aquaregia::ToolCheckpoint::current().is_some());
            helper.execute(json!({"task": "probe"})).await
        })
        .await
        .unwrap();
    assert!(output.to_string().contains("child done"), "{output:?}");
    // ...the subagent's call inside it does not.
    assert_eq!(*seen.lock().unwrap(), [false]);
}

//! The agent loop on a scripted model: tool round trips, limits, policies, streamed events.
//! (What each provider puts on the wire is tested against mocks in the provider tests; the
//! llama.cpp captures that shape the loop's handling of duplicate and cut-off calls are
//! replayed on the wire here.)

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentEvent, Error, FinishReason, Message, Role, StopReason, StreamEvent, ToolErrorPolicy,
    ToolExecError, ToolOutput, Usage, tool,
};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use common::{chat_client, last_tool_results, scripted_agent};
use futures::StreamExt;
use serde_json::{Value, json};

/// The tool messages of the `request`-th request the mock received.
fn tool_messages(server: &MockServer, request: usize) -> Vec<Value> {
    server.requests()[request].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

fn add_tool() -> aquaregia::Tool {
    tool("add")
        .description("Adds two integers")
        .raw_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": false
        }))
        .execute_raw(|args: Value| async move {
            Ok(json!(
                args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()
            ))
        })
}

fn usage() -> Usage {
    Usage::new(10, 5)
}

#[tokio::test]
async fn tool_call_round_trip() {
    let model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_call("call_1", "add", json!({"a": 2, "b": 3})).with_usage(usage()),
        )
        .reply(ScriptedReply::text("The sum is 5.").with_usage(usage()));
    let agent = scripted_agent(&model)
        .instructions("Be brief.")
        .tool(add_tool())
        .build()
        .unwrap();
    let output = agent.run("What is 2 + 3?").await.unwrap();

    assert_eq!(output.text, "The sum is 5.");
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(output.steps.len(), 2);
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Ok(ToolOutput::Json(json!(5)))
    );
    assert_eq!(output.usage.input_tokens, 20);
    // user, assistant(tool call), tool, assistant(text)
    let roles: Vec<Role> = output.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );

    let second = &model.requests()[1];
    assert_eq!(second.instructions.as_deref(), Some("Be brief."));
    assert_eq!(
        last_tool_results(second),
        [("call_1".to_owned(), "5".to_owned(), false)]
    );
    assert_eq!(second.tools[0].name, "add");
    assert_eq!(second.model, "scripted-model");
}

#[tokio::test]
async fn conversation_continues_from_output_messages() {
    let model = ScriptedModel::new()
        .text("Hi Ada.")
        .text("Your name is Ada.");
    let agent = scripted_agent(&model).build().unwrap();
    let first = agent.run("I am Ada.").await.unwrap();
    let mut messages = first.messages;
    messages.push(Message::user("What is my name?"));
    let second = agent.run(messages).await.unwrap();
    assert_eq!(second.text, "Your name is Ada.");
    let sent = &model.requests()[1].messages;
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[1], Message::assistant("Hi Ada."));
}

#[tokio::test]
async fn max_steps_stops_a_looping_model() {
    let model = ScriptedModel::new()
        .repeat_with(|| ScriptedReply::tool_call("call_x", "add", json!({"a": 1, "b": 1})));
    let agent = scripted_agent(&model)
        .tool(add_tool())
        .max_steps(3)
        .build()
        .unwrap();
    let output = agent.run("loop").await.unwrap();
    assert_eq!(output.stop_reason, StopReason::MaxSteps);
    assert_eq!(output.steps.len(), 3);
    assert_eq!(model.call_count(), 3);
    // The transcript stays valid: every tool call has its result.
    assert_eq!(output.messages.last().unwrap().role, Role::Tool);
}

#[tokio::test]
async fn schema_violations_and_unknown_tools_go_back_to_the_model() {
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_calls([
            ("c1", "add", json!({"a": "two", "b": 3})),
            ("c2", "nope", json!({})),
        ]))
        .text("Sorry.");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let add = tool("add")
        .raw_schema(add_tool().descriptor().input_schema.clone())
        .execute_raw(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!(0)) }
        });
    let agent = scripted_agent(&model).tool(add).build().unwrap();
    let output = agent.run("go").await.unwrap();

    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the executor must not run");
    let outcomes = &output.steps[0].tool_calls;
    assert!(
        matches!(&outcomes[0].result, Err(ToolExecError::InvalidArguments(m)) if m.contains("/a"))
    );
    assert_eq!(
        outcomes[1].result,
        Err(ToolExecError::UnknownTool("nope".into()))
    );
    let sent = last_tool_results(&model.requests()[1]);
    assert!(sent[0].1.contains("invalid arguments"), "{sent:?}");
    assert!(sent[0].2, "reported as an error");
    assert!(sent[1].1.contains("unknown tool `nope`"), "{sent:?}");
}

#[tokio::test]
async fn return_to_model_policy_reports_tool_errors() {
    let model = ScriptedModel::new()
        .tool_call("c1", "boom", json!({}))
        .text("It failed.");
    let boom = tool("boom").execute_raw(|_| async { Err::<Value, _>("disk on fire".into()) });
    let agent = scripted_agent(&model).tool(boom).build().unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(output.text, "It failed.");
    assert_eq!(
        last_tool_results(&model.requests()[1]),
        [("c1".to_owned(), "disk on fire".to_owned(), true)]
    );
}

#[tokio::test]
async fn fail_fast_policy_stops_the_run() {
    let model = ScriptedModel::new().tool_call("c1", "boom", json!({}));
    let boom = tool("boom").execute_raw(|_| async { Err::<Value, _>("disk on fire".into()) });
    let agent = scripted_agent(&model)
        .tool(boom)
        .tool_error_policy(ToolErrorPolicy::FailFast)
        .build()
        .unwrap();
    match agent.run("go").await {
        Err(Error::Tool { name, source }) => {
            assert_eq!(name, "boom");
            assert_eq!(source, ToolExecError::Execution("disk on fire".into()));
        }
        other => panic!("expected a tool error, got {other:?}"),
    }
    assert_eq!(model.call_count(), 1);
}

#[tokio::test]
async fn fail_fast_policy_stops_a_step_with_several_calls() {
    let model = ScriptedModel::new().reply(ScriptedReply::tool_calls([
        ("c1", "fine", json!({})),
        ("c2", "boom", json!({})),
    ]));
    let fine = tool("fine").execute_raw(|_| async { Ok(json!("ok")) });
    let boom = tool("boom").execute_raw(|_| async { Err::<Value, _>("disk on fire".into()) });
    let agent = scripted_agent(&model)
        .tool(fine)
        .tool(boom)
        .tool_error_policy(ToolErrorPolicy::FailFast)
        .build()
        .unwrap();
    assert!(matches!(
        agent.run("go").await,
        Err(Error::Tool { name, .. }) if name == "boom"
    ));
}

// Paused time: the tools' sleeps (which make them finish in reverse order) take no real time.
#[tokio::test(start_paused = true)]
async fn concurrency_is_limited_and_results_keep_call_order() {
    let calls: Vec<(String, String, Value)> = (0..6)
        .map(|i| (format!("c{i}"), "slow".to_owned(), json!({"i": i})))
        .collect();
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_calls(calls))
        .text("done");

    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let (now, max) = (in_flight.clone(), max_seen.clone());
    let slow = tool("slow").execute_raw(move |args: Value| {
        let (now, max) = (now.clone(), max.clone());
        async move {
            let current = now.fetch_add(1, Ordering::SeqCst) + 1;
            max.fetch_max(current, Ordering::SeqCst);
            // Earlier calls take longer, so completion order is the reverse of call order.
            let i = args["i"].as_u64().unwrap();
            tokio::time::sleep(Duration::from_millis(20 * (6 - i))).await;
            now.fetch_sub(1, Ordering::SeqCst);
            Ok(json!(format!("result {i}")))
        }
    });
    let agent = scripted_agent(&model)
        .tool(slow)
        .max_tool_concurrency(2)
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(max_seen.load(Ordering::SeqCst), 2);
    let sent: Vec<String> = last_tool_results(&model.requests()[1])
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(sent, ["c0", "c1", "c2", "c3", "c4", "c5"]);
    assert_eq!(
        output.steps[0].tool_calls[5].result,
        Ok(ToolOutput::Json(json!("result 5")))
    );
}

#[tokio::test]
async fn all_calls_of_a_step_run_concurrently_by_default() {
    // Distinct arguments: identical calls of one answer run once.
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_calls([
            ("a", "wait", json!({"n": 0})),
            ("b", "wait", json!({"n": 1})),
            ("c", "wait", json!({"n": 2})),
        ]))
        .text("ok");
    // Each call waits until all three are in flight; sequential execution would deadlock.
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let wait = tool("wait").execute_raw(move |_| {
        let barrier = barrier.clone();
        async move {
            barrier.wait().await;
            Ok(json!("ok"))
        }
    });
    let agent = scripted_agent(&model).tool(wait).build().unwrap();
    let output = tokio::time::timeout(Duration::from_secs(10), agent.run("go"))
        .await
        .expect("tool calls ran concurrently")
        .unwrap();
    assert_eq!(output.steps[0].tool_calls.len(), 3);
}

#[tokio::test]
async fn stream_emits_events_in_order() {
    let model = ScriptedModel::new()
        .tool_call("call_1", "add", json!({"a": 20, "b": 22}))
        .reply(ScriptedReply::Events(vec![
            Ok(StreamEvent::TextDelta("The answer ".into())),
            Ok(StreamEvent::TextDelta("is 42.".into())),
            Ok(StreamEvent::Finish(aquaregia::ModelResponse::new(
                Message::assistant("The answer is 42."),
                FinishReason::Stop,
            ))),
        ]));
    let agent = scripted_agent(&model).tool(add_tool()).build().unwrap();
    let events: Vec<AgentEvent> = agent
        .stream("What is 20 + 22?")
        .map(|e| e.unwrap())
        .collect()
        .await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            AgentEvent::TextDelta(_) => "text",
            AgentEvent::ToolCallStart { .. } => "tool_start",
            AgentEvent::ToolCallFinish { .. } => "tool_finish",
            AgentEvent::Usage { .. } => "usage",
            AgentEvent::StepFinish(_) => "step",
            AgentEvent::Finish(_) => "finish",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "usage",
            "tool_start",
            "tool_finish",
            "step",
            "text",
            "text",
            "usage",
            "step",
            "finish"
        ]
    );
    let AgentEvent::ToolCallStart { arguments, .. } = &events[1] else {
        unreachable!()
    };
    assert_eq!(arguments, &json!({"a": 20, "b": 22}));
    let AgentEvent::ToolCallFinish { result, .. } = &events[2] else {
        unreachable!()
    };
    assert_eq!(result, &Ok(ToolOutput::Json(json!(42))));
    let AgentEvent::Finish(output) = events.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(output.text, "The answer is 42.");
    assert!(model.calls().iter().all(|call| call.streamed));
}

#[tokio::test]
async fn stream_ends_with_the_error_when_the_model_fails() {
    let model = ScriptedModel::new().error(Error::Provider {
        provider: "scripted",
        status: 400,
        message: "bad".into(),
        code: Some("invalid_request_error".into()),
        body: String::new(),
        request_id: None,
        retry_after: None,
    });
    let agent = scripted_agent(&model).build().unwrap();
    let events: Vec<_> = agent.stream("hi").collect().await;
    assert_eq!(events.len(), 1);
    assert!(matches!(
        events[0],
        Err(Error::Provider { status: 400, .. })
    ));
}

#[tokio::test]
async fn duplicate_and_invalid_tool_names_fail_at_build() {
    let error = scripted_agent(&ScriptedModel::new())
        .tool(add_tool())
        .tool(add_tool())
        .tool(tool("bad name!").execute_raw(|_| async { Ok(json!(null)) }))
        .build()
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::ToolRegistry(_)));
    assert!(
        text.contains("`add`") && text.contains("`bad name!`"),
        "{text}"
    );
}

#[tokio::test]
async fn length_and_refusal_stop_reasons() {
    let model = ScriptedModel::new()
        .reply(ScriptedReply::text("partial").with_finish_reason(FinishReason::Length))
        .reply(ScriptedReply::text("").with_finish_reason(FinishReason::ContentFilter));
    let agent = scripted_agent(&model).build().unwrap();
    assert_eq!(
        agent.run("a").await.unwrap().stop_reason,
        StopReason::Length
    );
    assert_eq!(
        agent.run("b").await.unwrap().stop_reason,
        StopReason::Refusal
    );
}

/// An `echo` tool like server-everything's, counting its runs.
fn counting_echo(runs: Arc<AtomicUsize>) -> aquaregia::Tool {
    tool("echo")
        .description("Echoes back the input")
        .raw_schema(json!({"type": "object",
            "properties": {"message": {"type": "string", "description": "Message to echo"}},
            "required": ["message"]}))
        .execute_raw(move |args: Value| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!(format!(
                    "Echo: {}",
                    args["message"].as_str().unwrap_or_default()
                )))
            }
        })
}

/// llama.cpp often answers with the same call twice (captured, whole and streamed: two
/// `echo` calls with identical arguments and different ids). It runs once; the model gets
/// a result for each of its call ids.
#[tokio::test]
async fn identical_duplicate_calls_run_once() {
    for streamed in [false, true] {
        let server = MockServer::start().await;
        let (first, ids) = if streamed {
            (
                Reply::sse(common::fixture(
                    "llamacpp/chat_stream_duplicate_tool_calls.sse",
                )),
                [
                    "XgJIAqmIdlg6HSsKS9ChNoC7YpCopjea",
                    "53jZV7ppv48kUKcbxb9tnv03KbyJZCQ5",
                ],
            )
        } else {
            (
                Reply::json(common::fixture_json(
                    "llamacpp/chat_duplicate_tool_calls.json",
                )),
                [
                    "ANIiJyBKDkIcMiq5eakgIOdTNjHYPEFD",
                    "AVrC7kFw1AFHYyJl8HVVmmEtSqTSBjEd",
                ],
            )
        };
        server.push(first);
        server.push(if streamed {
            Reply::text("Done.")
        } else {
            Reply::json(chat_text("Done."))
        });
        let runs = Arc::new(AtomicUsize::new(0));
        let agent = chat_client(&server)
            .agent("smollm2")
            .tool(counting_echo(runs.clone()))
            .build()
            .unwrap();
        let output = if streamed {
            let mut stream = agent.stream("Echo hello three times using the echo tool.");
            let mut finish = None;
            while let Some(event) = stream.next().await {
                if let AgentEvent::Finish(output) = event.unwrap() {
                    finish = Some(output);
                }
            }
            finish.expect("a finish event")
        } else {
            agent
                .run("Echo hello three times using the echo tool.")
                .await
                .unwrap()
        };
        assert_eq!(output.stop_reason, StopReason::Finished);
        assert_eq!(runs.load(Ordering::SeqCst), 1, "streamed: {streamed}");
        let results = tool_messages(&server, 1);
        assert_eq!(results.len(), 2, "{results:?}");
        for (result, id) in results.iter().zip(ids) {
            assert_eq!(result["tool_call_id"], id);
            assert_eq!(result["content"], "\"Echo: Hello, World!\"");
        }
    }
}

/// llama.cpp cut off by the output limit inside its second call (captured:
/// `finish_reason: "length"`, the second call's arguments `{`): the complete first call runs,
/// the cut one does not and the model is told why; cut off again, the run stops with
/// `Length` instead of looping.
#[tokio::test]
async fn a_call_cut_off_by_the_output_limit_is_not_run() {
    let cut = || {
        Reply::sse(common::fixture(
            "llamacpp/chat_stream_cut_off_tool_call.sse",
        ))
    };
    let server = MockServer::start().await;
    server.push(cut());
    server.push(Reply::text("Done."));
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = chat_client(&server)
        .agent("smollm2")
        .tool(counting_echo(runs.clone()))
        .max_output_tokens(50)
        .build()
        .unwrap();
    let mut stream = agent.stream("Echo hello three times using the echo tool.");
    let mut finishes = Vec::new();
    let mut output = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            AgentEvent::ToolCallFinish { id, result, .. } => finishes.push((id, result)),
            AgentEvent::Finish(done) => output = Some(done),
            _ => {}
        }
    }
    let output = output.expect("a finish event");
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let results = tool_messages(&server, 1);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(
        results[0]["tool_call_id"],
        "WVo6vu8JuNYv2ameZR6X0GW9HQVALvWR"
    );
    assert_eq!(results[0]["content"], "\"Echo: Hello, World!\"");
    assert_eq!(
        results[1]["tool_call_id"],
        "GM6NGEIsF8zvzF6cdKFyb13pC6bAp4qH"
    );
    let told = results[1]["content"].as_str().unwrap();
    assert!(told.contains("cut off by the output token limit"), "{told}");
    assert!(told.contains("not run"), "{told}");
    // Hosts see the cut call end as an error too.
    assert!(
        matches!(
            &finishes[..],
            [(_, Ok(_)), (id, Err(ToolExecError::InvalidArguments(_)))]
                if id == "GM6NGEIsF8zvzF6cdKFyb13pC6bAp4qH"
        ),
        "{finishes:?}"
    );

    // Cut off twice in a row: the limit is too small for the call.
    let server = MockServer::start().await;
    server.push(cut());
    server.push(cut());
    server.set_fallback(Reply::text("not asked"));
    let runs = Arc::new(AtomicUsize::new(0));
    let agent = chat_client(&server)
        .agent("smollm2")
        .tool(counting_echo(runs.clone()))
        .max_output_tokens(50)
        .build()
        .unwrap();
    let mut stream = agent.stream("Echo hello three times using the echo tool.");
    let mut output = None;
    while let Some(event) = stream.next().await {
        if let AgentEvent::Finish(done) = event.unwrap() {
            output = Some(done);
        }
    }
    let output = output.expect("a finish event");
    assert_eq!(output.stop_reason, StopReason::Length);
    assert_eq!(output.steps.len(), 2);
    assert_eq!(server.request_count(), 2);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // Every call still has its result, so the conversation can go on.
    let last = output.messages.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(last.content.len(), 2);
}

//! A run as data: `AgentRun` saved to JSON between every action and driven by hand (or resumed
//! whole) on a fresh agent reaches what `Agent::run` reaches, and runs no tool call twice.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::common::scripted_agent;
use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    Agent, AgentEvent, AgentRun, Error, ModelPrice, NextAction, StopReason, Tool, ToolExecError,
    Usage, tool,
};
use futures::StreamExt;
use serde_json::{Value, json};

/// How often each tool was run with which `key`.
#[derive(Clone, Default)]
struct SideEffects(Arc<Mutex<BTreeMap<String, usize>>>);

impl SideEffects {
    fn counts(&self) -> BTreeMap<String, usize> {
        self.0.lock().unwrap().clone()
    }
}

fn lookup(effects: &SideEffects) -> Tool {
    let effects = effects.clone();
    tool("lookup")
        .description("Looks a key up")
        .raw_schema(json!({
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"]
        }))
        .execute_raw(move |args: Value| {
            let key = args["key"].as_str().unwrap_or_default().to_owned();
            *effects.0.lock().unwrap().entry(key.clone()).or_default() += 1;
            async move {
                if key == "missing" {
                    return Err(ToolExecError::Execution(format!("no value for {key}")));
                }
                Ok(json!({"key": key, "value": key.len()}))
            }
        })
}

/// Three steps: two calls plus a repeat of the first, one failing call, then the answer.
fn script() -> ScriptedModel {
    let usage = |input, output| Usage::new(input, output);
    ScriptedModel::new()
        .price(ModelPrice::new(1.0, 2.0))
        .reply(
            ScriptedReply::tool_calls([
                ("c1", "lookup", json!({"key": "alpha"})),
                ("c2", "lookup", json!({"key": "beta"})),
                ("c3", "lookup", json!({"key": "alpha"})),
            ])
            .with_usage(usage(100, 10)),
        )
        .reply(
            ScriptedReply::tool_call("c4", "lookup", json!({"key": "missing"}))
                .with_usage(usage(150, 5)),
        )
        .reply(ScriptedReply::text("alpha is 5, beta is 4").with_usage(usage(200, 8)))
}

fn agent_on(model: &ScriptedModel, effects: &SideEffects) -> Agent {
    scripted_agent(model)
        .instructions("Answer from lookups.")
        .tool(lookup(effects))
        .build()
        .unwrap()
}

fn save(run: &AgentRun) -> String {
    serde_json::to_string(run).unwrap()
}

fn load(saved: &str) -> AgentRun {
    serde_json::from_str(saved).unwrap()
}

#[tokio::test]
async fn a_run_driven_by_hand_through_json_reaches_what_run_reaches() {
    let reference_model = script();
    let reference_effects = SideEffects::default();
    let expected = agent_on(&reference_model, &reference_effects)
        .run("alpha and beta?")
        .await
        .unwrap();
    assert_eq!(expected.steps.len(), 3);

    let model = script();
    let effects = SideEffects::default();
    let mut saved = save(&agent_on(&model, &effects).start("alpha and beta?"));
    let mut actions = Vec::new();
    let output = loop {
        // A fresh agent and a fresh run from the JSON for every action: nothing carries over
        // in memory but the model's script and the tools' side effects.
        let agent = agent_on(&model, &effects);
        let mut stepper = agent.stepper(load(&saved));
        match stepper.next_action() {
            NextAction::CallModel { step } => {
                actions.push(format!("model {step}"));
                let request = stepper.model_request().await.unwrap();
                let response = stepper.call_model(&request).await.unwrap();
                stepper.model_responded(response).await.unwrap();
            }
            NextAction::RunTools { step, calls } => {
                // One call per round trip through JSON.
                let call = &calls[0];
                actions.push(format!("tool {step} {}", call.id));
                let result = stepper.execute_tool(call).await;
                stepper.tool_finished(&call.id, result).await.unwrap();
            }
            NextAction::Done(stop) => {
                assert_eq!(stop, StopReason::Finished);
                break stepper.finish().await.unwrap();
            }
            other => panic!("unexpected action {other:?}"),
        }
        let run = stepper.into_run();
        saved = save(&run);
        assert_eq!(load(&saved), run, "a saved run loads back equal");
    };

    assert_eq!(
        actions,
        [
            "model 0",
            "tool 0 c1",
            "tool 0 c2",
            "model 1",
            "tool 1 c4",
            "model 2"
        ],
        "the repeated call c3 is not run"
    );
    assert_eq!(output, expected);
    assert_eq!(effects.counts(), reference_effects.counts());
    assert_eq!(
        effects.counts(),
        BTreeMap::from([
            ("alpha".to_owned(), 1),
            ("beta".to_owned(), 1),
            ("missing".to_owned(), 1)
        ])
    );
    assert!(output.cost.is_some(), "every call was priced");
    // The model saw the same requests.
    let requests = model.requests();
    let reference_requests = reference_model.requests();
    assert_eq!(requests.len(), reference_requests.len());
    for (request, reference) in requests.iter().zip(&reference_requests) {
        assert_eq!(request.messages, reference.messages);
        assert_eq!(request.tools, reference.tools);
        assert_eq!(request.instructions, reference.instructions);
    }
}

#[tokio::test]
async fn advancing_a_run_saved_between_actions_reaches_what_run_reaches() {
    let reference_effects = SideEffects::default();
    let expected = agent_on(&script(), &reference_effects)
        .run("alpha and beta?")
        .await
        .unwrap();

    let model = script();
    let effects = SideEffects::default();
    let mut saved = save(&agent_on(&model, &effects).start("alpha and beta?"));
    let mut actions = 0;
    let output = loop {
        let agent = agent_on(&model, &effects);
        let mut stepper = agent.stepper(load(&saved));
        if stepper.advance().await.unwrap() {
            break stepper.finish().await.unwrap();
        }
        actions += 1;
        saved = save(stepper.run());
    };
    assert_eq!(
        actions, 2,
        "three steps: two advance to the next, the third ends the run"
    );
    assert_eq!(output, expected);
    assert_eq!(effects.counts(), reference_effects.counts());
}

#[tokio::test]
async fn a_run_stopped_at_a_tool_call_resumes_in_a_fresh_agent() {
    let reference_effects = SideEffects::default();
    let expected = agent_on(&script(), &reference_effects)
        .run("alpha and beta?")
        .await
        .unwrap();

    // The first process: the model call, then one of its calls, then it stops.
    let model = script();
    let effects = SideEffects::default();
    let saved = {
        let agent = agent_on(&model, &effects);
        let mut stepper = agent.stepper(agent.start("alpha and beta?"));
        stepper.advance_model_only().await;
        let NextAction::RunTools { calls, .. } = stepper.next_action() else {
            panic!("expected tool calls");
        };
        assert_eq!(
            calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["c1", "c2"]
        );
        let result = stepper.execute_tool(&calls[0]).await;
        stepper.tool_finished("c1", result).await.unwrap();
        save(stepper.run())
    };
    assert_eq!(effects.counts(), BTreeMap::from([("alpha".to_owned(), 1)]));

    // The second process: a fresh agent on the rest of the script, from the JSON.
    let run = load(&saved);
    assert_eq!(run.step(), 0);
    let pending: Vec<_> = run
        .tool_calls()
        .into_iter()
        .map(|(call, result)| (call.id.clone(), result.is_some()))
        .collect();
    assert_eq!(
        pending,
        [
            ("c1".to_owned(), true),
            ("c2".to_owned(), false),
            ("c3".to_owned(), true)
        ],
        "c3 repeats c1 and shows its result"
    );
    let agent = agent_on(&model, &effects);
    let mut events = Vec::new();
    let mut stream = agent.resume_stream(run);
    let mut output = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            AgentEvent::Finish(finished) => output = Some(finished),
            AgentEvent::ToolCallStart { id, .. } => events.push(format!("start {id}")),
            AgentEvent::StepFinish(step) => events.push(format!("step {}", step.index)),
            _ => {}
        }
    }
    assert_eq!(
        events,
        ["start c2", "step 0", "start c4", "step 1", "step 2"],
        "only the call still to run runs"
    );
    assert_eq!(output.unwrap(), expected);
    assert_eq!(effects.counts(), reference_effects.counts());
}

/// Test-side helper: the stepper's model call, as a caller journaling it would make it.
trait ModelOnly {
    async fn advance_model_only(&mut self);
}

impl ModelOnly for aquaregia::RunStepper {
    async fn advance_model_only(&mut self) {
        let request = self.model_request().await.unwrap();
        let response = self.call_model(&request).await.unwrap();
        self.model_responded(response).await.unwrap();
    }
}

#[tokio::test]
async fn a_stepper_refuses_outcomes_the_run_is_not_waiting_for() {
    let model = script();
    let effects = SideEffects::default();
    let agent = agent_on(&model, &effects);
    let mut stepper = agent.stepper(agent.start("alpha and beta?"));

    let error = stepper
        .tool_finished("c1", Ok(json!(1).into()))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::InvalidRequest(message) if message.contains("no tool call `c1`")),
        "{error}"
    );
    let error = stepper.finish().await.unwrap_err();
    assert!(matches!(&error, Error::InvalidRequest(message) if message.contains("has not ended")));

    let mut stepper = agent.stepper(agent.start("alpha and beta?"));
    stepper.advance_model_only().await;
    let error = stepper
        .model_responded(aquaregia::ModelResponse::new(
            aquaregia::Message::assistant("again"),
            aquaregia::FinishReason::Stop,
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::InvalidRequest(message) if message.contains("running tool calls")),
        "{error}"
    );
    let error = stepper.model_request().await.unwrap_err();
    assert!(matches!(error, Error::InvalidRequest(_)));
    let error = stepper
        .tool_finished("c3", Ok(json!(1).into()))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::InvalidRequest(_)),
        "c3 repeats c1 and is never run itself: {error}"
    );
    assert_eq!(effects.counts(), BTreeMap::new());
}

#[tokio::test]
async fn a_saved_run_of_another_version_or_with_broken_parts_does_not_load() {
    let model = script();
    let effects = SideEffects::default();
    let agent = agent_on(&model, &effects);
    let mut stepper = agent.stepper(agent.start("alpha and beta?"));
    stepper.advance_model_only().await;
    let saved: Value = serde_json::to_value(stepper.run()).unwrap();
    assert_eq!(saved["format_version"], 1);
    assert_eq!(saved["phase"]["phase"], "tools");

    let mut other_version = saved.clone();
    other_version["format_version"] = json!(2);
    let error = serde_json::from_value::<AgentRun>(other_version).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("format version 2 is not supported"),
        "{error}"
    );

    let mut broken = saved.clone();
    broken["phase"]["calls"][0]["same_as"] = json!(2);
    let error = serde_json::from_value::<AgentRun>(broken).unwrap_err();
    assert!(error.to_string().contains("repeats a call"), "{error}");

    let mut wrong_step = saved;
    wrong_step["phase"]["step"]["index"] = json!(3);
    let error = serde_json::from_value::<AgentRun>(wrong_step).unwrap_err();
    assert!(
        error.to_string().contains("not for its next step"),
        "{error}"
    );
}

#[tokio::test]
async fn resuming_an_ended_run_returns_its_output_without_calling_the_model() {
    let model = script();
    let effects = SideEffects::default();
    let agent = agent_on(&model, &effects);
    let mut stepper = agent.stepper(agent.start("alpha and beta?"));
    while !stepper.advance().await.unwrap() {}
    let ended = load(&save(stepper.run()));
    assert_eq!(ended.stop_reason(), Some(StopReason::Finished));
    let calls = model.call_count();
    let output = agent.resume(ended.clone()).await.unwrap();
    assert_eq!(model.call_count(), calls);
    assert_eq!(output.text, "alpha is 5, beta is 4");
    assert_eq!(output.messages, ended.messages());
    assert_eq!(output.usage, ended.usage());
}

#[tokio::test]
async fn deferred_tools_found_before_a_save_are_still_offered_after_it() {
    let tools = || -> Vec<Tool> {
        (0..80)
            .map(|n| {
                let topic = if n % 2 == 0 { "weather" } else { "traffic" };
                tool(format!("{topic}_{n:02}"))
                    .description(format!("The {topic} report number {n}"))
                    .execute_raw(|_| async { Ok(json!("ok")) })
            })
            .collect()
    };
    let script = || {
        ScriptedModel::new()
            .reply(ScriptedReply::tool_call(
                "s1",
                aquaregia::SEARCH_TOOLS,
                json!({"query": "weather"}),
            ))
            .reply(ScriptedReply::text("done"))
    };
    let agent_on = |model: &ScriptedModel| {
        scripted_agent(model)
            .tools(tools())
            .tool_deferral(
                aquaregia::ToolDeferral::new()
                    .threshold(32)
                    .search_results(3),
            )
            .build()
            .unwrap()
    };
    let tool_names = |model: &ScriptedModel| -> Vec<Vec<String>> {
        model
            .requests()
            .iter()
            .map(|request| request.tools.iter().map(|t| t.name.clone()).collect())
            .collect()
    };

    let reference = script();
    agent_on(&reference).run("weather?").await.unwrap();
    let expected = tool_names(&reference);
    assert_eq!(
        expected[1],
        [
            aquaregia::SEARCH_TOOLS,
            "weather_00",
            "weather_02",
            "weather_04"
        ],
        "the second request carries the tools the search found"
    );

    let model = script();
    let mut saved = save(&agent_on(&model).start("weather?"));
    loop {
        let mut stepper = agent_on(&model).stepper(load(&saved));
        if stepper.advance().await.unwrap() {
            break;
        }
        saved = save(stepper.run());
    }
    assert_eq!(tool_names(&model), expected);
}

#[tokio::test]
async fn an_answer_whose_only_call_was_cut_off_goes_on_to_the_next_model_call() {
    let model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_call("c1", "lookup", json!({"key": "a"}))
                .with_finish_reason(aquaregia::FinishReason::Length),
        )
        .reply(ScriptedReply::text("done"));
    let agent = scripted_agent(&model)
        .tool(lookup(&SideEffects::default()))
        .build()
        .unwrap();
    let mut stepper = agent.stepper(agent.start("look a up"));
    let request = stepper.model_request().await.unwrap();
    let response = stepper.call_model(&request).await.unwrap();
    stepper.model_responded(response).await.unwrap();
    assert_eq!(stepper.next_action(), NextAction::CallModel { step: 1 });
}

//! `StepOverrides::language_model`: a step run on another model, its cost attributed to that
//! model, and the run still plain data.

use std::sync::Arc;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentBuilder, AgentEvent, AgentRun, LanguageModel, ModelPrice, NextAction, StepOverrides,
    Usage, tool,
};
use futures::StreamExt;
use serde_json::{Value, json};

fn add() -> aquaregia::Tool {
    tool("add")
        .description("Adds")
        .raw_schema(json!({"type": "object", "properties": {"a": {"type": "number"}}}))
        .execute_raw(|_args: Value| async { Ok(json!(3)) })
}

/// The agent's model asks for a tool; every later step goes to `cheap`.
fn agent(big: &ScriptedModel, cheap: &ScriptedModel) -> aquaregia::Agent {
    let cheap: Arc<dyn LanguageModel> = Arc::new(cheap.clone());
    AgentBuilder::new(Arc::new(big.clone()))
        .tool(add())
        .prepare_step(move |ctx| {
            let overrides = if ctx.step() > 0 {
                StepOverrides::new().language_model(cheap.clone())
            } else {
                StepOverrides::new()
            };
            async move { Ok(overrides) }
        })
        .build()
        .unwrap()
}

fn models() -> (ScriptedModel, ScriptedModel) {
    let big = ScriptedModel::new()
        .id("big-model")
        .price(ModelPrice::new(10.0, 20.0))
        .reply(
            ScriptedReply::tool_call("c1", "add", json!({"a": 1}))
                .with_usage(Usage::new(1_000_000, 0)),
        );
    let cheap = ScriptedModel::new()
        .id("cheap-model")
        .provider("cheap-provider")
        .price(ModelPrice::new(0.5, 1.0))
        .reply(ScriptedReply::text("3").with_usage(Usage::new(1_000_000, 1_000_000)));
    (big, cheap)
}

#[tokio::test]
async fn a_step_runs_on_the_model_prepare_step_chose_and_costs_its_price() {
    let (big, cheap) = models();
    let agent = agent(&big, &cheap);
    let mut stream = agent.stream("add");
    let mut costs = Vec::new();
    let mut steps = Vec::new();
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            AgentEvent::Usage { cost, .. } => costs.push(cost.unwrap().total()),
            AgentEvent::StepFinish(step) => steps.push(step),
            _ => {}
        }
    }
    assert_eq!(big.call_count(), 1);
    assert_eq!(cheap.call_count(), 1);
    assert_eq!(cheap.requests()[0].model, "cheap-model");
    assert_eq!(steps[0].model, "big-model");
    assert_eq!(steps[1].model, "cheap-model");
    assert_eq!(steps[1].text, "3");
    // 1M input tokens at 10 $/M on the big model; 1M in and out at 0.5 + 1 $/M on the cheap.
    assert_eq!(costs, [10.0, 1.5]);
    assert_eq!(steps[1].cost.unwrap().total(), 1.5);
}

#[tokio::test]
async fn a_saved_run_stays_data_and_asks_prepare_step_again() {
    let (big, cheap) = models();
    let agent = agent(&big, &cheap);
    let mut stepper = agent.stepper(agent.start("add"));
    stepper.advance().await.unwrap();
    assert!(matches!(
        stepper.next_action(),
        NextAction::CallModel { .. }
    ));
    let saved = serde_json::to_string(stepper.run()).unwrap();
    assert!(
        !saved.contains("cheap-model"),
        "no model of a step to come is stored"
    );

    let mut resumed = agent.stepper(serde_json::from_str::<AgentRun>(&saved).unwrap());
    let request = resumed.model_request().await.unwrap();
    assert_eq!(request.model, "cheap-model");
    let response = resumed.call_model(&request).await.unwrap();
    resumed.model_responded(response).await.unwrap();
    let output = resumed.finish().await.unwrap();
    assert_eq!(output.text, "3");
    assert_eq!(cheap.call_count(), 1);
    assert_eq!(output.cost.unwrap().total(), 11.5);
}

#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_chat_span_names_the_model_that_ran() {
    let logs = Logs::default();
    let writer = logs.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::INFO)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_ansi(false)
            .finish(),
    );
    let (big, cheap) = models();
    agent(&big, &cheap).run("add").await.unwrap();
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let chats: Vec<&str> = logs.lines().filter(|line| line.contains("chat{")).collect();
    assert_eq!(chats.len(), 2, "{logs}");
    assert!(
        chats[0].contains("gen_ai.request.model=big-model")
            && chats[0].contains("gen_ai.provider.name=\"scripted\""),
        "{}",
        chats[0]
    );
    assert!(
        chats[1].contains("gen_ai.request.model=cheap-model")
            && chats[1].contains("gen_ai.provider.name=\"cheap-provider\""),
        "{}",
        chats[1]
    );
}

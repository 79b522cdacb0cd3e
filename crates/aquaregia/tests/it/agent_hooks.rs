//! Hooks and prepare_step, on a scripted model: order, deny, rewrite, and replacing tools
//! between steps.

use crate::common;

use std::sync::{Arc, Mutex};

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    AgentHooks, AgentOutput, Error, StepContext, StepOverrides, StepResult, StopReason, Tool,
    ToolCall, ToolCallDecision, ToolExecError, ToolOutput, tool,
};
use common::{last_tool_results, scripted_agent};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Recorder {
    log: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn push(&self, entry: String) {
        self.log.lock().unwrap().push(entry);
    }

    fn entries(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

#[aquaregia::async_trait]
impl AgentHooks for Recorder {
    async fn on_step_start(&self, ctx: &StepContext<'_>) {
        self.push(format!(
            "step_start {} msgs={}",
            ctx.step(),
            ctx.messages().len()
        ));
    }

    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        self.push(format!("tool_start {} known={}", call.name, tool.is_some()));
        match call.name.as_str() {
            "danger" => ToolCallDecision::Deny("not on a Friday".into()),
            "echo" => ToolCallDecision::Rewrite(json!({"text": "rewritten"})),
            _ => ToolCallDecision::Allow,
        }
    }

    async fn on_tool_call_finish(
        &self,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolExecError>,
    ) {
        self.push(format!("tool_finish {} ok={}", call.name, result.is_ok()));
    }

    async fn on_step_finish(&self, step: &StepResult) {
        self.push(format!("step_finish {}", step.index));
    }

    async fn on_finish(&self, output: &AgentOutput) {
        self.push(format!("finish {:?}", output.stop_reason));
    }
}

fn echo() -> Tool {
    tool("echo")
        .raw_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .execute_raw(|args: Value| async move { Ok(args["text"].clone()) })
}

#[tokio::test]
async fn hooks_run_in_order_and_can_deny_or_rewrite() {
    let model = ScriptedModel::new();
    model.push(ScriptedReply::tool_calls([(
        "c1",
        "echo",
        json!({"text": "original"}),
    )]));
    model.push(ScriptedReply::tool_calls([("c2", "danger", json!({}))]));
    model.push(ScriptedReply::text("done"));
    let ran_danger = Arc::new(Mutex::new(false));
    let flag = ran_danger.clone();
    let danger = tool("danger").execute_raw(move |_| {
        *flag.lock().unwrap() = true;
        async { Ok(json!("boom")) }
    });
    let recorder = Recorder::default();
    let agent = scripted_agent(&model)
        .tool(echo())
        .tool(danger)
        .hooks(recorder.clone())
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();

    assert_eq!(
        recorder.entries(),
        [
            "step_start 0 msgs=1",
            "tool_start echo known=true",
            "tool_finish echo ok=true",
            "step_finish 0",
            "step_start 1 msgs=3",
            "tool_start danger known=true",
            "tool_finish danger ok=false",
            "step_finish 1",
            "step_start 2 msgs=5",
            "step_finish 2",
            "finish Finished",
        ]
    );
    // Rewritten arguments reached the tool.
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Ok(ToolOutput::Json(json!("rewritten")))
    );
    // The denied tool never ran, and the model was told why, as a rejection rather than an error.
    assert!(!*ran_danger.lock().unwrap());
    assert_eq!(
        output.steps[1].tool_calls[0].result,
        Err(ToolExecError::Denied("not on a Friday".into()))
    );
    let rejection = last_tool_results(&model.requests()[2]);
    assert_eq!(rejection.len(), 1);
    assert!(
        rejection[0].1.contains("rejected: not on a Friday"),
        "{rejection:?}"
    );
    assert!(!rejection[0].2, "a rejection, not an error");
}

#[tokio::test]
async fn prepare_step_replaces_tools_between_steps() {
    let model = ScriptedModel::new();
    model.push(ScriptedReply::tool_calls([("c1", "v1", json!({}))]));
    model.push(ScriptedReply::tool_calls([("c2", "v2", json!({}))]));
    model.push(ScriptedReply::text("done"));
    let make = |name: &'static str| tool(name).execute_raw(move |_| async move { Ok(json!(name)) });
    // A stand-in for an MCP connection whose tool list changes while the agent runs.
    let current: Arc<Mutex<Vec<Tool>>> = Arc::new(Mutex::new(vec![make("v1")]));
    let source = current.clone();
    let agent = scripted_agent(&model)
        .prepare_step(move |ctx| {
            let source = source.clone();
            let step = ctx.step();
            async move {
                if step == 1 {
                    *source.lock().unwrap() = vec![make("v2")];
                }
                let tools = source.lock().unwrap().clone();
                Ok(StepOverrides::new().tools(tools))
            }
        })
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Ok(ToolOutput::Json(json!("v1")))
    );
    assert_eq!(
        output.steps[1].tool_calls[0].result,
        Ok(ToolOutput::Json(json!("v2")))
    );
    let names = |i: usize| -> Vec<String> {
        model.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(names(0), ["v1"]);
    assert_eq!(names(1), ["v2"]);
}

#[tokio::test]
async fn prepare_step_overrides_model_messages_and_active_tools() {
    let model = ScriptedModel::new();
    model.push(ScriptedReply::text("ok"));
    let agent = scripted_agent(&model.clone().id("base-model"))
        .tool(echo())
        .tool(tool("other").execute_raw(|_| async { Ok(json!(1)) }))
        .prepare_step(|_ctx| async {
            Ok(StepOverrides::new()
                .model("step-model")
                .instructions("step instructions")
                .active_tools(["other"])
                .messages(vec![aquaregia::Message::user("compacted")]))
        })
        .build()
        .unwrap();
    let output = agent.run("original question").await.unwrap();
    let request = &model.requests()[0];
    assert_eq!(request.model, "step-model");
    assert_eq!(request.instructions.as_deref(), Some("step instructions"));
    assert_eq!(request.messages, [aquaregia::Message::user("compacted")]);
    assert_eq!(request.tools.len(), 1);
    assert_eq!(request.tools[0].name, "other");
    // The run's own conversation keeps the real input.
    assert_eq!(output.messages[0].text(), "original question");
    assert_eq!(output.steps[0].model, "step-model");
}

#[tokio::test]
async fn prepare_step_errors_and_invalid_tools_end_the_run() {
    let model = ScriptedModel::new();
    let agent = scripted_agent(&model)
        .prepare_step(|_ctx| async { Err(Error::other("tool source unavailable")) })
        .build()
        .unwrap();
    let error = agent.run("go").await.unwrap_err();
    assert!(error.to_string().contains("tool source unavailable"));

    let agent = scripted_agent(&model)
        .prepare_step(|_ctx| async {
            let dup = || tool("same").execute_raw(|_| async { Ok(json!(1)) });
            Ok(StepOverrides::new().tools(vec![dup(), dup()]))
        })
        .build()
        .unwrap();
    assert!(matches!(agent.run("go").await, Err(Error::ToolRegistry(_))));
    assert_eq!(model.call_count(), 0);
}

/// The MCP hot-reload shape from the design: an error type from another layer converts with `?`.
#[tokio::test]
async fn prepare_step_accepts_question_mark_on_other_errors() {
    #[derive(Debug, thiserror::Error)]
    #[error("source failed")]
    struct SourceError;
    impl From<SourceError> for Error {
        fn from(error: SourceError) -> Self {
            Error::other(error)
        }
    }
    #[derive(Clone)]
    struct Source;
    impl Source {
        async fn tools(&self) -> Result<Vec<Tool>, SourceError> {
            Ok(vec![echo()])
        }
    }
    let model = ScriptedModel::new();
    model.push(ScriptedReply::text("ok"));
    let mcp = Source;
    let agent = scripted_agent(&model)
        .prepare_step(move |_ctx| {
            let mcp = mcp.clone();
            async move { Ok(StepOverrides::new().tools(mcp.tools().await?)) }
        })
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(model.requests()[0].tools[0].name, "echo");
}

/// Several hooks: they run in order, a rewrite is what the next one sees, a denial wins.
#[tokio::test]
async fn hooks_compose_in_order() {
    struct Rewrite;
    #[aquaregia::async_trait]
    impl AgentHooks for Rewrite {
        async fn on_tool_call_start(
            &self,
            call: &ToolCall,
            _tool: Option<&Tool>,
        ) -> ToolCallDecision {
            ToolCallDecision::Rewrite(
                json!({"text": format!("{}!", call.arguments["text"].as_str().unwrap())}),
            )
        }
    }
    struct DenyShouting(Recorder);
    #[aquaregia::async_trait]
    impl AgentHooks for DenyShouting {
        async fn on_tool_call_start(
            &self,
            call: &ToolCall,
            _tool: Option<&Tool>,
        ) -> ToolCallDecision {
            self.0.push(format!("saw {}", call.arguments["text"]));
            if call.arguments["text"] == "stop!" {
                ToolCallDecision::Deny("no shouting".into())
            } else {
                ToolCallDecision::Allow
            }
        }
    }
    let model = ScriptedModel::new();
    model.push(ScriptedReply::tool_calls([(
        "c1",
        "echo",
        json!({"text": "go"}),
    )]));
    model.push(ScriptedReply::tool_calls([(
        "c2",
        "echo",
        json!({"text": "stop"}),
    )]));
    model.push(ScriptedReply::text("done"));
    let recorder = Recorder::default();
    let agent = scripted_agent(&model)
        .tool(echo())
        .hooks(Rewrite)
        .hooks(DenyShouting(recorder.clone()))
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Ok(ToolOutput::Json(json!("go!")))
    );
    assert_eq!(
        output.steps[1].tool_calls[0].result,
        Err(ToolExecError::Denied("no shouting".into()))
    );
    assert_eq!(recorder.entries(), ["saw \"go!\"", "saw \"stop!\""]);
}

/// A `run_command` tool that records the commands it ran.
#[cfg(feature = "cedar")]
fn run_command(ran: Arc<Mutex<Vec<String>>>) -> Tool {
    tool("run_command")
        .raw_schema(json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}))
        .execute_raw(move |args: Value| {
            let command = args["command"].as_str().unwrap_or_default().to_owned();
            ran.lock().unwrap().push(command);
            async { Ok(json!("ran")) }
        })
}

#[cfg(feature = "cedar")]
const NO_RM: &str = r#"
@reason("rm is not allowed here")
forbid(principal, action == Action::"call", resource)
when { resource.name == "run_command" && context.args.command like "rm *" };

permit(principal, action == Action::"call", resource);
"#;

/// A Cedar policy refuses a call by its argument's value; the same tool with other arguments
/// runs, and the model is told the policy's reason.
#[cfg(feature = "cedar")]
#[tokio::test]
async fn a_cedar_policy_denies_a_call_by_argument_value() {
    use aquaregia::policy::{CedarPolicy, PermissionPolicy, PolicyHooks};

    let model = ScriptedModel::new();
    model.push(ScriptedReply::tool_calls([(
        "c1",
        "run_command",
        json!({"command": "rm -rf build"}),
    )]));
    model.push(ScriptedReply::tool_calls([(
        "c2",
        "run_command",
        json!({"command": "ls -la"}),
    )]));
    model.push(ScriptedReply::text("done"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let policy = PermissionPolicy::new().cedar(CedarPolicy::parse(NO_RM).unwrap());
    let agent = scripted_agent(&model)
        .tool(run_command(ran.clone()))
        .hooks(PolicyHooks::new(policy))
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();

    assert_eq!(*ran.lock().unwrap(), ["ls -la"]);
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Err(ToolExecError::Denied("rm is not allowed here".into()))
    );
    let (_, content, _) = &last_tool_results(&model.requests()[1])[0];
    assert!(content.contains("rm is not allowed here"), "{content}");
}

/// `@decision("ask")` on a permit asks the hooks' handler, which sees the arguments; its "no"
/// refuses the call.
#[cfg(feature = "cedar")]
#[tokio::test]
async fn a_cedar_ask_goes_to_the_ask_handler() {
    use aquaregia::policy::{CedarPolicy, PermissionPolicy, PolicyHooks};

    let model = ScriptedModel::new();
    model.push(ScriptedReply::tool_calls([(
        "c1",
        "run_command",
        json!({"command": "cargo publish"}),
    )]));
    model.push(ScriptedReply::text("done"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let cedar = CedarPolicy::parse(
        r#"@decision("ask") permit(principal, action, resource) when { resource.name == "run_command" };"#,
    )
    .unwrap();
    let hooks = PolicyHooks::new(
        PermissionPolicy::new()
            .cedar(cedar)
            .fallback(aquaregia::policy::Decision::Allow),
    )
    .on_ask(move |request| {
        seen.lock()
            .unwrap()
            .push(request.arguments["command"].clone());
        Box::pin(async { false })
    });
    let agent = scripted_agent(&model)
        .tool(run_command(ran.clone()))
        .hooks(hooks)
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert!(ran.lock().unwrap().is_empty());
    assert_eq!(*asked.lock().unwrap(), [json!("cargo publish")]);
    assert_eq!(
        output.steps[0].tool_calls[0].result,
        Err(ToolExecError::Denied(
            "the user rejected this tool call".into()
        ))
    );
}

/// A shadow policy logs what it would decide and changes nothing: the call it would refuse
/// runs.
#[cfg(feature = "cedar")]
#[tokio::test]
async fn a_shadow_policy_logs_without_enforcing() {
    use aquaregia::policy::{CedarPolicy, PermissionPolicy, PolicyHooks};

    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Logs {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let logs = Logs::default();
    let writer = logs.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .finish(),
    );
    let model = ScriptedModel::new();
    model.push(ScriptedReply::tool_calls([(
        "c1",
        "run_command",
        json!({"command": "rm -rf build"}),
    )]));
    model.push(ScriptedReply::text("done"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let policy = PermissionPolicy::new()
        .allow_all()
        .shadow(CedarPolicy::parse(NO_RM).unwrap());
    let agent = scripted_agent(&model)
        .tool(run_command(ran.clone()))
        .hooks(PolicyHooks::new(policy))
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(*ran.lock().unwrap(), ["rm -rf build"]);
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("aquaregia::policy")
            && logs.contains(
                "shadow policy would decide deny (rm is not allowed here), not enforced (enforced: allow)"
            ),
        "{logs}"
    );
}

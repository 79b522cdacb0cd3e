//! One server, one service process (the `durable_agent` example) and one scripted model per
//! test.

use std::path::PathBuf;
use std::time::Duration;

use aquaregia_test_support::deps::example_binary;
use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::restate::{RestateServer, ServiceProcess};
use serde_json::{Value, json};

/// The line the example writes when it listens.
const PORT_LINE: &str = "durable_agent listening on port ";
/// The approval key the service checks with and the tests sign with.
pub(crate) const APPROVAL_SECRET: &str = "a test approval secret of more than 32 bytes";
/// How long a run may take to finish, restarts included.
pub(crate) const RUN_BOUND: Duration = Duration::from_secs(120);

pub(crate) struct Setup {
    pub(crate) server: RestateServer,
    pub(crate) service: ServiceProcess,
    pub(crate) model: MockServer,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Setup {
    /// A restate-server, the example service registered with it, and a mock model with these
    /// replies queued.
    pub(crate) async fn start(replies: Vec<Reply>) -> Self {
        Self::start_with(replies, Vec::new()).await
    }

    /// As [`start`](Self::start), with more variables in the service's environment.
    pub(crate) async fn start_with(replies: Vec<Reply>, env: Vec<(&str, String)>) -> Self {
        let model = MockServer::with_replies(replies).await;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("side-effects.log");
        let mut vars = vec![
            ("AQUAREGIA_MODEL", "openai-chat:mock-model".to_owned()),
            ("OPENAI_BASE_URL", model.url.clone()),
            ("OPENAI_API_KEY", "test".to_owned()),
            ("AQUAREGIA_APPROVAL_KEY", APPROVAL_SECRET.to_owned()),
            ("DURABLE_AGENT_LOG", log.display().to_string()),
        ];
        vars.extend(env);
        let service = ServiceProcess::start(
            example_binary("durable_agent"),
            &["serve"],
            &vars,
            PORT_LINE,
        )
        .await;
        let server = RestateServer::start().await;
        server.register(&service.url()).await;
        Self {
            server,
            service,
            model,
            log,
            _dir: dir,
        }
    }

    /// Starts run `id` of `prompt` without waiting for it; returns its invocation id.
    pub(crate) async fn send_run(&self, id: &str, prompt: &str) -> String {
        let (status, body) = self
            .server
            .ingress_post(
                &format!("/AgentRun/{id}/run/send"),
                &json!({"prompt": prompt}),
            )
            .await;
        assert!(
            (200..300).contains(&status),
            "starting run {id}: {status} {body}"
        );
        body["invocationId"]
            .as_str()
            .unwrap_or_else(|| panic!("no invocation id in {body}"))
            .to_owned()
    }

    /// Waits for run `id`'s result.
    pub(crate) async fn result(&self, id: &str) -> Value {
        let (status, body) = self.server.attach("AgentRun", id, RUN_BOUND).await;
        assert_eq!(
            status,
            200,
            "run {id} failed: {body}\nthe service's stderr:\n{}",
            self.service.stderr()
        );
        body
    }

    /// The side effects the tools made so far, one line each.
    pub(crate) fn side_effects(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// A model answer calling `name` with `{"text": text}` (not streamed).
pub(crate) fn call(id: &str, name: &str, text: &str) -> Reply {
    Reply::json(aquaregia_test_support::mock_model::chat_tool_calls(&[(
        id,
        name,
        json!({"text": text}),
    )]))
}

/// A model answer calling `name` with `arguments` (not streamed).
pub(crate) fn call_with(id: &str, name: &str, arguments: Value) -> Reply {
    Reply::json(aquaregia_test_support::mock_model::chat_tool_calls(&[(
        id, name, arguments,
    )]))
}

/// Waits (boundedly: [`RUN_BOUND`]) until `condition` holds.
pub(crate) async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + RUN_BOUND;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {RUN_BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A model answer with text (not streamed).
pub(crate) fn answer(text: &str) -> Reply {
    Reply::json(aquaregia_test_support::mock_model::chat_text(text))
}

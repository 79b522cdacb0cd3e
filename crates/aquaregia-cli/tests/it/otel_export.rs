//! Feature `otel`: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, `aquaregia run` and `aquaregia acp`
//! export the agent's GenAI and MCP spans over OTLP/HTTP (protobuf) to a collector on
//! 127.0.0.1, flushed before the process exits.

use crate::common;

use std::sync::{Arc, Mutex};

use aquaregia_test_support::mock_model::{MockServer, Reply};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::routing::post;
use common::{BOUND, Scratch, cli, run, test_server_entry, use_mock};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message as _;
use serde_json::json;

/// An exported span, decoded.
struct Exported {
    trace_id: Vec<u8>,
    name: String,
    /// `gen_ai.conversation.id`.
    conversation: Option<String>,
}

/// One `POST /v1/traces`: its content type and its body.
type Posts = Arc<Mutex<Vec<(String, Bytes)>>>;

/// A minimal OTLP/HTTP collector: accepts `POST /v1/traces` and keeps what it got.
struct Collector {
    url: String,
    posts: Posts,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let posts = Posts::default();
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(posts.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, posts, task }
    }

    /// The exported spans, and the service names of their resources.
    fn spans(&self) -> (Vec<Exported>, Vec<String>) {
        let posts = self.posts.lock().unwrap().clone();
        assert!(!posts.is_empty(), "nothing was exported");
        let mut spans = Vec::new();
        let mut services = Vec::new();
        for (content_type, body) in posts {
            assert_eq!(content_type, "application/x-protobuf");
            assert!(!body.is_empty());
            let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
            for resource_spans in request.resource_spans {
                for attribute in resource_spans.resource.iter().flat_map(|r| &r.attributes) {
                    if attribute.key == "service.name"
                        && let Some(any_value::Value::StringValue(name)) =
                            attribute.value.as_ref().and_then(|v| v.value.as_ref())
                    {
                        services.push(name.clone());
                    }
                }
                for scope in resource_spans.scope_spans {
                    for span in scope.spans {
                        let conversation = span
                            .attributes
                            .iter()
                            .find(|attribute| attribute.key == "gen_ai.conversation.id")
                            .and_then(|attribute| attribute.value.as_ref())
                            .and_then(|value| match &value.value {
                                Some(any_value::Value::StringValue(id)) => Some(id.clone()),
                                _ => None,
                            });
                        spans.push(Exported {
                            trace_id: span.trace_id,
                            name: span.name,
                            conversation,
                        });
                    }
                }
            }
        }
        (spans, services)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(posts): State<Posts>, headers: HeaderMap, body: Bytes) -> Vec<u8> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    posts.lock().unwrap().push((content_type, body));
    // An empty ExportTraceServiceResponse: everything accepted.
    Vec::new()
}

fn names(spans: &[Exported]) -> Vec<&str> {
    spans.iter().map(|span| span.name.as_str()).collect()
}

#[tokio::test]
async fn run_exports_its_spans_to_the_collector() {
    let collector = Collector::start().await;
    let scratch = Scratch::new();
    scratch.config(&json!({"test": test_server_entry()}));
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["Hello, Ann."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command
        .args(["run", "--yes", "Greet Ann."])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .env_remove("OTEL_SERVICE_NAME");
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Hello, Ann.\n");

    let (spans, services) = collector.spans();
    let names = names(&spans);
    for expected in [
        "invoke_agent aquaregia",
        "chat mock",
        "execute_tool greet",
        "tools/call greet",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert_eq!(names.iter().filter(|name| **name == "chat mock").count(), 2);
    let trace = &spans[0].trace_id;
    assert!(
        spans.iter().all(|span| &span.trace_id == trace),
        "one trace"
    );
    assert!(
        services.iter().all(|service| service == "aquaregia"),
        "{services:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_exports_its_spans_when_it_exits() {
    let collector = Collector::start().await;
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Hi there."])]).await;
    let mut command = cli(&scratch);
    command
        .arg("acp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url);
    use_mock(&mut command, &model);
    let client = aquaregia_test_support::acp_client::RawClient::spawn(
        tokio::process::Command::from(command),
    );
    client.initialize().await;
    let session = client
        .request(
            "session/new",
            json!({"cwd": scratch.path, "mcpServers": []}),
        )
        .await;
    let id = session["result"]["sessionId"].clone();
    let answer = client
        .request(
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "Hi."}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.close_write().await;
    assert!(client.wait_exit(BOUND).await.success());

    let (spans, _) = collector.spans();
    let names = names(&spans);
    assert!(names.contains(&"chat mock"), "{names:?}");
    let run = spans
        .iter()
        .find(|span| span.name == "invoke_agent aquaregia")
        .expect("the run's span");
    assert_eq!(
        run.conversation.as_deref(),
        id.as_str(),
        "the ACP session id"
    );
}

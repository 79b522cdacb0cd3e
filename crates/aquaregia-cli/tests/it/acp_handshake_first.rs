//! `aquaregia acp` answers `initialize` before doing anything the handshake does not need: the
//! model's HTTPS client (TLS roots and all) is built on first use. With no CA certificate to
//! load, the agent still starts and answers; a prompt to an `https://` model gets the error,
//! and a model on plain HTTP (a local server) needs no TLS roots at all.

use crate::common;

use serde_json::json;

use aquaregia_test_support::acp_client::RawClient;
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};
use common::{BOUND, Scratch, cli, use_mock};

/// `aquaregia acp` on the mock, with no CA certificates to load, `base_url` overriding the
/// mock's URL when given.
fn agent_without_certificates(
    scratch: &Scratch,
    mock: &MockServer,
    base_url: Option<&str>,
) -> RawClient {
    let mut command = cli(scratch);
    command.arg("acp");
    use_mock(&mut command, mock);
    if let Some(url) = base_url {
        command.env("OPENAI_BASE_URL", url);
    }
    let nowhere = scratch.path.join("no-certificates-here");
    command
        .env("SSL_CERT_FILE", &nowhere)
        .env("SSL_CERT_DIR", &nowhere);
    RawClient::spawn(tokio::process::Command::from(command))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_is_answered_without_loading_tls_roots() {
    let scratch = Scratch::new();
    let mock = MockServer::start().await;
    // HTTPS to the mock's port: the client is never built, so nothing is sent.
    let https = mock.url.replacen("http://", "https://", 1);
    let agent = agent_without_certificates(&scratch, &mock, Some(&https));

    let init = agent.initialize().await;
    assert_eq!(init["protocolVersion"], 1, "{init}{}", agent.stderr());
    let session = agent.new_session("/tmp", json!([])).await;
    let answer = agent.prompt(&session, "hi").await;
    let reason = answer["error"]["data"]["reason"].to_string();
    assert!(
        reason.contains("certificate") || reason.contains("HTTP client"),
        "the prompt that needs the client says why it cannot run: {answer}"
    );
    assert_eq!(mock.request_count(), 0);

    agent.close_write().await;
    assert!(agent.wait_exit(BOUND).await.success(), "{}", agent.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_model_needs_no_tls_roots() {
    let scratch = Scratch::new();
    let mock = MockServer::start().await;
    mock.push(Reply::json(chat_text("hello from plain HTTP")));
    let agent = agent_without_certificates(&scratch, &mock, None);

    agent.initialize().await;
    let session = agent.new_session("/tmp", json!([])).await;
    let answer = agent.prompt(&session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(mock.request_count(), 1);

    agent.close_write().await;
    assert!(agent.wait_exit(BOUND).await.success(), "{}", agent.stderr());
}

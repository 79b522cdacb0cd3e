//! `aquaregia acp` answers `initialize` before doing anything the handshake does not need: the
//! model's HTTP client (TLS roots and all) is built on first use. With no CA certificate to
//! load, the agent still starts and answers; the prompt that needs the client gets the error.

use crate::common;

use serde_json::json;

use aquaregia_test_support::acp_client::RawClient;
use aquaregia_test_support::mock_model::MockServer;
use common::{BOUND, Scratch, cli, use_mock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_is_answered_without_loading_tls_roots() {
    let scratch = Scratch::new();
    let mock = MockServer::start().await;
    let mut command = cli(&scratch);
    command.arg("acp");
    use_mock(&mut command, &mock);
    let nowhere = scratch.path.join("no-certificates-here");
    command
        .env("SSL_CERT_FILE", &nowhere)
        .env("SSL_CERT_DIR", &nowhere);
    let agent = RawClient::spawn(tokio::process::Command::from(command));

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

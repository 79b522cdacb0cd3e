//! A plain-HTTP base URL that the proxy environment variables send to a proxy goes through
//! that proxy (reqwest's rules, `NO_PROXY` included), not straight to the server.
//!
//! The clients run in a child process (this test binary, run again on this test alone): the
//! environment variables are process-wide, and setting them here is `unsafe`.

use aquaregia::{Client, Message, ModelRequest};
use aquaregia_test_support::mock_model::{MockServer, Reply, chat_text};

const CHILD: &str = "AQUAREGIA_PROXY_TEST_MODEL_URL";

/// Runs this test in a child process with `env` set; returns the answer it printed.
fn child(model_url: &str, env: &[(&str, &str)]) -> String {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "proxy_env::a_proxy_from_the_environment_is_used_for_plain_http",
        ])
        .args(["--nocapture", "--test-threads", "1"])
        .env(CHILD, model_url);
    for name in [
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "child failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        // libtest's own "test ... " may start the line.
        .find_map(|line| line.split_once("answer: ").map(|(_, answer)| answer))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_proxy_from_the_environment_is_used_for_plain_http() {
    if let Ok(url) = std::env::var(CHILD) {
        let client = Client::openai_chat()
            .base_url(url)
            .api_key("test-key")
            .max_retries(0)
            .build()
            .unwrap();
        let request = ModelRequest::new("m", vec![Message::user("hi")]);
        let answer = client.generate(&request).await.unwrap();
        // The parent reads the answer from the child's output.
        #[allow(clippy::print_stdout)]
        {
            println!("answer: {}", answer.text());
        }
        return;
    }
    let model = MockServer::start().await;
    model.set_fallback(Reply::json(chat_text("direct")));
    let proxy = MockServer::start().await;
    proxy.set_fallback(Reply::json(chat_text("through the proxy")));
    let model_url = model.url.clone();

    let via_proxy = {
        let (url, proxy_url) = (model_url.clone(), proxy.root());
        tokio::task::spawn_blocking(move || child(&url, &[("HTTP_PROXY", &proxy_url)]))
    };
    assert_eq!(via_proxy.await.unwrap(), "through the proxy");
    assert_eq!(
        model.request_count(),
        0,
        "nothing went straight to the server"
    );
    assert_eq!(proxy.request_count(), 1);

    // A host NO_PROXY names goes straight to the server.
    let direct = {
        let (url, proxy_url) = (model_url, proxy.root());
        tokio::task::spawn_blocking(move || {
            child(
                &url,
                &[("HTTP_PROXY", &proxy_url), ("NO_PROXY", "127.0.0.1")],
            )
        })
    };
    assert_eq!(direct.await.unwrap(), "direct");
    assert_eq!(model.request_count(), 1);
    assert_eq!(proxy.request_count(), 1);
}

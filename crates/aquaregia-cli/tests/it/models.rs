//! `aquaregia models` lists what a configured provider offers, the default model marked, and
//! reports a provider that does not answer without failing the others.

use crate::common;

use aquaregia_test_support::mock_model::MockServer;
use common::{Scratch, cli};

/// Runs `aquaregia` with `args` and `env` (without blocking the runtime the mock serves on).
async fn aquaregia(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = cli(scratch);
    command.args(args).envs(env.iter().copied());
    tokio::process::Command::from(command)
        .output()
        .await
        .unwrap()
}
use serde_json::Value;

#[tokio::test]
async fn lists_the_models_of_providers_with_a_key() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    model.set_models(&["mock-large", "mock-small"]);
    let env = [
        ("OPENAI_BASE_URL", model.url.as_str()),
        ("OPENAI_API_KEY", "test"),
        ("AQUAREGIA_MODEL", "openai-chat:mock-small"),
    ];
    let output = aquaregia(&scratch, &["models", "openai-chat", "--json"], &env).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let list: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let specs: Vec<(&str, bool)> = list
        .iter()
        .map(|entry| {
            (
                entry["spec"].as_str().unwrap(),
                entry["default"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        specs,
        [
            ("openai-chat:mock-large", false),
            ("openai-chat:mock-small", true)
        ]
    );

    // Text: one spec per line, the default marked.
    let output = aquaregia(&scratch, &["models", "openai-chat"], &env).await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        ["openai-chat:mock-large", "openai-chat:mock-small (default)"]
    );
}

#[tokio::test]
async fn a_provider_that_does_not_answer_is_a_warning_not_a_failure() {
    let scratch = Scratch::new();
    let model = MockServer::start().await;
    model.set_models(&["mock-large"]);
    // A port nothing listens on, for Ollama.
    let closed = aquaregia_test_support::deps::ClosedPort::new();
    let dead = format!("http://127.0.0.1:{}", closed.port());
    let env = [
        ("OPENAI_BASE_URL", model.url.as_str()),
        ("OPENAI_API_KEY", "test"),
        ("OLLAMA_HOST", dead.as_str()),
        ("ANTHROPIC_API_KEY", "test"),
    ];
    let output = aquaregia(
        &scratch,
        &["models", "openai-chat", "ollama", "anthropic"],
        &env,
    )
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("openai-chat:mock-large"), "{text}");
    // Anthropic answers from its built-in list.
    assert!(
        text.lines()
            .any(|line| line.starts_with("anthropic:claude-")),
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("warning: ollama:"), "{stderr}");

    let output = aquaregia(&scratch, &["models", "nonsense"], &[]).await;
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown provider `nonsense`"));
}

/// `--model`'s help (run, chat, acp) and `models --help` name every provider the SDK knows,
/// and asking a provider whose key is not set says which variable to set.
#[tokio::test]
async fn every_provider_is_listed_and_a_missing_key_names_its_variable() {
    let scratch = Scratch::new();
    let providers = aquaregia::Client::provider_key_vars();
    assert!(providers.len() >= 18, "{providers:?}");
    for command in ["run", "chat", "acp"] {
        let output = aquaregia(&scratch, &[command, "--help"], &[]).await;
        assert!(output.status.success());
        let help = String::from_utf8_lossy(&output.stdout);
        // The providers' list, as one line whatever the wrapping.
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let list = help
            .split_once("(providers: ")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(list, _)| list)
            .unwrap_or_else(|| panic!("{command}: no provider list in {help}"));
        let ids: Vec<&str> = list.split(", ").collect();
        let want: Vec<&str> = providers.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, want, "{command}");
    }

    let output = aquaregia(&scratch, &["models", "--help"], &[]).await;
    let help = String::from_utf8_lossy(&output.stdout);
    for (id, vars) in &providers {
        let line = help
            .lines()
            .find(|line| line.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("{id} missing from {help}"));
        match vars.first() {
            Some(var) => assert!(line.contains(var), "{line}"),
            None => assert!(line.contains("(no key)"), "{line}"),
        }
    }

    for (provider, var) in [
        ("groq", "GROQ_API_KEY"),
        ("mistral", "MISTRAL_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
    ] {
        let output = aquaregia(&scratch, &["models", provider], &[]).await;
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("set {var}")),
            "{provider}: {stderr}"
        );
    }
}

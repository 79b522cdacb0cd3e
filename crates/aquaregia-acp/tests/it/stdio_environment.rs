//! Stdio servers run in the session's `cwd`, with the entry's `env` over the few variables
//! they inherit (`aquaregia_mcp::DEFAULT_INHERITED_ENV_VARS`).

use crate::support;

use std::path::PathBuf;

use serde_json::{Value, json};

use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::{Model, tool_outputs};
use support::raw::RawClient;
use support::scripts::toolbox_entry;
use support::{BOUND, tool_updates, updates};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stdio_servers_get_the_session_cwd_and_the_merged_env() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path().canonicalize().unwrap();
    let model = Model::new();
    let client = RawClient::connect(model.agent().trust_server("box"));
    client.initialize().await;
    let marker = marker("stdio-env");
    let session = client
        .new_session(
            dir.to_str().unwrap(),
            json!([toolbox_entry(
                "box",
                &[],
                &[
                    ("AQUAREGIA_TEST_MARKER", &marker),
                    ("ACP_ENTRY_VAR", "from the entry"),
                    ("HOME", "/acp-test-home"),
                ]
            )]),
        )
        .await;

    model
        .tool_call(
            "call-1",
            "box__whereami",
            json!({"names": ["ACP_ENTRY_VAR", "HOME", "PATH", "CARGO_MANIFEST_DIR"]}),
        )
        .text("Noted.");
    let answer = client.prompt(&session, "where are you?").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let told = tool_outputs(&model.requests()[1]);
    let report: Value = serde_json::from_str(&told[0]).unwrap_or_else(|e| panic!("{told:?}: {e}"));
    assert_eq!(
        PathBuf::from(report["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        dir,
        "run in the session cwd"
    );
    assert_eq!(report["env"]["ACP_ENTRY_VAR"], "from the entry");
    assert_eq!(
        report["env"]["HOME"], "/acp-test-home",
        "the entry wins over the inherited value"
    );
    // (pyenv's `python3` shim may prepend to PATH.)
    let path = report["env"]["PATH"].as_str().unwrap_or_default();
    assert!(
        path.ends_with(&std::env::var("PATH").unwrap()),
        "PATH is inherited: {path}"
    );
    // Nothing else of the agent's environment (cargo sets this one): it may hold API keys.
    if std::env::var_os("CARGO_MANIFEST_DIR").is_some() {
        assert_eq!(
            report["env"]["CARGO_MANIFEST_DIR"],
            Value::Null,
            "only allowlisted variables are inherited"
        );
    }
    // The same report is shown to the client.
    let completed = tool_updates(&updates(&client.log(), &session))
        .into_iter()
        .find(|u| u["status"] == "completed")
        .expect("completed");
    let shown = completed["content"][0]["content"]["text"].as_str().unwrap();
    assert!(shown.contains("from the entry"), "{shown}");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

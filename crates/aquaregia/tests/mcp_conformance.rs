//! The official MCP conformance suite's client scenarios against
//! `examples/mcp_conformance_client.rs`.

use aquaregia_test_support::deps::{dep, example_binary};

fn run_scenario(scenario: &str) {
    let client = example_binary("mcp_conformance_client");
    let output = std::process::Command::new(dep("AQUAREGIA_NODE22"))
        .arg(dep("AQUAREGIA_CONFORMANCE"))
        .args(["client", "--command"])
        .arg(&client)
        .args(["--scenario", scenario])
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "conformance scenario `{scenario}` failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

#[test]
fn initialize() {
    run_scenario("initialize");
}

#[test]
fn tools_call() {
    run_scenario("tools_call");
}

#[test]
fn sse_retry() {
    run_scenario("sse-retry");
}

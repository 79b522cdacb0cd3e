//! The official MCP conformance suite's client scenarios against
//! `examples/mcp_conformance_client.rs`.
//!
//! Of the 22 `auth/*` scenarios of 0.1.16, three are not run: `client-credentials-jwt`
//! (private-key JWT client authentication is not supported), `cross-app-access-complete-flow`
//! (enterprise-managed authorization) and `2025-03-26-oauth-metadata-backcompat` (its
//! metadata names another issuer than the one it is served for, which rmcp rejects).

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

#[test]
fn elicitation_defaults() {
    run_scenario("elicitation-sep1034-client-defaults");
}

#[test]
fn auth_metadata_default() {
    run_scenario("auth/metadata-default");
}

#[test]
fn auth_metadata_var1() {
    run_scenario("auth/metadata-var1");
}

#[test]
fn auth_metadata_var2() {
    run_scenario("auth/metadata-var2");
}

#[test]
fn auth_metadata_var3() {
    run_scenario("auth/metadata-var3");
}

#[test]
fn auth_basic_cimd() {
    run_scenario("auth/basic-cimd");
}

#[test]
fn auth_scope_from_www_authenticate() {
    run_scenario("auth/scope-from-www-authenticate");
}

#[test]
fn auth_scope_from_scopes_supported() {
    run_scenario("auth/scope-from-scopes-supported");
}

#[test]
fn auth_scope_omitted_when_undefined() {
    run_scenario("auth/scope-omitted-when-undefined");
}

#[test]
fn auth_scope_step_up() {
    run_scenario("auth/scope-step-up");
}

#[test]
fn auth_scope_retry_limit() {
    run_scenario("auth/scope-retry-limit");
}

#[test]
fn auth_token_endpoint_auth_basic() {
    run_scenario("auth/token-endpoint-auth-basic");
}

#[test]
fn auth_token_endpoint_auth_post() {
    run_scenario("auth/token-endpoint-auth-post");
}

#[test]
fn auth_token_endpoint_auth_none() {
    run_scenario("auth/token-endpoint-auth-none");
}

#[test]
fn auth_pre_registration() {
    run_scenario("auth/pre-registration");
}

#[test]
fn auth_v2025_03_26_oauth_endpoint_fallback() {
    run_scenario("auth/2025-03-26-oauth-endpoint-fallback");
}

#[test]
fn auth_resource_mismatch() {
    run_scenario("auth/resource-mismatch");
}

#[test]
fn auth_offline_access_scope() {
    run_scenario("auth/offline-access-scope");
}

#[test]
fn auth_offline_access_not_supported() {
    run_scenario("auth/offline-access-not-supported");
}

#[test]
fn auth_client_credentials_basic() {
    run_scenario("auth/client-credentials-basic");
}

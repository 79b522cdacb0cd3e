//! `aquaregia mcp login` against a local OAuth authorization server: the token is stored
//! (0600), the next `mcp tools` uses it without a prompt, an expired token is refreshed (on
//! the server's 401, and before it expires), and `logout` removes it. The same for a server
//! on the legacy HTTP+SSE transport, and with a client registered beforehand (`"oauth"` in
//! the config: its id, scopes and redirect port).

use crate::common;
use aquaregia_test_support::oauth_server;

use std::sync::atomic::Ordering;

use common::{Outcome, Scratch, cli, run};
use oauth_server::{OAuthServer, SCOPE};
use serde_json::json;

fn command(scratch: &Scratch, args: &[&str]) -> std::process::Command {
    let mut command = cli(scratch);
    command
        .args(args)
        .env("AQUAREGIA_DATA_DIR", scratch.path.join("data"))
        .env_remove("AQUAREGIA_OAUTH_AUTOMATIC");
    command
}

fn token_files(scratch: &Scratch) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(scratch.path.join("data/oauth")) {
        Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Moves the receipt time of the one stored token `seconds` back, as if that much time had
/// passed since it was issued.
fn age_stored_token(scratch: &Scratch, seconds: u64) {
    let files = token_files(scratch);
    assert_eq!(files.len(), 1, "{files:?}");
    let mut stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    let received = stored["token_received_at"]
        .as_u64()
        .unwrap_or_else(|| panic!("a receipt time in the stored token: {stored}"));
    stored["token_received_at"] = json!(received - seconds);
    std::fs::write(&files[0], stored.to_string()).unwrap();
}

fn lists_whoami(outcome: &Outcome) {
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(outcome.stdout.starts_with("whoami()"), "{outcome:?}");
}

#[tokio::test]
async fn login_stores_a_token_that_later_commands_use_and_refresh_until_logout() {
    let server = OAuthServer::start().await;
    let scratch = Scratch::new();
    scratch.config(&json!({"protected": {"url": server.mcp_url}}));
    let counts = server.counts();

    // Without a token and without a terminal: a clear error, no prompt.
    let before = run(command(&scratch, &["mcp", "tools", "protected"]), "").await;
    assert_eq!(before.code, Some(1), "{before:?}");
    assert!(
        before.stderr.contains("requires authorization")
            && before
                .stderr
                .contains("run `aquaregia mcp login protected`"),
        "{before:?}"
    );
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 0);

    // Login: discovery, registration, authorization (followed headlessly), code exchange.
    let mut login = command(&scratch, &["mcp", "login", "protected"]);
    login
        .env("AQUAREGIA_OAUTH_AUTOMATIC", "1")
        .env("RUST_LOG", "trace");
    let login = run(login, "").await;
    assert_eq!(login.code, Some(0), "{login:?}");
    assert!(
        login.stderr.contains("logged in to `protected` (1 tools)"),
        "{login:?}"
    );
    assert!(
        !login.stderr.contains("access-"),
        "a token was logged: {login:?}"
    );
    assert_eq!(counts.registrations.load(Ordering::SeqCst), 1);
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(counts.code_grants.load(Ordering::SeqCst), 1);
    let (resource, scope) = server.last_authorize().expect("an authorization request");
    assert_eq!(resource, server.mcp_url);
    assert!(scope.split(' ').any(|s| s == SCOPE), "scope {scope:?}");

    let files = token_files(&scratch);
    assert_eq!(files.len(), 1, "{files:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The stored token is used as it is: no prompt, no refresh.
    lists_whoami(&run(command(&scratch, &["mcp", "tools", "protected"]), "").await);
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(counts.refresh_grants.load(Ordering::SeqCst), 0);
    assert_eq!(counts.rejected_tokens.load(Ordering::SeqCst), 0);

    // The server stops accepting it: refreshed on the 401, the call goes through.
    server.expire_access_tokens();
    server.set_expires_in(60);
    let call = run(
        command(&scratch, &["mcp", "call", "protected", "whoami"]),
        "",
    )
    .await;
    assert_eq!(call.code, Some(0), "{call:?}");
    assert_eq!(call.stdout, "you are authorized\n");
    assert_eq!(counts.refresh_grants.load(Ordering::SeqCst), 1);
    assert_eq!(counts.rejected_tokens.load(Ordering::SeqCst), 1);
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);

    // The refreshed token said it lasts a minute; an hour later (its receipt time moved back in
    // the stored file, rather than waiting) it is refreshed before it is sent.
    age_stored_token(&scratch, 3600);
    lists_whoami(&run(command(&scratch, &["mcp", "tools", "protected"]), "").await);
    assert_eq!(counts.refresh_grants.load(Ordering::SeqCst), 2);
    assert_eq!(counts.rejected_tokens.load(Ordering::SeqCst), 1);
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);

    // Logout forgets it: the server has to be authorized again.
    let logout = run(command(&scratch, &["mcp", "logout", "protected"]), "").await;
    assert_eq!(logout.code, Some(0), "{logout:?}");
    assert!(
        logout.stderr.contains("logged out of `protected`"),
        "{logout:?}"
    );
    assert!(token_files(&scratch).is_empty());
    let after = run(command(&scratch, &["mcp", "tools", "protected"]), "").await;
    assert_eq!(after.code, Some(1), "{after:?}");
    assert!(
        after.stderr.contains("run `aquaregia mcp login protected`"),
        "{after:?}"
    );
}

#[tokio::test]
async fn login_to_a_legacy_sse_server_stores_a_token_that_later_commands_use() {
    let server = OAuthServer::start().await;
    let scratch = Scratch::new();
    scratch.config(&json!({"legacy": {"type": "sse", "url": server.sse_url}}));
    let counts = server.counts();

    let before = run(command(&scratch, &["mcp", "tools", "legacy"]), "").await;
    assert_eq!(before.code, Some(1), "{before:?}");
    assert!(
        before.stderr.contains("run `aquaregia mcp login legacy`"),
        "{before:?}"
    );

    let mut login = command(&scratch, &["mcp", "login", "legacy"]);
    login.env("AQUAREGIA_OAUTH_AUTOMATIC", "1");
    let login = run(login, "").await;
    assert_eq!(login.code, Some(0), "{login:?}");
    assert!(
        login.stderr.contains("logged in to `legacy` (1 tools)"),
        "{login:?}"
    );
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(token_files(&scratch).len(), 1);

    let call = run(command(&scratch, &["mcp", "call", "legacy", "whoami"]), "").await;
    assert_eq!(call.code, Some(0), "{call:?}");
    assert_eq!(call.stdout, "you are authorized\n");
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(counts.rejected_tokens.load(Ordering::SeqCst), 0);
}

/// A server that does not let clients register themselves: the config's `"oauth"` names the
/// client registered with it, the scopes, and the port of its redirect URI.
#[tokio::test]
async fn login_uses_the_configured_client_its_scopes_and_its_redirect_port() {
    let server = OAuthServer::start().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    server.preregister("my-app", &format!("http://127.0.0.1:{port}/callback"));
    let scratch = Scratch::new();
    scratch.config(&json!({"protected": {"url": server.mcp_url, "oauth": {
        "clientId": "my-app", "scopes": ["tools.read"], "callbackPort": port}}}));
    let counts = server.counts();

    let mut login = command(&scratch, &["mcp", "login", "protected"]);
    login.env("AQUAREGIA_OAUTH_AUTOMATIC", "1");
    let login = run(login, "").await;
    assert_eq!(login.code, Some(0), "{login:?}");
    assert_eq!(counts.registrations.load(Ordering::SeqCst), 0);
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);
    let (_, scope) = server.last_authorize().expect("an authorization request");
    assert_eq!(scope, "tools.read");

    // The stored token (of that client) is used by the next command.
    lists_whoami(&run(command(&scratch, &["mcp", "tools", "protected"]), "").await);
    assert_eq!(counts.authorizations.load(Ordering::SeqCst), 1);
}

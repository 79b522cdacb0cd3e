//! Unit tests of the parent module.

use super::*;

#[test]
fn malformed_json_reports_line_and_column() {
    let error =
        McpServersConfig::from_json("{\n  \"mcpServers\": {\n    \"a\": {,}\n").unwrap_err();
    assert!(
        matches!(error, ConfigError::Syntax { line: 3, .. }),
        "{error}"
    );
}

/// Config files are often JSONC (VS Code, Cursor...): comments and trailing commas are
/// accepted, and an error still points at the file's own line and column.
#[test]
fn jsonc_is_accepted() {
    let text = r#"{
  // the servers this project uses
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "server-fs", /* the root */ "/tmp",],},
  },
}"#;
    let config = McpServersConfig::from_json(text).unwrap();
    assert_eq!(
        config.get("fs"),
        Some(&McpServerSpec::stdio(
            "npx",
            vec!["-y".into(), "server-fs".into(), "/tmp".into()]
        ))
    );
    let error = McpServersConfig::from_json("{ // c\n  \"mcpServers\": {,}\n}").unwrap_err();
    assert!(
        matches!(
            error,
            ConfigError::Syntax {
                line: 2,
                column: 18,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn entries_are_checked() {
    for bad in [
        r#"{"mcpServers": {"a": {}}}"#,
        r#"{"mcpServers": {"a": {"command": "x", "url": "y"}}}"#,
        r#"{"mcpServers": {"a": {"url": "y", "type": "carrier-pigeon"}}}"#,
        r#"{"mcpServers": {"a": {"command": "x", "env": {"K": []}}}}"#,
        r#"{"mcpServers": []}"#,
    ] {
        let error = McpServersConfig::from_json(bad).unwrap_err();
        assert!(matches!(error, ConfigError::Invalid(_)), "{bad}: {error}");
    }
}

fn lookup(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/me".into()),
        "TOKEN" => Some("t0k".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

#[test]
fn variables_expand_with_defaults_and_odd_text_stays() {
    for (value, expanded) in [
        ("${HOME}/bin", "/home/me/bin"),
        ("a${TOKEN}b${TOKEN}", "at0kbt0k"),
        ("${UNSET:-fallback}", "fallback"),
        ("${UNSET:-}", ""),
        ("${UNSET:-a:-b}", "a:-b"),
        ("${HOME:-unused}", "/home/me"),
        ("${EMPTY:-unused}", ""),
        (
            "$HOME ${} ${not a name} ${1X}",
            "$HOME ${} ${not a name} ${1X}",
        ),
        ("tail ${HOME", "tail ${HOME"),
        ("${TOKEN}${HOME", "t0k${HOME"),
        ("ünï${TOKEN}cödé", "ünït0kcödé"),
    ] {
        assert_eq!(expand(value, &lookup).as_deref(), Ok(expanded), "{value}");
    }
    assert_eq!(expand("x${TOKEN}${NOPE}", &lookup), Err("NOPE".to_owned()));
}

#[test]
fn every_field_of_the_rule_is_expanded() {
    let config = McpServersConfig::from_json_with_env(
        r#"{"mcpServers": {
            "s": {"command": "${HOME}/bin/srv", "args": ["--token", "${TOKEN}", 3],
                  "env": {"${TOKEN}": "name kept", "KEY": "${TOKEN}"}, "cwd": "${HOME}"},
            "h": {"url": "https://${HOST:-example.com}/mcp",
                  "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "e": {"type": "sse", "url": "${HOST:-http://127.0.0.1:1}/sse"},
            "off": {"command": "${NOT_SET}", "disabled": true}
        }}"#,
        lookup,
    )
    .unwrap();
    assert_eq!(
        config.get("s"),
        Some(&McpServerSpec::Stdio {
            command: "/home/me/bin/srv".into(),
            args: vec!["--token".into(), "t0k".into(), "3".into()],
            env: vec![
                ("${TOKEN}".into(), "name kept".into()),
                ("KEY".into(), "t0k".into()),
            ],
            cwd: Some("${HOME}".into()),
            inherit_env: false,
        })
    );
    assert_eq!(
        config.get("h"),
        Some(&McpServerSpec::Http {
            url: "https://example.com/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer t0k".into())],
        })
    );
    assert_eq!(
        config.get("e"),
        Some(&McpServerSpec::Sse {
            url: "http://127.0.0.1:1/sse".into(),
            headers: Vec::new(),
        })
    );
    assert_eq!(config.disabled, ["off"]);
}

#[test]
fn an_unset_variable_names_itself_the_server_and_the_field() {
    for (entry, field) in [
        (r#"{"command": "${MISSING}"}"#, "command"),
        (
            r#"{"command": "x", "args": ["a", "${MISSING}"]}"#,
            "args[1]",
        ),
        (r#"{"command": "x", "env": {"K": "${MISSING}"}}"#, "env.K"),
        (r#"{"url": "${MISSING}"}"#, "url"),
        (
            r#"{"url": "u", "headers": {"X-Key": "${MISSING}"}}"#,
            "headers.X-Key",
        ),
    ] {
        let text = format!(r#"{{"mcpServers": {{"srv": {entry}}}}}"#);
        let error = McpServersConfig::from_json_with_env(&text, lookup).unwrap_err();
        assert_eq!(
            error,
            ConfigError::UnsetVariable {
                server: "srv".into(),
                field: field.into(),
                variable: "MISSING".into(),
            },
            "{entry}"
        );
        assert!(
            error.to_string().starts_with(&format!(
                "server `srv`: `{field}` uses `${{MISSING}}`, which is not set"
            )),
            "{error}"
        );
    }
}

#[test]
fn debug_hides_env_and_header_values() {
    let config = McpServersConfig::from_json_with_env(
        r#"{"mcpServers": {
            "s": {"command": "srv", "env": {"API_KEY": "${TOKEN}"}},
            "h": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
        }}"#,
        lookup,
    )
    .unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains("t0k"), "{shown}");
    assert!(shown.contains(r#""API_KEY": "<redacted>""#), "{shown}");
    assert!(
        shown.contains(r#""Authorization": "<redacted>""#),
        "{shown}"
    );
}

#[test]
fn inherit_env_is_read_and_checked() {
    let config = McpServersConfig::from_json(
        r#"{"mcpServers": {"a": {"command": "x", "inheritEnv": true}, "b": {"command": "y"}}}"#,
    )
    .unwrap();
    assert!(matches!(
        config.get("a"),
        Some(McpServerSpec::Stdio {
            inherit_env: true,
            ..
        })
    ));
    assert!(matches!(
        config.get("b"),
        Some(McpServerSpec::Stdio {
            inherit_env: false,
            ..
        })
    ));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let error =
        McpServersConfig::from_json(r#"{"mcpServers": {"a": {"command": "x", "inheritEnv": 1}}}"#)
            .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`inheritEnv` must be true or false"),
        "{error}"
    );
}

#[test]
fn stdio_and_sse_entries() {
    let config = McpServersConfig::from_json(
        r#"{"mcpServers": {
            "a": {"type": "stdio", "command": "node", "args": ["s.js"], "env": {"K": "v"}, "cwd": "/tmp"},
            "b": {"type": "sse", "url": "http://127.0.0.1:1/sse"}
        }, "globalShortcut": "x"}"#,
    )
    .unwrap();
    assert_eq!(
        config.get("a"),
        Some(&McpServerSpec::Stdio {
            command: "node".into(),
            args: vec!["s.js".into()],
            env: vec![("K".into(), "v".into())],
            cwd: Some("/tmp".into()),
            inherit_env: false,
        })
    );
    assert!(matches!(config.get("b"), Some(McpServerSpec::Sse { .. })));
    assert_eq!(
        config.warnings,
        ["ignoring unknown top-level key `globalShortcut`"]
    );
}

#[test]
fn timeouts_are_read_in_milliseconds() {
    use std::time::Duration;
    let config = McpServersConfig::from_json(
        r#"{"mcpServers": {
            "slow": {"command": "x", "timeout": 120000, "startupTimeoutMs": 5000},
            "quick": {"url": "http://127.0.0.1:1/mcp", "timeout": 250},
            "plain": {"command": "y"}
        }}"#,
    )
    .unwrap();
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert_eq!(
        config.timeouts("slow"),
        McpServerTimeouts::new()
            .call(Duration::from_secs(120))
            .connect(Duration::from_secs(5))
    );
    assert_eq!(
        config.timeouts("quick"),
        McpServerTimeouts::new().call(Duration::from_millis(250))
    );
    assert!(config.timeouts("plain").is_empty());
    for bad in [
        r#"{"mcpServers": {"a": {"command": "x", "timeout": "60s"}}}"#,
        r#"{"mcpServers": {"a": {"command": "x", "timeout": 0}}}"#,
        r#"{"mcpServers": {"a": {"command": "x", "startupTimeoutMs": -5}}}"#,
    ] {
        let error = McpServersConfig::from_json(bad).unwrap_err();
        assert!(matches!(error, ConfigError::Invalid(_)), "{bad}: {error}");
    }
}

#[test]
fn an_oauth_client_is_read_with_its_secret_expanded() {
    let lookup = |name: &str| (name == "GH_SECRET").then(|| "from-env".to_owned());
    let config = McpServersConfig::from_json_with_env(
        r#"{"mcpServers": {
            "gh": {"url": "https://example.com/mcp", "oauth": {
                "clientId": "Iv1.abc", "clientSecret": "${GH_SECRET}",
                "scopes": ["repo", "read:org"], "callbackPort": 8765, "extra": 1}},
            "dcr": {"url": "https://example.com/other", "oauth": {"scopes": ["x"]}},
            "local": {"command": "x", "oauth": {"clientId": "y"}},
            "plain": {"url": "https://example.com/plain"}
        }}"#,
        lookup,
    )
    .unwrap();
    let gh = config.oauth_client("gh").unwrap();
    assert_eq!(gh.client_id.as_deref(), Some("Iv1.abc"));
    assert_eq!(gh.client_secret.as_deref(), Some("from-env"));
    assert_eq!(gh.scopes, ["repo", "read:org"]);
    assert_eq!(gh.callback_port, Some(8765));
    let dcr = config.oauth_client("dcr").unwrap();
    assert_eq!((dcr.client_id.as_deref(), dcr.scopes.len()), (None, 1));
    assert!(config.oauth_client("plain").is_none());
    assert!(config.oauth_client("local").is_none());
    assert_eq!(
        config.warnings,
        [
            "server `gh`: ignoring unknown key `oauth.extra`",
            "server `local`: `oauth` is for HTTP servers; ignoring it",
        ]
    );

    let unset = McpServersConfig::from_json_with_env(
        r#"{"mcpServers": {"gh": {"url": "https://example.com/mcp",
            "oauth": {"clientId": "a", "clientSecret": "${NOPE}"}}}}"#,
        |_| None,
    )
    .unwrap_err();
    assert!(
        unset
            .to_string()
            .contains("`oauth.clientSecret` uses `${NOPE}`"),
        "{unset}"
    );
    for bad in [
        r#"{"mcpServers": {"a": {"url": "http://x", "oauth": "id"}}}"#,
        r#"{"mcpServers": {"a": {"url": "http://x", "oauth": {"clientId": 7}}}}"#,
        r#"{"mcpServers": {"a": {"url": "http://x", "oauth": {"scopes": "repo"}}}}"#,
        r#"{"mcpServers": {"a": {"url": "http://x", "oauth": {"callbackPort": 70000}}}}"#,
        r#"{"mcpServers": {"a": {"url": "http://x", "oauth": {"callbackPort": 0}}}}"#,
    ] {
        let error = McpServersConfig::from_json(bad).unwrap_err();
        assert!(
            matches!(error, ConfigError::Invalid(ref message) if message.contains("oauth")),
            "{bad}: {error}"
        );
    }
}

#[test]
fn trust_is_read_and_checked() {
    let config = McpServersConfig::from_json(
        r#"{"mcpServers": {
            "mine": {"command": "a", "trust": true},
            "theirs": {"url": "https://example.com/mcp", "trust": false},
            "plain": {"command": "b"},
            "off": {"command": "c", "trust": true, "disabled": true}
        }}"#,
    )
    .unwrap();
    assert_eq!(config.trusted, ["mine"]);
    assert!(config.is_trusted("mine"));
    assert!(!config.is_trusted("theirs") && !config.is_trusted("plain"));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let error =
        McpServersConfig::from_json(r#"{"mcpServers": {"x": {"command": "a", "trust": "yes"}}}"#)
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "server `x`: `trust` must be true or false"
    );
}

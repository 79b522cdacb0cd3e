//! The `mcpServers` of `session/new`: parsed leniently, connected in parallel, each within the
//! startup budget, all through [`McpToolset`].

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use aquaregia::mcp::{McpError, McpServerSpec, McpToolset};
use serde_json::Value;

use crate::mcp_over_acp::McpOverAcp;

/// One declared server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Declared {
    Spec(McpServerSpec),
    /// Served by the client over the ACP connection.
    Acp {
        server_id: String,
    },
}

/// A server that could not be used, and why (reported to the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) name: String,
    pub(crate) reason: String,
}

/// Parses one `mcpServers` entry: stdio (`command`, `args`, `env: [{name, value}]`, no
/// `type`, though `"stdio"` is accepted), `http`/`sse` (`url`, `headers: [{name, value}]`),
/// `acp` (`serverId`, or the older `id`).
pub(crate) fn parse(entry: &Value, cwd: &Path) -> Result<(String, Declared), Failure> {
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.trim().is_empty())
        .map(str::to_owned);
    let fail = |reason: String| Failure {
        name: name.clone().unwrap_or_else(|| entry.to_string()),
        reason,
    };
    let Some(name) = name.clone() else {
        return Err(fail("the entry has no `name`".into()));
    };
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
    let pairs = |key: &str| -> Result<Vec<(String, String)>, Failure> {
        match entry.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    match (
                        item.get("name").and_then(Value::as_str),
                        item.get("value").and_then(Value::as_str),
                    ) {
                        (Some(k), Some(v)) => Ok((k.to_owned(), v.to_owned())),
                        _ => Err(fail(format!(
                            "every `{key}` item needs `name` and `value` strings"
                        ))),
                    }
                })
                .collect(),
            Some(_) => Err(fail(format!("`{key}` must be an array of {{name, value}}"))),
        }
    };
    let declared = match entry.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {
            let command =
                text("command").ok_or_else(|| fail("a stdio server needs `command`".into()))?;
            let args = match entry.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(args)) => args
                    .iter()
                    .map(|arg| arg.as_str().map(str::to_owned))
                    .collect::<Option<_>>()
                    .ok_or_else(|| fail("`args` must be strings".into()))?,
                Some(_) => return Err(fail("`args` must be an array".into())),
            };
            let mut spec = McpServerSpec::stdio(command, args);
            if let McpServerSpec::Stdio { env, cwd: dir, .. } = &mut spec {
                *env = pairs("env")?;
                *dir = Some(cwd.to_owned());
            }
            Declared::Spec(spec)
        }
        Some(kind @ ("http" | "sse")) => {
            let url = text("url").ok_or_else(|| fail(format!("an {kind} server needs `url`")))?;
            let headers = pairs("headers")?;
            Declared::Spec(if kind == "http" {
                McpServerSpec::Http { url, headers }
            } else {
                McpServerSpec::Sse { url, headers }
            })
        }
        Some("acp") => {
            let server_id = text("serverId")
                .or_else(|| text("id"))
                .ok_or_else(|| fail("an acp server needs `serverId`".into()))?;
            Declared::Acp { server_id }
        }
        Some(other) => return Err(fail(format!("unknown server type `{other}`"))),
    };
    Ok((name, declared))
}

/// How to connect a session's servers.
#[derive(Clone)]
pub(crate) struct ConnectPlan {
    pub(crate) startup_timeout: Duration,
    pub(crate) disabled: Arc<[String]>,
}

/// Connects every entry in parallel through an [`McpToolset`] (tools named
/// `<server>__<tool>`). Failures (bad entries, duplicates, servers that do not start in time)
/// are returned, not fatal.
pub(crate) async fn connect_all(
    entries: &[Value],
    cwd: &Path,
    plan: &ConnectPlan,
    cx: &ConnectionTo<Client>,
    acp: &Arc<McpOverAcp>,
) -> (McpToolset, Vec<Failure>) {
    let mut failures = Vec::new();
    let mut names = HashSet::new();
    let mut server_ids = HashSet::new();
    let mut builder = McpToolset::builder()
        .startup_timeout(plan.startup_timeout)
        .always_prefix(true)
        .disable_tools(plan.disabled.iter().cloned());
    for entry in entries {
        match parse(entry, cwd) {
            Ok((name, _)) if !names.insert(name.clone()) => failures.push(Failure {
                name,
                reason: "another server has the same name".into(),
            }),
            Ok((name, Declared::Acp { server_id })) if !server_ids.insert(server_id.clone()) => {
                failures.push(Failure {
                    name,
                    reason: format!("serverId `{server_id}` is declared twice"),
                });
            }
            Ok((name, Declared::Spec(spec))) => builder = builder.server(name, spec),
            Ok((name, Declared::Acp { server_id })) => {
                let (cx, acp, server) = (cx.clone(), acp.clone(), name.clone());
                builder = builder.connect_with(name, move |connector| async move {
                    let transport =
                        acp.open(&cx, &server_id)
                            .await
                            .map_err(|message| McpError::Connect {
                                server,
                                message,
                                source: None,
                            })?;
                    connector.transport(transport).await
                });
            }
            Err(failure) => failures.push(failure),
        }
    }
    // Not strict: connecting never fails as a whole.
    let toolset = builder.connect().await.unwrap_or_default();
    failures.extend(toolset.failures().iter().map(|(name, error)| Failure {
        name: name.clone(),
        reason: error.to_string(),
    }));
    (toolset, failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_of_every_kind() {
        let cwd = Path::new("/work");
        let (name, stdio) = parse(
            &json!({"name": "fs", "command": "npx", "args": ["-y", "x"], "env": [{"name": "K", "value": "v"}]}),
            cwd,
        )
        .unwrap();
        assert_eq!(name, "fs");
        assert_eq!(
            stdio,
            Declared::Spec(McpServerSpec::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "x".into()],
                env: vec![("K".into(), "v".into())],
                cwd: Some(cwd.to_owned()),
                inherit_env: false,
            })
        );
        let (_, acp) = parse(
            &json!({"type": "acp", "name": "ws", "id": "old-style"}),
            cwd,
        )
        .unwrap();
        assert_eq!(
            acp,
            Declared::Acp {
                server_id: "old-style".into()
            }
        );
        assert!(matches!(
            parse(
                &json!({"type": "http", "name": "h", "url": "http://127.0.0.1:1/mcp", "headers": []}),
                cwd
            ),
            Ok((_, Declared::Spec(McpServerSpec::Http { .. })))
        ));
        let failure = parse(&json!({"type": "carrier", "name": "x"}), cwd).unwrap_err();
        assert_eq!(failure.name, "x");
        assert!(failure.reason.contains("carrier"));
        assert!(parse(&json!({"command": "x"}), cwd).is_err());
    }
}

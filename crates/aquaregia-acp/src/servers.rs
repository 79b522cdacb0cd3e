//! The `mcpServers` of `session/new`: read one entry at a time into the schema's
//! [`McpServer`], turned into [`McpServerSpec`]s, connected in parallel, each within the
//! startup budget, all through [`McpToolset`].

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{HttpHeader, McpServer};
use aquaregia_mcp::{Connector, McpError, McpServerSpec, McpToolset};
use serde_json::Value;

use crate::elicitation::Elicitation;
use crate::mcp_over_acp::McpOverAcp;
use crate::trust::{PinReviews, Trust};

/// A server that could not be used, and why (reported to the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) name: String,
    pub(crate) reason: String,
}

/// Reads the raw `mcpServers` of `session/new` (or `load`/`resume`) one entry at a time, so
/// one bad entry is reported and the others are still used. Older spellings are accepted:
/// a stray `"type": "stdio"` and an `acp` server's `id` for `serverId`.
pub(crate) fn declared(entries: &[Value]) -> (Vec<McpServer>, Vec<Failure>) {
    let mut servers = Vec::new();
    let mut failures = Vec::new();
    for entry in entries {
        match declared_one(entry) {
            Ok(server) => servers.push(server),
            Err(failure) => failures.push(failure),
        }
    }
    (servers, failures)
}

fn declared_one(entry: &Value) -> Result<McpServer, Failure> {
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.trim().is_empty());
    let fail = |reason: String| Failure {
        name: name.map_or_else(|| entry.to_string(), str::to_owned),
        reason,
    };
    if name.is_none() {
        return Err(fail("the entry has no `name`".into()));
    }
    let mut entry = entry.clone();
    let Some(object) = entry.as_object_mut() else {
        return Err(fail("the entry is not an object".into()));
    };
    let kind = match object.remove("type") {
        None => "stdio".to_owned(),
        Some(Value::String(kind)) => kind,
        Some(other) => return Err(fail(format!("`type` must be a string, not {other}"))),
    };
    // Lists the spec requires but older clients leave out.
    let lists: &[&str] = match kind.as_str() {
        "stdio" => &["args", "env"],
        "http" | "sse" => &["headers"],
        _ => &[],
    };
    for list in lists {
        object
            .entry(*list)
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    if kind == "acp"
        && !object.contains_key("serverId")
        && let Some(id) = object.remove("id")
    {
        object.insert("serverId".into(), id);
    }
    let parsed = match kind.as_str() {
        "stdio" => serde_json::from_value(entry).map(McpServer::Stdio),
        "http" => serde_json::from_value(entry).map(McpServer::Http),
        "sse" => serde_json::from_value(entry).map(McpServer::Sse),
        "acp" => serde_json::from_value(entry).map(McpServer::Acp),
        other => return Err(fail(format!("unknown server type `{other}`"))),
    };
    parsed.map_err(|error| fail(format!("{kind} server: {error}")))
}

/// A server's name.
pub(crate) fn name(server: &McpServer) -> &str {
    match server {
        McpServer::Stdio(stdio) => &stdio.name,
        McpServer::Http(http) => &http.name,
        McpServer::Sse(sse) => &sse.name,
        McpServer::Acp(acp) => &acp.name,
        _ => "",
    }
}

/// How the SDK connects a declared server; `Err` for a kind this agent does not know.
fn spec(server: &McpServer, cwd: &Path) -> Result<McpServerSpec, String> {
    match server {
        McpServer::Stdio(stdio) => {
            let mut spec = McpServerSpec::stdio(
                stdio.command.to_string_lossy().into_owned(),
                stdio.args.clone(),
            );
            if let McpServerSpec::Stdio { env, cwd: dir, .. } = &mut spec {
                *env = stdio
                    .env
                    .iter()
                    .map(|var| (var.name.clone(), var.value.clone()))
                    .collect();
                *dir = Some(cwd.to_owned());
            }
            Ok(spec)
        }
        McpServer::Http(http) => Ok(McpServerSpec::Http {
            url: http.url.clone(),
            headers: headers(&http.headers),
        }),
        McpServer::Sse(sse) => Ok(McpServerSpec::Sse {
            url: sse.url.clone(),
            headers: headers(&sse.headers),
        }),
        _ => Err("unsupported server kind".into()),
    }
}

fn headers(headers: &[HttpHeader]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|header| (header.name.clone(), header.value.clone()))
        .collect()
}

/// Told when a stdio server's process starts and ends.
pub(crate) use aquaregia_mcp::process::ProcessHook;

/// Says how to authorize a server, given its URL.
pub(crate) type LoginHint = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// How to connect a session's servers.
#[derive(Clone)]
pub(crate) struct ConnectPlan {
    /// The template of every server: timeout, OAuth...
    pub(crate) connector: Connector,
    pub(crate) disabled: Arc<[String]>,
    pub(crate) on_process: Option<ProcessHook>,
    /// How local `run_command`s are confined (`None`: not at all).
    pub(crate) sandbox: Option<Arc<crate::Sandbox>>,
    pub(crate) login_hint: Option<LoginHint>,
    /// Whether stdio servers the client names are started (on this machine).
    pub(crate) stdio_servers: bool,
}

/// Connects every entry in parallel through an [`McpToolset`] (tools named
/// `<server>__<tool>`, questions to the user through `elicitation`). Failures (bad entries,
/// duplicates, servers that do not start in time) are returned, not fatal.
///
/// With a pin file, the tools are pinned and new or changed ones are reviewed through
/// `reviews`; the servers `trust` names have their hints believed.
pub(crate) async fn connect_all(
    servers: &[McpServer],
    cwd: &Path,
    plan: &ConnectPlan,
    (cx, acp): (&ConnectionTo<Client>, &Arc<McpOverAcp>),
    elicitation: Arc<Elicitation>,
    (trust, reviews): (&Trust, Arc<PinReviews>),
) -> (McpToolset, Vec<Failure>) {
    let mut failures = Vec::new();
    let mut names = HashSet::new();
    let mut server_ids = HashSet::new();
    let mut connector = plan
        .connector
        .clone()
        .on_elicitation_complete({
            let elicitation = elicitation.clone();
            move |complete| elicitation.completed(&complete)
        })
        .on_elicitation(move |request| elicitation.clone().answer(request));
    if let Some(hook) = plan.on_process.clone() {
        connector = connector.on_process(move |event| hook(event));
    }
    let mut builder = McpToolset::builder()
        .connector(connector)
        .always_prefix(true)
        .disable_tools(plan.disabled.iter().cloned());
    if let Some(pins) = trust.pins() {
        builder = builder
            .pins(pins.clone())
            .on_pin_review(move |review| reviews.clone().ask(review));
    }
    for name in trust.names() {
        builder = builder.trust(name);
    }
    for server in servers {
        let name = name(server).to_owned();
        if !names.insert(name.clone()) {
            failures.push(Failure {
                name,
                reason: "another server has the same name".into(),
            });
            continue;
        }
        if let McpServer::Acp(entry) = server {
            let server_id = entry.server_id.0.to_string();
            if !server_ids.insert(server_id.clone()) {
                failures.push(Failure {
                    name,
                    reason: format!("serverId `{server_id}` is declared twice"),
                });
                continue;
            }
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
            continue;
        }
        if let McpServer::Stdio(stdio) = server {
            if !plan.stdio_servers {
                failures.push(Failure {
                    name,
                    reason: format!(
                        "this agent does not start stdio servers: `{}` would run on the \
                         agent's machine. Declare an HTTP server instead, or have the agent's \
                         operator allow stdio servers",
                        stdio.command.display()
                    ),
                });
                continue;
            }
            builder =
                builder.pinned_command(name.clone(), &stdio.command.to_string_lossy(), &stdio.args);
        }
        match spec(server, cwd) {
            Ok(spec) => builder = builder.server(name, spec),
            Err(reason) => failures.push(Failure { name, reason }),
        }
    }
    // Not strict: connecting never fails as a whole.
    let toolset = builder.connect().await.unwrap_or_default();
    failures.extend(toolset.failures().iter().map(|(name, error)| {
        let mut reason = error.to_string();
        if let (McpError::AuthRequired { url, .. }, Some(hint)) = (error, &plan.login_hint) {
            reason = format!("{reason}; {}", hint(url));
        }
        Failure {
            name: name.clone(),
            reason,
        }
    }));
    (toolset, failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(clippy::needless_pass_by_value)]
    fn one(entry: Value) -> Result<McpServer, Failure> {
        declared_one(&entry)
    }

    #[test]
    fn entries_of_every_kind() {
        let cwd = Path::new("/work");
        let stdio = one(json!({"name": "fs", "command": "npx", "args": ["-y", "x"], "env": [{"name": "K", "value": "v"}]})).unwrap();
        assert_eq!(name(&stdio), "fs");
        assert_eq!(
            spec(&stdio, cwd).unwrap(),
            McpServerSpec::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "x".into()],
                env: vec![("K".into(), "v".into())],
                cwd: Some(cwd.to_owned()),
                inherit_env: false,
            }
        );
        assert!(matches!(
            one(json!({"type": "stdio", "name": "s", "command": "x", "args": [], "env": []})),
            Ok(McpServer::Stdio(_))
        ));
        let Ok(McpServer::Acp(acp)) = one(json!({"type": "acp", "name": "ws", "id": "old-style"}))
        else {
            panic!("an acp entry")
        };
        assert_eq!(&*acp.server_id.0, "old-style");
        let http = one(
            json!({"type": "http", "name": "h", "url": "http://127.0.0.1:1/mcp", "headers": []}),
        )
        .unwrap();
        assert!(matches!(spec(&http, cwd), Ok(McpServerSpec::Http { .. })));
        let failure = one(json!({"type": "carrier", "name": "x"})).unwrap_err();
        assert_eq!(failure.name, "x");
        assert!(failure.reason.contains("carrier"));
        assert!(one(json!({"command": "x"})).is_err());
        assert!(
            one(json!({"name": "nocmd", "args": []}))
                .unwrap_err()
                .reason
                .contains("command")
        );
        assert!(
            one(json!({"type": "http", "name": "nourl"}))
                .unwrap_err()
                .reason
                .contains("url")
        );
    }
}

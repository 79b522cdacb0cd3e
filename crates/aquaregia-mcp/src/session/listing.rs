//! `tools/list`: paging, and the one lenient mapping from the server's tool descriptions to
//! [`McpTool`]s.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use aquaregia::ToolAnnotations;
use rmcp::RoleClient;
use rmcp::model::{ClientRequest, ListToolsRequest, PaginatedRequestParams, ServerResult};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::Value;

use crate::error::McpError;
use crate::transport::compat::execution::execution_of;

/// Limit on each `tools/list` page.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound on `tools/list` pages, against a server that never stops paginating.
const MAX_PAGES: usize = 1000;

/// A session's listing: the tools, and the list-change generation they were fetched at.
#[derive(Clone)]
pub(crate) struct Listing {
    pub(crate) generation: u64,
    pub(crate) tools: Arc<[McpTool]>,
}

/// How a tool says it runs (`execution.taskSupport`, 2025-11-25).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TaskSupport {
    /// Never as a task (the default).
    #[default]
    Forbidden,
    /// Either way.
    Optional,
    /// Only as a task.
    Required,
}

impl TaskSupport {
    pub(crate) fn parse(value: Option<&str>) -> Self {
        match value {
            Some("required") => Self::Required,
            Some("optional") => Self::Optional,
            _ => Self::Forbidden,
        }
    }
}

/// A tool as the server described it.
#[derive(Debug, Clone)]
pub(crate) struct McpTool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) schema: Value,
    pub(crate) annotations: ToolAnnotations,
    /// Whether it runs as a task (`execution.taskSupport`).
    pub(crate) tasks: TaskSupport,
}

/// Every page of `tools/list` from `server` (its name), its failures described by
/// `session_error`.
pub(crate) async fn fetch_tools<F, Fut>(
    peer: &Peer<RoleClient>,
    server: &str,
    session_error: F,
) -> Result<Vec<McpTool>, McpError>
where
    F: Fn(ServiceError, &'static str) -> Fut,
    Fut: Future<Output = McpError>,
{
    let reader = Reader { server };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    for _ in 0..MAX_PAGES {
        let mut params = PaginatedRequestParams::default();
        params.cursor = cursor.take();
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let response = peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(LIST_TIMEOUT))
            .await;
        let response = match response {
            Ok(handle) => handle.await_response().await,
            Err(error) => Err(error),
        };
        // Typed pages go through the same lenient reading as raw ones; raw pages keep what
        // rmcp's types drop (`execution`) and what they reject (odd schemas).
        let page = match response {
            Ok(ServerResult::ListToolsResult(page)) => {
                serde_json::to_value(page).unwrap_or_default()
            }
            Ok(ServerResult::CustomResult(page)) => page.0,
            Ok(_) => {
                return Err(reader.list_error("the server answered with something else"));
            }
            Err(error) => {
                let error = session_error(error, "tools/list").await;
                return Err(match error {
                    McpError::Disconnected | McpError::ServerExited(_) => error,
                    other => McpError::ListTools {
                        server: server.to_owned(),
                        message: other.to_string(),
                        source: Some(Box::new(other)),
                    },
                });
            }
        };
        let next = reader.read_page(&page, &mut tools)?;
        match next {
            Some(next) if !seen.insert(next.clone()) => {
                return Err(reader.list_error(format!(
                    "the server repeated the pagination cursor `{next}`"
                )));
            }
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(reader.list_error(format!("more than {MAX_PAGES} pages of tools")))
}

/// Reads the pages of one server's listing, leniently.
struct Reader<'a> {
    server: &'a str,
}

impl Reader<'_> {
    fn list_error(&self, message: impl Into<String>) -> McpError {
        McpError::ListTools {
            server: self.server.to_owned(),
            message: message.into(),
            source: None,
        }
    }

    /// Reads one page into `tools`; returns the next cursor.
    fn read_page(
        &self,
        page: &Value,
        tools: &mut Vec<McpTool>,
    ) -> Result<Option<String>, McpError> {
        let Some(items) = page.get("tools").and_then(Value::as_array) else {
            return Err(self.list_error("the tools/list result has no `tools` array"));
        };
        tools.extend(items.iter().filter_map(|item| self.read_tool(item)));
        Ok(page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    fn read_tool(&self, item: &Value) -> Option<McpTool> {
        let Some(name) = item.get("name").and_then(Value::as_str) else {
            tracing::warn!(server = %self.server, tool = %item, "skipping a tool without a name");
            return None;
        };
        let tasks = TaskSupport::parse(
            execution_of(item)
                .and_then(|execution| execution.get("taskSupport"))
                .and_then(Value::as_str),
        );
        let schema = item.get("inputSchema").cloned().unwrap_or(Value::Null);
        if !schema.is_object() {
            tracing::warn!(
                server = %self.server, tool = name,
                "the tool's input schema is not a JSON object; it is kept as given and \
                 its arguments are not validated"
            );
        }
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let hints = item.get("annotations");
        let hint = |key: &str| hints.and_then(|h| h.get(key)).and_then(Value::as_bool);
        let title = text(item.get("title")).or_else(|| text(hints.and_then(|h| h.get("title"))));
        let mut annotations = ToolAnnotations::new();
        annotations.read_only = hint("readOnlyHint");
        annotations.destructive = hint("destructiveHint");
        annotations.idempotent = hint("idempotentHint");
        annotations.open_world = hint("openWorldHint");
        annotations.title.clone_from(&title);
        Some(McpTool {
            name: name.to_owned(),
            description: text(item.get("description")).or(title).unwrap_or_default(),
            schema,
            annotations,
            tasks,
        })
    }
}

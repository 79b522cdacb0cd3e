//! `tools/list`: paging, and the one lenient mapping from the server's tool descriptions to
//! [`McpTool`]s.

use std::collections::HashSet;
use std::time::Duration;

use rmcp::model::{
    ClientRequest, CustomResult, ListToolsRequest, ListToolsResult, PaginatedRequestParams,
    ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};

use super::connection::Shared;
use super::error::McpError;
use super::task::TaskSupport;
use aquaregia::ToolAnnotations;

/// Limit on each `tools/list` page.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound on `tools/list` pages, against a server that never stops paginating.
const MAX_PAGES: usize = 1000;

/// Where the transports keep a listed tool's `execution` (which rmcp's `Tool` drops): in its
/// `_meta`, so that the answer stays a typed `tools/list` result for rmcp, whose HTTP
/// transport reads it (per-tool `Mcp-Param-*` headers, and tools with invalid `x-mcp-header`
/// annotations left out, SEP-2243).
const EXECUTION_META: &str = "aquaregia/execution";

/// A `tools/list` result as the transports hand it to rmcp: typed, with each tool's
/// `execution` kept in its `_meta`; raw when rmcp's types reject it (odd schemas), which the
/// listing reads all the same.
pub(crate) fn keeping_execution(mut result: Value) -> ServerResult {
    if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            let Some(execution) = tool.get("execution").cloned() else {
                continue;
            };
            let meta = tool
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(EXECUTION_META.to_owned(), execution);
            }
        }
    }
    match serde_json::from_value::<ListToolsResult>(result.clone()) {
        Ok(typed) => ServerResult::ListToolsResult(typed),
        Err(_) => ServerResult::CustomResult(CustomResult(result)),
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

impl Shared {
    /// Every page of `tools/list`.
    pub(crate) async fn fetch_tools(&self) -> Result<Vec<McpTool>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            let mut params = PaginatedRequestParams::default();
            params.cursor = cursor.take();
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            let response = self
                .peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(LIST_TIMEOUT))
                .await;
            let response = match response {
                Ok(handle) => handle.await_response().await,
                Err(error) => Err(error),
            };
            // Typed pages go through the same lenient reading as raw ones; raw pages keep
            // what rmcp's types drop (`execution`) and what they reject (odd schemas).
            let page = match response {
                Ok(ServerResult::ListToolsResult(page)) => {
                    serde_json::to_value(page).unwrap_or_default()
                }
                Ok(ServerResult::CustomResult(page)) => page.0,
                Ok(_) => {
                    return Err(self.list_error("the server answered with something else"));
                }
                Err(error) => {
                    let error = self.session_error(error, "tools/list").await;
                    return Err(match error {
                        McpError::Disconnected | McpError::ServerExited(_) => error,
                        other => McpError::ListTools {
                            server: self.name.clone(),
                            message: other.to_string(),
                            source: Some(Box::new(other)),
                        },
                    });
                }
            };
            let next = self.read_page(&page, &mut tools)?;
            match next {
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(self.list_error(format!(
                        "the server repeated the pagination cursor `{next}`"
                    )));
                }
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(self.list_error(format!("more than {MAX_PAGES} pages of tools")))
    }

    fn list_error(&self, message: impl Into<String>) -> McpError {
        McpError::ListTools {
            server: self.name.clone(),
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
            tracing::warn!(server = %self.name, tool = %item, "skipping a tool without a name");
            return None;
        };
        let execution = item
            .get("execution")
            .or_else(|| item.get("_meta")?.get(EXECUTION_META));
        let tasks = TaskSupport::parse(
            execution
                .and_then(|execution| execution.get("taskSupport"))
                .and_then(Value::as_str),
        );
        let schema = item.get("inputSchema").cloned().unwrap_or(Value::Null);
        if !schema.is_object() {
            tracing::warn!(
                server = %self.name, tool = name,
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

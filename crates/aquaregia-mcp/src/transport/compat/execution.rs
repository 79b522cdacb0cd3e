//! A listed tool's `execution` (its `taskSupport`), which rmcp's `Tool` drops, kept in its
//! `_meta` under our own key so that the `tools/list` result stays a typed
//! `ListToolsResult` for rmcp, whose HTTP transport reads it (per-tool `Mcp-Param-*` headers,
//! and tools with invalid `x-mcp-header` annotations left out, SEP-2243); and a 2025-11-25
//! server's `tasks` capability, which rmcp's `ServerCapabilities` drops, kept under our own
//! key in its `experimental` capabilities.
//!
//! Remove when rmcp's `Tool` keeps `execution` and its capabilities keep `tasks`.

use rmcp::model::{CustomResult, InitializeResult, ListToolsResult, ServerResult};
use serde_json::{Map, Value};

/// Where the transports keep a listed tool's `execution`.
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

/// A listed tool's `execution`: its own field when the listing was read raw, else where
/// [`keeping_execution`] kept it.
pub(crate) fn execution_of(tool: &Value) -> Option<&Value> {
    tool.get("execution")
        .or_else(|| tool.get("_meta")?.get(EXECUTION_META))
}

/// Where the transports keep a 2025-11-25 server's `tasks` capability.
pub(crate) const TASKS_CAPABILITY: &str = "aquaregia/tasks";

/// An `initialize` result as the transports hand it to rmcp: its `capabilities.tasks` (which
/// rmcp's types drop) kept as the experimental capability [`TASKS_CAPABILITY`]; as it came
/// when it has none, or when rmcp's types reject it.
pub(crate) fn keeping_tasks_capability(mut result: Value) -> Option<ServerResult> {
    let capabilities = result.get_mut("capabilities")?.as_object_mut()?;
    let tasks = capabilities.get("tasks")?.clone();
    let experimental = capabilities
        .entry("experimental")
        .or_insert_with(|| Value::Object(Map::new()));
    experimental
        .as_object_mut()?
        .insert(TASKS_CAPABILITY.to_owned(), tasks);
    serde_json::from_value::<InitializeResult>(result)
        .ok()
        .map(ServerResult::InitializeResult)
}

//! An in-process MCP server whose tools report progress: `work {steps, delay_ms}` sends one
//! `notifications/progress` per step (`step i of n`) before answering `done`; `silent
//! {delay_ms}` waits without a word, then answers `done`.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::io::DuplexStream;

#[derive(Clone, Default)]
pub struct ProgressServer;

impl ProgressServer {
    pub fn serve_duplex() -> DuplexStream {
        let (client, server) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(running) = ProgressServer.serve(server).await {
                let _ = running.waiting().await;
            }
        });
        client
    }
}

fn tool(name: &str, description: &str) -> Tool {
    let schema = json!({"type": "object", "properties": {
        "steps": {"type": "integer"}, "delay_ms": {"type": "integer"}}});
    let serde_json::Value::Object(schema) = schema else {
        unreachable!()
    };
    Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
}

impl ServerHandler for ProgressServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("progress-server", "0.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool("work", "Works in steps, reporting each."),
            tool("silent", "Works without a word."),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let number = |name: &str| arguments.get(name).and_then(|v| v.as_u64()).unwrap_or(0);
        let delay = Duration::from_millis(number("delay_ms"));
        if request.name == "work" {
            let steps = number("steps");
            let token = context.meta.get_progress_token();
            for step in 1..=steps {
                tokio::time::sleep(delay).await;
                if let Some(token) = &token {
                    let mut update = ProgressNotificationParam::new(token.clone(), step as f64);
                    update.total = Some(steps as f64);
                    update.message = Some(format!("step {step} of {steps}"));
                    let _ = context.peer.notify_progress(update).await;
                }
            }
        } else {
            tokio::time::sleep(delay).await;
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]).into())
    }
}

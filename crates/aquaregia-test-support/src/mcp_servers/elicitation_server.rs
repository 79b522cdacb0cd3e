//! An in-process MCP server (2025-11-25: it does not answer `server/discover`) whose `ask`
//! tool asks the user through elicitation and reports the answer: `ask {mode: "form"}` asks
//! for a name and an age, `ask {mode: "url"}` sends the user to a URL and, once the user
//! agreed to go, says that elicitation is complete (`notifications/elicitation/complete`).
#![allow(missing_docs)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomNotification,
    DiscoverRequestMethod, DiscoverResult, ElicitRequestParams, ElicitationAction, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::io::DuplexStream;

pub const FORM_SCHEMA: &str = r#"{"type": "object",
    "properties": {"name": {"type": "string", "title": "Your name"},
                   "age": {"type": "integer", "default": 30}},
    "required": ["name"]}"#;

pub fn serve_duplex() -> DuplexStream {
    let (client, server) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = ElicitationServer.serve(server).await {
            let _ = running.waiting().await;
        }
    });
    client
}

struct ElicitationServer;

impl ServerHandler for ElicitationServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("elicitation-server", "0.0.0"))
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::method_not_found::<DiscoverRequestMethod>())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"mode": {"type": "string"}}});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "ask",
            "Asks the user.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mode = request
            .arguments
            .as_ref()
            .and_then(|args| args.get("mode"))
            .and_then(|mode| mode.as_str())
            .unwrap_or("form");
        let params = if mode == "url" {
            json!({"mode": "url", "message": "Sign in to continue",
                   "url": "https://auth.example/start", "elicitationId": "e-1"})
        } else {
            let schema: serde_json::Value = serde_json::from_str(FORM_SCHEMA).unwrap();
            json!({"mode": "form", "message": "Who are you?", "requestedSchema": schema})
        };
        let params: ElicitRequestParams = serde_json::from_value(params).unwrap();
        let text = match context.peer.create_elicitation(params).await {
            Ok(result) => match result.action {
                ElicitationAction::Accept if mode == "url" => {
                    let done = CustomNotification::new(
                        "notifications/elicitation/complete",
                        Some(json!({"elicitationId": "e-1"})),
                    );
                    let _ = context.peer.send_notification(done.into()).await;
                    "accepted".to_owned()
                }
                ElicitationAction::Accept => format!(
                    "accepted {}",
                    result.content.map(|c| c.to_string()).unwrap_or_default()
                ),
                ElicitationAction::Decline => "declined".to_owned(),
                ElicitationAction::Cancel => "cancelled".to_owned(),
                other => format!("{other:?}"),
            },
            Err(error) => format!("elicitation failed: {error}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text.trim_end())]).into())
    }
}

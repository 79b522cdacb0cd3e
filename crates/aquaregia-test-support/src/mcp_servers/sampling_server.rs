//! An in-process MCP server (2025-11-25: it does not answer `server/discover`) whose `haiku`
//! tool asks the client to sample its model (`sampling/createMessage`) and answers with what
//! it got back, or with the error.
#![allow(missing_docs, deprecated)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    CreateMessageRequestParams, DiscoverRequestMethod, DiscoverResult, Implementation,
    ListToolsResult, PaginatedRequestParams, SamplingMessage, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::io::DuplexStream;

pub fn serve_duplex() -> DuplexStream {
    let (client, server) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = SamplingServer.serve(server).await {
            let _ = running.waiting().await;
        }
    });
    client
}

struct SamplingServer;

impl ServerHandler for SamplingServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sampling-server", "0.0.0"))
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
        let serde_json::Value::Object(schema) = json!({"type": "object", "properties": {}}) else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "haiku",
            "Writes a haiku with the client's model.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut params = CreateMessageRequestParams::new(
            vec![SamplingMessage::user_text("Write a haiku about rust.")],
            64,
        );
        params.system_prompt = Some("You are a poet.".to_owned());
        #[allow(deprecated)]
        let sampled = context.peer.create_message(params).await;
        let text = match sampled {
            Ok(result) => format!(
                "{} (by {}, {})",
                result
                    .message
                    .content
                    .into_vec()
                    .first()
                    .and_then(|block| block.as_text())
                    .map(|text| text.text.clone())
                    .unwrap_or_default(),
                result.model,
                result.stop_reason.unwrap_or_default()
            ),
            Err(error) => format!("sampling failed: {error}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

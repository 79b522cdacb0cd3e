//! An in-process MCP server on protocol 2026-07-28 whose tools ask the client for input with
//! `input_required` results (SEP-2322) rather than server-to-client requests:
//! - `book`: asks for a city (round 1), then for a number of nights and the client's roots
//!   (round 2), then answers `booked <city> for <nights> nights (<n> roots)`;
//! - `forever`: asks again whatever it is told;
//! - `sample`: asks the client to sample its model, then answers with the sampled text.
//!
//! Every `tools/call` it receives is recorded (its `requestState` and `inputResponses`).
#![allow(missing_docs)]

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InputRequests, InputRequiredResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::DuplexStream;

/// One `tools/call` as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub tool: String,
    pub request_state: Option<String>,
    pub input_responses: Option<Value>,
}

#[derive(Clone, Default)]
pub struct InputRequiredServer {
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl InputRequiredServer {
    pub fn serve_duplex(&self) -> DuplexStream {
        let (client, server) = tokio::io::duplex(1 << 16);
        let handler = self.clone();
        tokio::spawn(async move {
            if let Ok(running) = handler.serve(server).await {
                let _ = running.waiting().await;
            }
        });
        client
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn tool(name: &str) -> Tool {
    let serde_json::Value::Object(schema) = json!({"type": "object", "properties": {}}) else {
        unreachable!()
    };
    Tool::new(
        name.to_owned(),
        format!("The {name} tool."),
        Arc::new(schema),
    )
}

fn ask(requests: Value, state: Option<&str>) -> CallToolResponse {
    let requests: InputRequests = serde_json::from_value(requests).unwrap();
    InputRequiredResult::new(Some(requests), state.map(str::to_owned)).into()
}

fn form(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}},
                            "required": [field]}}})
}

fn text(text: String) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

fn answer<'a>(responses: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    responses.and_then(|responses| responses.get(key))
}

impl ServerHandler for InputRequiredServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("input-required-server", "0.0.0"));
        info.protocol_version = ProtocolVersion::V_2026_07_28;
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool("book"),
            tool("forever"),
            tool("sample"),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let responses = request
            .input_responses
            .as_ref()
            .map(|responses| serde_json::to_value(responses).unwrap());
        self.received.lock().unwrap().push(Received {
            tool: request.name.to_string(),
            request_state: request.request_state.clone(),
            input_responses: responses.clone(),
        });
        let state = request.request_state.as_deref();
        let responses = responses.as_ref();
        Ok(match (request.name.as_ref(), state) {
            ("book", None) => ask(
                json!({"city": form("Which city?", "city", "string")}),
                Some("round-1"),
            ),
            ("book", Some("round-1")) => {
                let Some(city) =
                    answer(responses, "city").and_then(|answer| answer["content"]["city"].as_str())
                else {
                    return Err(ErrorData::invalid_params("no city in the answers", None));
                };
                // The state carries what round 1 learnt: the client must echo it exactly.
                ask(
                    json!({"nights": form("How many nights?", "nights", "integer"),
                           "roots": {"method": "roots/list"}}),
                    Some(&format!("round-2 \"{city}\"")),
                )
            }
            ("book", Some(state)) if state.starts_with("round-2 ") => {
                let city = state.trim_start_matches("round-2 ").trim_matches('"');
                let nights = answer(responses, "nights")
                    .and_then(|answer| answer["content"]["nights"].as_i64());
                let roots =
                    answer(responses, "roots").and_then(|answer| answer["roots"].as_array());
                match (nights, roots) {
                    (Some(nights), Some(roots)) => text(format!(
                        "booked {city} for {nights} nights ({} roots)",
                        roots.len()
                    )),
                    _ => text(format!(
                        "not booked: {}",
                        responses.map(Value::to_string).unwrap_or_default()
                    )),
                }
            }
            ("forever", _) => ask(json!({"again": form("Again?", "yes", "boolean")}), None),
            ("sample", None) => ask(
                json!({"haiku": {"method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user",
                                  "content": {"type": "text", "text": "Write a haiku."}}],
                    "maxTokens": 50}}}),
                Some("sampling"),
            ),
            ("sample", Some("sampling")) => {
                let sampled = answer(responses, "haiku")
                    .and_then(|answer| answer["content"]["text"].as_str())
                    .unwrap_or("<nothing>");
                text(format!("sampled: {sampled}"))
            }
            (name, state) => {
                return Err(ErrorData::invalid_params(
                    format!("unexpected call of {name} with state {state:?}"),
                    None,
                ));
            }
        })
    }
}

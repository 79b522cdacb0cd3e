//! An in-process MCP server on protocol 2026-07-28 with the tasks extension (SEP-2663): every
//! `tools/call` becomes a task.
//! - `research`: `working` ("gathering", then "writing") and `completed` on the third poll,
//!   with the text `report ready`;
//! - `endless`: `working` forever, always "still going";
//! - `gated`: `working` ("waiting at the gate") until [`TaskServer::release`], then
//!   `completed` with the text `gate opened`.
//!
//! It records the `tasks/cancel` requests it gets. rmcp refuses `tasks/*` from, and a task
//! answer to, a client that did not declare the extension.
#![allow(missing_docs)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Task, TaskPayload,
    TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::io::DuplexStream;

#[derive(Default)]
struct State {
    /// Tool name and polls so far, by task id.
    tasks: HashMap<String, (String, u32)>,
    cancelled: Vec<String>,
    /// Whether `gated` tasks complete.
    released: bool,
}

#[derive(Clone, Default)]
pub struct TaskServer {
    state: Arc<Mutex<State>>,
}

impl TaskServer {
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

    /// The ids of the tasks the client cancelled.
    pub fn cancelled(&self) -> Vec<String> {
        self.state.lock().unwrap().cancelled.clone()
    }

    /// Lets every `gated` task complete at its next poll.
    pub fn release(&self) {
        self.state.lock().unwrap().released = true;
    }

    /// How many times task `id` was polled (`tasks/get`).
    pub fn polls(&self, id: &str) -> u32 {
        self.state
            .lock()
            .unwrap()
            .tasks
            .get(id)
            .map_or(0, |(_, polls)| *polls)
    }

    /// The ids of the tasks made so far.
    pub fn tasks(&self) -> Vec<String> {
        let mut ids: Vec<_> = self.state.lock().unwrap().tasks.keys().cloned().collect();
        ids.sort();
        ids
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

fn task(id: &str, status: TaskStatus, message: &str) -> Task {
    Task::new(id, status, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
        .with_ttl_ms(60_000)
        .with_poll_interval_ms(20)
        .with_status_message(message)
}

impl ServerHandler for TaskServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build();
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("task-server", "0.0.0"));
        info.protocol_version = ProtocolVersion::V_2026_07_28;
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool("research"),
            tool("endless"),
            tool("gated"),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut state = self.state.lock().unwrap();
        let id = format!("task-{}", state.tasks.len() + 1);
        state
            .tasks
            .insert(id.clone(), (request.name.to_string(), 0));
        Ok(CreateTaskResult::new(task(&id, TaskStatus::Working, "queued")).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let mut state = self.state.lock().unwrap();
        let cancelled = state.cancelled.contains(&request.task_id);
        let released = state.released;
        let Some((tool, polls)) = state.tasks.get_mut(&request.task_id) else {
            return Err(ErrorData::invalid_params("no such task", None));
        };
        *polls += 1;
        let id = request.task_id.as_str();
        let detailed = if cancelled {
            DetailedTask::new(
                task(id, TaskStatus::Cancelled, "cancelled"),
                TaskPayload::Cancelled,
            )
        } else if (tool == "research" && *polls >= 3) || (tool == "gated" && released) {
            let text = if tool == "gated" {
                "gate opened"
            } else {
                "report ready"
            };
            let result = CallToolResult::success(vec![ContentBlock::text(text)]);
            let serde_json::Value::Object(result) = serde_json::to_value(result).unwrap() else {
                unreachable!()
            };
            DetailedTask::new(
                task(id, TaskStatus::Completed, "done"),
                TaskPayload::Completed { result },
            )
        } else {
            let message = match (tool.as_str(), *polls) {
                ("research", 1) => "gathering".to_owned(),
                ("research", _) => "writing".to_owned(),
                ("gated", _) => "waiting at the gate".to_owned(),
                _ => "still going".to_owned(),
            };
            DetailedTask::new(
                task(id, TaskStatus::Working, &message),
                TaskPayload::Working,
            )
        };
        Ok(GetTaskResult::new(detailed))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.state.lock().unwrap().cancelled.push(request.task_id);
        Ok(())
    }
}

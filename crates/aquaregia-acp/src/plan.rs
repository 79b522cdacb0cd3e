//! The built-in `update_plan` tool: the model keeps a plan (entries with status and priority)
//! and each call is streamed to the client as a `plan` update.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::SessionUpdate;
use aquaregia::{Tool, ToolAnnotations, ToolExecError, tool};
use serde_json::{Value, json};

use crate::builtins::UPDATE_PLAN;
use crate::updates;

/// `update_plan`: replaces the session `session_id`'s plan and shows it in the client.
pub(crate) fn tool_for(cx: ConnectionTo<Client>, session_id: String) -> Tool {
    let mut annotations = ToolAnnotations::new();
    annotations.read_only = Some(true);
    tool(UPDATE_PLAN)
        .description(
            "Show the user your plan for this task: every step, each with a status \
             (pending, in_progress, completed) and a priority (high, medium, low). Send the \
             whole plan each time a step changes.",
        )
        .raw_schema(json!({
            "type": "object",
            "properties": {"entries": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                    "priority": {"type": "string", "enum": ["high", "medium", "low"]}
                },
                "required": ["content", "status", "priority"]
            }}},
            "required": ["entries"]
        }))
        .annotations(annotations)
        .execute_raw(move |args: Value| {
            let (cx, session_id) = (cx.clone(), session_id.clone());
            async move {
                let plan = updates::plan(&args).map_err(|error| {
                    ToolExecError::from(format!("invalid plan entries: {error}"))
                })?;
                let count = plan.entries.len();
                updates::send(&cx, &session_id, SessionUpdate::Plan(plan));
                Ok(format!("The plan ({count} steps) is shown to the user."))
            }
        })
}

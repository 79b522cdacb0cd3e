//! The tools a connection hands out: the server's listing made into [`Tool`]s, one
//! [`McpToolExecutor`] each, named and filtered as the connection's settings say.

use std::sync::Arc;

use aquaregia::{Tool, ToolDescriptor};

use super::executor::{CallContext, McpToolExecutor, ToolTarget};
use super::naming::{prefixed_name, sanitized_name};
use crate::error::McpError;
use crate::session::connection::{LeftOutTool, McpConnection, lock};
use crate::session::listing::{McpTool, TaskSupport};

impl McpConnection {
    /// The server's tools as [`Tool`]s, in the server's order.
    ///
    /// Served from a cache until the server announces a list change; refreshes are
    /// coalesced, and an older listing never replaces a newer one. Tools are the same `Arc`s
    /// while nothing changes, so agents can tell the tool set did not change.
    pub async fn tools(&self) -> Result<Vec<Tool>, McpError> {
        Ok(self.tools_and_listing().await?.0)
    }

    /// [`tools`](Self::tools) with the server's own description of them (the listing they
    /// were made from).
    pub(crate) async fn tools_and_listing(&self) -> Result<(Vec<Tool>, Arc<[McpTool]>), McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let current = self.shared.changes.current();
        if let Some((generation, tools, listing)) = &*lock(&self.view.converted)
            && *generation >= current
        {
            return Ok((tools.clone(), listing.clone()));
        }
        let listing = self.shared.listing().await?;
        let tools = self.convert(&listing.tools);
        let mut converted = lock(&self.view.converted);
        if converted
            .as_ref()
            .is_none_or(|(generation, _, _)| *generation <= listing.generation)
        {
            *converted = Some((listing.generation, tools.clone(), listing.tools.clone()));
        }
        Ok((tools, listing.tools))
    }

    /// The name the model sees for the server's tool `name` under this connection's prefix.
    pub(crate) fn exposed_name(&self, name: &str) -> String {
        match &self.view.prefix {
            Some(prefix) => prefixed_name(prefix, name),
            None => sanitized_name(name),
        }
    }

    /// The tools of the last listing that are not offered because they cannot be called
    /// correctly, and why: a tool that runs only as a task (`execution.taskSupport:
    /// "required"`) on a 2025-11-25 server that does not declare the `tasks` capability, whose
    /// calls a client must not task-augment (MCP 2025-11-25). Each is logged once, as a
    /// warning naming the server and the tool.
    pub fn left_out_tools(&self) -> Vec<LeftOutTool> {
        lock(&self.shared.left_out).clone()
    }

    fn convert(&self, tools: &[McpTool]) -> Vec<Tool> {
        // 2026-07-28 servers make tasks themselves; a 2025-11-25 one gets task-augmented calls
        // only when it says it takes them.
        let legacy = self.shared.protocol_version() < "2026-07-28";
        let declares_tasks = self.shared.declares_tool_tasks();
        let mut left_out = Vec::new();
        let call = Arc::new(CallContext {
            peer: self.shared.peer.clone(),
            closed: self.shared.closed.clone(),
            timeout: self.view.call_timeout,
            meta: self.view.meta.clone(),
            shared: Arc::downgrade(&self.shared),
            progress: self.shared.progress.clone(),
            input: self.shared.input.clone(),
            augment_tasks: legacy && declares_tasks,
            reconnects: self.shared.reconnects().cloned(),
        });
        let tools = tools
            .iter()
            .filter_map(|tool| {
                if legacy && !declares_tasks && tool.tasks == TaskSupport::Required {
                    left_out.push(LeftOutTool {
                        name: tool.name.clone(),
                        reason: "it runs only as a task (execution.taskSupport: \"required\"), \
                                 and the server does not declare the tasks capability, so it \
                                 cannot be called correctly"
                            .to_owned(),
                    });
                    return None;
                }
                // MCP allows names (`a.b`, `a/b`) that models reject.
                let name = self.exposed_name(&tool.name);
                let descriptor = ToolDescriptor {
                    name,
                    description: tool.description.clone(),
                    input_schema: tool.schema.clone(),
                };
                if let Some(keep) = &self.view.filter
                    && !keep(&descriptor)
                {
                    return None;
                }
                let executor = Arc::new(McpToolExecutor {
                    call: call.clone(),
                    tool: ToolTarget {
                        name: tool.name.clone(),
                        tasks: tool.tasks,
                        retry_safe: tool.annotations.read_only == Some(true)
                            || tool.annotations.idempotent == Some(true),
                    },
                });
                Some(
                    Tool::new(descriptor, executor)
                        .with_annotations(tool.annotations.clone())
                        .with_trusted_hints(self.view.trusted),
                )
            })
            .collect();
        let mut warned = lock(&self.shared.warned);
        for tool in &left_out {
            if warned.insert(tool.name.clone()) {
                tracing::warn!(
                    server = %self.shared.name, tool = %tool.name,
                    "MCP tool left out: {}", tool.reason
                );
            }
        }
        drop(warned);
        *lock(&self.shared.left_out) = left_out;
        tools
    }
}

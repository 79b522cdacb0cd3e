//! `/prompts` in chat: every MCP server's prompts as the commands that send them
//! (`/<server>:<prompt> [name=value...]`, rendered by [`McpToolset::render_prompt`]).

use aquaregia_mcp::McpToolset;

/// Every server's prompts, as `/<server>:<prompt> <arguments>  <description>` lines.
pub(crate) async fn list(toolset: &McpToolset) -> Vec<String> {
    toolset
        .prompts()
        .await
        .into_iter()
        .map(|listed| {
            let description = listed.prompt.description.as_deref().unwrap_or_default();
            let hint = listed.prompt.arguments_hint();
            let hint = if hint.is_empty() {
                String::new()
            } else {
                format!(" {hint}")
            };
            format!("/{}{hint}  {description}", listed.command())
        })
        .collect()
}

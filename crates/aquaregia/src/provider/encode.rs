//! Request bodies: [`encode_request`] and the [`RequestCache`] that makes each step encode only
//! what is new.
//!
//! Providers write their wire items straight to bytes from borrowed, typed wire structs (no
//! `serde_json::Value` in between). Wire APIs that merge consecutive messages of one role
//! (Anthropic, Gemini) group messages with [`encode_merged`]: every group that nothing can merge
//! into any more is encoded once and kept; the last, open, group is kept as written and reused
//! when the next message starts a group of its own (the common case in an agent loop: a tool
//! result, then the model's turn), or written anew when a message merges into it.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::WireApi;
use crate::error::Error;
use crate::message::Message;
use crate::model::ModelRequest;
use crate::tool::ToolDescriptor;

/// The encoded conversation and tool definitions of earlier requests, so each step of a run
/// only encodes what is new: request building does not grow with the conversation.
///
/// Valid while the conversation only grows by appending; anything else resets it.
#[derive(Debug, Default)]
pub(crate) struct RequestCache {
    provider: &'static str,
    /// Messages whose wire items are final and in `history`.
    sealed: usize,
    /// Serialized final wire items, comma-separated.
    history: Vec<u8>,
    /// The last wire item of a wire API that merges messages, still open.
    open: OpenItem,
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
    if cache.provider != P::NAME || cache.sealed > request.messages.len() {
        cache.reset(P::NAME);
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
    let mut out = Vec::with_capacity(cache.history.len() + cache.tools_json.len() + 1024);
    out.push(b'{');
    if !overridden(P::HISTORY_FIELD) {
        let unsealed = request.messages.get(cache.sealed..).unwrap_or_default();
        match P::encode_messages(request, unsealed, &mut cache.history, &mut cache.open) {
            Ok(sealed) => cache.sealed += sealed,
            Err(error) => {
                cache.reset(P::NAME); // partly written
                return Err(error);
            }
        }
        write_key(&mut out, P::HISTORY_FIELD)?;
        out.push(b'[');
        P::write_leading_item(request, &mut out)?;
        for items in [&cache.history, &cache.open.bytes] {
            if !items.is_empty() {
                if out.last() != Some(&b'[') {
                    out.push(b',');
                }
                out.extend_from_slice(items);
            }
        }
        out.push(b']');
    }
    let output_tool = request
        .output_schema
        .as_ref()
        .filter(|_| P::OUTPUT_AS_TOOL)
        .map(P::output_tool);
    if (!request.tools.is_empty() || output_tool.is_some()) && !overridden(P::TOOLS_FIELD) {
        write_key(&mut out, P::TOOLS_FIELD)?;
        out.extend_from_slice(P::TOOLS_OPEN.as_bytes());
        out.extend_from_slice(&cache.tools_json);
        if let Some(tool) = &output_tool {
            if !cache.tools_json.is_empty() {
                out.push(b',');
            }
            write_json(&mut out, tool)?;
        }
        P::write_tools_close(request, &mut out)?;
    }
    P::body_fields(
        request,
        stream,
        &mut BodyWriter {
            out: &mut out,
            extra,
        },
    )?;
    for (key, value) in extra.into_iter().flatten() {
        write_key(&mut out, key)?;
        write_json(&mut out, value)?;
    }
    out.push(b'}');
    Ok(out)
}

/// The wire item of a run of consecutive messages of one wire role, for wire APIs that merge
/// such messages into one item.
pub(crate) trait MergeGroup {
    /// The wire role; consecutive groups of one role merge.
    fn role(&self) -> &'static str;

    /// Appends `later`, a group of the same role that follows this one.
    fn merge(&mut self, later: Self);

    /// Appends this group's wire item to `out` (comma-separated). `latest`: it is the latest
    /// turn, to be made a prompt-cache breakpoint (wire APIs with explicit breakpoints).
    fn write(self, out: &mut Vec<u8>, latest: bool) -> Result<(), Error>;
}

/// The last wire item of a wire API that merges consecutive messages of one role: a message
/// appended later may still merge into it.
#[derive(Debug, Default)]
pub(crate) struct OpenItem {
    /// The item as it goes in the body; empty when there is none.
    bytes: Vec<u8>,
    /// The wire role of the item.
    role: &'static str,
    /// How many of the unsealed messages the item covers, when `bytes` is also its final
    /// form (0: it has to be written again before it is sealed).
    final_over: usize,
}

/// Encodes `messages` for a wire API that merges consecutive messages of one role: the groups
/// that a later message can no longer merge into go to `sealed`, the last one to `open`.
/// `group` gives a message's own group, or `None` for a message that sends nothing (those are
/// transparent: the messages around them still merge). `mark_latest`: the open group is
/// written as a prompt-cache breakpoint (it is then written anew before it is sealed). Returns
/// how many messages the sealed groups cover.
pub(crate) fn encode_merged<'m, G: MergeGroup>(
    messages: &'m [Message],
    mut group: impl FnMut(&'m Message) -> Option<G>,
    mark_latest: bool,
    sealed: &mut Vec<u8>,
    open: &mut OpenItem,
) -> Result<usize, Error> {
    let mut current: Option<(usize, G)> = None;
    let mut next = 0;
    // The open item of the last call covers the first messages: unless the first message of a
    // group after them merges into it, it is final as written (and, unmarked, the open item).
    if let Some(added) = messages
        .get(open.final_over..)
        .filter(|_| open.final_over > 0 && !mark_latest)
    {
        let following = added
            .iter()
            .enumerate()
            .find_map(|(index, message)| Some((open.final_over + index, group(message)?)));
        match following {
            None => {
                open.final_over = messages.len();
                return Ok(0);
            }
            Some((index, first)) if first.role() != open.role => {
                append_raw(sealed, &open.bytes);
                current = Some((index, first));
                next = index + 1;
            }
            Some(_) => {} // it merges: every group is built again
        }
    }
    for (index, message) in messages.iter().enumerate().skip(next) {
        let Some(later) = group(message) else {
            continue;
        };
        match &mut current {
            Some((_, last)) if last.role() == later.role() => last.merge(later),
            _ => {
                if let Some((_, done)) = current.replace((index, later)) {
                    done.write(sealed, false)?;
                }
            }
        }
    }
    open.bytes.clear();
    match current {
        Some((start, last)) => {
            open.role = last.role();
            open.final_over = if mark_latest {
                0
            } else {
                messages.len() - start
            };
            last.write(&mut open.bytes, mark_latest)?;
            Ok(start)
        }
        None => {
            open.final_over = 0;
            Ok(messages.len())
        }
    }
}

/// Appends already serialized items to a comma-separated list.
fn append_raw(out: &mut Vec<u8>, items: &[u8]) {
    if !out.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(items);
}

/// Writes a request body's top-level fields, leaving out the ones `extra_body` overrides.
pub(crate) struct BodyWriter<'a> {
    out: &'a mut Vec<u8>,
    extra: Option<&'a Map<String, Value>>,
}

impl BodyWriter<'_> {
    /// Writes `"key":value` unless `extra_body` has `key`. Fields go in alphabetical order,
    /// as `serde_json::Value` objects have them.
    pub(crate) fn field<T: Serialize + ?Sized>(
        &mut self,
        key: &str,
        value: &T,
    ) -> Result<(), Error> {
        if self.extra.is_some_and(|extra| extra.contains_key(key)) {
            return Ok(());
        }
        write_key(self.out, key)?;
        write_json(self.out, value)
    }
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

/// Appends an item to a comma-separated list (`out` is empty or ends in `[` or an item).
pub(crate) fn append_item<T: Serialize + ?Sized>(out: &mut Vec<u8>, item: &T) -> Result<(), Error> {
    if !out.is_empty() && out.last() != Some(&b'[') {
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
    use crate::message::{ContentPart, Message, Reasoning, Role, ToolCall, ToolResult};
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

    /// Every kind of part and the merging edge cases: system messages and messages that send
    /// nothing between messages of one wire role, several tool results with images and
    /// errors, signed and unsigned reasoning.
    fn rich_conversation() -> Vec<Message> {
        let reasoning = |text: &str, id: Option<&str>, signature: Option<&str>| {
            ContentPart::Reasoning(Reasoning {
                text: text.into(),
                id: id.map(Into::into),
                signature: signature.map(Into::into),
                encrypted_content: id.map(|_| "ENC".into()),
            })
        };
        let result = |id: &str, output: ToolOutput, is_error: bool| {
            ContentPart::ToolResult(ToolResult {
                call_id: id.into(),
                name: "t".into(),
                output,
                is_error,
            })
        };
        let call = |id: &str, arguments: Value| {
            ContentPart::ToolCall(ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments,
            })
        };
        vec![
            Message::system("sys one"),
            Message::new(
                Role::User,
                vec![
                    ContentPart::text("look"),
                    ContentPart::image("image/png", "AA=="),
                    ContentPart::image_url("https://x.example/a.png"),
                ],
            ),
            Message::system("sys two"),
            Message::user("more"),
            Message::new(
                Role::Assistant,
                vec![
                    reasoning("thinking", Some("rs_1"), Some("SIG")),
                    reasoning("", None, Some("S0")),
                    ContentPart::text("one "),
                    ContentPart::text("two"),
                    call("a", serde_json::json!({"z": 1, "a": "\"q\""})),
                    call("b", serde_json::json!("{\"k\": 2}")),
                ],
            ),
            Message::new(Role::Assistant, vec![reasoning("unsigned", None, None)]),
            Message::new(
                Role::Tool,
                vec![
                    result("a", ToolOutput::Text("out".into()), false),
                    result("b", ToolOutput::Json(serde_json::json!({"$ref": 1})), true),
                    result(
                        "c",
                        ToolOutput::Content(vec![ContentBlock::image("image/gif", "DD==")]),
                        true,
                    ),
                ],
            ),
            Message::user(""),
            Message::system("sys three"),
            Message::user("after tools"),
            Message::assistant("answer"),
            Message::new(Role::Tool, vec![]),
            Message::assistant("more answer"),
        ]
    }

    /// Encoding step by step with the cache gives exactly the body a fresh encode gives,
    /// whether each step adds one message or several, when a step adds none (a retry), and
    /// with prompt-cache breakpoints (which move every step) or without.
    fn incremental_equals_fresh<P: WireApi>() {
        incremental_equals_fresh_with::<P>(&PromptCaching::none());
        incremental_equals_fresh_with::<P>(&PromptCaching::breakpoints().key("k"));
    }

    fn incremental_equals_fresh_with<P: WireApi>(caching: &PromptCaching) {
        let tool = crate::tool::tool("t").execute_raw(|_| async { Ok(()) });
        let other = crate::tool::tool("u").execute_raw(|_| async { Ok(()) });
        for all in [conversation(), rich_conversation()] {
            for stride in 1..=3 {
                let mut cache = RequestCache::default();
                for n in (stride..all.len() + stride).step_by(stride) {
                    let n = n.min(all.len());
                    let request = ModelRequest::new("m", all[..n].to_vec())
                        .instructions("be brief")
                        .tools([tool.shared_descriptor(), other.shared_descriptor()])
                        .prompt_caching(caching.clone());
                    let fresh =
                        encode_request::<P>(&request, false, &mut RequestCache::default()).unwrap();
                    for attempt in 0..2 {
                        let incremental = encode_request::<P>(&request, false, &mut cache).unwrap();
                        assert_eq!(
                            String::from_utf8(incremental).unwrap(),
                            String::from_utf8(fresh.clone()).unwrap(),
                            "{} after {n} messages, stride {stride}, attempt {attempt}",
                            P::NAME
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn cached_encoding_matches_fresh_encoding() {
        incremental_equals_fresh::<openai_chat::OpenAiChat>();
        incremental_equals_fresh::<openai_responses::OpenAiResponses>();
        incremental_equals_fresh::<anthropic::Anthropic>();
        incremental_equals_fresh::<gemini::Gemini>();
        #[cfg(feature = "bedrock")]
        incremental_equals_fresh::<crate::provider::bedrock::Converse>();
    }

    /// Merging wire APIs keep every group but the last one encoded; the others keep all.
    #[test]
    fn only_the_open_group_is_encoded_again() {
        let all = conversation();
        let sealed_after = |n: usize, encode: fn(&ModelRequest, &mut RequestCache)| {
            let mut cache = RequestCache::default();
            encode(&ModelRequest::new("m", all[..n].to_vec()), &mut cache);
            cache.sealed
        };
        let anthropic: fn(&ModelRequest, &mut RequestCache) = |request, cache| {
            encode_request::<anthropic::Anthropic>(request, false, cache).unwrap();
        };
        let chat: fn(&ModelRequest, &mut RequestCache) = |request, cache| {
            encode_request::<openai_chat::OpenAiChat>(request, false, cache).unwrap();
        };
        // user | assistant | tool + user (one wire message) | assistant: the last is open.
        assert_eq!(sealed_after(5, anthropic), 4);
        // ... | tool: the user turn the tool result opened stays open.
        assert_eq!(sealed_after(3, anthropic), 2);
        assert_eq!(sealed_after(4, anthropic), 2);
        assert_eq!(sealed_after(5, chat), 5);
    }

    /// A cache filled without breakpoints gives the fresh body once they are switched on, also
    /// when the new messages send nothing.
    #[test]
    fn switching_breakpoints_on_rewrites_the_open_message() {
        let mut cache = RequestCache::default();
        let mut messages = vec![Message::user("hi")];
        for caching in [PromptCaching::none(), PromptCaching::breakpoints()] {
            let request = ModelRequest::new("m", messages.clone()).prompt_caching(caching);
            let incremental =
                encode_request::<anthropic::Anthropic>(&request, false, &mut cache).unwrap();
            let fresh = encode_request::<anthropic::Anthropic>(
                &request,
                false,
                &mut RequestCache::default(),
            )
            .unwrap();
            assert_eq!(
                String::from_utf8(incremental).unwrap(),
                String::from_utf8(fresh).unwrap()
            );
            messages.push(Message::system("sends nothing in the conversation"));
        }
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

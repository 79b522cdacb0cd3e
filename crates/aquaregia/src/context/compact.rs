//! Compaction: older tool results elided first, then older turns summarised by the model.

use std::fmt::Write as _;

use tracing::Instrument;

use crate::error::Error;
use crate::message::{ContentPart, Message, Role};
use crate::model::ProviderKind;
use crate::model::{LanguageModel, ModelRequest, ModelState, Usage};
use crate::telemetry;
use crate::tool::ToolOutput;

use super::budget::{ceil_char_boundary, floor_char_boundary};
use super::store::{READ_TOOL_OUTPUT, ToolOutputStore};
use super::tokens::{
    BYTES_PER_TOKEN, estimate_message_tokens, estimate_messages_tokens, estimate_output_tokens,
    estimate_tokens, estimator_kind,
};

/// Tool results smaller than this many tokens are never elided: the marker would not be
/// much shorter.
const ELIDE_MIN_TOKENS: u64 = 64;

/// Longest tool result quoted in a summary transcript, in bytes.
const TRANSCRIPT_RESULT_BYTES: usize = 2_000;

/// What the summarising model call is told.
const SUMMARY_INSTRUCTIONS: &str = "You compact conversations between a user and an AI agent \
    that uses tools. Write a concise summary that lets the agent continue the work: the user's \
    goals and constraints, decisions made, facts and results learned from tools (with the \
    identifiers, paths, numbers and names that matter), and what remains to do. Write only the \
    summary.";

/// How the summary starts, in the conversation.
const SUMMARY_HEADER: &str = "[Summary of the earlier conversation, compacted to save context]";

/// What a compaction did.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// The estimated request tokens before.
    pub before_tokens: u64,
    /// The estimated request tokens after.
    pub after_tokens: u64,
    /// How many older tool results were replaced by a short marker.
    pub elided_tool_results: usize,
    /// How many older messages were replaced by a summary (0: no summary was made).
    pub summarized_messages: usize,
    /// Tokens used by the summarising model call (zero when no summary was made). They count
    /// in the run's usage, not in any step's.
    pub usage: Usage,
}

/// One compaction's settings.
pub(crate) struct Compaction<'a> {
    /// Writes the summary.
    pub(crate) model: &'a dyn LanguageModel,
    /// The model id the summary is asked of.
    pub(crate) model_id: &'a str,
    /// Tokens of the request outside the messages: instructions and tool definitions.
    pub(crate) fixed_tokens: u64,
    /// What the request may use: the window minus the reserved output.
    pub(crate) target: u64,
    /// Output tokens reserved for the summary.
    pub(crate) reserve: u64,
    pub(crate) store: Option<&'a ToolOutputStore>,
    /// Record the summary call's prompt and answer on its `chat` span.
    pub(crate) record_content: bool,
}

impl Compaction<'_> {
    /// Makes `messages` fit the target: older tool results elided, then older turns
    /// summarised. `force` does both even when the messages fit (what `/compact` asks for).
    /// Fails with [`Error::ContextWindowExceeded`] when they still do not fit.
    pub(crate) async fn run(
        &self,
        messages: &mut Vec<Message>,
        force: bool,
    ) -> Result<CompactionReport, Error> {
        let provider = estimator_kind(self.model);
        let before = self.fixed_tokens + estimate_messages_tokens(messages, provider);
        let mut report = CompactionReport {
            before_tokens: before,
            after_tokens: before,
            ..CompactionReport::default()
        };
        if !force && before <= self.target {
            return Ok(report);
        }
        let target = if force { 0 } else { self.target };
        let (elided, mut current) = self.elide(messages, before, target).await;
        report.elided_tool_results = elided;
        if force || current > self.target {
            let split = if force {
                latest_turn(messages)
            } else {
                let tail_budget = self.target.saturating_sub(self.fixed_tokens) / 2;
                split_point(messages, provider, tail_budget)
            };
            if let Some(split) = split {
                (report.summarized_messages, report.usage) =
                    self.summarise(messages, split).await?;
                current = self.fixed_tokens + estimate_messages_tokens(messages, provider);
            }
        }
        report.after_tokens = current;
        if current > self.target {
            return Err(Error::ContextWindowExceeded {
                request_tokens: Some(current),
                limit: Some(self.target),
                provider: None,
            });
        }
        Ok(report)
    }

    /// Replaces tool results older than the last tool message, oldest first, until the
    /// estimate is at most `target`. Returns how many and the new estimate.
    async fn elide(&self, messages: &mut [Message], mut current: u64, target: u64) -> (usize, u64) {
        let provider = estimator_kind(self.model);
        let Some(last_tool) = messages.iter().rposition(|m| m.role == Role::Tool) else {
            return (0, current);
        };
        let mut elided = 0;
        for message in messages.iter_mut().take(last_tool) {
            if message.role != Role::Tool {
                continue;
            }
            for part in &mut message.content {
                if current <= target {
                    return (elided, current);
                }
                let ContentPart::ToolResult(result) = part else {
                    continue;
                };
                let tokens = estimate_output_tokens(&result.output, provider);
                if tokens < ELIDE_MIN_TOKENS {
                    continue;
                }
                let marker = match self.store {
                    Some(store) => {
                        store.keep(&result.call_id, result.output.to_text()).await;
                        format!(
                            "[tool output elided to save context (~{tokens} tokens). Read it with \
                             {READ_TOOL_OUTPUT} {{\"id\": {}, \"offset\": 0}}]",
                            serde_json::Value::from(result.call_id.as_str())
                        )
                    }
                    None => format!("[tool output elided to save context (~{tokens} tokens)]"),
                };
                let saved = tokens.saturating_sub(estimate_tokens(&marker));
                result.output = ToolOutput::Text(marker);
                current = current.saturating_sub(saved);
                elided += 1;
            }
        }
        (elided, current)
    }

    /// Replaces `messages[..split]` (system messages aside) with a summary the model writes.
    async fn summarise(
        &self,
        messages: &mut Vec<Message>,
        split: usize,
    ) -> Result<(usize, Usage), Error> {
        // The conversation is only changed once the summary is there: a failed or cancelled
        // call leaves it as it was.
        let old = messages.get(..split).unwrap_or_default();
        let (system, rest): (Vec<&Message>, Vec<&Message>) =
            old.iter().partition(|m| m.role == Role::System);
        let prompt_tokens = estimate_tokens(SUMMARY_INSTRUCTIONS) + 64;
        let room = self
            .target
            .saturating_sub(prompt_tokens)
            .saturating_mul(BYTES_PER_TOKEN);
        let transcript = transcript(&rest, usize::try_from(room).unwrap_or(usize::MAX));
        let request = ModelRequest::new(
            self.model_id,
            vec![Message::user(format!(
                "{transcript}\n\nSummarise the conversation above."
            ))],
        )
        .instructions(SUMMARY_INSTRUCTIONS)
        .max_output_tokens(u32::try_from(self.reserve).unwrap_or(u32::MAX));
        let summarized = rest.len();
        let mut compacted: Vec<Message> = system.into_iter().cloned().collect();
        let span = telemetry::chat_span(self.model, &request, false, self.record_content);
        let response = self
            .model
            .generate(&request, &mut ModelState::new())
            .instrument(span.clone())
            .await;
        telemetry::record_chat(&span, &response, self.record_content);
        let response = response?;
        compacted.push(Message::user(format!(
            "{SUMMARY_HEADER}\n{}",
            response.text()
        )));
        compacted.extend(messages.drain(split..));
        *messages = compacted;
        Ok((summarized, response.usage))
    }
}

/// Where to cut: the earliest message (never a tool result, which must follow its call) such
/// that the messages from it on fit `tail_budget`; if even the last turn is larger, the latest
/// possible cut. `None` when nothing can be summarised.
fn split_point(messages: &[Message], provider: ProviderKind, tail_budget: u64) -> Option<usize> {
    let first = messages.iter().position(|m| m.role != Role::System)?;
    let mut tail = 0;
    let mut best = None;
    let mut latest = None;
    for index in (first + 1..messages.len()).rev() {
        let message = messages.get(index)?;
        tail += estimate_message_tokens(message, provider);
        if message.role == Role::Tool {
            continue;
        }
        latest.get_or_insert(index);
        if tail > tail_budget {
            break;
        }
        best = Some(index);
    }
    best.or(latest)
}

/// The start of the latest user turn, when there is something before it to summarise.
fn latest_turn(messages: &[Message]) -> Option<usize> {
    let first = messages.iter().position(|m| m.role != Role::System)?;
    messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .filter(|&index| index > first)
        .or_else(|| {
            // No later user message: keep the last answer, summarise what led to it.
            messages
                .iter()
                .rposition(|m| m.role != Role::Tool)
                .filter(|&index| index > first)
        })
}

/// The conversation as plain text for the summarising call, cut to `max_bytes`.
fn transcript(messages: &[&Message], max_bytes: usize) -> String {
    let mut out = String::new();
    for message in messages {
        let role = match message.role {
            Role::System => "System",
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool",
        };
        let _ = write!(out, "{role}:");
        for part in &message.content {
            match part {
                ContentPart::Text { text } => {
                    let _ = write!(out, " {text}");
                }
                ContentPart::Image { .. } => out.push_str(" [image]"),
                ContentPart::Reasoning(_) => {}
                ContentPart::ToolCall(call) => {
                    let _ = write!(out, " [calls {} with {}]", call.name, call.arguments);
                }
                ContentPart::ToolResult(result) => {
                    let text = result.output.to_text();
                    let end = floor_char_boundary(&text, TRANSCRIPT_RESULT_BYTES);
                    let more = if end < text.len() { " ..." } else { "" };
                    let _ = write!(
                        out,
                        " [{} returned: {}{more}]",
                        result.name,
                        text.get(..end).unwrap_or_default()
                    );
                }
            }
        }
        out.push('\n');
    }
    if out.len() <= max_bytes {
        return out;
    }
    let head = floor_char_boundary(&out, max_bytes / 2);
    let tail = ceil_char_boundary(&out, out.len() - max_bytes / 2).max(head);
    format!(
        "{}\n[... earlier middle part left out ...]\n{}",
        out.get(..head).unwrap_or_default(),
        out.get(tail..).unwrap_or_default()
    )
}

//! Cutting a tool result down to its head and tail to fit its [`OutputBudget`].

use crate::model::ProviderKind;
use crate::tool::{ContentBlock, OutputBudget, ToolOutput};

use super::tokens::{BYTES_PER_TOKEN, bytes_to_tokens, estimate_image_tokens, json_len};

/// The smallest budget accepted, in tokens: room for a useful head, tail and marker.
pub(crate) const MIN_BUDGET_TOKENS: u64 = 256;

/// Bytes kept free in a budget for the marker between head and tail.
const MARKER_RESERVE: usize = 400;

/// A result cut to fit its budget: what the model gets, and the full text to keep.
#[derive(Debug)]
pub(crate) struct Fitted {
    pub(crate) output: ToolOutput,
    pub(crate) full_text: String,
}

/// `output` cut to `budget`, or `None` when it fits as it is.
pub(crate) fn fit_output(
    output: &ToolOutput,
    call_id: &str,
    budget: OutputBudget,
    provider: ProviderKind,
) -> Option<Fitted> {
    let max_bytes = budget.max_bytes_usize();
    let max_tokens = budget.max_tokens();
    match output {
        ToolOutput::Text(text) => {
            (text.len() > max_bytes).then(|| fit_text(text.clone(), Vec::new(), call_id, max_bytes))
        }
        ToolOutput::Json(value) => (json_len(value) > max_bytes)
            .then(|| fit_text(value.to_string(), Vec::new(), call_id, max_bytes)),
        ToolOutput::Content(blocks)
        | ToolOutput::Structured {
            content: blocks, ..
        } => {
            let image_cost = |block: &ContentBlock| match block {
                ContentBlock::Image { data, .. } => estimate_image_tokens(provider, Some(data)),
                _ => 0,
            };
            let total: u64 = blocks
                .iter()
                .map(|block| match block {
                    ContentBlock::Image { .. } => image_cost(block),
                    other => bytes_to_tokens(other.to_text().len()),
                })
                .sum();
            if total <= max_tokens {
                return None;
            }
            // Images stay while they use at most half the budget; the text gets the rest.
            let mut images = Vec::new();
            let mut image_tokens = 0;
            for block in blocks {
                let cost = image_cost(block);
                if cost > 0 && image_tokens + cost <= max_tokens / 2 {
                    image_tokens += cost;
                    images.push(block.clone());
                }
            }
            let text_bytes = max_bytes.saturating_sub(
                usize::try_from(image_tokens * BYTES_PER_TOKEN).unwrap_or(usize::MAX),
            );
            Some(fit_text(output.to_text(), images, call_id, text_bytes))
        }
    }
}

/// Head and tail of `full` within `max_bytes` (marker included), followed by `images`.
fn fit_text(full: String, images: Vec<ContentBlock>, call_id: &str, max_bytes: usize) -> Fitted {
    let room = max_bytes.saturating_sub(MARKER_RESERVE).min(full.len());
    let head_end = floor_char_boundary(&full, room / 2);
    let tail_start = ceil_char_boundary(&full, full.len() - (room - room / 2)).max(head_end);
    let (head, tail) = (
        full.get(..head_end).unwrap_or_default(),
        full.get(tail_start..).unwrap_or_default(),
    );
    let marker = cut_marker(call_id, head_end, tail_start, full.len());
    let text = format!("{head}{marker}{tail}");
    let output = if images.is_empty() {
        ToolOutput::Text(text)
    } else {
        let mut blocks = vec![ContentBlock::text(text)];
        blocks.extend(images);
        ToolOutput::Content(blocks)
    };
    Fitted {
        output,
        full_text: full,
    }
}

/// What the model reads where a result was cut.
fn cut_marker(call_id: &str, from: usize, to: usize, total: usize) -> String {
    let call_id = serde_json::Value::from(call_id);
    format!(
        "\n\n[... {} of {total} bytes cut here (bytes {from}..{to}) to fit the context. Read them \
         with read_tool_output {{\"id\": {call_id}, \"offset\": {from}, \"length\": {}}} ...]\n\n",
        to - from,
        to - from
    )
}

/// The largest char boundary of `text` at or below `at`.
pub(crate) fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary of `text` at or above `at`.
pub(crate) fn ceil_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_and_tail_fit_and_cut_on_char_boundaries() {
        let full = "é".repeat(10_000);
        let fitted = fit_output(
            &ToolOutput::Text(full.clone()),
            "c1",
            OutputBudget::bytes(2_000),
            ProviderKind::OpenAiChat,
        )
        .unwrap();
        let text = fitted.output.as_text().unwrap();
        assert!(text.len() <= 2_000, "{}", text.len());
        assert!(text.starts_with("éé") && text.ends_with("éé"));
        assert!(text.contains("read_tool_output {\"id\": \"c1\", \"offset\": 800,"));
        assert_eq!(fitted.full_text, full);
        assert!(
            fit_output(
                &ToolOutput::Text("short".into()),
                "c1",
                OutputBudget::bytes(2_000),
                ProviderKind::OpenAiChat
            )
            .is_none()
        );
    }

    #[test]
    fn images_count_by_their_cost_and_stay_while_they_use_half_the_budget() {
        // A 1x1 PNG: 255 tokens for OpenAI, 1 for Anthropic.
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGMwTjsDAAI1AWaKkkQyAAAAAElFTkSuQmCC";
        let output = ToolOutput::Content(vec![
            ContentBlock::text("x".repeat(3_000)),
            ContentBlock::image("image/png", png),
            ContentBlock::image("image/png", png),
        ]);
        let budget = OutputBudget::tokens(1_000);
        // Anthropic: 750 + 2 tokens fit.
        assert!(fit_output(&output, "c", budget, ProviderKind::Anthropic).is_none());
        // OpenAI: 750 + 510 do not; one image (255 <= 500) stays, the text is cut.
        let fitted = fit_output(&output, "c", budget, ProviderKind::OpenAiChat).unwrap();
        let ToolOutput::Content(blocks) = &fitted.output else {
            panic!("{:?}", fitted.output);
        };
        assert_eq!(blocks.len(), 2);
        assert!(matches!(&blocks[1], ContentBlock::Image { .. }));
        let text = blocks[0].to_text();
        assert!(text.len() <= 4_000 - 255 * 4, "{}", text.len());
        assert!(
            fitted
                .full_text
                .ends_with("[image/png image]\n[image/png image]")
        );
    }
}

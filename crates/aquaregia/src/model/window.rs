//! Known context windows per model family.

/// The window assumed for a model this table does not know.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// Model-name prefixes (lower case, after any `provider/` or `models/` path and before any
/// `:tag`) and their context windows in tokens, most specific first.
const WINDOWS: &[(&str, u64)] = &[
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-oss", 131_072),
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude-", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-", 1_048_576),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("llama3.3", 131_072),
    ("llama4", 1_048_576),
    ("llama3", 8_192),
    ("qwen3", 40_960),
    ("qwen2.5", 32_768),
    ("mistral-nemo", 131_072),
    ("mistral", 32_768),
    ("gemma3", 131_072),
    ("gemma2", 8_192),
    ("phi4", 16_384),
    ("phi3", 131_072),
    ("deepseek", 131_072),
];

/// The context window of `model` in tokens, from a small built-in table (OpenAI `gpt-5*`,
/// `gpt-4.1*`, `gpt-4o*`, `o1`/`o3`/`o4`; Anthropic `claude-*`; Gemini; common Ollama
/// families), or [`DEFAULT_CONTEXT_WINDOW`] for a model it does not know.
///
/// Ollama serves a smaller window than the model's (its `num_ctx`, 4096 by default) unless
/// configured; set [`AgentBuilder::context_window`](crate::AgentBuilder::context_window) to
/// what the server uses.
///
/// ```
/// use aquaregia::context_window_for;
/// assert_eq!(context_window_for("gpt-4o-mini"), 128_000);
/// assert_eq!(context_window_for("claude-sonnet-4-5"), 200_000);
/// assert_eq!(context_window_for("models/gemini-2.5-flash"), 1_048_576);
/// assert_eq!(context_window_for("llama3.1:8b"), 131_072);
/// assert_eq!(context_window_for("my-finetune"), aquaregia::DEFAULT_CONTEXT_WINDOW);
/// ```
pub fn context_window_for(model: &str) -> u64 {
    known_context_window(model).unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// The context window of `model` in tokens when the table of [`context_window_for`] knows
/// it; `None` for a model it does not know (where [`context_window_for`] assumes
/// [`DEFAULT_CONTEXT_WINDOW`]).
///
/// ```
/// use aquaregia::known_context_window;
///
/// assert_eq!(known_context_window("openai/gpt-4o-mini"), Some(128_000));
/// assert_eq!(known_context_window("my-finetune"), None);
/// ```
pub fn known_context_window(model: &str) -> Option<u64> {
    let name = model.rsplit('/').next().unwrap_or(model);
    let name = name.split(':').next().unwrap_or(name);
    WINDOWS
        .iter()
        .find(|(prefix, _)| {
            name.get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
        })
        .map(|&(_, window)| window)
}

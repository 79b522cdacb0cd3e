//! The prompt caching both front ends ask for: Anthropic breakpoints, and OpenAI's
//! `prompt_cache_key` per session (only on OpenAI itself: compatible servers may reject
//! unknown fields).

use aquaregia::{Client, PromptCaching, ProviderKind};

/// What `client` should cache for the session (or run) `session`.
pub(crate) fn for_session(client: &Client, session: &str) -> PromptCaching {
    let openai = client.base_url().starts_with("https://api.openai.com");
    match client.kind() {
        ProviderKind::Anthropic => PromptCaching::breakpoints(),
        ProviderKind::OpenAiResponses => PromptCaching::none().key(session),
        ProviderKind::OpenAiChat if openai => PromptCaching::none().key(session),
        _ => PromptCaching::none(),
    }
}

/// A key for this process's requests (`aquaregia-run-<pid>-<nanos>`), so the steps and turns of
/// one `run` or `chat` share a cache.
pub(crate) fn process_key() -> &'static str {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        format!("aquaregia-run-{}-{nanos}", std::process::id())
    })
}

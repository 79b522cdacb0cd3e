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

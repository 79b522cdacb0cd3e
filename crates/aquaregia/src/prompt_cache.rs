//! [`PromptCaching`]: what a request asks the provider to cache.

/// Which parts of a request the provider should cache, so later requests that start the same
/// way are cheaper and faster. Off by default; cache hits show in
/// [`Usage::cached_input_tokens`](crate::Usage::cached_input_tokens).
///
/// - Anthropic caches only up to explicit breakpoints (`cache_control`): after the system
///   prompt, after the last tool definition, and after the latest turn (which moves forward
///   every step, so each step reads what the previous one wrote). That is at most 3 of the 4
///   breakpoints Anthropic allows.
/// - OpenAI (Responses and Chat Completions) caches long prompts by itself; a `key` sent as
///   `prompt_cache_key` routes requests of one session to the same cache.
/// - Gemini caches implicitly; nothing is sent.
///
/// ```
/// use aquaregia::PromptCaching;
/// // All Anthropic breakpoints, and an OpenAI cache key for this session.
/// let caching = PromptCaching::breakpoints().key("session-42");
/// assert!(caching.system && caching.tools && caching.latest_turn);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptCaching {
    /// Anthropic: a breakpoint after the system prompt.
    pub system: bool,
    /// Anthropic: a breakpoint after the last tool definition (which caches them all).
    pub tools: bool,
    /// Anthropic: a breakpoint after the last block of the latest message.
    pub latest_turn: bool,
    /// OpenAI: the `prompt_cache_key`, e.g. a session id.
    pub key: Option<String>,
}

impl PromptCaching {
    /// Nothing cached explicitly (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// Every Anthropic breakpoint: system prompt, tool definitions and latest turn.
    pub fn breakpoints() -> Self {
        Self {
            system: true,
            tools: true,
            latest_turn: true,
            key: None,
        }
    }

    /// Sets the breakpoint after the system prompt.
    #[must_use]
    pub fn system(mut self, on: bool) -> Self {
        self.system = on;
        self
    }

    /// Sets the breakpoint after the tool definitions.
    #[must_use]
    pub fn tools(mut self, on: bool) -> Self {
        self.tools = on;
        self
    }

    /// Sets the breakpoint after the latest turn.
    #[must_use]
    pub fn latest_turn(mut self, on: bool) -> Self {
        self.latest_turn = on;
        self
    }

    /// Sets the OpenAI `prompt_cache_key`.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

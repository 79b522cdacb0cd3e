//! The crate's error type.

use std::time::Duration;

use crate::tool::ToolExecError;

/// Everything that can go wrong in aquaregia, from building a client to running an agent.
///
/// Branch on the structured variants; the `Display` text is for people. No variant ever holds
/// an API key.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The provider answered with a non-success HTTP status.
    #[error("{provider} returned HTTP {status}: {message}")]
    Provider {
        /// Which API answered (`openai`, `openai-chat`, `anthropic`).
        provider: &'static str,
        /// The HTTP status code.
        status: u16,
        /// The provider's error message, or the body when it has none.
        message: String,
        /// The provider's error type or code (`rate_limit_exceeded`, `overloaded_error`...).
        code: Option<String>,
        /// The raw response body.
        body: String,
        /// The request id the provider sent back, for support tickets.
        request_id: Option<String>,
    },
    /// The provider reported an error inside an otherwise successful response stream.
    #[error("{provider} stream error: {message}")]
    Stream {
        /// Which API sent it.
        provider: &'static str,
        /// The provider's error message.
        message: String,
        /// The provider's error type or code, when it sent one.
        code: Option<String>,
    },
    /// The request never got an HTTP answer (DNS, connect, TLS, reset...).
    #[error("transport error talking to {url}: {message}")]
    Transport {
        /// The URL that was being requested, without user info, query or fragment.
        url: String,
        /// What failed: the cause chain in one line, redacted.
        message: String,
        /// The HTTP client's own error (a `reqwest::Error` without its URL), to walk or
        /// downcast; `None` when the failure did not come from the HTTP client.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A request or stream took longer than the configured timeout.
    #[error("timed out after {after:?}")]
    Timeout {
        /// The limit that was exceeded.
        after: Duration,
    },
    /// The provider's response could not be decoded (malformed JSON, truncated stream...).
    #[error("could not decode the {provider} response: {message}")]
    Decode {
        /// Which API sent it.
        provider: &'static str,
        /// What was wrong.
        message: String,
        /// The raw body (or stream fragment) that failed to decode.
        body: String,
    },
    /// The request could not be built (bad header, bad option, unusable message list...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Client configuration is wrong (unknown provider, bad URL or header...).
    #[error("configuration error: {0}")]
    Config(String),
    /// No API key was given and the provider's environment variable is not set.
    #[error("no API key: set {env_var}")]
    MissingApiKey {
        /// The variable to set (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
        env_var: &'static str,
    },
    /// A tool set was rejected: invalid or duplicate names.
    #[error("invalid tool set: {0}")]
    ToolRegistry(String),
    /// A tool failed and the agent runs with [`ToolErrorPolicy::FailFast`](crate::ToolErrorPolicy::FailFast).
    #[error("tool `{name}` failed: {source}")]
    Tool {
        /// The tool's name.
        name: String,
        /// What went wrong.
        #[source]
        source: ToolExecError,
    },
    /// A structured answer ([`Client::generate_object`](crate::Client::generate_object),
    /// [`Agent::run_typed`](crate::Agent::run_typed)) was still unusable after the repair
    /// round: not JSON, not matching the schema, or not decoding into the type.
    #[error("structured output failed: {message}")]
    StructuredOutput {
        /// What was wrong with the last answer.
        message: String,
        /// The last answer's text, as the model wrote it.
        raw: String,
    },
    /// The request does not fit the model's context window: either it would not fit even
    /// after compaction and was not sent (`provider` is `None`), or the provider refused it as
    /// too long (llama.cpp's `exceed_context_size_error`, OpenAI's `context_length_exceeded`,
    /// Anthropic's "prompt is too long").
    #[error("{}", context_window_message(*request_tokens, *limit, *provider))]
    #[non_exhaustive]
    ContextWindowExceeded {
        /// The request's tokens: estimated here after compaction, or counted by the provider
        /// that refused it (`None` when it did not say).
        request_tokens: Option<u64>,
        /// The most that fit: the context window minus the output reserved when checked
        /// here, or the provider's context size (`None` when it did not say).
        limit: Option<u64>,
        /// The provider that refused the request; `None` when it was not sent.
        provider: Option<&'static str>,
    },
    /// The operation was cancelled through its cancellation token.
    #[error("cancelled")]
    Cancelled,
    /// An error from another layer: a user's `prepare_step`, a tool source such as an MCP
    /// server (`aquaregia_mcp::McpError` converts into this variant). Downcast it to act on
    /// it.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// Wraps any error as [`Error::Other`]; handy inside `prepare_step` closures.
    pub fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Other(error.into())
    }

    /// Whether retrying the same request may succeed (rate limits, overload, timeouts...).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Provider { status, .. } => is_retryable_status(*status),
            Self::Transport { .. } | Self::Timeout { .. } => true,
            Self::Stream { code, .. } => code.as_deref().is_some_and(|code| {
                matches!(
                    code,
                    "overloaded_error" | "rate_limit_exceeded" | "server_error" | "api_error"
                )
            }),
            _ => false,
        }
    }
}

fn context_window_message(
    request_tokens: Option<u64>,
    limit: Option<u64>,
    provider: Option<&'static str>,
) -> String {
    let size = match (request_tokens, limit) {
        (Some(tokens), Some(limit)) => format!(": {tokens} tokens, at most {limit} fit"),
        (Some(tokens), None) => format!(": {tokens} tokens"),
        (None, Some(limit)) => format!(": at most {limit} tokens fit"),
        (None, None) => String::new(),
    };
    match provider {
        Some(provider) => {
            format!("{provider} refused the request as too long for the context window{size}")
        }
        None => format!(
            "the request does not fit the context window (minus the output reserved) even \
             after compaction{size}"
        ),
    }
}

pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429) || status >= 500
}

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
        /// How long the provider asked to wait before trying again: its `retry-after-ms` or
        /// `Retry-After` header (seconds or an HTTP date), or a delay in the body (Gemini's
        /// `RetryInfo`). `None` when it did not say.
        retry_after: Option<Duration>,
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
    /// Client configuration is wrong (unknown provider, bad URL or header...): see
    /// [`ConfigError`] for which.
    #[error("configuration error: {0}")]
    Config(ConfigError),
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
    /// A [`Cassette`](crate::Cassette) could not answer: replay of a request it does not
    /// hold, a file that cannot be read, written or parsed, a builder setting that is wrong.
    #[error("cassette {}: {message}", path.display())]
    Cassette {
        /// The cassette's file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
        /// The I/O, JSON or pattern error behind it, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
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

    /// How long the provider asked to wait before a retry ([`Error::Provider`]'s
    /// `retry_after`), when it said.
    ///
    /// ```
    /// use std::time::Duration;
    /// let error = aquaregia::Error::Provider {
    ///     provider: "openai",
    ///     status: 429,
    ///     message: "slow down".into(),
    ///     code: None,
    ///     body: String::new(),
    ///     request_id: None,
    ///     retry_after: Some(Duration::from_secs(2)),
    /// };
    /// assert_eq!(error.retry_after(), Some(Duration::from_secs(2)));
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Provider { retry_after, .. } => *retry_after,
            _ => None,
        }
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

/// What is wrong with a client's configuration ([`Error::Config`]).
///
/// ```
/// use aquaregia::{Client, ConfigError, Error};
/// match Client::from_model_spec("nope:model") {
///     Err(Error::Config(ConfigError::UnknownProvider { provider, .. })) => assert_eq!(provider, "nope"),
///     other => panic!("{other:?}"),
/// }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A model spec without the `provider:` part.
    #[error("model spec `{spec}` is not of the form provider:model (providers: {providers})")]
    MalformedModelSpec {
        /// The spec as given.
        spec: String,
        /// The provider ids there are, comma-separated.
        providers: String,
    },
    /// A model spec with a provider and no model (`openai:`).
    #[error("model spec `{spec}` names no model")]
    NoModel {
        /// The spec as given.
        spec: String,
    },
    /// A model spec naming a provider that does not exist.
    #[error("unknown provider `{provider}` in model spec `{spec}` (use one of {providers})")]
    UnknownProvider {
        /// The provider id asked for.
        provider: String,
        /// The spec as given.
        spec: String,
        /// The provider ids there are, comma-separated.
        providers: String,
    },
    /// A base URL (or an endpoint under it) that does not parse. The URL is shown without
    /// user info or query.
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL, without credentials.
        url: String,
        /// Why it does not parse.
        reason: String,
    },
    /// The API key cannot be sent in a header (a newline, say).
    #[error("the API key contains characters not allowed in a header")]
    InvalidApiKey,
    /// A custom header name that HTTP does not allow.
    #[error("invalid header name `{name}`")]
    InvalidHeaderName {
        /// The name as given.
        name: String,
    },
    /// A custom header value that HTTP does not allow (the value is not shown: it may be a
    /// credential).
    #[error("invalid value for header `{name}`")]
    InvalidHeaderValue {
        /// The header's name.
        name: String,
    },
    /// A provider with no default base URL (Azure: each resource has its own) and none
    /// configured.
    #[error("no base URL for {provider}: set {env_var}")]
    MissingBaseUrl {
        /// The provider's id.
        provider: &'static str,
        /// The variable to set.
        env_var: &'static str,
    },
    /// A provider that works in a Google Cloud project (Vertex AI) has none configured.
    #[error(
        "no Google Cloud project for {provider}: set {env_var} (a service-account key file \
         names its own project)"
    )]
    MissingProject {
        /// The provider's id.
        provider: &'static str,
        /// The variable to set.
        env_var: &'static str,
    },
    /// A provider setting that cannot be used (a Vertex AI location that names no location).
    #[error("invalid {setting} for {provider}: {reason}")]
    InvalidSetting {
        /// The provider's id.
        provider: &'static str,
        /// The setting (`location`).
        setting: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Credentials a signing provider (Bedrock, Vertex AI) needs are missing or unreadable;
    /// the message says what to set.
    #[error("{0}")]
    Credentials(String),
    /// The HTTP client could not be set up (TLS backend, system proxy settings...).
    #[error("HTTP client: {0}")]
    HttpClient(String),
}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Self::Config(error)
    }
}

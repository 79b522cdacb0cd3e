//! [`Client`]: one configured connection to a model provider.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::agent::AgentBuilder;
use crate::error::Error;
use crate::provider::anthropic::Anthropic;
use crate::provider::openai_chat::OpenAiChat;
use crate::provider::openai_responses::OpenAiResponses;
use crate::provider::{HttpConfig, ModelRequest, ModelResponse, ModelStream, RequestCache};

const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
const OLLAMA_HOST: &str = "http://127.0.0.1:11434";
const ANTHROPIC_VERSION: &str = "2023-06-01";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
const DEFAULT_MAX_RETRIES: u32 = 2;

/// Which wire API a [`Client`] speaks.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI Responses API (`POST /responses`).
    OpenAiResponses,
    /// Chat Completions (`POST /chat/completions`): OpenAI and every compatible server.
    OpenAiChat,
    /// Anthropic Messages API (`POST /v1/messages`).
    Anthropic,
}

/// A configured model provider. Cheap to clone; share one per provider.
///
/// ```no_run
/// # async fn demo() -> Result<(), aquaregia::Error> {
/// let client = aquaregia::Client::openai_chat()
///     .base_url("http://127.0.0.1:8000/v1")
///     .api_key("local")
///     .build()?;
/// let output = client.agent("my-model").build()?.run("Hello!").await?;
/// println!("{}", output.text);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    kind: ProviderKind,
    http: HttpConfig,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // HeaderMap's Debug shows sensitive values as `Sensitive`, so the key never leaks.
        f.debug_struct("Client")
            .field("kind", &self.inner.kind)
            .field("base_url", &self.inner.http.base_url)
            .field("timeout", &self.inner.http.timeout)
            .field("max_retries", &self.inner.http.max_retries)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// OpenAI Responses API. Key from `OPENAI_API_KEY`, base URL from `OPENAI_BASE_URL`.
    pub fn openai() -> ClientBuilder {
        ClientBuilder::new(ProviderKind::OpenAiResponses, Defaults::OpenAi)
    }

    /// Chat Completions API: OpenAI and compatible servers (vLLM, llama.cpp, DeepSeek, Groq,
    /// OpenRouter...). Key from `OPENAI_API_KEY`, base URL from `OPENAI_BASE_URL`; the key is
    /// optional when a base URL is given.
    pub fn openai_chat() -> ClientBuilder {
        ClientBuilder::new(ProviderKind::OpenAiChat, Defaults::OpenAi)
    }

    /// Anthropic Messages API. Key from `ANTHROPIC_API_KEY`, base URL from `ANTHROPIC_BASE_URL`.
    pub fn anthropic() -> ClientBuilder {
        ClientBuilder::new(ProviderKind::Anthropic, Defaults::Anthropic)
    }

    /// A local Ollama server through its Chat Completions endpoint, at `OLLAMA_HOST`
    /// (default `http://127.0.0.1:11434`). No key.
    pub fn ollama() -> ClientBuilder {
        ClientBuilder::new(ProviderKind::OpenAiChat, Defaults::Ollama)
    }

    /// A client and model id from a `provider:model` spec: `openai:gpt-5-mini`,
    /// `openai-chat:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`, `ollama:qwen3:8b`.
    ///
    /// ```
    /// let err = aquaregia::Client::from_model_spec("nope:model").unwrap_err();
    /// assert!(err.to_string().contains("unknown provider `nope`"));
    /// ```
    pub fn from_model_spec(spec: &str) -> Result<(Client, String), Error> {
        let (provider, model) = spec.split_once(':').ok_or_else(|| {
            Error::Config(format!(
                "model spec `{spec}` is not of the form provider:model \
                 (providers: openai, openai-chat, anthropic, ollama)"
            ))
        })?;
        if model.is_empty() {
            return Err(Error::Config(format!("model spec `{spec}` names no model")));
        }
        let builder = match provider {
            "openai" => Self::openai(),
            "openai-chat" => Self::openai_chat(),
            "anthropic" => Self::anthropic(),
            "ollama" => Self::ollama(),
            other => {
                return Err(Error::Config(format!(
                    "unknown provider `{other}` in model spec `{spec}` \
                     (use openai, openai-chat, anthropic or ollama)"
                )));
            }
        };
        Ok((builder.build()?, model.to_owned()))
    }

    /// The model spec to use when none is given: `AQUAREGIA_MODEL` if set, else the provider
    /// whose API key is present (OpenAI, then Anthropic), else local Ollama.
    pub fn default_model_spec() -> String {
        if let Some(spec) = env_var("AQUAREGIA_MODEL") {
            return spec;
        }
        if env_var("OPENAI_API_KEY").is_some() {
            "openai:gpt-5-mini".to_owned()
        } else if env_var("ANTHROPIC_API_KEY").is_some() {
            "anthropic:claude-sonnet-4-5".to_owned()
        } else {
            "ollama:llama3.2".to_owned()
        }
    }

    /// [`Client::from_model_spec`] of [`Client::default_model_spec`].
    pub fn from_env() -> Result<(Client, String), Error> {
        let spec = Self::default_model_spec();
        tracing::info!(model = %spec, "using model");
        Self::from_model_spec(&spec)
    }

    /// Which wire API this client speaks.
    pub fn kind(&self) -> ProviderKind {
        self.inner.kind
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.inner.http.base_url
    }

    /// Starts building an agent on `model`.
    pub fn agent(&self, model: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(self.clone(), model.into())
    }

    /// One model call, waiting for the whole answer.
    pub async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, Error> {
        self.generate_cached(request, &mut RequestCache::default())
            .await
    }

    /// One model call, streamed. The stream ends with [`StreamEvent::Finish`](crate::StreamEvent::Finish)
    /// or an error.
    pub async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, Error> {
        self.stream_cached(request, &mut RequestCache::default())
            .await
    }

    /// [`generate`](Self::generate), reusing the encoding of earlier steps.
    pub(crate) async fn generate_cached(
        &self,
        request: &ModelRequest,
        cache: &mut RequestCache,
    ) -> Result<ModelResponse, Error> {
        let http = &self.inner.http;
        match self.inner.kind {
            ProviderKind::OpenAiResponses => http.generate::<OpenAiResponses>(request, cache).await,
            ProviderKind::OpenAiChat => http.generate::<OpenAiChat>(request, cache).await,
            ProviderKind::Anthropic => http.generate::<Anthropic>(request, cache).await,
        }
    }

    /// [`stream`](Self::stream), reusing the encoding of earlier steps.
    pub(crate) async fn stream_cached(
        &self,
        request: &ModelRequest,
        cache: &mut RequestCache,
    ) -> Result<ModelStream, Error> {
        let http = &self.inner.http;
        match self.inner.kind {
            ProviderKind::OpenAiResponses => http.stream::<OpenAiResponses>(request, cache).await,
            ProviderKind::OpenAiChat => http.stream::<OpenAiChat>(request, cache).await,
            ProviderKind::Anthropic => http.stream::<Anthropic>(request, cache).await,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defaults {
    OpenAi,
    Anthropic,
    Ollama,
}

/// Configures a [`Client`]; see [`Client::openai`] and friends.
#[must_use]
pub struct ClientBuilder {
    kind: ProviderKind,
    defaults: Defaults,
    api_key: Option<String>,
    base_url: Option<String>,
    headers: Vec<(String, String)>,
    timeout: Duration,
    max_retries: u32,
    http: Option<reqwest::Client>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("kind", &self.kind)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

impl ClientBuilder {
    fn new(kind: ProviderKind, defaults: Defaults) -> Self {
        Self {
            kind,
            defaults,
            api_key: None,
            base_url: None,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            http: None,
        }
    }

    /// The API key (otherwise read from the provider's environment variable).
    pub fn api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// The base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// An extra header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Per-request timeout (default 10 minutes). For streams it bounds the wait for the
    /// response headers and for each chunk after them.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries on connect errors, timeouts, 408, 429 and 5xx (default 2).
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Uses this `reqwest::Client` (proxies, custom TLS...) instead of a default one.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Checks the configuration and builds the client.
    pub fn build(self) -> Result<Client, Error> {
        let (key_var, url_var) = match self.defaults {
            Defaults::OpenAi => ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
            Defaults::Anthropic => ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
            Defaults::Ollama => ("", "OLLAMA_HOST"),
        };
        let explicit_url = self.base_url.clone().or_else(|| env_var(url_var));
        let base_url = match (self.defaults, explicit_url.clone()) {
            (Defaults::Ollama, url) => ollama_base_url(url.as_deref().unwrap_or(OLLAMA_HOST)),
            (_, Some(url)) => url,
            (Defaults::OpenAi, None) => OPENAI_BASE_URL.to_owned(),
            (Defaults::Anthropic, None) => ANTHROPIC_BASE_URL.to_owned(),
        };
        reqwest::Url::parse(&base_url)
            .map_err(|error| Error::Config(format!("invalid base URL `{base_url}`: {error}")))?;

        let api_key = match self.defaults {
            Defaults::Ollama => self.api_key,
            _ => self.api_key.or_else(|| env_var(key_var)),
        };
        let key_optional = self.defaults == Defaults::Ollama
            || (self.kind == ProviderKind::OpenAiChat && explicit_url.is_some());
        if api_key.is_none() && !key_optional {
            return Err(Error::MissingApiKey { env_var: key_var });
        }

        let mut headers = HeaderMap::new();
        if let Some(key) = &api_key {
            let (name, value) = match self.kind {
                ProviderKind::Anthropic => (HeaderName::from_static("x-api-key"), key.clone()),
                _ => (AUTHORIZATION, format!("Bearer {key}")),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                Error::Config("the API key contains characters not allowed in a header".into())
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        if self.kind == ProviderKind::Anthropic {
            headers.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(ANTHROPIC_VERSION),
            );
        }
        for (name, value) in &self.headers {
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::Config(format!("invalid header name `{name}`")))?;
            let header_value = HeaderValue::from_str(value)
                .map_err(|_| Error::Config(format!("invalid value for header `{name}`")))?;
            headers.insert(header_name, header_value);
        }

        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .build()
                .map_err(|error| Error::Config(format!("HTTP client: {error}")))?,
        };
        Ok(Client {
            inner: Arc::new(ClientInner {
                kind: self.kind,
                http: HttpConfig {
                    http,
                    base_url,
                    headers,
                    timeout: self.timeout,
                    max_retries: self.max_retries,
                },
            }),
        })
    }
}

/// `OLLAMA_HOST` may be `host:port`, `0.0.0.0` or a full URL; the API lives under `/v1`.
fn ollama_base_url(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    let with_scheme = if host.contains("://") {
        host.to_owned()
    } else {
        format!("http://{host}")
    };
    let with_port = match reqwest::Url::parse(&with_scheme) {
        Ok(url) if url.port().is_none() && !host.contains("://") => {
            format!("{with_scheme}:11434")
        }
        _ => with_scheme,
    };
    let local = with_port.replace("://0.0.0.0", "://127.0.0.1");
    if local.ends_with("/v1") {
        local
    } else {
        format!("{local}/v1")
    }
}

fn env_var(name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_host_forms() {
        assert_eq!(
            ollama_base_url("127.0.0.1:11434"),
            "http://127.0.0.1:11434/v1"
        );
        assert_eq!(ollama_base_url("0.0.0.0"), "http://127.0.0.1:11434/v1");
        assert_eq!(
            ollama_base_url("http://gpu-box:8080/"),
            "http://gpu-box:8080/v1"
        );
        assert_eq!(
            ollama_base_url("https://o.example/v1"),
            "https://o.example/v1"
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        let builder = Client::openai_chat()
            .api_key("sk-secret-123")
            .base_url("http://127.0.0.1:1/v1");
        assert!(!format!("{builder:?}").contains("sk-secret-123"));
        let client = builder.build().expect("client builds");
        assert!(!format!("{client:?}").contains("sk-secret-123"));
    }
}

//! [`Client`]: one configured connection to a model provider.

mod client_model;
mod models;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::error::{ConfigError, Error};
use crate::http::{HttpConfig, RequestSigner, Route};
use crate::model::{
    GeneratedObject, ModelRequest, ModelResponse, ModelState, ModelStream, ProviderKind,
    generate_object,
};
pub use client_model::ClientModel;

use crate::provider::{
    KeyPolicy, PROVIDERS, ProviderInfo, ProviderSettings, SetupInput, anthropic, bearer_auth,
    gemini, ollama, openai_chat, openai_responses, provider, provider_ids,
};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
const DEFAULT_MAX_RETRIES: u32 = 2;

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
    provider: &'static ProviderInfo,
    http: HttpConfig,
    /// The base URL's host and port, for spans (`server.address`, `server.port`).
    server: Option<(String, Option<u16>)>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // HeaderMap's Debug shows sensitive values as `Sensitive`, so the key never leaks.
        f.debug_struct("Client")
            .field("provider", &self.inner.provider.id)
            .field("base_url", &self.inner.http.base_url)
            .field("timeout", &self.inner.http.timeout)
            .field("max_retries", &self.inner.http.max_retries)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// OpenAI Responses API. Key from `OPENAI_API_KEY`, base URL from `OPENAI_BASE_URL`.
    pub fn openai() -> ClientBuilder {
        ClientBuilder::new(&openai_responses::OPENAI)
    }

    /// Chat Completions API: OpenAI and compatible servers (vLLM, llama.cpp, DeepSeek, Groq,
    /// OpenRouter...). Key from `OPENAI_API_KEY`, base URL from `OPENAI_BASE_URL`; the key is
    /// optional when a base URL is given.
    pub fn openai_chat() -> ClientBuilder {
        ClientBuilder::new(&openai_chat::OPENAI_CHAT)
    }

    /// Anthropic Messages API. Key from `ANTHROPIC_API_KEY`, base URL from `ANTHROPIC_BASE_URL`.
    pub fn anthropic() -> ClientBuilder {
        ClientBuilder::new(&anthropic::ANTHROPIC)
    }

    /// Google Gemini API (`generateContent`). Key from `GEMINI_API_KEY` or `GOOGLE_API_KEY`,
    /// base URL from `GOOGLE_GEMINI_BASE_URL` (default
    /// `https://generativelanguage.googleapis.com`).
    pub fn gemini() -> ClientBuilder {
        ClientBuilder::new(&gemini::GEMINI)
    }

    /// A local Ollama server through its Chat Completions endpoint, at `OLLAMA_HOST`
    /// (default `http://127.0.0.1:11434`). No key.
    pub fn ollama() -> ClientBuilder {
        ClientBuilder::new(&ollama::OLLAMA)
    }

    /// A client and model id from a `provider:model` spec: `openai:gpt-5-mini`,
    /// `openai-chat:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`, `gemini:gemini-2.5-flash`,
    /// `ollama:qwen3:8b`, or an OpenAI-compatible preset with its own base URL and key
    /// variable: `openrouter:`, `groq:`, `deepseek:`, `mistral:`, `xai:`, `together:`,
    /// `fireworks:`, `cerebras:`, and the local `lmstudio:`, `vllm:`, `llamacpp:` (no key).
    /// Azure (`azure:`, `azure-responses:`), Amazon Bedrock (`bedrock:`, feature `bedrock`) and
    /// Google Vertex AI (`vertex:`, `vertex-anthropic:`, feature `vertex`) too.
    ///
    /// ```
    /// let err = aquaregia::Client::from_model_spec("nope:model").unwrap_err();
    /// assert!(err.to_string().contains("unknown provider `nope`"));
    /// ```
    pub fn from_model_spec(spec: &str) -> Result<(Client, String), Error> {
        let (builder, model) = Self::builder_from_model_spec(spec)?;
        Ok((builder.build()?, model))
    }

    /// Like [`Client::from_model_spec`], but returns the builder, to set the key (or anything
    /// else) before building.
    pub fn builder_from_model_spec(spec: &str) -> Result<(ClientBuilder, String), Error> {
        let (id, model) = spec.split_once(':').ok_or_else(|| {
            Error::Config(ConfigError::MalformedModelSpec {
                spec: spec.to_owned(),
                providers: provider_ids(),
            })
        })?;
        if model.is_empty() {
            return Err(Error::Config(ConfigError::NoModel {
                spec: spec.to_owned(),
            }));
        }
        let provider = provider(id).ok_or_else(|| {
            Error::Config(ConfigError::UnknownProvider {
                provider: id.to_owned(),
                spec: spec.to_owned(),
                providers: provider_ids(),
            })
        })?;
        Ok((ClientBuilder::new(provider), model.to_owned()))
    }

    /// Every provider's id and the environment variables it reads its API key from (empty
    /// for providers that need none), in the order model specs are documented.
    pub fn provider_key_vars() -> Vec<(&'static str, &'static [&'static str])> {
        PROVIDERS
            .iter()
            .map(|provider| (provider.id, provider.api_key_vars))
            .collect()
    }

    /// The model spec to use when none is given: `AQUAREGIA_MODEL` if set, else the first
    /// provider whose API key is present (OpenAI, then Anthropic...), else local Ollama.
    pub fn default_model_spec() -> String {
        if let Some(spec) = env_var("AQUAREGIA_MODEL") {
            return spec;
        }
        PROVIDERS
            .iter()
            .find_map(|provider| {
                let model = provider.default_model?;
                let has_key = provider
                    .api_key_vars
                    .iter()
                    .any(|var| env_var(var).is_some());
                has_key.then(|| format!("{}:{model}", provider.id))
            })
            .unwrap_or_else(|| "ollama:llama3.2".to_owned())
    }

    /// [`Client::from_model_spec`] of [`Client::default_model_spec`].
    pub fn from_env() -> Result<(Client, String), Error> {
        let spec = Self::default_model_spec();
        tracing::info!(model = %spec, "using model");
        Self::from_model_spec(&spec)
    }

    /// Which wire API this client speaks.
    pub fn kind(&self) -> ProviderKind {
        self.inner.provider.kind
    }

    /// The provider's id, as in model specs (`openai`, `anthropic`, `ollama`...).
    pub fn provider_id(&self) -> &'static str {
        self.inner.provider.id
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.inner.http.base_url
    }

    /// The base URL's host and port.
    pub(crate) fn server(&self) -> Option<(&str, Option<u16>)> {
        let (host, port) = self.inner.server.as_ref()?;
        Some((host, *port))
    }

    /// The model `id` of this client's provider, as a [`LanguageModel`](crate::LanguageModel)
    /// to run agents on ([`AgentBuilder::new`](crate::AgentBuilder::new)) or to wrap ([`Fallback`](crate::Fallback)).
    ///
    /// ```
    /// use aquaregia::LanguageModel;
    /// let client = aquaregia::Client::openai_chat().base_url("http://127.0.0.1:8000/v1").build()?;
    /// let model = client.model("my-model");
    /// assert_eq!((model.model_id(), model.provider_name()), ("my-model", "openai"));
    /// # Ok::<(), aquaregia::Error>(())
    /// ```
    pub fn model(&self, id: impl Into<String>) -> ClientModel {
        ClientModel::new(self.clone(), id.into())
    }

    /// One model call, waiting for the whole answer.
    pub async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, Error> {
        self.generate_in(request, &mut ModelState::new()).await
    }

    /// One model call, streamed. The stream ends with [`StreamEvent::Finish`](crate::StreamEvent::Finish)
    /// or an error.
    pub async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, Error> {
        self.stream_in(request, &mut ModelState::new()).await
    }

    /// [`generate`](Self::generate), reusing the encoding of earlier calls kept in `state`.
    pub(crate) fn generate_in<'a>(
        &'a self,
        request: &'a ModelRequest,
        state: &'a mut ModelState,
    ) -> BoxFuture<'a, Result<ModelResponse, Error>> {
        let inner = &self.inner;
        inner.provider.api.generate(&inner.http, request, state)
    }

    /// [`stream`](Self::stream), reusing the encoding of earlier calls kept in `state`.
    pub(crate) fn stream_in<'a>(
        &'a self,
        request: &'a ModelRequest,
        state: &'a mut ModelState,
    ) -> BoxFuture<'a, Result<ModelStream, Error>> {
        let inner = &self.inner;
        inner.provider.api.stream(&inner.http, request, state)
    }
}

/// Configures a [`Client`]; see [`Client::openai`] and friends.
#[must_use]
pub struct ClientBuilder {
    provider: &'static ProviderInfo,
    api_key: Option<String>,
    bearer_token: Option<String>,
    settings: ProviderSettings,
    base_url: Option<String>,
    headers: Vec<(String, String)>,
    timeout: Duration,
    max_retries: u32,
    http: Option<reqwest::Client>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("provider", &self.provider.id)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("settings", &self.settings)
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
    fn new(provider: &'static ProviderInfo) -> Self {
        Self {
            provider,
            api_key: None,
            bearer_token: None,
            settings: ProviderSettings::default(),
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

    /// A bearer token sent as `Authorization: Bearer <token>` instead of the API key (for
    /// Azure, a Microsoft Entra ID token; otherwise read from `AZURE_OPENAI_AD_TOKEN` when no
    /// key is set; for Vertex AI, an OAuth access token, used instead of minting one). It
    /// takes the place of any key.
    ///
    /// ```
    /// let client = aquaregia::Client::builder_from_model_spec("azure:my-gpt-4o")?
    ///     .0
    ///     .base_url("https://my-resource.openai.azure.com")
    ///     .bearer_token("eyJ0eXAi...")
    ///     .build()?;
    /// assert_eq!(client.base_url(), "https://my-resource.openai.azure.com/openai");
    /// # Ok::<(), aquaregia::Error>(())
    /// ```
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// Static AWS credentials and the region to sign Bedrock requests with (otherwise read
    /// from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, the shared
    /// credentials file and `AWS_REGION`). Other providers ignore them.
    #[cfg(feature = "bedrock")]
    pub fn aws_credentials(
        mut self,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
        region: impl Into<String>,
    ) -> Self {
        self.settings.aws = Some(crate::http::StaticCredentials {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token,
            region: region.into(),
        });
        self
    }

    /// The Google Cloud project Vertex AI requests go to (otherwise `GOOGLE_CLOUD_PROJECT`,
    /// else the credentials' own project). Other providers ignore it.
    #[cfg(feature = "vertex")]
    pub fn google_cloud_project(mut self, project: impl Into<String>) -> Self {
        self.settings.google_project = Some(project.into());
        self
    }

    /// The Vertex AI location: a region such as `us-central1`, or `global` (otherwise
    /// `GOOGLE_CLOUD_LOCATION`, else `global`). Other providers ignore it.
    #[cfg(feature = "vertex")]
    pub fn google_cloud_location(mut self, location: impl Into<String>) -> Self {
        self.settings.google_location = Some(location.into());
        self
    }

    /// The Google credentials file Vertex AI access tokens are minted from: a service-account
    /// key, or `authorized_user` credentials as `gcloud auth application-default login`
    /// writes them (otherwise `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's file). An
    /// access token given with [`bearer_token`](Self::bearer_token) or
    /// `GOOGLE_CLOUD_ACCESS_TOKEN` is used instead. Other providers ignore it.
    ///
    /// ```no_run
    /// let client = aquaregia::Client::builder_from_model_spec("vertex:gemini-2.5-flash")?
    ///     .0
    ///     .google_credentials_file("/secrets/vertex-sa.json")
    ///     .google_cloud_location("europe-west4")
    ///     .build()?;
    /// # Ok::<(), aquaregia::Error>(())
    /// ```
    #[cfg(feature = "vertex")]
    pub fn google_credentials_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.settings.google_credentials_file = Some(path.into());
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

    /// Retries on connect errors, timeouts, 408, 429 and 5xx (default 2), honouring the
    /// provider's `Retry-After` up to 60 s.
    ///
    /// Under a [`Retry`](crate::Retry) layer these retries are off: the client makes one
    /// attempt per call and returns the error (with the provider's
    /// [`retry_after`](crate::Error::retry_after)) to the layer, whose policy alone decides,
    /// so the two never multiply attempts.
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Uses this `reqwest::Client` (proxies, custom TLS...) instead of a default one; it then
    /// carries every request. (Without one, requests to a plain `http://` base URL that no
    /// proxy applies to, such as a local model server, go straight on hyper's client, which
    /// reqwest is built on: same connections, about 7 µs less per request.)
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// The base URL, its route, the headers (API key included) and the request signer of a
    /// provider that signs requests and has no key, checked.
    fn resolve(&self) -> Result<Resolved, Error> {
        let provider = self.provider;
        let configured_url = self
            .base_url
            .clone()
            .or_else(|| provider.base_url_vars.iter().find_map(|var| env_var(var)));
        if configured_url.is_none()
            && provider.default_base_url.is_empty()
            && let Some(env_var) = provider.base_url_vars.last()
        {
            return Err(Error::Config(ConfigError::MissingBaseUrl {
                provider: provider.id,
                env_var,
            }));
        }
        let base_url = (provider.normalize_base_url)(
            configured_url
                .as_deref()
                .unwrap_or(provider.default_base_url),
        );

        // A bearer token (given, or from a token variable when no key is set) replaces the key.
        let bearer_token = self.bearer_token.clone().or_else(|| {
            if self.api_key.is_some() {
                return None;
            }
            let has_key_var = provider
                .api_key_vars
                .iter()
                .any(|var| env_var(var).is_some());
            (!has_key_var)
                .then(|| provider.token_vars.iter().find_map(|var| env_var(var)))
                .flatten()
        });
        let api_key = match bearer_token {
            Some(_) => None,
            None => self
                .api_key
                .clone()
                .or_else(|| provider.api_key_vars.iter().find_map(|var| env_var(var))),
        };
        let key_needed = match provider.key {
            KeyPolicy::Required => true,
            KeyPolicy::UnlessBaseUrl => configured_url.is_none(),
            KeyPolicy::Never => false,
        };
        let (signer, base_url) = match provider.signer {
            Some(make) => {
                let setup = make(&SetupInput {
                    base_url: &base_url,
                    configured: configured_url.is_some(),
                    authorized: api_key.is_some() || bearer_token.is_some(),
                    settings: &self.settings,
                })?;
                (setup.signer, setup.base_url.unwrap_or(base_url))
            }
            None => (None, base_url),
        };
        reqwest::Url::parse(&base_url).map_err(|error| {
            Error::Config(ConfigError::InvalidUrl {
                url: crate::http::safe_url(&base_url),
                reason: error.to_string(),
            })
        })?;
        if api_key.is_none()
            && bearer_token.is_none()
            && key_needed
            && let Some(env_var) = provider.api_key_vars.first()
        {
            return Err(Error::MissingApiKey { env_var });
        }

        let mut headers = HeaderMap::new();
        for (name, value) in provider.static_headers {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        if let Some(key) = &api_key {
            crate::redact::register(key);
            let (name, value) = (provider.auth_header)(key);
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| Error::Config(ConfigError::InvalidApiKey))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        if let Some(token) = &bearer_token {
            crate::redact::register(token);
            let (name, value) = bearer_auth(token);
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| Error::Config(ConfigError::InvalidApiKey))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        for (name, value) in &self.headers {
            crate::redact::register_header(name, value);
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                Error::Config(ConfigError::InvalidHeaderName { name: name.clone() })
            })?;
            let mut header_value = HeaderValue::from_str(value).map_err(|_| {
                Error::Config(ConfigError::InvalidHeaderValue { name: name.clone() })
            })?;
            // Custom headers often carry credentials (gateway keys, org tokens).
            header_value.set_sensitive(true);
            headers.insert(header_name, header_value);
        }

        let route = (provider.route)(&base_url);
        Ok(Resolved {
            base_url,
            route,
            headers,
            signer,
        })
    }

    /// Checks the configuration (base URL, API key, headers) without building the HTTP
    /// client, which loads TLS roots: a cheap way to report a bad configuration or a missing
    /// key early and build the client only when it is first needed.
    ///
    /// ```
    /// let builder = aquaregia::Client::anthropic().base_url("not a url");
    /// assert!(builder.check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        self.resolve().map(|_| ())
    }

    /// Checks the configuration and builds the client.
    pub fn build(self) -> Result<Client, Error> {
        let Resolved {
            base_url,
            route,
            headers,
            signer,
        } = self.resolve()?;
        let provider = self.provider;
        let server = reqwest::Url::parse(&base_url).ok().and_then(|url| {
            let host = url.host_str()?.to_owned();
            Some((host, url.port_or_known_default()))
        });
        Ok(Client {
            inner: Arc::new(ClientInner {
                provider,
                server,
                http: HttpConfig::new(
                    self.http,
                    base_url,
                    route,
                    signer,
                    headers,
                    self.timeout,
                    self.max_retries,
                )?,
            }),
        })
    }
}

/// A checked [`ClientBuilder`] configuration.
struct Resolved {
    base_url: String,
    route: Route,
    headers: HeaderMap,
    signer: Option<Arc<dyn RequestSigner>>,
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

impl Client {
    /// One model call whose answer is a `T`: [`generate_object`] on the model
    /// `request.model` names.
    ///
    /// ```no_run
    /// # async fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
    /// use aquaregia::{Message, ModelRequest};
    /// #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    /// struct City {
    ///     name: String,
    ///     country: String,
    /// }
    /// let request = ModelRequest::new("gpt-4o-mini", vec![Message::user("The capital of France?")]);
    /// let city = client.generate_object::<City>(&request).await?.value;
    /// # Ok(()) }
    /// ```
    pub async fn generate_object<T: JsonSchema + DeserializeOwned>(
        &self,
        request: &ModelRequest,
    ) -> Result<GeneratedObject<T>, Error> {
        generate_object(&self.model(request.model.clone()), request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

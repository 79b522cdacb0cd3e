//! HTTP plumbing shared by every provider and by other crates' HTTP transports (the MCP
//! client's): the client every request goes through (no credentials across origins), sending
//! with retries and backoff, the one SSE decoder, and error descriptions.
//!
//! Public here: [`client_builder`], [`reqwest_message`] and the [`sse`] decoder, for crates
//! that speak HTTP next to aquaregia and must follow the same rules.

mod plain;
pub mod sse;

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use hyper::Uri;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Method, Url};

use plain::{PlainClient, PlainResponse};

use crate::error::{ConfigError, Error, is_retryable_status};

const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
const BASE_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// The most redirects (within one origin) one request follows.
const MAX_REDIRECTS: usize = 10;

/// A `reqwest::ClientBuilder` with the rules every aquaregia HTTP client follows: no `Referer`
/// (URLs may carry secrets in their query), and redirects followed only within the same origin,
/// so credentials set as headers (API keys, bearer tokens, custom auth) never reach another
/// host. A cross-origin redirect is returned to the caller as the 3xx response it is.
///
/// ```
/// let client = aquaregia::http::client_builder().build();
/// assert!(client.is_ok());
/// ```
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .referer(false)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !same_origin || attempt.previous().len() > MAX_REDIRECTS {
                attempt.stop()
            } else {
                attempt.follow()
            }
        }))
}

/// A default client built by [`client_builder`].
fn default_client() -> Result<reqwest::Client, ConfigError> {
    client_builder()
        .build()
        .map_err(|error| ConfigError::HttpClient(reqwest_message(&error)))
}

/// HTTP settings shared by every request of a [`Client`](crate::Client).
#[derive(Debug)]
pub(crate) struct HttpConfig {
    /// The reqwest client: the caller's, or aquaregia's own built on first use when requests
    /// go on the plain-HTTP client (a local model server then needs no TLS roots at all).
    http: OnceLock<Result<reqwest::Client, ConfigError>>,
    /// Model requests to a plain-HTTP base URL no proxy applies to, when `http` is aquaregia's
    /// own client (see [`plain`]).
    plain: Option<PlainClient>,
    pub(crate) base_url: String,
    /// How request paths hang off `base_url`.
    pub(crate) route: Route,
    /// Signs each attempt (instead of a static auth header).
    signer: Option<Arc<dyn RequestSigner>>,
    /// Auth and custom headers, marked sensitive.
    pub(crate) headers: HeaderMap,
    /// `headers` and `content-type: application/json`: what a POST of a JSON body sends.
    json_headers: HeaderMap,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    /// The last endpoint requested, parsed once: requests of an agent run all go to one
    /// endpoint, and parsing a URL costs more than a whole request body's encoding step.
    endpoint: Mutex<Option<(String, Endpoint)>>,
}

/// Static AWS credentials and a region, given to a [`ClientBuilder`](crate::ClientBuilder)
/// for a provider that signs its requests.
#[derive(Clone, Default)]
#[cfg_attr(not(feature = "bedrock"), allow(dead_code))] // only Bedrock signs with them
pub(crate) struct StaticCredentials {
    pub(crate) access_key_id: String,
    pub(crate) secret_access_key: String,
    pub(crate) session_token: Option<String>,
    pub(crate) region: String,
}

impl std::fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// Signs requests whose auth depends on their URL, body and time (AWS SigV4) or on a token
/// fetched and renewed on the way (Google's OAuth access tokens): called before every
/// attempt, so a retry carries a fresh signature.
pub(crate) trait RequestSigner: Send + Sync + std::fmt::Debug {
    /// The headers to add to a POST of `body` to `url` whose other headers are `headers`.
    /// `http` is the client's configuration, for signers that make requests of their own.
    fn sign<'a>(
        &'a self,
        http: &'a HttpConfig,
        url: &'a Url,
        headers: &'a HeaderMap,
        body: &'a [u8],
    ) -> BoxFuture<'a, Result<Vec<(HeaderName, HeaderValue)>, Error>>;
}

/// How a request's path is put under the base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `{base}{path}`.
    Plain,
    /// Azure's deployment URLs: `{base}/deployments/{model}{path}?{query}`.
    Deployment {
        /// The query, without `?` (`api-version=...`).
        query: String,
    },
}

impl Route {
    /// The path, under the base URL, of a request on `model` to the wire API's `path`.
    pub(crate) fn path<'a>(&self, path: &'a str, model: &str) -> std::borrow::Cow<'a, str> {
        match self {
            Self::Plain => std::borrow::Cow::Borrowed(path),
            Self::Deployment { query } => std::borrow::Cow::Owned(format!(
                "/deployments/{}{path}?{query}",
                encode_component(model)
            )),
        }
    }
}

/// `text` percent-encoded for a URL path segment or query value (all but the unreserved
/// characters), so a name cannot change the rest of the URL.
pub(crate) fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A request's URL, parsed (and as a `Uri` for the plain-HTTP client).
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    url: Url,
    uri: Uri,
}

/// An answer from either client.
#[derive(Debug)]
pub(crate) enum HttpResponse {
    Reqwest(reqwest::Response),
    Plain(PlainResponse),
}

impl std::fmt::Debug for PlainResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainResponse")
            .field("status", &self.response.status())
            .field("url", &safe_url(self.url.as_str()))
            .finish_non_exhaustive()
    }
}

impl From<reqwest::Response> for HttpResponse {
    fn from(response: reqwest::Response) -> Self {
        Self::Reqwest(response)
    }
}

impl HttpResponse {
    fn status(&self) -> u16 {
        match self {
            Self::Reqwest(response) => response.status().as_u16(),
            Self::Plain(plain) => plain.response.status().as_u16(),
        }
    }

    /// The response headers.
    pub(crate) fn headers(&self) -> &HeaderMap {
        match self {
            Self::Reqwest(response) => response.headers(),
            Self::Plain(plain) => plain.response.headers(),
        }
    }

    /// The whole body.
    async fn bytes(self) -> Result<Bytes, Error> {
        match self {
            Self::Reqwest(response) => {
                let url = response.url().to_string();
                response
                    .bytes()
                    .await
                    .map_err(|error| transport_error(&url, error))
            }
            Self::Plain(plain) => plain.bytes().await,
        }
    }

    /// The body as it arrives.
    pub(crate) fn into_stream(self) -> Pin<Box<dyn Stream<Item = Result<Bytes, Error>> + Send>> {
        match self {
            Self::Reqwest(response) => {
                let url = response.url().to_string();
                Box::pin(
                    response
                        .bytes_stream()
                        .map(move |chunk| chunk.map_err(|error| transport_error(&url, error))),
                )
            }
            Self::Plain(plain) => Box::pin(plain.into_stream()),
        }
    }
}

/// How a provider reads an error response: the error, and any retry delay its body asks for.
pub(crate) type ErrorReader = fn(status: u16, headers: &HeaderMap, body: &[u8]) -> Rejection;

/// An error response, read.
#[derive(Debug)]
pub(crate) struct Rejection {
    pub(crate) error: Error,
    /// A retry delay from the body (Gemini's `RetryInfo`); headers are read separately.
    pub(crate) retry_after: Option<Duration>,
}

impl HttpConfig {
    /// The settings of a client sending to `base_url` with these headers (auth included).
    /// `custom` is the caller's own client, which then carries every request; without one,
    /// aquaregia's own is built now, unless model requests go on the plain-HTTP client (then
    /// on first use), so that a bad TLS setup is reported when the client is built.
    pub(crate) fn new(
        custom: Option<reqwest::Client>,
        base_url: String,
        route: Route,
        signer: Option<Arc<dyn RequestSigner>>,
        headers: HeaderMap,
        timeout: Duration,
        max_retries: u32,
    ) -> Result<Self, Error> {
        let mut json_headers = headers.clone();
        json_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let plain = match Url::parse(&base_url) {
            Ok(url) if custom.is_none() => PlainClient::for_base_url(&url),
            _ => None,
        };
        let http = OnceLock::new();
        match custom {
            Some(client) => {
                let _ = http.set(Ok(client));
            }
            None if plain.is_none() => {
                let _ = http.set(Ok(default_client().map_err(Error::Config)?));
            }
            None => {}
        }
        Ok(Self {
            http,
            plain,
            base_url,
            route,
            signer,
            headers,
            json_headers,
            timeout,
            max_retries,
            endpoint: Mutex::new(None),
        })
    }

    /// The reqwest client (built now if it was left for first use).
    pub(crate) fn reqwest(&self) -> Result<&reqwest::Client, Error> {
        self.http
            .get_or_init(default_client)
            .as_ref()
            .map_err(|error| Error::Config(error.clone()))
    }

    /// `path` appended to the base URL.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url.trim_end_matches('/'), path)
    }

    /// [`url`](Self::url) of `path`, parsed; the last one is kept, so a run of requests to one
    /// endpoint parses it once.
    pub(crate) fn endpoint(&self, path: &str) -> Result<Endpoint, Error> {
        let mut last = crate::sync::lock(&self.endpoint);
        if let Some((last_path, endpoint)) = &*last
            && last_path == path
        {
            return Ok(endpoint.clone());
        }
        let text = self.url(path);
        let invalid = |error: &dyn std::fmt::Display| {
            Error::Config(ConfigError::InvalidUrl {
                url: safe_url(&text),
                reason: error.to_string(),
            })
        };
        let url = Url::parse(&text).map_err(|error| invalid(&error))?;
        let uri = url
            .as_str()
            .parse::<Uri>()
            .map_err(|error| invalid(&error))?;
        let endpoint = Endpoint { url, uri };
        *last = Some((path.to_owned(), endpoint.clone()));
        Ok(endpoint)
    }

    /// Sends one POST of `body`: on the plain-HTTP client when there is one, else on reqwest.
    async fn send(&self, endpoint: &Endpoint, body: &Bytes) -> Result<HttpResponse, Error> {
        let signed;
        let headers = match &self.signer {
            None => &self.json_headers,
            Some(signer) => {
                let mut headers = self.json_headers.clone();
                for (name, value) in signer
                    .sign(self, &endpoint.url, &self.json_headers, body)
                    .await?
                {
                    headers.insert(name, value);
                }
                signed = headers;
                &signed
            }
        };
        match &self.plain {
            Some(plain) => plain
                .post(&endpoint.url, &endpoint.uri, headers, body.clone())
                .await
                .map(HttpResponse::Plain),
            None => {
                // A request built whole: `RequestBuilder` would parse the URL and copy the
                // headers in one by one.
                let mut request = reqwest::Request::new(Method::POST, endpoint.url.clone());
                *request.headers_mut() = headers.clone();
                *request.body_mut() = Some(body.clone().into());
                self.reqwest()?
                    .execute(request)
                    .await
                    .map(HttpResponse::Reqwest)
                    .map_err(|error| transport_error(endpoint.url.as_str(), error))
            }
        }
    }

    /// POSTs a JSON body, retrying connect errors, timeouts, 408, 429 and 5xx with backoff,
    /// honouring `Retry-After` (and `x-should-retry` where a provider sends it).
    pub(crate) async fn post_json(
        &self,
        endpoint: &Endpoint,
        body: Vec<u8>,
        read_error: ErrorReader,
    ) -> Result<HttpResponse, Error> {
        let body = Bytes::from(body);
        let mut attempt = 0u32;
        loop {
            let (error, retry_after) =
                match tokio::time::timeout(self.timeout, self.send(endpoint, &body)).await {
                    Err(_) => (
                        Error::Timeout {
                            after: self.timeout,
                        },
                        None,
                    ),
                    Ok(Err(error)) => (error, None),
                    Ok(Ok(response)) if (200..300).contains(&response.status()) => {
                        return Ok(response);
                    }
                    Ok(Ok(response)) => {
                        let status = response.status();
                        let headers = response.headers().clone();
                        let body = tokio::time::timeout(self.timeout, response.bytes())
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .unwrap_or_default();
                        let Rejection {
                            mut error,
                            retry_after,
                        } = read_error(status, &headers, &body);
                        let retry_after = retry_after_header(&headers).or(retry_after);
                        if let Error::Provider {
                            retry_after: asked, ..
                        } = &mut error
                        {
                            *asked = retry_after;
                        }
                        let retry = match header_str(&headers, "x-should-retry") {
                            Some("true") => true,
                            Some("false") => false,
                            _ => is_retryable_status(status),
                        };
                        if !retry {
                            return Err(error);
                        }
                        (error, retry_after)
                    }
                };
            if attempt >= self.max_retries || !error.is_retryable() || retries_outside() {
                return Err(error);
            }
            let delay = retry_after
                .filter(|delay| *delay <= MAX_RETRY_AFTER)
                .unwrap_or_else(|| backoff(attempt));
            tracing::debug!(url = %safe_url(endpoint.url.as_str()), attempt, ?delay, %error, "retrying request");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// The whole response body, within the request timeout.
    pub(crate) async fn read_body(
        &self,
        response: impl Into<HttpResponse>,
    ) -> Result<Bytes, Error> {
        tokio::time::timeout(self.timeout, response.into().bytes())
            .await
            .map_err(|_| Error::Timeout {
                after: self.timeout,
            })?
    }
}

/// [`Error::Transport`] for a request to `url` that got no HTTP answer. The URL loses its
/// user info and its query (a key may travel there, `?key=`), and the message is redacted.
pub(crate) fn transport_error(url: &str, error: reqwest::Error) -> Error {
    Error::Transport {
        url: safe_url(url),
        message: crate::redact::redact(&reqwest_message(&error)).into_owned(),
        source: Some(Box::new(error.without_url())),
    }
}

/// `url` without user info, query or fragment, for messages; text that is not a URL is
/// redacted ([`crate::redact::redact`]) instead.
pub(crate) fn safe_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => {
            // Not a URL: cut what would be the query and fragment, and user info before the
            // host, by text alone (a password must not reach a message because the host part
            // is broken).
            let end = url.find(['?', '#']).unwrap_or(url.len());
            let mut text = url.get(..end).unwrap_or(url).to_owned();
            // Up to the last `@`: a password may hold a `/` when it is not percent-encoded,
            // and cutting too much from a broken URL in a message costs nothing.
            if let Some(scheme_end) = text.find("://") {
                let authority_start = scheme_end + 3;
                if let Some(at) = text.get(authority_start..).and_then(|rest| rest.rfind('@')) {
                    text.replace_range(authority_start..=authority_start + at, "");
                }
            }
            crate::redact::redact(&text).into_owned()
        }
    }
}

/// What a reqwest error means, without the URL its own text repeats: the cause chain says
/// what really failed (`timed out` for a timeout).
pub fn reqwest_message(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out".to_owned();
    }
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    }
}

/// A header's value, when it is text.
pub(crate) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

tokio::task_local! {
    /// Set while a retry layer outside the client ([`Retry`](crate::Retry)) makes the calls:
    /// the client then makes one attempt per call, so attempts do not multiply.
    static RETRIES_OUTSIDE: ();
}

/// Runs `future` with the client's own retries off: one attempt per request, the error
/// (with the provider's `Retry-After`) returned at once for the caller's retry layer.
pub(crate) async fn with_retries_outside<F: std::future::Future>(future: F) -> F::Output {
    RETRIES_OUTSIDE.scope((), future).await
}

/// Whether a retry layer outside the client decides on retries ([`with_retries_outside`]).
fn retries_outside() -> bool {
    RETRIES_OUTSIDE.try_with(|()| ()).is_ok()
}

/// `retry-after-ms`, then `retry-after` as seconds or an HTTP date.
pub(crate) fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) =
        header_str(headers, "retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
    {
        return (ms >= 0.0 && ms.is_finite()).then(|| Duration::from_secs_f64(ms / 1000.0));
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds >= 0.0 && seconds.is_finite()).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

/// Exponential backoff with jitter: 0.5 s, 1 s, 2 s... capped at 8 s, each scaled by 0.75-1.
fn backoff(attempt: u32) -> Duration {
    let exp = BASE_BACKOFF.saturating_mul(1u32 << attempt.min(10));
    exp.min(MAX_BACKOFF).mul_f64(0.75 + fastrand::f64() * 0.25)
}

/// `text` cut to at most `max` bytes (on a character boundary), with `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

//! Model requests to a plain-HTTP server that no proxy applies to (a model server on this
//! machine or the local network), sent straight on hyper's pooled client.
//!
//! reqwest runs every request through layers these requests do not need: it parses the URL
//! three times (the request's, again in its redirect layer, again from the response), clones
//! the request for its retry layer and copies the headers twice. Against a model server that
//! answers in microseconds, that is most of what a step costs the client: reqwest adds about
//! 38,000 instructions per request to the 28,000 hyper's client (its connection task
//! included) costs over a bare socket (BENCHMARKS.md, agent loop). The connections are the ones reqwest would make (same pool
//! settings, `TCP_NODELAY`, the same system proxy rules deciding that no proxy applies), and
//! redirects follow the same rule: same origin only, with the headers kept.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body_util::{BodyExt, BodyStream, Full};
use hyper::body::Incoming;
use hyper::{Method, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use reqwest::Url;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, LOCATION};

use super::{MAX_REDIRECTS, safe_url};
use crate::error::Error;

/// What reqwest's default client uses too.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
const TCP_KEEPALIVE: Duration = Duration::from_secs(15);

/// A pooled HTTP/1.1 client for one plain-HTTP base URL.
#[derive(Debug, Clone)]
pub(crate) struct PlainClient {
    client: Client<HttpConnector, Full<Bytes>>,
}

/// An answer, and the URL it came from (after same-origin redirects).
pub(crate) struct PlainResponse {
    pub(crate) response: hyper::Response<Incoming>,
    pub(crate) url: Url,
}

impl PlainClient {
    /// A client for `base_url` when it is `http://` and the system's proxy settings (the
    /// environment variables reqwest's default client reads, `NO_PROXY` included) send it to
    /// no proxy; `None` otherwise.
    pub(crate) fn for_base_url(base_url: &Url) -> Option<Self> {
        if base_url.scheme() != "http" {
            return None;
        }
        let uri: Uri = base_url.as_str().parse().ok()?;
        if Matcher::from_system().intercept(&uri).is_some() {
            return None;
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_keepalive(Some(TCP_KEEPALIVE));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Some(Self { client })
    }

    /// POSTs `body` to `url` (`uri` is the same address) and returns the answer's head, after
    /// following same-origin redirects: 307 and 308 resend the request, 301, 302 and 303 turn
    /// it into a `GET` without a body, as browsers and reqwest do. A redirect elsewhere is
    /// returned as it is, so credentials never leave the origin.
    pub(crate) async fn post(
        &self,
        url: &Url,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<PlainResponse, Error> {
        let (mut method, mut body, mut target, mut at) =
            (Method::POST, body, uri.clone(), url.clone());
        // The headers once a redirect turned the request into a `GET`.
        let mut get_headers: Option<HeaderMap> = None;
        let mut hops = 0;
        loop {
            let mut request = hyper::Request::new(Full::new(body.clone()));
            *request.method_mut() = method.clone();
            *request.uri_mut() = target;
            *request.headers_mut() = get_headers.as_ref().unwrap_or(headers).clone();
            let response = self
                .client
                .request(request)
                .await
                .map_err(|error| plain_error(&at, error))?;
            let next = (hops < MAX_REDIRECTS)
                .then(|| same_origin_redirect(&at, &response))
                .flatten();
            let Some(next) = next else {
                return Ok(PlainResponse { response, url: at });
            };
            hops += 1;
            if !matches!(
                response.status(),
                StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
            ) {
                method = Method::GET;
                body = Bytes::new();
                let mut without_body = headers.clone();
                without_body.remove(CONTENT_TYPE);
                without_body.remove(CONTENT_LENGTH);
                get_headers = Some(without_body);
            }
            target = next.as_str().parse().map_err(|_| Error::Transport {
                url: safe_url(at.as_str()),
                message: format!("unusable redirect to {}", safe_url(next.as_str())),
                source: None,
            })?;
            at = next;
        }
    }
}

/// Where a redirect answer points, when it is a redirect within `url`'s origin.
fn same_origin_redirect(url: &Url, response: &hyper::Response<Incoming>) -> Option<Url> {
    if !response.status().is_redirection() {
        return None;
    }
    let location = response.headers().get(LOCATION)?.to_str().ok()?;
    let next = url.join(location).ok()?;
    (next.origin() == url.origin()).then_some(next)
}

impl PlainResponse {
    /// The whole body.
    pub(crate) async fn bytes(self) -> Result<Bytes, Error> {
        let url = self.url;
        self.response
            .into_body()
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
            .map_err(|error| plain_error(&url, error))
    }

    /// The body as it arrives.
    pub(crate) fn into_stream(self) -> impl Stream<Item = Result<Bytes, Error>> + Send + 'static {
        let url = self.url;
        BodyStream::new(self.response.into_body()).filter_map(move |frame| {
            let item = match frame {
                Ok(frame) => frame.into_data().ok().map(Ok),
                Err(error) => Some(Err(plain_error(&url, error))),
            };
            std::future::ready(item)
        })
    }
}

/// [`Error::Transport`] for a request to `url` that got no (whole) HTTP answer: what failed,
/// from the cause chain, as reqwest's errors are described.
fn plain_error(url: &Url, error: impl StdError + Send + Sync + 'static) -> Error {
    let mut causes = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    let message = if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    };
    Error::Transport {
        url: safe_url(url.as_str()),
        message: crate::redact::redact(&message).into_owned(),
        source: Some(Box::new(error)),
    }
}

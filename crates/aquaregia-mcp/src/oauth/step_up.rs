//! Authorizing again during a session: a request answered `403 insufficient_scope` (or a
//! `401` once refreshing failed) gets a new authorization with the scopes the challenge names,
//! then is sent once more.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthClient;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::OAuth;
use super::authorize::authorize;
use crate::transport::compat::http_post::RepairingClient;

/// How many times in a row one session may authorize again without a request getting
/// through.
const MAX_STEP_UPS: usize = 3;

type Inner = AuthClient<RepairingClient>;
type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// rmcp's OAuth client (tokens, refresh on 401) plus step-up once the session is up. Before
/// that, challenges go back to the connect, which authorizes outside the handshake timeout.
#[derive(Clone)]
pub(super) struct StepUpClient {
    inner: Inner,
    state: Arc<State>,
}

struct State {
    url: String,
    name: String,
    oauth: OAuth,
    connected: Arc<AtomicBool>,
    step_ups: AtomicUsize,
    /// One authorization at a time.
    authorizing: tokio::sync::Mutex<()>,
}

impl StepUpClient {
    pub(super) fn new(inner: Inner, url: &str, name: &str, oauth: &OAuth) -> Self {
        Self {
            inner,
            state: Arc::new(State {
                url: url.to_owned(),
                name: name.to_owned(),
                oauth: oauth.clone(),
                connected: Arc::new(AtomicBool::new(false)),
                step_ups: AtomicUsize::new(0),
                authorizing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Set once the handshake succeeded: from then on challenges are answered here.
    pub(super) fn connected(&self) -> Arc<AtomicBool> {
        self.state.connected.clone()
    }

    /// Whether a new authorization answered `challenge`.
    async fn step_up(&self, challenge: &str) -> bool {
        let state = &self.state;
        if !state.connected.load(Ordering::SeqCst)
            || state.step_ups.fetch_add(1, Ordering::SeqCst) >= MAX_STEP_UPS
        {
            return false;
        }
        let _one_at_a_time = state.authorizing.lock().await;
        tracing::info!(server = %state.name, "the server wants another authorization");
        match authorize(&state.url, &state.name, &state.oauth, challenge).await {
            Ok(Some(manager)) => {
                *self.inner.auth_manager.lock().await = manager;
                true
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(server = %state.name, %error, "authorizing again failed");
                false
            }
        }
    }
}

impl StreamableHttpClient for StepUpClient {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = PostResult> + Send + '_ {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        let result = self
            .inner
            .post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                limits,
            )
            .await;
        let challenge = match &result {
            Err(StreamableHttpError::InsufficientScope(challenge)) => {
                challenge.www_authenticate_header.clone()
            }
            Err(StreamableHttpError::AuthRequired(challenge)) => {
                challenge.www_authenticate_header.clone()
            }
            _ => return result,
        };
        if !self.step_up(&challenge).await {
            return result;
        }
        let retried = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        if retried.is_ok() {
            // The new authorization worked: the limit is on authorizations in a row that do
            // not, so a long session can authorize again each time its tokens run out.
            self.state.step_ups.store(0, Ordering::SeqCst);
        }
        retried
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<reqwest::Error>>> + Send + '_ {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<reqwest::Error>,
        >,
    > + Send
    + '_ {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<reqwest::Error>,
        >,
    > + Send
    + '_ {
        self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

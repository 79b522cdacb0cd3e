//! [`Connector`]: how a connection is made, for every transport, and the settings it
//! carries (name, timeouts, environment, handlers, OAuth).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::transport::IntoTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use tokio::process::Command;

use super::elicitation::{ElicitationComplete, ElicitationRequest, ElicitationResponse};
use super::handshake::{Handshake, HandshakeError, HttpTarget, establish, is_unreachable};
#[cfg(feature = "oauth")]
use super::oauth::{self, OAuth};
use super::sampling::{SamplingRequest, SamplingResponse};
use super::stdio::ServerProcess;
use super::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RESTARTS, HttpOptions, McpConnection, McpError,
    elicitation, http, input, lines, restart, sampling, sse, stdio, trace,
};

/// Connection settings: the server's name and the connect timeout for every transport, and
/// for stdio servers whether they inherit the whole environment.
///
/// ```no_run
/// # async fn demo() -> Result<(), aquaregia_mcp::McpError> {
/// use std::time::Duration;
/// use aquaregia_mcp::{Connector, HttpOptions};
///
/// let github = Connector::new()
///     .name("github")
///     .timeout(Duration::from_secs(10))
///     .http("https://mcp.example.com/mcp", HttpOptions::new().bearer_token("..."))
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct Connector {
    name: Option<String>,
    pub(crate) timeout: Duration,
    inherit_env: bool,
    max_restarts: u32,
    pub(super) handlers: input::Handlers,
    on_process: Option<stdio::ProcessHook>,
    #[cfg(feature = "oauth")]
    oauth: Option<OAuth>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Connector");
        f.field("name", &self.name)
            .field("timeout", &self.timeout)
            .field("inherit_env", &self.inherit_env)
            .field("max_restarts", &self.max_restarts)
            .field(
                "elicitation",
                &self.handlers.elicitation.as_ref().map(|_| "<handler>"),
            )
            .field(
                "sampling",
                &self.handlers.sampling.as_ref().map(|_| "<handler>"),
            )
            .field("on_process", &self.on_process.as_ref().map(|_| "<hook>"));
        #[cfg(feature = "oauth")]
        f.field("oauth", &self.oauth);
        f.finish()
    }
}

impl Default for Connector {
    fn default() -> Self {
        Self::new()
    }
}

impl Connector {
    /// No name (one is derived from the command or URL), a 30 s connect timeout, and stdio
    /// servers limited to [`DEFAULT_INHERITED_ENV_VARS`](super::DEFAULT_INHERITED_ENV_VARS)
    /// of this process's environment.
    pub fn new() -> Self {
        Self {
            name: None,
            timeout: DEFAULT_CONNECT_TIMEOUT,
            inherit_env: false,
            max_restarts: DEFAULT_MAX_RESTARTS,
            handlers: input::Handlers::default(),
            on_process: None,
            #[cfg(feature = "oauth")]
            oauth: None,
        }
    }

    /// The server's name in logs and errors.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How long the server gets to start and finish the handshake.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether a stdio server inherits this process's whole environment (`true`), or only
    /// [`DEFAULT_INHERITED_ENV_VARS`](super::DEFAULT_INHERITED_ENV_VARS) (`false`, the
    /// default). Variables set on the server's `Command` are passed either way.
    ///
    /// The whole environment usually holds API keys and tokens (`OPENAI_API_KEY`,
    /// `GITHUB_TOKEN`...) that a third-party server has no business reading: prefer giving a
    /// server the variables it needs.
    pub fn inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    /// How many times a stdio server that died is started again (default
    /// [`DEFAULT_MAX_RESTARTS`]; 0: never). The restart happens on the next tool call, which
    /// then runs on the new session (a call in flight when the server died fails: it may have
    /// had effects). Each restart is logged, and tried three times with backoff.
    pub fn max_restarts(mut self, restarts: u32) -> Self {
        self.max_restarts = restarts;
        self
    }

    /// Answers the server's questions to the user (MCP elicitation, form and URL modes); the
    /// client then advertises the `elicitation` capability. Without it, questions are
    /// declined.
    ///
    /// ```
    /// use aquaregia_mcp::{Connector, ElicitationRequest, ElicitationResponse};
    /// let connector = Connector::new().on_elicitation(|request| async move {
    ///     match request {
    ///         ElicitationRequest::Form { .. } => {
    ///             ElicitationResponse::Accept(Some(serde_json::json!({"name": "Ann"})))
    ///         }
    ///         _ => ElicitationResponse::Decline,
    ///     }
    /// });
    /// ```
    pub fn on_elicitation<F, Fut>(mut self, answer: F) -> Self
    where
        F: Fn(ElicitationRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ElicitationResponse> + Send + 'static,
    {
        self.handlers.elicitation = Some(elicitation::handler(answer));
        self
    }

    /// Told when the server says a URL-mode question it asked is done
    /// (`notifications/elicitation/complete`), so a client still showing it can stop.
    pub fn on_elicitation_complete<F>(mut self, hook: F) -> Self
    where
        F: Fn(ElicitationComplete) + Send + Sync + 'static,
    {
        self.handlers.elicitation_complete = Some(Arc::new(hook));
        self
    }

    /// Answers the server's requests to sample the model (MCP sampling,
    /// `sampling/createMessage`); the client then advertises the `sampling` capability.
    /// Without it, such requests are refused. [`sample_with_model`](super::sample_with_model)
    /// answers with an aquaregia [`Client`](aquaregia::Client) and model behind an approval
    /// callback.
    pub fn on_sampling<F, Fut>(mut self, answer: F) -> Self
    where
        F: Fn(SamplingRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = SamplingResponse> + Send + 'static,
    {
        self.handlers.sampling = Some(sampling::handler(answer));
        self
    }

    /// Tells `hook` when each stdio server process starts (with its process id, on Unix also
    /// its process group's) and when it has ended, restarts included: what a supervisor that
    /// must clean up after this process (if it is killed before it can) needs to know. Called
    /// synchronously, so it should be quick.
    ///
    /// ```
    /// use aquaregia_mcp::{Connector, ServerProcess};
    /// let connector = Connector::new().on_process(|event| match event {
    ///     ServerProcess::Started { pid } => eprintln!("server {pid} started"),
    ///     ServerProcess::Ended { pid } => eprintln!("server {pid} is gone"),
    ///     _ => {}
    /// });
    /// ```
    pub fn on_process<F>(mut self, hook: F) -> Self
    where
        F: Fn(ServerProcess) + Send + Sync + 'static,
    {
        self.on_process = Some(Arc::new(hook));
        self
    }

    /// OAuth 2.1 for the HTTP and SSE servers connected with this connector (feature
    /// `oauth`), used when a server asks for authorization and its [`HttpOptions`] carry no
    /// credentials (a bearer token or an `Authorization` header). The one place OAuth is
    /// set: an [`McpToolset`](crate::McpToolset) uses its
    /// [`connector`](crate::McpToolsetBuilder::connector)'s.
    #[cfg(feature = "oauth")]
    pub fn oauth(mut self, oauth: OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Whether connecting may wait for the user (an OAuth authorization callback is set).
    pub(crate) fn authorizes_interactively(&self) -> bool {
        #[cfg(feature = "oauth")]
        if let Some(oauth) = &self.oauth {
            return oauth.authorize.is_some();
        }
        false
    }

    /// Starts and connects a stdio server.
    ///
    /// Unless [`inherit_env`](Self::inherit_env) is set, what `command` would inherit is
    /// limited to [`DEFAULT_INHERITED_ENV_VARS`](super::DEFAULT_INHERITED_ENV_VARS).
    /// Variables set on `command` (with [`Command::env`]) are kept, since whoever set them
    /// meant the server to have them, and variables removed from it stay removed. A `command`
    /// whose environment was cleared with [`Command::env_clear`] still receives the
    /// allowlisted variables: remove them with [`Command::env_remove`] if they must not be
    /// there.
    pub async fn stdio(self, mut command: Command) -> Result<McpConnection, McpError> {
        let name = self.name.clone().unwrap_or_else(|| {
            let program = command
                .as_std()
                .get_program()
                .to_string_lossy()
                .into_owned();
            std::path::Path::new(&program)
                .file_name()
                .map_or(program.clone(), |file| file.to_string_lossy().into_owned())
        });
        let mut retry = rebuild(command.as_std());
        if !self.inherit_env {
            stdio::restrict_env(&mut command);
            stdio::restrict_env(&mut retry);
        }
        let restart = (self.max_restarts > 0)
            .then(|| restart::Restart::stdio(&self, &command, &name, self.max_restarts));
        let (process, stdout, stdin) = stdio::spawn(command, &name, self.on_process.as_ref())?;
        let first = establish(
            lines::StdioTransport::new(stdout, stdin),
            name.clone(),
            self.timeout,
            Some(process),
            Handshake::Auto,
            None,
            self.handlers.clone(),
        )
        .await;
        let connection = match first {
            Ok(connection) => Ok(connection),
            Err(failed) if failed.discover_confused => {
                // The server misunderstood `server/discover`; start it again for `initialize`.
                tracing::debug!(server = %name, error = %failed.error, "retrying with initialize");
                let (process, stdout, stdin) =
                    stdio::spawn(retry, &name, self.on_process.as_ref())?;
                establish(
                    lines::StdioTransport::new(stdout, stdin),
                    name,
                    self.timeout,
                    Some(process),
                    Handshake::Initialize,
                    None,
                    self.handlers.clone(),
                )
                .await
                .map_err(|failed| failed.error)
            }
            Err(failed) => Err(failed.error),
        }?;
        if let Some(restart) = restart {
            connection.shared().set_restart(restart);
        }
        Ok(connection)
    }

    /// Connects to a Streamable HTTP server, falling back to legacy HTTP+SSE.
    pub async fn http(
        self,
        url: impl Into<String>,
        options: HttpOptions,
    ) -> Result<McpConnection, McpError> {
        let url = url.into();
        let name = self.name.clone().unwrap_or_else(|| name_from_url(&url));
        let error = match self.streamable_http(&url, &name, &options).await {
            Ok(connection) => return Ok(connection),
            Err(error) => error,
        };
        // Nothing listens there, or authorization is wanted (which does not depend on the
        // transport): the legacy one would not do better.
        if is_unreachable(&error)
            || matches!(
                error,
                McpError::AuthRequired { .. }
                    | McpError::Authorization { .. }
                    | McpError::Http {
                        status: 401 | 403,
                        ..
                    }
            )
        {
            return Err(error);
        }
        tracing::debug!(server = %name, %error, "Streamable HTTP failed; trying legacy HTTP+SSE");
        match self.sse(url, options).await {
            Ok(connection) => Ok(connection),
            Err(McpError::Connect {
                message: sse,
                source: sse_source,
                ..
            }) => {
                let (message, source) = match error {
                    McpError::Connect {
                        message, source, ..
                    } => (message, source.or(sse_source)),
                    other => (other.to_string(), sse_source),
                };
                Err(McpError::Connect {
                    server: name,
                    message: format!("{message} (legacy HTTP+SSE fallback: {sse})"),
                    source,
                })
            }
            Err(other) => Err(other),
        }
    }

    /// Connects over Streamable HTTP only, authorizing with OAuth when the options have it
    /// and the server asks.
    async fn streamable_http(
        &self,
        url: &str,
        name: &str,
        options: &HttpOptions,
    ) -> Result<McpConnection, McpError> {
        #[cfg(feature = "oauth")]
        if let Some(oauth) = self.oauth.as_ref().filter(|_| !options.has_credentials()) {
            let session = oauth::Session {
                url,
                name,
                options,
                timeout: self.timeout,
                handlers: &self.handlers,
            };
            return oauth::connect_with_oauth(&session, oauth).await;
        }
        let session_id = trace::SessionIdSlot::default();
        let client = http::RepairingClient::new(options.client(), session_id.clone());
        let reconnects = client.reconnects();
        let session = streamable_http(
            client,
            session_id,
            url,
            name,
            options,
            self.timeout,
            &self.handlers,
        );
        match session.await {
            Ok(connection) => {
                connection.shared().set_reconnects(reconnects);
                Ok(connection)
            }
            Err(failed) => Err(failed.error),
        }
    }

    /// Connects to a legacy HTTP+SSE server (authorizing with OAuth when the options or the
    /// connector have it and the server asks).
    pub async fn sse(
        self,
        url: impl Into<String>,
        options: HttpOptions,
    ) -> Result<McpConnection, McpError> {
        let url = url.into();
        let name = self.name.clone().unwrap_or_else(|| name_from_url(&url));
        let session = sse::SseSession {
            url: &url,
            name: &name,
            options: &options,
            timeout: self.timeout,
            handlers: &self.handlers,
        };
        #[cfg(feature = "oauth")]
        if let Some(oauth) = self.oauth.as_ref().filter(|_| !options.has_credentials()) {
            return oauth::connect_sse_with_oauth(&session, oauth).await;
        }
        session.connect(None).await
    }

    /// Connects over any rmcp transport.
    pub async fn transport<T, E, A>(self, transport: T) -> Result<McpConnection, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let name = self.name.unwrap_or_else(|| "mcp".to_owned());
        establish(
            transport,
            name,
            self.timeout,
            None,
            Handshake::Auto,
            None,
            self.handlers,
        )
        .await
        .map_err(|failed| failed.error)
    }
}

/// Connects over Streamable HTTP with `client`: the `server/discover` handshake, then
/// `initialize` on a fresh transport when the server misunderstood it.
pub(crate) async fn streamable_http<C>(
    client: C,
    session_id: trace::SessionIdSlot,
    url: &str,
    name: &str,
    options: &HttpOptions,
    timeout: Duration,
    handlers: &input::Handlers,
) -> Result<McpConnection, HandshakeError>
where
    C: StreamableHttpClient + Clone + Send + Sync + 'static,
{
    let headers = options.header_map().map_err(|error| HandshakeError {
        error,
        discover_confused: false,
        challenge: None,
    })?;
    let target = HttpTarget {
        url: url.to_owned(),
        credentials: options.has_credentials(),
        session: Some(session_id),
    };
    let attempt = |handshake| {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .max_json_response_size(options.max_response_bytes)
            .max_sse_event_size(options.max_response_bytes)
            .reinit_on_expired_session(true)
            .custom_headers(
                headers
                    .clone()
                    .into_iter()
                    .filter_map(|(name, value)| Some((name?, value)))
                    .collect(),
            );
        let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
        establish(
            transport,
            name.to_owned(),
            timeout,
            None,
            handshake,
            Some(target.clone()),
            handlers.clone(),
        )
    };
    match attempt(Handshake::Auto).await {
        Err(failed) if failed.discover_confused => attempt(Handshake::Initialize).await,
        result => result,
    }
}

/// A copy of `command` (program, arguments, environment, directory) to start it again.
pub(super) fn rebuild(command: &std::process::Command) -> Command {
    let mut copy = std::process::Command::new(command.get_program());
    copy.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => copy.env(key, value),
            None => copy.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        copy.current_dir(dir);
    }
    Command::from(copy)
}

/// `host:port/path` of a URL, for naming a server.
fn name_from_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or("server");
            match parsed.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            }
        }
        Err(_) => url.to_owned(),
    }
}

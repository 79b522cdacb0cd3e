//! [`Connector`]: how a connection is made, for every transport, and the settings it
//! carries (name, timeouts, environment, handlers, OAuth).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::RoleClient;
use rmcp::transport::IntoTransport;
use tokio::process::Command;

use crate::error::McpError;
#[cfg(feature = "oauth")]
use crate::oauth::{self, OAuth};
use crate::server_requests::Handlers;
use crate::server_requests::elicitation::{
    self, ElicitationComplete, ElicitationRequest, ElicitationResponse,
};
use crate::server_requests::sampling::{self, SamplingRequest, SamplingResponse};
use crate::session::connection::McpConnection;
use crate::session::handshake::{Handshake, establish, is_unreachable};
use crate::session::http::{SseSession, streamable_http};
use crate::session::restart::{Restart, Start};
use crate::transport::compat::http_post::RepairingClient;
use crate::transport::compat::lines::StdioTransport;
use crate::transport::http::SessionIdSlot;
use crate::transport::http_options::HttpOptions;
use crate::transport::process::{self, ProcessHook, ServerProcess};
use aquaregia::sync::lock;

/// How many times a stdio server that died is started again, by default.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;

/// How long a server gets to finish the handshake by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

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
    handlers: Handlers,
    on_process: Option<ProcessHook>,
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
    /// servers limited to [`DEFAULT_INHERITED_ENV_VARS`](crate::DEFAULT_INHERITED_ENV_VARS)
    /// of this process's environment.
    pub fn new() -> Self {
        Self {
            name: None,
            timeout: DEFAULT_CONNECT_TIMEOUT,
            inherit_env: false,
            max_restarts: DEFAULT_MAX_RESTARTS,
            handlers: Handlers::default(),
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
    /// [`DEFAULT_INHERITED_ENV_VARS`](crate::DEFAULT_INHERITED_ENV_VARS) (`false`, the
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
    /// Without it, such requests are refused. [`sample_with_model`](crate::sample_with_model)
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
    /// limited to [`DEFAULT_INHERITED_ENV_VARS`](crate::DEFAULT_INHERITED_ENV_VARS).
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
            process::restrict_env(&mut command);
            process::restrict_env(&mut retry);
        }
        let restart = (self.max_restarts > 0).then(|| self.restart(&command, &name));
        let requests = self.handlers.requests();
        let (process, stdout, stdin) = process::spawn(command, &name, self.on_process.as_ref())?;
        let first = establish(
            StdioTransport::new(stdout, stdin),
            name.clone(),
            self.timeout,
            Some(process),
            Handshake::Auto,
            None,
            requests.clone(),
        )
        .await;
        let connection = match first {
            Ok(connection) => Ok(connection),
            Err(failed) if failed.discover_confused => {
                // The server misunderstood `server/discover`; start it again for `initialize`.
                tracing::debug!(server = %name, error = %failed.error, "retrying with initialize");
                let (process, stdout, stdin) =
                    process::spawn(retry, &name, self.on_process.as_ref())?;
                establish(
                    StdioTransport::new(stdout, stdin),
                    name,
                    self.timeout,
                    Some(process),
                    Handshake::Initialize,
                    None,
                    requests,
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
        let error = match self.connect_streamable_http(&url, &name, &options).await {
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

    /// Connects over Streamable HTTP only, authorizing with OAuth when the connector has it,
    /// the options carry no credentials and the server asks.
    async fn connect_streamable_http(
        &self,
        url: &str,
        name: &str,
        options: &HttpOptions,
    ) -> Result<McpConnection, McpError> {
        #[cfg(feature = "oauth")]
        if let Some(oauth) = self.oauth.as_ref().filter(|_| !options.has_credentials()) {
            let requests = self.handlers.requests();
            let session = oauth::Session {
                url,
                name,
                options,
                timeout: self.timeout,
                requests: &requests,
            };
            return oauth::connect_with_oauth(&session, oauth).await;
        }
        let session_id = SessionIdSlot::default();
        let client = RepairingClient::new(options.client(), session_id.clone());
        let reconnects = client.reconnects();
        let requests = self.handlers.requests();
        let session = streamable_http(
            client,
            session_id,
            url,
            name,
            options,
            self.timeout,
            &requests,
        );
        match session.await {
            Ok(connection) => {
                connection.shared().set_reconnects(reconnects);
                Ok(connection)
            }
            Err(failed) => Err(failed.error),
        }
    }

    /// Connects to a legacy HTTP+SSE server (authorizing with OAuth when the connector has it,
    /// the options carry no credentials and the server asks).
    pub async fn sse(
        self,
        url: impl Into<String>,
        options: HttpOptions,
    ) -> Result<McpConnection, McpError> {
        let url = url.into();
        let name = self.name.clone().unwrap_or_else(|| name_from_url(&url));
        let requests = self.handlers.requests();
        let session = SseSession {
            url: &url,
            name: &name,
            options: &options,
            timeout: self.timeout,
            requests: &requests,
        };
        #[cfg(feature = "oauth")]
        if let Some(oauth) = self.oauth.as_ref().filter(|_| !options.has_credentials()) {
            return oauth::connect_sse_with_oauth(&session, oauth).await;
        }
        session.connect(None).await
    }

    /// Connects over any rmcp transport (see [`connect`](crate::connect)). The transport
    /// traits are rmcp's, through the [`rmcp`](crate::rmcp) re-export: the one place, with
    /// [`McpConnection::peer`], where this crate's API follows rmcp's versions.
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
            self.handlers.requests(),
        )
        .await
        .map_err(|failed| failed.error)
    }
}

impl Connector {
    /// How a stdio server started from `command` is started again when it dies: with this
    /// connector's settings, under `name`, without restarts of its own, at most
    /// [`max_restarts`](Self::max_restarts) times.
    fn restart(&self, command: &Command, name: &str) -> Restart<McpConnection> {
        let template = std::sync::Mutex::new(rebuild(command.as_std()));
        let connector = self.clone().max_restarts(0).name(name);
        let start: Start<McpConnection> = Arc::new(move || -> BoxFuture<'static, _> {
            let command = {
                let template = lock(&template);
                rebuild(template.as_std())
            };
            let connector = connector.clone();
            Box::pin(async move { connector.stdio(command).await })
        });
        Restart::new(start, name, self.max_restarts)
    }
}

/// A copy of `command` (program, arguments, environment, directory) to start it again.
fn rebuild(command: &std::process::Command) -> Command {
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

//! `aquaregia serve`: the agent `aquaregia acp` runs, served to remote ACP clients over
//! WebSocket.
//!
//! One endpoint, `/acp`, upgraded to a WebSocket (the shape of the ACP remote-transport
//! proposal): one ACP connection per socket, one JSON-RPC message per text frame, as on stdio.
//! Every connection is served by the same agent settings and session store (a shared
//! PostgreSQL store lets several replicas serve one set of sessions), each with its own
//! sessions, which are closed (turn cancelled, servers stopped) when its socket closes.
//!
//! The upgrade needs `Authorization: Bearer <token>`, the token from `--token-file` or
//! `$AQUAREGIA_SERVE_TOKEN`; without one configured the server does not start. A remote
//! client may not make this machine run commands unless the operator allows it: stdio MCP
//! servers need `--allow-stdio-servers`, local file tools and `run_command` (for clients that
//! cannot serve them) `--allow-local-tools`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use aquaregia_acp::AcpServer;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use clap::Args;
use futures::{SinkExt, StreamExt};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::acp::{self, AgentArgs, ModelSetup};
use crate::signals::StopSignals;

/// The variable the bearer token is read from when no `--token-file` is given.
pub(crate) const TOKEN_VAR: &str = "AQUAREGIA_SERVE_TOKEN";

/// The largest message (and frame) read: the bound of a stdio line.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// A connection's WebSocket read buffer, and the most one read of the socket takes.
/// tungstenite's default, 128 KiB, is allocated and zeroed at each connection's first read:
/// 128 MiB for 1,000 idle clients. ACP messages are mostly far smaller, and a larger one is
/// still read whole (the buffer grows to its size).
const READ_BUFFER_BYTES: usize = 8 << 10;

/// What a binary frame becomes: a message the agent cannot parse, answered with a parse error
/// (ACP messages are text frames).
const BINARY_FRAME: &str = "<a binary WebSocket frame: ACP messages are text frames>";

/// How long stopping waits for the connections to close their sessions.
const CLOSE_BOUND: Duration = Duration::from_secs(10);

/// How long a close frame may take to send.
const CLOSE_SEND_BOUND: Duration = Duration::from_secs(1);

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) agent: AgentArgs,

    /// Listen on this address (port 0: a free port; the address is printed on stderr).
    /// Anything but loopback exposes the agent to the network: put a TLS proxy in front.
    #[arg(long, value_name = "ADDRESS:PORT", default_value = "127.0.0.1:8765")]
    pub(crate) listen: SocketAddr,

    /// Read the bearer token clients must send from this file (surrounding whitespace
    /// ignored); without it, from $AQUAREGIA_SERVE_TOKEN. With neither, `serve` refuses to
    /// start.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,

    /// Start the stdio MCP servers clients name in their sessions. Each is a command line the
    /// client has this machine run: allow it only for clients you would give a shell.
    #[arg(long)]
    pub(crate) allow_stdio_servers: bool,

    /// Run the built-in file tools and `run_command` on this machine for clients that cannot
    /// serve them (no `fs` or `terminal` capability), confined to the session's directory as
    /// for `acp`. Off: those tools exist only where the client serves them.
    #[arg(long)]
    pub(crate) allow_local_tools: bool,

    /// Ping each client this often; one that has sent nothing since the previous ping is
    /// disconnected.
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) ping_interval: u64,
}

/// The bearer token, kept as its SHA-256 so that comparing takes the same time whatever the
/// length or content of what a client sends.
struct Token([u8; 32]);

impl Token {
    fn new(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }

    /// Whether `headers` carry `Authorization: Bearer <this token>`.
    fn admits(&self, headers: &HeaderMap) -> bool {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let Some(presented) = presented else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.0).into()
    }
}

/// The token from `file`, else from [`TOKEN_VAR`]; an error when neither gives one.
fn token(file: Option<&Path>) -> anyhow::Result<Token> {
    let token = match file {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the token file {}", file.display()))?,
        None => std::env::var(TOKEN_VAR).unwrap_or_default(),
    };
    let token = token.trim();
    if token.is_empty() {
        anyhow::bail!(match file {
            Some(file) => format!("the token file {} is empty", file.display()),
            None => format!(
                "no bearer token: set {TOKEN_VAR} or give --token-file (clients must send it \
                 as `Authorization: Bearer <token>`); `serve` does not run without one"
            ),
        });
    }
    Ok(Token::new(token))
}

/// What every upgrade request shares.
struct Endpoint {
    server: AcpServer,
    token: Token,
    ping_interval: Duration,
    /// Cancelled when the server stops: every connection ends.
    stopping: CancellationToken,
    connections: TaskTracker,
    next_id: AtomicU64,
}

pub(crate) async fn run(args: ServeArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let token = token(args.token_file.as_deref())?;
    let setup = ModelSetup::new(args.agent.model.clone())?;
    // Remote clients do not hand this machine API keys: the key is the operator's.
    if let Some(var) = setup.missing_key() {
        anyhow::bail!(
            "the model `{}` needs {var}: set it, or store it with `aquaregia acp --login`",
            setup.spec()
        );
    }
    let server = acp::agent_server(args.agent, config, setup)
        .await?
        .allow_stdio_servers(args.allow_stdio_servers)
        .local_tools(args.allow_local_tools);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr().context("the listening address")?;
    // Nagle off: the updates of a turn and its answer are small writes one after another, and
    // each would wait for the client's ACK of the one before (up to its 40 ms delayed ACK).
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot turn Nagle's algorithm off");
        }
    });
    if !address.ip().is_loopback() {
        eprintln!(
            "warning: listening on {address}, beyond this machine, without TLS: the token and \
             every message cross the network in clear. Serve clients through a TLS-terminating \
             proxy (wss://), or listen on 127.0.0.1."
        );
    }
    eprintln!("aquaregia serve: ACP over WebSocket at ws://{address}/acp");
    let endpoint = Arc::new(Endpoint {
        server,
        token,
        ping_interval: Duration::from_secs(args.ping_interval),
        stopping: CancellationToken::new(),
        connections: TaskTracker::new(),
        next_id: AtomicU64::new(1),
    });
    let app = axum::Router::new()
        .route("/acp", axum::routing::get(upgrade))
        .with_state(endpoint.clone());
    let stopping = endpoint.stopping.clone();
    let mut signals = StopSignals::new();
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        signals.recv().await;
        tracing::info!("stopping: closing every connection");
        stopping.cancel();
    })
    .await;
    endpoint.stopping.cancel();
    endpoint.connections.close();
    if tokio::time::timeout(CLOSE_BOUND, endpoint.connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("some connections did not close in time");
    }
    served.context("serving")
}

/// `GET /acp`: the token is checked before anything else, then the connection upgraded.
async fn upgrade(
    State(endpoint): State<Arc<Endpoint>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    if !endpoint.token.admits(&headers) {
        tracing::warn!(%peer, "refused a connection without the right bearer token");
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required (Authorization: Bearer <token>)\n",
        )
            .into_response();
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    if endpoint.stopping.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the server is stopping\n").into_response();
    }
    let id = format!("conn-{}", endpoint.next_id.fetch_add(1, Ordering::Relaxed));
    let span = tracing::info_span!("connection", id = %id, %peer);
    let connections = endpoint.connections.clone();
    let connection = move |socket| {
        let serving = serve_socket(socket, endpoint);
        connections.track_future(tracing::Instrument::instrument(serving, span))
    };
    let mut response = upgrade
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_frame_size(MAX_MESSAGE_BYTES)
        .on_failed_upgrade(|error| tracing::warn!(%error, "a WebSocket upgrade failed"))
        .on_upgrade(connection);
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("acp-connection-id", value);
    }
    response
}

/// Serves one ACP connection on `socket` until either side ends it.
async fn serve_socket(socket: WebSocket, endpoint: Arc<Endpoint>) {
    tracing::info!("connected");
    let (to_agent, incoming) = tokio::sync::mpsc::channel::<std::io::Result<String>>(16);
    let (outgoing, from_agent) = tokio::sync::mpsc::channel::<String>(64);
    let outgoing = futures::sink::unfold(outgoing, async |sender, message: String| {
        sender.send(message).await.map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the WebSocket is closed")
        })?;
        Ok::<_, std::io::Error>(sender)
    });
    let incoming = futures::stream::unfold(incoming, async |mut receiver| {
        receiver.recv().await.map(|message| (message, receiver))
    });
    let serving = endpoint.server.clone().serve_messages(
        outgoing,
        incoming,
        endpoint.stopping.clone().cancelled_owned(),
    );
    let (served, ()) = tokio::join!(
        serving,
        pump(socket, to_agent, from_agent, endpoint.ping_interval)
    );
    match served {
        Ok(()) => tracing::info!("disconnected"),
        Err(error) => tracing::warn!(%error, "disconnected"),
    }
}

/// Moves messages between the socket and the agent, and pings the client, until the client
/// closes the socket, stops answering, or the agent is done.
async fn pump(
    socket: WebSocket,
    to_agent: tokio::sync::mpsc::Sender<std::io::Result<String>>,
    mut from_agent: tokio::sync::mpsc::Receiver<String>,
    ping_interval: Duration,
) {
    let (mut sender, mut receiver) = socket.split();
    let mut pings = tokio::time::interval(ping_interval);
    pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate.
    pings.tick().await;
    let mut heard = true;
    let close = loop {
        tokio::select! {
            frame = receiver.next() => {
                heard = true;
                let message = match frame {
                    Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
                    Some(Ok(Message::Binary(_))) => {
                        tracing::warn!("a binary frame was answered with a parse error");
                        BINARY_FRAME.to_owned()
                    }
                    // Pings are answered by the WebSocket layer.
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | None => break None,
                    Some(Err(error)) => {
                        tracing::warn!(%error, "the WebSocket failed");
                        break Some((close_code::PROTOCOL, "unreadable message"));
                    }
                };
                if to_agent.send(Ok(message)).await.is_err() {
                    break Some((close_code::NORMAL, "the agent is done"));
                }
            }
            message = from_agent.recv() => {
                let Some(message) = message else {
                    break Some((close_code::AWAY, "the agent is done"));
                };
                if let Err(error) = sender.send(Message::Text(message.into())).await {
                    tracing::debug!(%error, "the WebSocket is closed");
                    break None;
                }
            }
            _ = pings.tick() => {
                if !heard {
                    tracing::warn!("the client did not answer a ping: disconnecting it");
                    break Some((close_code::POLICY, "no answer to ping"));
                }
                heard = false;
                if sender.send(Message::Ping(Default::default())).await.is_err() {
                    break None;
                }
            }
        }
    };
    // The agent sees the end of input, and closes the connection's sessions.
    drop(to_agent);
    if let Some((code, reason)) = close {
        let frame = Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }));
        let _ = tokio::time::timeout(CLOSE_SEND_BOUND, sender.send(frame)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(authorization).unwrap(),
        );
        headers
    }

    #[test]
    fn only_the_bearer_token_is_admitted() {
        let token = Token::new("s3cret-token");
        assert!(token.admits(&headers("Bearer s3cret-token")));
        assert!(token.admits(&headers("bearer s3cret-token")));
        assert!(!token.admits(&headers("Bearer s3cret-toke")));
        assert!(!token.admits(&headers("Bearer s3cret-token2")));
        assert!(!token.admits(&headers("Basic s3cret-token")));
        assert!(!token.admits(&headers("s3cret-token")));
        assert!(!token.admits(&HeaderMap::new()));
    }
}

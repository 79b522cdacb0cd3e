//! OAuth for HTTP servers: the token store in the data directory, the loopback listener that
//! catches the authorization redirect, and opening (or, headless, fetching) the URL.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, anyhow};
use aquaregia_mcp::{AuthorizationPrompt, AuthorizeError, FileTokenStore, McpOAuthClient, OAuth};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Set to `1` to have the CLI request the authorization URL itself and follow its redirects
/// instead of opening a browser: for authorization servers that approve without a user
/// (tests, headless machines with a pre-approved client).
pub(crate) const AUTOMATIC_ENV: &str = "AQUAREGIA_OAUTH_AUTOMATIC";

/// How long the user gets to finish authorizing in the browser.
const AUTHORIZE_TIMEOUT: Duration = Duration::from_secs(300);
const CALLBACK_PATH: &str = "/callback";

/// The token store in the data directory (`AQUAREGIA_DATA_DIR` overrides it).
pub(crate) fn store() -> anyhow::Result<FileTokenStore> {
    FileTokenStore::in_data_dir().map_err(|error| anyhow!("{error}"))
}

fn automatic() -> bool {
    std::env::var(AUTOMATIC_ENV).is_ok_and(|value| value == "1")
}

/// Whether an authorization can be completed here: a terminal to talk to, or the automatic
/// mode.
pub(crate) fn can_authorize() -> bool {
    automatic() || (std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
}

/// The OAuth settings for `mcp tools|call` and `run`: stored tokens, and an authorization
/// through a loopback listener only when [`can_authorize`].
pub(crate) async fn settings() -> anyhow::Result<OAuth> {
    let store = store()?;
    if !can_authorize() {
        return Ok(OAuth::new("http://127.0.0.1/callback").store(store));
    }
    Ok(Loopback::bind().await?.oauth().store(store))
}

/// `shared` ([`settings`]) for a server whose config names its OAuth client: with its id,
/// secret and scopes, and its redirect port if it registered one (the shared listener
/// otherwise).
pub(crate) fn for_client(shared: &OAuth, client: &McpOAuthClient) -> OAuth {
    let oauth = match client.callback_port {
        Some(port) if can_authorize() => on_port(port).shared_store(shared.token_store().clone()),
        _ => shared.clone(),
    };
    client.apply(oauth)
}

/// OAuth that authorizes through the browser (or, automatic, by itself), catching the
/// redirect on 127.0.0.1: on the port `client` registered its redirect URI with, else on one
/// the system picks.
pub(crate) async fn authorizing(client: Option<&McpOAuthClient>) -> anyhow::Result<OAuth> {
    let oauth = match client.and_then(|client| client.callback_port) {
        Some(port) => on_port(port),
        None => Loopback::bind().await?.oauth(),
    };
    Ok(match client {
        Some(client) => client.apply(oauth),
        None => oauth,
    })
}

/// OAuth whose redirect URI is on `port`, which is listened on only while an authorization
/// waits for its redirect (a busy port does not stop a server whose token is stored).
fn on_port(port: u16) -> OAuth {
    OAuth::new(format!("http://127.0.0.1:{port}{CALLBACK_PATH}")).on_authorize(
        move |prompt| async move {
            let listener = TcpListener::bind(("127.0.0.1", port))
                .await
                .map_err(|error| {
                    format!("cannot listen on 127.0.0.1:{port} for the OAuth redirect: {error}")
                })?;
            authorize(prompt, &listener).await
        },
    )
}

/// A listener on 127.0.0.1 for the authorization redirect. Dropping it closes the port.
#[derive(Debug)]
pub(crate) struct Loopback {
    redirect_uri: String,
    listener: std::sync::Arc<TcpListener>,
}

impl Loopback {
    pub(crate) async fn bind() -> anyhow::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("cannot listen on 127.0.0.1 for the OAuth redirect")?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
            listener: std::sync::Arc::new(listener),
        })
    }

    /// OAuth with this redirect URI, sending the user to the URL and waiting for the redirect.
    pub(crate) fn oauth(&self) -> OAuth {
        let listener = self.listener.clone();
        OAuth::new(self.redirect_uri.clone()).on_authorize(move |prompt| {
            let listener = listener.clone();
            async move { authorize(prompt, &listener).await }
        })
    }
}

async fn authorize(
    prompt: AuthorizationPrompt,
    listener: &TcpListener,
) -> Result<String, AuthorizeError> {
    let redirect = async {
        if automatic() {
            // The redirect lands on the listener, which answers it.
            let (fetched, caught) = tokio::join!(fetch(&prompt.url), catch_redirect(listener));
            fetched?;
            caught
        } else {
            eprintln!(
                "Server `{}` needs authorization. Open this URL in a browser:\n\n  {}\n",
                prompt.server, prompt.url
            );
            open_browser(&prompt.url).await;
            eprintln!(
                "Waiting for the browser to come back to {} ...",
                prompt.redirect_uri
            );
            catch_redirect(listener).await
        }
    };
    match tokio::time::timeout(AUTHORIZE_TIMEOUT, redirect).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "nothing came back to {} within {} s",
            prompt.redirect_uri,
            AUTHORIZE_TIMEOUT.as_secs()
        )
        .into()),
    }
}

/// Requests the authorization URL and follows its redirects, as a browser would.
async fn fetch(url: &str) -> Result<(), AuthorizeError> {
    let response = reqwest::Client::new().get(url).send().await?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(format!("the authorization URL answered HTTP {status}: {body}").into());
    }
    Ok(())
}

/// Waits for the browser's request to the redirect URI and returns its full URL. Other
/// requests (a favicon) are answered 404 and ignored.
async fn catch_redirect(listener: &TcpListener) -> Result<String, AuthorizeError> {
    let port = listener.local_addr()?.port();
    loop {
        let (mut stream, _) = listener.accept().await?;
        let mut request = Vec::new();
        let mut buffer = [0_u8; 2048];
        while !request.windows(4).any(|window| window == b"\r\n\r\n") && request.len() < 16384 {
            let read = stream.read(&mut buffer).await?;
            if read == 0 {
                break;
            }
            request.extend_from_slice(buffer.get(..read).unwrap_or_default());
        }
        let head = String::from_utf8_lossy(&request);
        let target = head
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or_default()
            .to_owned();
        if target.split('?').next() != Some(CALLBACK_PATH) {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let body = "Authorization received: you can close this window.";
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        return Ok(format!("http://127.0.0.1:{port}{target}"));
    }
}

/// Opens `url` in the default browser, if there is one; the URL is printed either way.
async fn open_browser(url: &str) {
    let mut command = if cfg!(target_os = "macos") {
        tokio::process::Command::new("open")
    } else if cfg!(windows) {
        let mut command = tokio::process::Command::new("rundll32");
        command.arg("url.dll,FileProtocolHandler");
        command
    } else {
        tokio::process::Command::new("xdg-open")
    };
    command
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(10), command.status()).await {
        Ok(Ok(status)) if status.success() => {}
        _ => tracing::debug!("no browser could be opened"),
    }
}

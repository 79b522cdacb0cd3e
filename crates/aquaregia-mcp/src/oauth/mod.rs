//! OAuth 2.1 for HTTP MCP servers, Streamable HTTP and legacy HTTP+SSE alike (feature
//! `oauth`), on rmcp's `auth` module.
//!
//! Give [`Connector::oauth`](crate::Connector::oauth) an [`OAuth`] and a server that
//! answers `401` with a `WWW-Authenticate: Bearer` challenge is authorized during the
//! connect:
//! - discovery: the challenge's `resource_metadata` (RFC 9728), else the path-based and root
//!   `/.well-known/oauth-protected-resource`; then RFC 8414 and OpenID Connect metadata with
//!   the path-insertion variants; the `issuer` is checked; a server of the 2025-03-26
//!   revision (no protected-resource metadata) is authorized at its origin as that revision
//!   says;
//! - the client: a pre-registered id (and secret), else a client ID metadata document when
//!   the server supports them, else dynamic client registration;
//! - authorization code with PKCE S256 and the `resource` parameter, scopes from the
//!   challenge, the redirect's `iss` checked (RFC 9207); or client credentials for
//!   machine-to-machine use, the client authenticating with a secret or with a JWT signed by
//!   its private key (RFC 7523 `private_key_jwt`, [`OAuth::client_credentials_jwt`]); or,
//!   without a browser either, enterprise-managed authorization (SEP-990,
//!   [`OAuth::enterprise`]: the user's ID token from the enterprise identity provider is
//!   exchanged there for an identity assertion grant, which the MCP server's authorization
//!   server takes for an access token) and workload identity ([`OAuth::workload_identity`]:
//!   a JWT the platform issued to the workload, presented as an RFC 7523 grant);
//! - tokens are refreshed shortly before they expire and when the server rejects one; a
//!   `403 insufficient_scope` at connect time authorizes again with the scopes it names.
//!
//! Tokens are kept in a [`TokenStore`] per server URL (with the issuer that minted them);
//! they never appear in errors, logs or `Debug` output.
//!
//! ```no_run
//! # async fn demo() -> Result<(), aquaregia_mcp::McpError> {
//! use aquaregia_mcp::{Connector, FileTokenStore, HttpOptions, OAuth};
//!
//! let oauth = OAuth::new("http://127.0.0.1:8765/callback")
//!     .store(FileTokenStore::new("/var/lib/my-agent"))
//!     .on_authorize(|prompt| async move {
//!         println!("open {}", prompt.url);
//!         // ... wait for the browser to reach the redirect URI, return the URL it was sent to
//!         Ok("http://127.0.0.1:8765/callback?code=...&state=...".to_owned())
//!     });
//! let linear = Connector::new()
//!     .oauth(oauth)
//!     .http("https://mcp.linear.app/mcp", HttpOptions::new())
//!     .await?;
//! # Ok(()) }
//! ```

mod authorize;
mod client_credentials;
mod enterprise;
mod flow;
mod sse;
mod step_up;
mod store;
mod workload;

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

pub use client_credentials::JwtAlgorithm;
pub use enterprise::IdentityProvider;
pub(crate) use flow::{Session, connect_with_oauth};
pub(crate) use sse::connect_sse_with_oauth;
pub use store::{
    FileTokenStore, MemoryTokenStore, OAuthCredentials, OAuthToken, TokenStore, TokenStoreError,
};

/// What the authorization callback is given: where to send the user.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationPrompt {
    /// The server's name (as in errors and logs).
    pub server: String,
    /// The MCP server URL.
    pub server_url: String,
    /// The authorization URL to open in a browser.
    pub url: String,
    /// The redirect URI the authorization server will send the browser to.
    pub redirect_uri: String,
}

/// Why the authorization callback gave no redirect (the user gave up, a listener failed...).
pub type AuthorizeError = Box<dyn std::error::Error + Send + Sync>;

type Authorize = Arc<
    dyn Fn(AuthorizationPrompt) -> BoxFuture<'static, Result<String, AuthorizeError>> + Send + Sync,
>;

/// Where a token the client presents comes from (an ID token, a workload's JWT): asked each
/// time a new access token is needed, so it can hand out a fresh one.
pub(crate) type TokenSource =
    Arc<dyn Fn() -> BoxFuture<'static, Result<String, AuthorizeError>> + Send + Sync>;

fn token_source<F, Fut>(source: F) -> TokenSource
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, AuthorizeError>> + Send + 'static,
{
    Arc::new(move || Box::pin(source()))
}

fn fixed_token(token: String) -> TokenSource {
    token_source(move || std::future::ready(Ok(token.clone())))
}

/// How new tokens are obtained.
#[derive(Clone)]
pub(crate) enum Grant {
    /// The authorization code flow, through the callback.
    AuthorizationCode,
    /// Client credentials, with the client's secret or signing key.
    ClientCredentials,
    /// Enterprise-managed authorization (SEP-990): the ID token the source gives is exchanged
    /// at the identity provider for an ID-JAG, which is exchanged for the access token.
    Enterprise {
        idp: IdentityProvider,
        id_token: TokenSource,
    },
    /// Workload identity: the JWT the source gives is the RFC 7523 grant.
    WorkloadIdentity { assertion: TokenSource },
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AuthorizationCode => f.write_str("AuthorizationCode"),
            Self::ClientCredentials => f.write_str("ClientCredentials"),
            Self::Enterprise { idp, .. } => f
                .debug_struct("Enterprise")
                .field("idp", idp)
                .finish_non_exhaustive(),
            Self::WorkloadIdentity { .. } => f.write_str("WorkloadIdentity { .. }"),
        }
    }
}

/// OAuth settings for one or more HTTP MCP servers.
///
/// `Debug` never shows the client secret:
///
/// ```
/// use aquaregia_mcp::OAuth;
/// let oauth = OAuth::client_credentials("agent-7", "s3cret");
/// assert!(!format!("{oauth:?}").contains("s3cret"));
/// ```
#[derive(Clone)]
#[must_use]
pub struct OAuth {
    pub(crate) redirect_uri: String,
    pub(crate) authorize: Option<Authorize>,
    pub(crate) store: Arc<dyn TokenStore>,
    pub(crate) client_name: String,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<String>,
    pub(crate) client_metadata_url: Option<String>,
    pub(crate) scopes: Vec<String>,
    pub(crate) grant: Grant,
    /// The PEM private key (and its algorithm) that signs client assertions.
    pub(crate) signing_key: Option<(String, JwtAlgorithm)>,
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("redirect_uri", &self.redirect_uri)
            .field("authorize", &self.authorize.as_ref().map(|_| "<callback>"))
            .field("client_name", &self.client_name)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field(
                "signing_key",
                &self
                    .signing_key
                    .as_ref()
                    .map(|(_, algorithm)| (algorithm, "<redacted>")),
            )
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// The authorization-code flow with `redirect_uri` (registered with the authorization
    /// server), tokens in memory, and no callback: stored tokens are used and refreshed, and
    /// a server that needs a new authorization fails the connect with
    /// [`McpError::AuthRequired`](crate::McpError::AuthRequired).
    pub fn new(redirect_uri: impl Into<String>) -> Self {
        Self {
            redirect_uri: redirect_uri.into(),
            authorize: None,
            store: Arc::new(MemoryTokenStore::new()),
            client_name: "aquaregia".to_owned(),
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
            grant: Grant::AuthorizationCode,
            signing_key: None,
        }
    }

    /// Machine-to-machine: the client credentials grant with a pre-registered client.
    pub fn client_credentials(client_id: impl Into<String>, secret: impl Into<String>) -> Self {
        let mut oauth = Self::with_grant(Grant::ClientCredentials);
        oauth.client_id = Some(client_id.into());
        oauth.client_secret = Some(secret.into());
        oauth
    }

    /// Machine-to-machine with a client that authenticates by signing a JWT with its private
    /// key (RFC 7523 `private_key_jwt`): `private_key_pem` is an RSA or EC key in PEM (PKCS#8
    /// or the traditional form) matching `algorithm`. The assertion names the client as `iss`
    /// and `sub`, the authorization server's issuer as `aud`, and expires after five minutes.
    ///
    /// `Debug` never shows the key:
    ///
    /// ```
    /// use aquaregia_mcp::{JwtAlgorithm, OAuth};
    /// let pem = "-----BEGIN PRIVATE KEY-----\nMIGH...\n-----END PRIVATE KEY-----\n";
    /// let oauth = OAuth::client_credentials_jwt("agent-7", pem, JwtAlgorithm::Es256);
    /// assert!(!format!("{oauth:?}").contains("MIGH"));
    /// ```
    pub fn client_credentials_jwt(
        client_id: impl Into<String>,
        private_key_pem: impl Into<String>,
        algorithm: JwtAlgorithm,
    ) -> Self {
        let mut oauth = Self::with_grant(Grant::ClientCredentials);
        oauth.client_id = Some(client_id.into());
        oauth.signing_key = Some((private_key_pem.into(), algorithm));
        oauth
    }

    /// Enterprise-managed authorization (SEP-990, "cross-app access"), no browser involved:
    /// `id_token`, the user's OpenID Connect ID token from the enterprise identity provider
    /// `idp`, is exchanged there (RFC 8693) for an identity assertion grant (ID-JAG) naming
    /// the MCP server's authorization server and the server itself, which that authorization
    /// server exchanges (RFC 7523) for an access token. Set the client registered with the
    /// MCP server's authorization server with [`client_id`](Self::client_id) and
    /// [`client_secret`](Self::client_secret).
    ///
    /// The access token is not refreshed (the grant brings no refresh token): when it expires,
    /// the exchange runs again, with the same ID token. A long-running agent whose ID tokens
    /// expire gives [`enterprise_with`](Self::enterprise_with) a source of fresh ones.
    ///
    /// ```
    /// use aquaregia_mcp::{IdentityProvider, OAuth};
    /// let okta = "https://acme.okta.com";
    /// let idp = IdentityProvider::new(okta, format!("{okta}/oauth2/v1/token"), "agent");
    /// let oauth = OAuth::enterprise(idp, "eyJhbGciOi...")
    ///     .client_id("agent-at-linear")
    ///     .client_secret("s3cret");
    /// assert!(!format!("{oauth:?}").contains("eyJ"));
    /// ```
    pub fn enterprise(idp: IdentityProvider, id_token: impl Into<String>) -> Self {
        Self::with_grant(Grant::Enterprise {
            idp,
            id_token: fixed_token(id_token.into()),
        })
    }

    /// [`enterprise`](Self::enterprise) with the ID token asked of `id_token` each time an
    /// access token is needed (after a login, from a cache the SSO client keeps...).
    pub fn enterprise_with<F, Fut>(idp: IdentityProvider, id_token: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, AuthorizeError>> + Send + 'static,
    {
        Self::with_grant(Grant::Enterprise {
            idp,
            id_token: token_source(id_token),
        })
    }

    /// Workload identity (SEP-1933), machine-to-machine with no stored secret: `assertion` is
    /// a JWT the platform issued to this workload (a Kubernetes service account token, a
    /// cloud's identity token...) for the MCP server's authorization server, presented as an
    /// RFC 7523 JWT-bearer grant by the public client `client_id`. A rejected assertion fails
    /// the connect with the authorization server's error; it is not retried.
    ///
    /// Platform tokens are short-lived: [`workload_identity_with`](Self::workload_identity_with)
    /// reads a fresh one each time.
    pub fn workload_identity(client_id: impl Into<String>, assertion: impl Into<String>) -> Self {
        let mut oauth = Self::with_grant(Grant::WorkloadIdentity {
            assertion: fixed_token(assertion.into()),
        });
        oauth.client_id = Some(client_id.into());
        oauth
    }

    /// [`workload_identity`](Self::workload_identity) with the JWT asked of `assertion` each
    /// time an access token is needed (read again from the file the platform rotates, say).
    pub fn workload_identity_with<F, Fut>(client_id: impl Into<String>, assertion: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, AuthorizeError>> + Send + 'static,
    {
        let mut oauth = Self::with_grant(Grant::WorkloadIdentity {
            assertion: token_source(assertion),
        });
        oauth.client_id = Some(client_id.into());
        oauth
    }

    fn with_grant(grant: Grant) -> Self {
        let mut oauth = Self::new("http://127.0.0.1/unused");
        oauth.grant = grant;
        oauth
    }

    /// Called with the authorization URL when the user has to authorize; returns the URL the
    /// authorization server redirected the browser to (with `code` and `state`).
    pub fn on_authorize<F, Fut>(mut self, authorize: F) -> Self
    where
        F: Fn(AuthorizationPrompt) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, AuthorizeError>> + Send + 'static,
    {
        self.authorize = Some(Arc::new(move |prompt| Box::pin(authorize(prompt))));
        self
    }

    /// Where tokens are kept (default: in memory). [`FileTokenStore::in_data_dir`] keeps
    /// them across runs.
    pub fn store(mut self, store: impl TokenStore + 'static) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// A store shared with other code (to log out, list servers...).
    pub fn shared_store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.store = store;
        self
    }

    /// The client name sent with dynamic client registration (default `aquaregia`).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// A client id registered with the authorization server beforehand (no registration).
    pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(client_id.into());
        self
    }

    /// The secret of the pre-registered [`client_id`](Self::client_id).
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }

    /// The HTTPS URL of this client's metadata document, used as its client id by servers
    /// that support client ID metadata documents.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// Scopes to ask for (default: those of the challenge, else the server's).
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The token store.
    pub fn token_store(&self) -> &Arc<dyn TokenStore> {
        &self.store
    }
}

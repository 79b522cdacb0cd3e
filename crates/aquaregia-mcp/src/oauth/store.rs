//! Where OAuth tokens live: the [`TokenStore`] trait over [`OAuthCredentials`], a file store
//! in the user's data directory, an in-memory one, and the adapter to rmcp's per-manager
//! credential store.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aquaregia::sync::lock;
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One server's OAuth credentials, as a [`TokenStore`] keeps them: the client they were issued
/// to, the token, the scopes granted, when the token came, and the authorization server
/// (`issuer`) that minted it.
///
/// Serialized as JSON in the shape rmcp stores (`token_response` holding the token endpoint's
/// answer), so files written by earlier versions still load. `Debug` never shows a token:
///
/// ```
/// use aquaregia_mcp::{OAuthCredentials, OAuthToken};
/// let credentials = OAuthCredentials::new("client-7")
///     .token(OAuthToken::bearer("s3cret").expires_in(3600))
///     .issuer("https://auth.example");
/// assert!(!format!("{credentials:?}").contains("s3cret"));
/// ```
#[non_exhaustive]
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct OAuthCredentials {
    /// The client id the tokens were issued to.
    pub client_id: String,
    /// The token, once there is one.
    #[serde(rename = "token_response")]
    pub token: Option<OAuthToken>,
    /// The scopes granted.
    #[serde(default)]
    pub granted_scopes: Vec<String>,
    /// When the token was received, in seconds since the Unix epoch.
    #[serde(default)]
    pub token_received_at: Option<u64>,
    /// The authorization server that minted the token.
    #[serde(default)]
    pub issuer: Option<String>,
}

/// A token endpoint's answer (RFC 6749 section 5.1). `Debug` never shows the tokens.
#[non_exhaustive]
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct OAuthToken {
    /// The access token.
    pub access_token: String,
    /// Its type (`bearer`).
    pub token_type: String,
    /// Its lifetime in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<u64>,
    /// The refresh token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes granted, space-separated, when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Other fields of the answer (vendor extensions, `id_token`...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl OAuthCredentials {
    /// Credentials of `client_id`, without a token yet.
    pub fn new(client_id: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            token: None,
            granted_scopes: Vec::new(),
            token_received_at: None,
            issuer: None,
        }
    }

    /// With `token`.
    #[must_use]
    pub fn token(mut self, token: OAuthToken) -> Self {
        self.token = Some(token);
        self
    }

    /// With the scopes granted.
    #[must_use]
    pub fn granted_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.granted_scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// With the time the token was received (seconds since the Unix epoch).
    #[must_use]
    pub fn received_at(mut self, seconds: u64) -> Self {
        self.token_received_at = Some(seconds);
        self
    }

    /// With the issuer that minted the token.
    #[must_use]
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// As rmcp's credential type (the same JSON).
    fn to_rmcp(&self) -> Result<StoredCredentials, serde_json::Error> {
        serde_json::from_value(serde_json::to_value(self)?)
    }

    /// From rmcp's credential type (the same JSON).
    fn from_rmcp(credentials: &StoredCredentials) -> Result<Self, serde_json::Error> {
        serde_json::from_value(serde_json::to_value(credentials)?)
    }
}

impl OAuthToken {
    /// A bearer token with no lifetime, refresh token or scope.
    pub fn bearer(access_token: impl Into<String>) -> Self {
        Self {
            access_token: access_token.into(),
            token_type: "bearer".to_owned(),
            expires_in: None,
            refresh_token: None,
            scope: None,
            extra: Map::new(),
        }
    }

    /// With a lifetime in seconds.
    #[must_use]
    pub fn expires_in(mut self, seconds: u64) -> Self {
        self.expires_in = Some(seconds);
        self
    }

    /// With a refresh token.
    #[must_use]
    pub fn refresh_token(mut self, token: impl Into<String>) -> Self {
        self.refresh_token = Some(token.into());
        self
    }
}

impl fmt::Debug for OAuthCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthCredentials")
            .field("client_id", &self.client_id)
            .field("token", &self.token)
            .field("granted_scopes", &self.granted_scopes)
            .field("token_received_at", &self.token_received_at)
            .field("issuer", &self.issuer)
            .finish()
    }
}

impl fmt::Debug for OAuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthToken")
            .field("access_token", &"<redacted>")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("scope", &self.scope)
            .field("extra", &self.extra.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a [`TokenStore`] failed. Never contains a token.
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum TokenStoreError {
    /// Reading or writing the store failed.
    #[error("token store {path}: {message}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// A stored entry could not be read back.
    #[error("token store {path}: unreadable entry: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        message: String,
    },
    /// No data directory: set `AQUAREGIA_DATA_DIR`.
    #[error("no data directory for OAuth tokens (set AQUAREGIA_DATA_DIR)")]
    NoDataDir,
}

/// Keeps OAuth credentials (client id, tokens, granted scopes, issuer) per MCP server URL.
///
/// The credentials record the authorization server (`issuer`) that minted them; tokens of
/// another issuer are discarded rather than sent. Implement it for a keychain or a database;
/// [`FileTokenStore`] and [`MemoryTokenStore`] come with the crate.
#[aquaregia::async_trait]
pub trait TokenStore: Send + Sync {
    /// The credentials stored for `server` (its URL), if any.
    async fn load(&self, server: &str) -> Result<Option<OAuthCredentials>, TokenStoreError>;
    /// Stores `credentials` for `server`, replacing what was there.
    async fn save(
        &self,
        server: &str,
        credentials: OAuthCredentials,
    ) -> Result<(), TokenStoreError>;
    /// Forgets `server`'s credentials; `true` if there were any.
    async fn remove(&self, server: &str) -> Result<bool, TokenStoreError>;
}

/// Credentials as files: one JSON file per server in `<dir>/oauth/`, readable only by the
/// user (0600 on Unix), written atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTokenStore {
    dir: PathBuf,
}

impl FileTokenStore {
    /// Files under `<data_dir>/oauth/`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: data_dir.into().join("oauth"),
        }
    }

    /// The store in aquaregia's data directory: `$AQUAREGIA_DATA_DIR`, else the platform data
    /// directory's `aquaregia` (`~/.local/share/aquaregia` on Linux).
    pub fn in_data_dir() -> Result<Self, TokenStoreError> {
        if let Some(dir) = std::env::var_os("AQUAREGIA_DATA_DIR").filter(|dir| !dir.is_empty()) {
            return Ok(Self::new(dir));
        }
        dirs::data_dir()
            .map(|dir| Self::new(dir.join("aquaregia")))
            .ok_or(TokenStoreError::NoDataDir)
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file for `server`: its host and port, readable, plus a hash of the whole URL.
    pub fn path_for(&self, server: &str) -> PathBuf {
        let host: String = url::Url::parse(server)
            .ok()
            .and_then(|url| {
                let host = url.host_str()?.to_owned();
                Some(match url.port() {
                    Some(port) => format!("{host}_{port}"),
                    None => host,
                })
            })
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir
            .join(format!("{host}-{:016x}.json", fnv1a(server.as_bytes())))
    }

    fn io(path: &Path, error: &std::io::Error) -> TokenStoreError {
        TokenStoreError::Io {
            path: path.to_owned(),
            message: error.to_string(),
        }
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), TokenStoreError> {
        create_private_dir(&self.dir).map_err(|error| Self::io(&self.dir, &error))?;
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let result = options
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(bytes)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, path));
        if let Err(error) = result {
            let _ = std::fs::remove_file(&temporary);
            return Err(Self::io(path, &error));
        }
        Ok(())
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[aquaregia::async_trait]
impl TokenStore for FileTokenStore {
    async fn load(&self, server: &str) -> Result<Option<OAuthCredentials>, TokenStoreError> {
        let path = self.path_for(server);
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Self::io(&path, &error)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| TokenStoreError::Corrupt {
                path,
                message: error.to_string(),
            })
    }

    async fn save(
        &self,
        server: &str,
        credentials: OAuthCredentials,
    ) -> Result<(), TokenStoreError> {
        let path = self.path_for(server);
        let bytes = serde_json::to_vec(&credentials).map_err(|error| TokenStoreError::Io {
            path: path.clone(),
            message: error.to_string(),
        })?;
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.write(&path, &bytes))
            .await
            .map_err(|error| TokenStoreError::Io {
                path: self.dir.clone(),
                message: error.to_string(),
            })?
    }

    async fn remove(&self, server: &str) -> Result<bool, TokenStoreError> {
        let path = self.path_for(server);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(Self::io(&path, &error)),
        }
    }
}

/// Credentials kept in memory for the life of the process (the default store).
#[derive(Clone, Default)]
pub struct MemoryTokenStore {
    entries: Arc<Mutex<HashMap<String, OAuthCredentials>>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, OAuthCredentials>> {
        lock(&self.entries)
    }
}

impl fmt::Debug for MemoryTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTokenStore")
            .field("servers", &self.entries().keys().collect::<Vec<_>>())
            .finish()
    }
}

#[aquaregia::async_trait]
impl TokenStore for MemoryTokenStore {
    async fn load(&self, server: &str) -> Result<Option<OAuthCredentials>, TokenStoreError> {
        Ok(self.entries().get(server).cloned())
    }

    async fn save(
        &self,
        server: &str,
        credentials: OAuthCredentials,
    ) -> Result<(), TokenStoreError> {
        self.entries().insert(server.to_owned(), credentials);
        Ok(())
    }

    async fn remove(&self, server: &str) -> Result<bool, TokenStoreError> {
        Ok(self.entries().remove(server).is_some())
    }
}

/// One server's slot of a [`TokenStore`], as rmcp's credential store.
///
/// rmcp loads the credentials for every request it sends; the slot keeps what the store last
/// gave (or was given) so that only the first load reads the store (a file, for the CLI).
/// A refresh reads the store again: another process may have refreshed, and rotated the
/// refresh token, first.
pub(crate) struct ServerSlot {
    store: Arc<dyn TokenStore>,
    server: String,
    /// `None`: read the store on the next load.
    cache: Mutex<Option<Option<StoredCredentials>>>,
}

impl ServerSlot {
    pub(crate) fn new(store: Arc<dyn TokenStore>, server: &str) -> Self {
        Self {
            store,
            server: server.to_owned(),
            cache: Mutex::new(None),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Option<Option<StoredCredentials>>> {
        lock(&self.cache)
    }
}

fn store_error(error: &TokenStoreError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

/// Credentials that do not convert between rmcp's type and ours (never expected: both are
/// the same JSON).
fn unreadable(error: &serde_json::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("unreadable OAuth credentials: {error}"))
}

#[aquaregia::async_trait]
impl CredentialStore for ServerSlot {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        if let Some(cached) = &*self.cache() {
            return Ok(cached.clone());
        }
        let loaded = self
            .store
            .load(&self.server)
            .await
            .map_err(|error| store_error(&error))?;
        if let Some(credentials) = &loaded {
            register_tokens(credentials);
        }
        let loaded = loaded
            .map(|credentials| credentials.to_rmcp())
            .transpose()
            .map_err(|error| unreadable(&error))?;
        *self.cache() = Some(loaded.clone());
        Ok(loaded)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let ours = OAuthCredentials::from_rmcp(&credentials).map_err(|error| unreadable(&error))?;
        register_tokens(&ours);
        *self.cache() = None;
        self.store
            .save(&self.server, ours)
            .await
            .map_err(|error| store_error(&error))?;
        *self.cache() = Some(Some(credentials));
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        *self.cache() = None;
        self.store
            .remove(&self.server)
            .await
            .map_err(|error| store_error(&error))?;
        *self.cache() = Some(None);
        Ok(())
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        *self.cache() = None;
        Ok(None)
    }
}

/// Registers the access and refresh tokens of `credentials` as secrets ([`aquaregia::redact`]).
fn register_tokens(credentials: &OAuthCredentials) {
    if let Some(token) = &credentials.token {
        aquaregia::redact::register(&token.access_token);
        if let Some(refresh) = &token.refresh_token {
            aquaregia::redact::register(refresh);
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client_id: &str) -> OAuthCredentials {
        OAuthCredentials::new(client_id)
            .granted_scopes(["read"])
            .received_at(1)
            .issuer("https://auth.example")
    }

    /// Files written by earlier versions (rmcp's `StoredCredentials` as JSON) load, and what
    /// is saved reads back as rmcp's type unchanged.
    #[test]
    fn credentials_are_rmcp_stored_credentials_json() {
        let stored = r#"{"client_id":"c","token_response":{"access_token":"at","token_type":"bearer",
            "expires_in":3600,"refresh_token":"rt","scope":"read write","id_token":"x"},
            "granted_scopes":["read","write"],"token_received_at":7,"issuer":"https://auth.example"}"#;
        let rmcp: StoredCredentials = serde_json::from_str(stored).unwrap();
        let ours = OAuthCredentials::from_rmcp(&rmcp).unwrap();
        let token = ours.token.clone().unwrap();
        assert_eq!(token.access_token, "at");
        assert_eq!(token.refresh_token.as_deref(), Some("rt"));
        assert_eq!(token.expires_in, Some(3600));
        assert_eq!(token.extra["id_token"], "x");
        assert_eq!(ours.granted_scopes, ["read", "write"]);
        let back = ours.to_rmcp().unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&rmcp).unwrap()
        );
        let direct: OAuthCredentials = serde_json::from_str(stored).unwrap();
        assert_eq!(direct, ours);
        assert!(!format!("{ours:?}").contains("\"at\""));
    }

    #[tokio::test]
    async fn file_store_keeps_one_private_file_per_server() {
        let scratch = tempfile::tempdir().unwrap();
        let store = FileTokenStore::new(scratch.path());
        let (a, b) = ("https://a.example/mcp", "https://a.example/other");
        assert!(store.load(a).await.unwrap().is_none());
        store.save(a, credentials("client-a")).await.unwrap();
        store.save(b, credentials("client-b")).await.unwrap();
        assert_ne!(store.path_for(a), store.path_for(b));
        let loaded = store.load(a).await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "client-a");
        assert_eq!(loaded.issuer.as_deref(), Some("https://auth.example"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path_for(a))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(store.remove(a).await.unwrap());
        assert!(!store.remove(a).await.unwrap());
        assert_eq!(store.load(b).await.unwrap().unwrap().client_id, "client-b");
        std::fs::write(store.path_for(a), "{not json").unwrap();
        assert!(matches!(
            store.load(a).await,
            Err(TokenStoreError::Corrupt { .. })
        ));
    }
}

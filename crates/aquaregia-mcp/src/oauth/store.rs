//! Where OAuth tokens live: the [`TokenStore`] trait, a file store in the user's data
//! directory, an in-memory one, and the adapter to rmcp's per-manager credential store.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};

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
    async fn load(&self, server: &str) -> Result<Option<StoredCredentials>, TokenStoreError>;
    /// Stores `credentials` for `server`, replacing what was there.
    async fn save(
        &self,
        server: &str,
        credentials: StoredCredentials,
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
    async fn load(&self, server: &str) -> Result<Option<StoredCredentials>, TokenStoreError> {
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
        credentials: StoredCredentials,
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
    entries: Arc<Mutex<HashMap<String, StoredCredentials>>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, StoredCredentials>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
    async fn load(&self, server: &str) -> Result<Option<StoredCredentials>, TokenStoreError> {
        Ok(self.entries().get(server).cloned())
    }

    async fn save(
        &self,
        server: &str,
        credentials: StoredCredentials,
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
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn store_error(error: &TokenStoreError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
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
        *self.cache() = Some(loaded.clone());
        Ok(loaded)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        register_tokens(&credentials);
        *self.cache() = None;
        self.store
            .save(&self.server, credentials.clone())
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
fn register_tokens(credentials: &StoredCredentials) {
    use oauth2::TokenResponse as _;
    if let Some(response) = &credentials.token_response {
        aquaregia::redact::register(response.access_token().secret());
        if let Some(refresh) = response.refresh_token() {
            aquaregia::redact::register(refresh.secret());
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

    fn credentials(client_id: &str) -> StoredCredentials {
        StoredCredentials::new(client_id.to_owned(), None, vec!["read".into()], Some(1))
            .with_issuer(Some("https://auth.example".into()))
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

//! Where `run`, `chat`, `sessions` and `acp` keep sessions: files in the data dir by default,
//! or the PostgreSQL database a config file names with `"sessions": {"postgres": "<url>"}`
//! (`${VAR}` expanded from the environment when the store is opened, so the URL and its
//! password can stay out of the file). Either way turns are redacted before they are written.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use aquaregia::redact::RedactingStore;
use aquaregia::{FileSessionStore, SessionStore};
use aquaregia_mcp::ConfigError;
use serde_json::Value;

/// The `"sessions"` setting of a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionsSetting {
    /// A PostgreSQL database, by its connection string as written (`${VAR}` not yet expanded).
    Postgres { url: String },
}

impl SessionsSetting {
    /// Reads the value of `"sessions"`.
    pub(crate) fn parse(value: Value) -> Result<Self, ConfigError> {
        let invalid = || {
            ConfigError::Invalid(
                "`sessions` must be an object naming the store: \
                 {\"postgres\": \"postgres://user@host/db\"}"
                    .into(),
            )
        };
        let Value::Object(mut fields) = value else {
            return Err(invalid());
        };
        if let Some(key) = fields.keys().find(|key| *key != "postgres") {
            return Err(ConfigError::Invalid(format!(
                "`sessions` has an unknown key `{key}` (use `postgres`)"
            )));
        }
        let setting = match fields.remove("postgres") {
            Some(Value::String(url)) => Self::Postgres { url },
            Some(_) => {
                return Err(ConfigError::Invalid(
                    "`sessions.postgres` must be a connection string (postgres://... or \
                     ${DATABASE_URL})"
                        .into(),
                ));
            }
            None => return Err(invalid()),
        };
        Ok(setting)
    }

    /// In a few words, without the connection string (it may hold a password).
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Postgres { .. } => "PostgreSQL",
        }
    }
}

/// An open session store, and where it is, for messages.
#[derive(Debug, Clone)]
pub(crate) struct OpenStore {
    /// Turns are redacted ([`aquaregia::redact`]) before they are written.
    pub(crate) store: Arc<dyn SessionStore>,
    /// `<dir>` or `PostgreSQL at user@host:port/db`.
    pub(crate) place: String,
}

/// The store the config files name (the `--config` file alone, else the default files, a
/// later file's setting winning), or the file store in `file_dir` (the data dir's `sessions`).
pub(crate) async fn open(
    config: Option<&Path>,
    file_dir: impl FnOnce() -> anyhow::Result<PathBuf>,
) -> anyhow::Result<OpenStore> {
    match crate::config::sessions_setting(config)? {
        None => {
            let dir = file_dir()?;
            Ok(OpenStore {
                place: dir.display().to_string(),
                store: Arc::new(RedactingStore::new(FileSessionStore::new(dir))),
            })
        }
        Some((SessionsSetting::Postgres { url }, file)) => {
            let url = aquaregia_mcp::expand_variables(&url, |name| std::env::var(name).ok())
                .map_err(|variable| {
                    anyhow::anyhow!(
                        "{}: `sessions.postgres` uses `${{{variable}}}`, which is not set (set \
                         it, or give a default: `${{{variable}:-default}}`)",
                        file.display()
                    )
                })?;
            open_postgres(&url, &file).await
        }
    }
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str, file: &Path) -> anyhow::Result<OpenStore> {
    // A CLI process runs one conversation at a time; `acp` a few sessions at once.
    let store = aquaregia_postgres::PostgresSessionStore::builder(url)
        .max_connections(4)
        .connect()
        .await
        .with_context(|| format!("cannot open the session store of {}", file.display()))?;
    Ok(OpenStore {
        place: format!("PostgreSQL at {}", store.target()),
        store: Arc::new(RedactingStore::new(store)),
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str, file: &Path) -> anyhow::Result<OpenStore> {
    anyhow::bail!(
        "{} keeps sessions in PostgreSQL, but this aquaregia was built without it: build it \
         with `--features postgres` (cargo install aquaregia-cli --features postgres)",
        file.display()
    )
}

/// The file store's directory: `$AQUAREGIA_DATA_DIR/sessions`, else the platform data dir's.
pub(crate) fn default_file_dir() -> anyhow::Result<PathBuf> {
    FileSessionStore::default_dir().context("no data directory: set AQUAREGIA_DATA_DIR")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_setting_names_one_store_with_a_string() {
        assert_eq!(
            SessionsSetting::parse(json!({"postgres": "${DATABASE_URL}"})),
            Ok(SessionsSetting::Postgres {
                url: "${DATABASE_URL}".into()
            })
        );
        for (bad, says) in [
            (json!("postgres://x"), "must be an object"),
            (json!({}), "must be an object naming the store"),
            (json!({"postgres": 5}), "must be a connection string"),
            (
                json!({"postgres": "x", "sqlite": "y"}),
                "unknown key `sqlite`",
            ),
        ] {
            let error = SessionsSetting::parse(bad.clone()).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}

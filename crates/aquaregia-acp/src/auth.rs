//! Authentication without dying: API keys per provider, given through the environment, through
//! ACP `authenticate` (stored 0600 in a data directory, never logged), or through the
//! client's terminal login.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest, AuthenticateResponse,
    LogoutResponse,
};
use aquaregia::sync::lock;
use serde_json::json;

use crate::rpc::invalid_params;

/// The `_meta` key of `authenticate` that carries the API key.
pub const API_KEY_META: &str = "apiKey";

const CREDENTIALS_FILE: &str = "credentials.json";

/// Why authentication failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The method id is not one this agent advertised.
    #[error("unknown authentication method `{0}`")]
    UnknownMethod(String),
    /// `authenticate` carried no key and the provider's variable is not set.
    #[error("no API key: send it in `_meta.{API_KEY_META}` or set `{env_var}`")]
    NoKey {
        /// The variable the provider reads.
        env_var: String,
    },
    /// The key store could not be read or written.
    #[error("the key store `{path}`: {source}")]
    Store {
        /// The credentials file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// One API key the agent can be given (keys are known by the variable they stand for, so
/// providers reading the same variable share one).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApiKeyMethod {
    /// The provider id, as in model specs (`openai`, `anthropic`...); the ACP method id is
    /// `<provider>-api-key`.
    pub provider: String,
    /// The name shown to the user.
    pub name: String,
    /// The environment variable the provider reads its key from.
    pub env_var: String,
}

/// API-key authentication for an [`AcpServer`](crate::AcpServer).
///
/// Every method gets an ACP auth method `<provider>-api-key`; `authenticate` with that id
/// and the key in `_meta.apiKey` stores the key (mode 0600) in `<dir>/credentials.json`,
/// under the name of the variable it stands for; `logout` forgets the stored keys. Until the
/// required variable has a key (from the environment or the store), `session/new` and
/// `session/prompt` answer ACP's `auth_required`. Cheap to clone; clones share the keys.
///
/// ```
/// let auth = aquaregia_acp::ApiKeyAuth::new(std::env::temp_dir().join("aquaregia-doc"))
///     .method("openai", "OpenAI API key", "OPENAI_API_KEY")
///     .require("OPENAI_API_KEY");
/// let _key = auth.api_key("OPENAI_API_KEY");
/// ```
#[derive(Clone)]
pub struct ApiKeyAuth {
    methods: Vec<ApiKeyMethod>,
    required: Option<String>,
    terminal_args: Option<Vec<String>>,
    path: PathBuf,
    keys: Arc<Mutex<Option<BTreeMap<String, String>>>>,
}

impl fmt::Debug for ApiKeyAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyAuth")
            .field("methods", &self.methods)
            .field("required", &self.required)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ApiKeyAuth {
    /// Keys stored in `dir` (created when a key is first stored).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            methods: Vec::new(),
            required: None,
            terminal_args: None,
            path: dir.into().join(CREDENTIALS_FILE),
            keys: Arc::default(),
        }
    }

    /// Offers an API-key method for `provider`, whose key is otherwise read from `env_var`.
    #[must_use]
    pub fn method(
        mut self,
        provider: impl Into<String>,
        name: impl Into<String>,
        env_var: impl Into<String>,
    ) -> Self {
        self.methods.push(ApiKeyMethod {
            provider: provider.into(),
            name: name.into(),
            env_var: env_var.into(),
        });
        self
    }

    /// The variable whose key sessions need (none: sessions never wait for a key).
    #[must_use]
    pub fn require(mut self, env_var: impl Into<String>) -> Self {
        self.required = Some(env_var.into());
        self
    }

    /// Offers ACP terminal auth to clients that support it: the client runs the agent's
    /// command with these extra arguments in a terminal, where the user enters the key.
    #[must_use]
    pub fn terminal_login(mut self, args: Vec<String>) -> Self {
        self.terminal_args = Some(args);
        self
    }

    /// The methods offered.
    pub fn methods(&self) -> &[ApiKeyMethod] {
        &self.methods
    }

    /// The key for `env_var`: the variable itself, else the stored key.
    pub fn api_key(&self, env_var: &str) -> Option<String> {
        std::env::var(env_var)
            .ok()
            .filter(|key| !key.is_empty())
            .or_else(|| self.stored().get(env_var).cloned())
    }

    /// The variable sessions need, if any.
    pub fn required(&self) -> Option<&str> {
        self.required.as_deref()
    }

    /// Whether sessions may run: the required variable, if any, has a key.
    pub fn is_authenticated(&self) -> bool {
        self.required
            .as_deref()
            .is_none_or(|env_var| self.api_key(env_var).is_some())
    }

    /// Stores `key` for `env_var` (the file is written with mode 0600).
    pub fn store_key(&self, env_var: &str, key: &str) -> Result<(), AuthError> {
        let mut keys = self.stored();
        keys.insert(env_var.to_owned(), key.to_owned());
        self.write(&keys)?;
        *lock(&self.keys) = Some(keys);
        Ok(())
    }

    /// Forgets every stored key.
    pub fn logout(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(AuthError::Store {
                    path: self.path.clone(),
                    source,
                });
            }
        }
        *lock(&self.keys) = Some(BTreeMap::new());
        Ok(())
    }

    /// The ACP methods: one per provider, and terminal login when the client supports it.
    pub(crate) fn acp_methods(&self, client_has_terminal_auth: bool) -> Vec<AuthMethod> {
        let mut methods: Vec<AuthMethod> = self
            .methods
            .iter()
            .map(|method| {
                AuthMethod::Agent(
                    AuthMethodAgent::new(format!("{}-api-key", method.provider), &method.name)
                        .description(format!(
                            "An API key for {}, sent in `_meta.{API_KEY_META}` of `authenticate` \
                             (or set `{}`)",
                            method.provider, method.env_var
                        ))
                        .meta(
                            serde_json::json!({"envVar": method.env_var, "provider": method.provider})
                                .as_object()
                                .cloned(),
                        ),
                )
            })
            .collect();
        if client_has_terminal_auth && let Some(args) = &self.terminal_args {
            methods.push(AuthMethod::Terminal(
                AuthMethodTerminal::new("terminal", "Enter an API key in a terminal")
                    .args(args.clone()),
            ));
        }
        methods
    }

    /// ACP `authenticate`.
    pub(crate) fn authenticate(&self, request: &AuthenticateRequest) -> Result<(), AuthError> {
        let id = &*request.method_id.0;
        let method = self
            .methods
            .iter()
            .find(|method| id.strip_suffix("-api-key") == Some(method.provider.as_str()))
            .ok_or_else(|| AuthError::UnknownMethod(id.to_owned()))?;
        let key = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get(API_KEY_META))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|key| !key.is_empty());
        match key {
            Some(key) => self.store_key(&method.env_var, key),
            None if self.api_key(&method.env_var).is_some() => Ok(()),
            None => Err(AuthError::NoKey {
                env_var: method.env_var.clone(),
            }),
        }
    }

    fn stored(&self) -> BTreeMap<String, String> {
        let mut cache = lock(&self.keys);
        if let Some(keys) = cache.as_ref() {
            return keys.clone();
        }
        let keys = read_keys(&self.path);
        *cache = Some(keys.clone());
        keys
    }

    fn write(&self, keys: &BTreeMap<String, String>) -> Result<(), AuthError> {
        let store = |source| AuthError::Store {
            path: self.path.clone(),
            source,
        };
        let body = serde_json::to_vec_pretty(keys).map_err(|e| store(e.into()))?;
        aquaregia::files::replace(&self.path, &body, aquaregia::files::Access::Private)
            .map_err(store)
    }
}

/// ACP `authenticate`: stores the key the request carries (any request succeeds when the agent
/// asks for no key).
pub(crate) fn authenticate(
    auth: Option<&ApiKeyAuth>,
    request: &AuthenticateRequest,
) -> Result<AuthenticateResponse, agent_client_protocol::Error> {
    if let Some(auth) = auth {
        auth.authenticate(request).map_err(|error| {
            tracing::info!(method = %request.method_id, %error, "authenticate failed");
            invalid_params(error.to_string())
        })?;
    }
    Ok(AuthenticateResponse::new())
}

/// ACP `logout`: forgets the stored keys.
pub(crate) fn logout(
    auth: Option<&ApiKeyAuth>,
) -> Result<LogoutResponse, agent_client_protocol::Error> {
    if let Some(auth) = auth {
        auth.logout().map_err(|error| {
            agent_client_protocol::Error::internal_error()
                .data(json!({"reason": error.to_string()}))
        })?;
    }
    Ok(LogoutResponse::new())
}

/// The stored keys; an unreadable or malformed file counts as none (logged, never the keys).
fn read_keys(path: &Path) -> BTreeMap<String, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            tracing::warn!(path = %path.display(), %error, "the key store is malformed; ignored");
            BTreeMap::new()
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "the key store is unreadable");
            BTreeMap::new()
        }
    }
}

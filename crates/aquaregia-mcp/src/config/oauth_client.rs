//! A server's own OAuth client: [`McpOAuthClient`], read from a config entry's `"oauth"`.

use std::fmt;

use serde_json::{Map, Value};

use super::error::ConfigError;

/// The OAuth client registered with one server's authorization server beforehand (servers
/// that do not let clients register themselves need one), the scopes to ask for, and the port
/// of the redirect URI registered with it.
///
/// In a config file:
/// `"oauth": {"clientId": "...", "clientSecret": "${SECRET}", "scopes": ["repo"], "callbackPort": 8765}`,
/// every key optional. `${VAR}` is expanded in `clientId` and `clientSecret`, so the secret
/// can stay out of the file. `callbackPort` is for a client whose registered redirect URI is
/// `http://127.0.0.1:<port>/callback`: the authorization's redirect is caught there.
///
/// `Debug` never shows the secret:
///
/// ```
/// use aquaregia_mcp::McpServersConfig;
/// let config = McpServersConfig::from_json(r#"{"mcpServers": {"gh": {
///     "url": "https://example.com/mcp",
///     "oauth": {"clientId": "Iv1.abc", "clientSecret": "s3cret", "callbackPort": 8765}
/// }}}"#).unwrap();
/// let client = config.oauth_client("gh").unwrap();
/// assert_eq!(client.client_id.as_deref(), Some("Iv1.abc"));
/// assert_eq!(client.callback_port, Some(8765));
/// assert!(!format!("{client:?}").contains("s3cret"));
/// ```
#[non_exhaustive]
#[derive(Clone, Default, PartialEq, Eq)]
pub struct McpOAuthClient {
    /// The client id (none: a client ID metadata document or dynamic registration).
    pub client_id: Option<String>,
    /// The client's secret, for a confidential client.
    pub client_secret: Option<String>,
    /// The scopes to ask for (none: those the server's challenge names).
    pub scopes: Vec<String>,
    /// The port of the registered redirect URI `http://127.0.0.1:<port>/callback`.
    pub callback_port: Option<u16>,
}

impl fmt::Debug for McpOAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpOAuthClient")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("scopes", &self.scopes)
            .field("callback_port", &self.callback_port)
            .finish()
    }
}

impl McpOAuthClient {
    /// `oauth` with this client's id, secret and scopes (the redirect URI, which
    /// [`callback_port`](Self::callback_port) decides, is the caller's).
    #[cfg(feature = "oauth")]
    pub fn apply(&self, mut oauth: crate::oauth::OAuth) -> crate::oauth::OAuth {
        if let Some(id) = &self.client_id {
            oauth = oauth.client_id(id);
        }
        if let Some(secret) = &self.client_secret {
            oauth = oauth.client_secret(secret);
        }
        if !self.scopes.is_empty() {
            oauth = oauth.scopes(self.scopes.clone());
        }
        oauth
    }

    /// This client with `expand` applied to its id and secret (`field` names them in errors).
    pub(super) fn expanded(
        self,
        expand: impl Fn(&str, String) -> Result<String, ConfigError>,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            client_id: self
                .client_id
                .map(|id| expand("oauth.clientId", id))
                .transpose()?,
            client_secret: self
                .client_secret
                .map(|secret| expand("oauth.clientSecret", secret))
                .transpose()?,
            ..self
        })
    }
}

/// Takes `"oauth"` out of a server entry.
pub(super) fn take_oauth_client(
    name: &str,
    entry: &mut Map<String, Value>,
    warnings: &mut Vec<String>,
) -> Result<Option<McpOAuthClient>, ConfigError> {
    let invalid = |what: &str| ConfigError::Invalid(format!("server `{name}`: `oauth.{what}`"));
    let mut oauth = match entry.remove("oauth") {
        None => return Ok(None),
        Some(Value::Object(oauth)) => oauth,
        Some(_) => {
            return Err(ConfigError::Invalid(format!(
                "server `{name}`: `oauth` must be an object"
            )));
        }
    };
    let string = |value: Option<Value>, what: &str| match value {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(invalid(&format!("{what}` must be a string"))),
    };
    let client = McpOAuthClient {
        client_id: string(oauth.remove("clientId"), "clientId")?,
        client_secret: string(oauth.remove("clientSecret"), "clientSecret")?,
        scopes: match oauth.remove("scopes") {
            None => Vec::new(),
            Some(Value::Array(scopes)) => scopes
                .into_iter()
                .map(|scope| match scope {
                    Value::String(scope) => Ok(scope),
                    _ => Err(invalid("scopes` must be an array of strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid("scopes` must be an array of strings")),
        },
        callback_port: match oauth.remove("callbackPort") {
            None => None,
            Some(Value::Number(port)) => match port.as_u64().map(u16::try_from) {
                Some(Ok(port)) if port > 0 => Some(port),
                _ => return Err(invalid("callbackPort` must be a port number (1 to 65535)")),
            },
            Some(_) => return Err(invalid("callbackPort` must be a port number (1 to 65535)")),
        },
    };
    for key in oauth.keys() {
        warnings.push(format!(
            "server `{name}`: ignoring unknown key `oauth.{key}`"
        ));
    }
    Ok(Some(client))
}

//! OAuth for legacy HTTP+SSE servers, with the same store and flow as Streamable HTTP: the
//! token goes on the event-stream GET and on every POST, and a challenge on the GET starts the
//! same discovery and authorization before the stream is opened again. A POST refused once the
//! session is up gets a refreshed token, else a new authorization answering its challenge
//! (more scope, say).

use std::sync::Arc;

use rmcp::transport::auth::AuthorizationManager;

use super::OAuth;
use super::authorize::{MAX_AUTHORIZATIONS, authorize, restored_manager};
use crate::error::McpError;
use crate::session::connection::McpConnection;
use crate::session::http::SseSession;
use crate::transport::sse::{BearerSource, Renew};

/// Connects to a legacy HTTP+SSE server, authorizing with `oauth` when it asks.
pub(crate) async fn connect_sse_with_oauth(
    session: &SseSession<'_>,
    oauth: &OAuth,
) -> Result<McpConnection, McpError> {
    let (url, name) = (session.url, session.name);
    let mut manager = restored_manager(url, name, oauth).await?;
    let mut authorizations = 0;
    loop {
        let bearer = bearer(manager, Authorizer::new(url, name, oauth));
        let error = match session.connect(Some(bearer)).await {
            Ok(connection) => return Ok(connection),
            Err(error) => error,
        };
        let McpError::AuthRequired {
            resource_metadata,
            scope,
            ..
        } = &error
        else {
            return Err(error);
        };
        if authorizations == MAX_AUTHORIZATIONS {
            return Err(error);
        }
        authorizations += 1;
        let challenge = challenge(resource_metadata.as_deref(), scope.as_deref());
        manager = match authorize(url, name, oauth, &challenge).await? {
            Some(manager) => manager,
            None => return Err(error),
        };
    }
}

/// What authorizing the server again takes.
#[derive(Clone)]
struct Authorizer {
    url: Arc<str>,
    name: Arc<str>,
    oauth: OAuth,
}

impl Authorizer {
    fn new(url: &str, name: &str, oauth: &OAuth) -> Self {
        Self {
            url: url.into(),
            name: name.into(),
            oauth: oauth.clone(),
        }
    }
}

/// The manager's access token, refreshed when it is about to expire or when asked, or from a
/// new authorization when the server's challenge asks for one; none without one.
fn bearer(manager: AuthorizationManager, authorizer: Authorizer) -> BearerSource {
    let manager = Arc::new(tokio::sync::Mutex::new(manager));
    Arc::new(move |renew| {
        let manager = manager.clone();
        let authorizer = authorizer.clone();
        Box::pin(async move {
            let mut manager = manager.lock().await;
            match renew {
                Renew::No => {}
                Renew::Refresh => {
                    if let Err(error) = manager.refresh_token().await {
                        tracing::debug!(%error, "refreshing the rejected OAuth token failed");
                        return None;
                    }
                }
                Renew::Authorize(challenge) => {
                    let Authorizer { url, name, oauth } = &authorizer;
                    tracing::info!(server = %name, "the server wants another authorization");
                    match authorize(url, name, oauth, &challenge).await {
                        Ok(Some(authorized)) => *manager = authorized,
                        Ok(None) => return None,
                        Err(error) => {
                            tracing::warn!(server = %name, %error, "authorizing again failed");
                            return None;
                        }
                    }
                }
            }
            match manager.get_access_token().await {
                Ok(token) => Some(token),
                Err(error) => {
                    tracing::debug!(%error, "no OAuth access token to send");
                    None
                }
            }
        })
    })
}

/// A `WWW-Authenticate` challenge with the parameters the server's carried.
fn challenge(resource_metadata: Option<&str>, scope: Option<&str>) -> String {
    let quote = |value: &str| value.replace('\\', "\\\\").replace('"', "\\\"");
    let params: Vec<String> = [("resource_metadata", resource_metadata), ("scope", scope)]
        .into_iter()
        .filter_map(|(name, value)| Some(format!("{name}=\"{}\"", quote(value?))))
        .collect();
    format!("Bearer {}", params.join(", "))
}

#[cfg(test)]
mod tests {
    use super::challenge;
    use crate::transport::http::parse_challenge;

    #[test]
    fn rebuilt_challenges_parse_back() {
        let header = challenge(Some("http://127.0.0.1:1/.well-known/x"), Some("a \"b\""));
        let parsed = parse_challenge(&header);
        assert_eq!(
            parsed.resource_metadata.as_deref(),
            Some("http://127.0.0.1:1/.well-known/x")
        );
        assert_eq!(parsed.scope.as_deref(), Some("a \"b\""));
        assert_eq!(challenge(None, None), "Bearer ");
    }
}

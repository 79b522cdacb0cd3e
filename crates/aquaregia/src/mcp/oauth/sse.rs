//! OAuth for legacy HTTP+SSE servers, with the same store and flow as Streamable HTTP: the
//! token goes on the event-stream GET and on every POST, and a challenge on the GET starts the
//! same discovery and authorization before the stream is opened again.

use std::sync::Arc;

use rmcp::transport::auth::AuthorizationManager;

use super::OAuth;
use super::flow::{MAX_AUTHORIZATIONS, authorize, restored_manager};
use crate::mcp::McpConnection;
use crate::mcp::error::McpError;
use crate::mcp::sse::{BearerSource, SseSession};

/// Connects to a legacy HTTP+SSE server, authorizing with `oauth` when it asks.
pub(crate) async fn connect_sse_with_oauth(
    session: &SseSession<'_>,
    oauth: &OAuth,
) -> Result<McpConnection, McpError> {
    let (url, name) = (session.url, session.name);
    let mut manager = restored_manager(url, name, oauth).await?;
    let mut authorizations = 0;
    loop {
        let error = match session.connect(Some(bearer(manager))).await {
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

/// The manager's access token, refreshed when it is about to expire or when asked; none
/// without one.
fn bearer(manager: AuthorizationManager) -> BearerSource {
    let manager = Arc::new(tokio::sync::Mutex::new(manager));
    Arc::new(move |refresh| {
        let manager = manager.clone();
        Box::pin(async move {
            let manager = manager.lock().await;
            if refresh && let Err(error) = manager.refresh_token().await {
                tracing::debug!(%error, "refreshing the rejected OAuth token failed");
                return None;
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
    use crate::mcp::http::parse_challenge;

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

//! Getting credentials: the stored ones when usable, else a new authorization (the code flow
//! through the callback, client credentials, or an assertion grant) after a challenge.

use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession, CredentialStore, OAuthTokenResponse,
    StoredCredentials,
};

use super::store::ServerSlot;
use super::{AuthorizationPrompt, Grant, OAuth, client_credentials, enterprise, workload};
use crate::error::McpError;
use crate::transport::compat::oauth_discovery as legacy;
use crate::transport::http::parse_challenge;

/// How many times a connect may be answered with a new challenge (a step-up after the first
/// authorization, say) before giving up.
pub(super) const MAX_AUTHORIZATIONS: usize = 2;

/// A manager for `url` with the credentials `oauth`'s store has for it, if they are usable.
pub(super) async fn restored_manager(
    url: &str,
    name: &str,
    oauth: &OAuth,
) -> Result<AuthorizationManager, McpError> {
    let mut manager = manager(url, name, oauth).await?;
    let mut restored = manager.initialize_from_store().await;
    if let Err(error) = &restored
        && legacy::is_issuer_mismatch(error)
        && let Ok(metadata) = resolve_metadata(&manager, url, None).await
    {
        manager.set_metadata(metadata);
        restored = manager.initialize_from_store().await;
    }
    if let Err(error) = restored {
        // Unusable stored credentials (an unreachable issuer, a corrupt entry): authorize anew.
        tracing::warn!(server = %name, %error, "stored OAuth credentials are unusable");
    }
    Ok(manager)
}

/// A manager for `url` whose credentials live in `oauth`'s store.
async fn manager(url: &str, name: &str, oauth: &OAuth) -> Result<AuthorizationManager, McpError> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|error| failed(name, url, "setting up OAuth", &error))?;
    manager.set_credential_store(ServerSlot::new(oauth.store.clone(), url));
    Ok(manager)
}

/// Gets new credentials after `challenge` with `oauth`'s grant. `None` when there is no way
/// to get them (the code flow without a callback).
pub(super) async fn authorize(
    url: &str,
    name: &str,
    oauth: &OAuth,
    challenge: &str,
) -> Result<Option<AuthorizationManager>, McpError> {
    if matches!(oauth.grant, Grant::AuthorizationCode) && oauth.authorize.is_none() {
        return Ok(None);
    }
    let mut manager = manager(url, name, oauth).await?;
    let metadata = resolve_metadata(&manager, url, Some(challenge))
        .await
        .map_err(|error| failed(name, url, "discovering the authorization server", &error))?;
    manager.set_metadata(metadata.clone());
    let scopes = || {
        if oauth.scopes.is_empty() {
            parse_challenge(challenge)
                .scope
                .map(|scope| scope.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default()
        } else {
            oauth.scopes.clone()
        }
    };
    let refused = |step: &str, message: String| McpError::Authorization {
        url: url.to_owned(),
        message: format!("{step}: {message}"),
    };
    let token = match &oauth.grant {
        Grant::AuthorizationCode => {
            return authorization_code(manager, url, name, oauth, challenge).await;
        }
        Grant::ClientCredentials => {
            let config = client_credentials::config(oauth, scopes(), url);
            let manager = client_credentials::exchange(manager, config)
                .await
                .map_err(|error| failed(name, url, "the client credentials grant", &error))?;
            tracing::info!(server = %name, "authorized with client credentials");
            return Ok(Some(manager));
        }
        Grant::Enterprise { idp, id_token } => {
            enterprise::exchange(oauth, idp, id_token, &metadata, url, scopes())
                .await
                .map_err(|message| refused("enterprise-managed authorization", message))?
        }
        Grant::WorkloadIdentity { assertion } => {
            workload::exchange(oauth, assertion, &metadata, url, &scopes())
                .await
                .map_err(|message| refused("workload identity", message))?
        }
    };
    let manager = adopt(manager, url, oauth, token, metadata.issuer)
        .await
        .map_err(|error| failed(name, url, "keeping the token", &error))?;
    tracing::info!(server = %name, "authorized");
    Ok(Some(manager))
}

/// Stores `token` (a token response obtained outside rmcp's flows) as `url`'s credentials and
/// has `manager` use them.
async fn adopt(
    mut manager: AuthorizationManager,
    url: &str,
    oauth: &OAuth,
    token: serde_json::Value,
    issuer: Option<String>,
) -> Result<AuthorizationManager, AuthError> {
    let token: OAuthTokenResponse = serde_json::from_value(token)
        .map_err(|error| AuthError::InternalError(format!("malformed token response: {error}")))?;
    let scopes = token
        .scopes()
        .map(|scopes| scopes.iter().map(|scope| scope.to_string()).collect())
        .unwrap_or_default();
    let received_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let client_id = oauth.client_id.clone().unwrap_or_default();
    let credentials = StoredCredentials::new(client_id, Some(token), scopes, Some(received_at))
        .with_issuer(issuer);
    ServerSlot::new(oauth.store.clone(), url)
        .save(credentials)
        .await?;
    manager.initialize_from_store().await?;
    Ok(manager)
}

/// The authorization code flow: the user authorizes through the callback.
async fn authorization_code(
    manager: AuthorizationManager,
    url: &str,
    name: &str,
    oauth: &OAuth,
    challenge: &str,
) -> Result<Option<AuthorizationManager>, McpError> {
    let Some(callback) = &oauth.authorize else {
        return Ok(None);
    };
    let mut request = AuthorizationRequest::new(oauth.redirect_uri.clone())
        .with_client_name(oauth.client_name.clone())
        .with_challenge(challenge);
    if !oauth.scopes.is_empty() {
        request = request.with_scopes(oauth.scopes.clone());
    }
    if let Some(client_id) = &oauth.client_id {
        request = request.with_preregistered_client(client_id.clone());
        if let Some(secret) = &oauth.client_secret {
            request = request.with_client_secret(secret.clone());
        }
    }
    if let Some(metadata_url) = &oauth.client_metadata_url {
        request = request.with_client_metadata_url(metadata_url.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, error)| failed(name, url, "starting the authorization", &error))?;
    tracing::info!(server = %name, "authorization required; asking the user");
    let prompt = AuthorizationPrompt {
        server: name.to_owned(),
        server_url: url.to_owned(),
        url: session.get_authorization_url().to_owned(),
        redirect_uri: oauth.redirect_uri.clone(),
    };
    let redirect = callback(prompt)
        .await
        .map_err(|error| McpError::Authorization {
            url: url.to_owned(),
            message: format!("no authorization: {error}"),
        })?;
    let answer = AuthorizationCallback::from_redirect_url(&redirect)
        .map_err(|error| failed(name, url, "reading the redirect", &error))?;
    session
        .handle_callback_with_issuer(&answer.code, &answer.csrf_token, answer.issuer.as_deref())
        .await
        .map_err(|error| failed(name, url, "exchanging the authorization code", &error))?;
    tracing::info!(server = %name, "authorized");
    Ok(Some(session.auth_manager))
}

/// The authorization server's metadata: RFC 9728 and RFC 8414 discovery, else, for a server of
/// the 2025-03-26 revision whose metadata rmcp rejects for its issuer, that revision's
/// discovery.
async fn resolve_metadata(
    manager: &AuthorizationManager,
    url: &str,
    challenge: Option<&str>,
) -> Result<AuthorizationMetadata, AuthError> {
    match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => Ok(resolution.metadata),
        Err(error) if legacy::is_issuer_mismatch(&error) => {
            let client = aquaregia::http::client_builder()
                .build()
                .unwrap_or_default();
            match legacy::legacy_metadata(&client, url, challenge).await {
                Some(metadata) => {
                    tracing::info!(%url, "using the 2025-03-26 authorization server discovery");
                    Ok(metadata)
                }
                None => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}

/// An OAuth step that failed. rmcp's messages name URLs and OAuth error codes, never tokens.
fn failed(name: &str, url: &str, step: &str, error: &AuthError) -> McpError {
    tracing::debug!(server = %name, step, %error, "OAuth failed");
    McpError::Authorization {
        url: url.to_owned(),
        message: format!("{step}: {error}"),
    }
}

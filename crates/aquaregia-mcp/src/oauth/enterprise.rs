//! Enterprise-managed authorization (SEP-990, "cross-app access"), on rmcp's exchanges: the
//! user's ID token is exchanged at the enterprise identity provider for an ID-JAG (RFC 8693),
//! which the MCP server's authorization server exchanges for an access token (RFC 7523).

use std::fmt;

use oauth2::ClientSecret;
use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAuthentication, EmaError, EmaExchangeRequest, EmaExchangeStage,
};
use rmcp::transport::auth::{AuthorizationMetadata, default_oauth_http_client};

use super::workload::takes_jwt_bearer;
use super::{OAuth, TokenSource};

/// The enterprise identity provider of [`OAuth::enterprise`](super::OAuth::enterprise): its
/// issuer, its token endpoint, and the client this agent is registered as there.
///
/// `Debug` never shows the client secret.
#[derive(Clone)]
#[must_use]
pub struct IdentityProvider {
    issuer: String,
    token_endpoint: String,
    client_id: String,
    client_secret: Option<String>,
}

impl IdentityProvider {
    /// A public client `client_id` of the identity provider `issuer` (as its metadata names
    /// it), whose token endpoint is `token_endpoint`.
    pub fn new(
        issuer: impl Into<String>,
        token_endpoint: impl Into<String>,
        client_id: impl Into<String>,
    ) -> Self {
        Self {
            issuer: issuer.into(),
            token_endpoint: token_endpoint.into(),
            client_id: client_id.into(),
            client_secret: None,
        }
    }

    /// The client's secret at the identity provider (sent with HTTP Basic authentication).
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }
}

impl fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("issuer", &self.issuer)
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// The access token both exchanges give for `resource`, as the JSON of a token response.
///
/// Errors are sentences for [`McpError::Authorization`](crate::McpError); neither
/// rmcp's nor these name a token.
pub(super) async fn exchange(
    oauth: &OAuth,
    idp: &IdentityProvider,
    id_token: &TokenSource,
    metadata: &AuthorizationMetadata,
    resource: &str,
    scopes: Vec<String>,
) -> Result<serde_json::Value, String> {
    let Some(issuer) = metadata.issuer.clone() else {
        return Err(
            "the authorization server's metadata names no issuer to address the ID-JAG to"
                .to_owned(),
        );
    };
    if !takes_jwt_bearer(metadata) {
        return Err(concat!(
            "the authorization server does not take JWT-bearer grants ",
            "(its metadata's grant_types_supported), so it cannot redeem an ID-JAG"
        )
        .to_owned());
    }
    let Some(client_id) = oauth.client_id.clone() else {
        return Err(concat!(
            "no client id for the MCP server's authorization server: ",
            "give OAuth::client_id the client registered there"
        )
        .to_owned());
    };
    let id_token = id_token()
        .await
        .map_err(|error| format!("no ID token: {error}"))?;
    let idp_server = EmaAuthorizationServer::new(&idp.issuer, &idp.token_endpoint, &idp.client_id)
        .with_client_authentication(match &idp.client_secret {
            Some(secret) => {
                EmaClientAuthentication::ClientSecretBasic(ClientSecret::new(secret.clone()))
            }
            None => EmaClientAuthentication::None,
        });
    let resource_server = EmaAuthorizationServer::new(issuer, &metadata.token_endpoint, client_id)
        .with_client_authentication(resource_authentication(oauth, metadata));
    let http = default_oauth_http_client().map_err(|error| error.to_string())?;
    let token =
        EmaExchangeRequest::new_with_id_token(idp_server, resource_server, resource, &id_token)
            .with_scopes(scopes)
            .exchange(&http, &http)
            .await
            .map_err(|error| describe(&error))?;
    let mut response = serde_json::json!({
        "access_token": token.access_token.secret(),
        "token_type": "Bearer",
    });
    if let Some(expires_in) = token.expires_in {
        response["expires_in"] = expires_in.as_secs().into();
    }
    if !token.scopes.is_empty() {
        let mut scopes: Vec<_> = token.scopes.into_iter().collect();
        scopes.sort();
        response["scope"] = scopes.join(" ").into();
    }
    Ok(response)
}

/// How the client authenticates at the MCP server's authorization server: with its secret as
/// the metadata allows (HTTP Basic unless only the form is listed), else as a public client.
fn resource_authentication(
    oauth: &OAuth,
    metadata: &AuthorizationMetadata,
) -> EmaClientAuthentication {
    let Some(secret) = &oauth.client_secret else {
        return EmaClientAuthentication::None;
    };
    let secret = ClientSecret::new(secret.clone());
    let methods = metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(serde_json::Value::as_array);
    let listed = |method: &str| methods.is_some_and(|methods| methods.iter().any(|m| m == method));
    if listed("client_secret_post") && !listed("client_secret_basic") {
        EmaClientAuthentication::ClientSecretPost(secret)
    } else {
        EmaClientAuthentication::ClientSecretBasic(secret)
    }
}

/// rmcp's sanitized error, with the side that failed named in words.
fn describe(error: &EmaError) -> String {
    let stage = |stage: &EmaExchangeStage| match stage {
        EmaExchangeStage::IdentityProvider => "the identity provider",
        _ => "the MCP server's authorization server",
    };
    match error {
        EmaError::InvalidGrant(EmaExchangeStage::IdentityProvider) => {
            "the identity provider rejected the ID token (invalid_grant): sign in again".to_owned()
        }
        EmaError::InvalidGrant(other) => {
            format!("{} rejected the ID-JAG (invalid_grant)", stage(other))
        }
        EmaError::RequestFailed(other) => format!("{} could not be reached", stage(other)),
        EmaError::OAuthRejected {
            stage: other,
            status,
            code,
        } => {
            format!("{} answered HTTP {status}: {code}", stage(other))
        }
        other => other.to_string(),
    }
}

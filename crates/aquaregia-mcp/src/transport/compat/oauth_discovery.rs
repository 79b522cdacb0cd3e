//! The 2025-03-26 authorization discovery, for servers that publish no protected-resource
//! metadata: the authorization server is the MCP server's origin, its RFC 8414 metadata sits
//! at `<origin>/.well-known/oauth-authorization-server`, and without metadata the endpoints
//! default to `/authorize`, `/token` and `/register` (rmcp covers that last case).
//!
//! That revision sets no rule on the metadata's `issuer`, and servers written for it name
//! issuers such as `<origin>/oauth`, which RFC 8414 discovery rightly rejects (the issuer must
//! be the URL the metadata was derived from). So when rmcp rejects the metadata for its issuer,
//! and only then, this module checks that the server really is a 2025-03-26 one (no
//! protected-resource metadata in its challenge or at either well-known URL) and takes the
//! metadata at its origin if the issuer it names is on that same origin. Servers that publish
//! protected-resource metadata keep the full RFC 8414 check.
//!
//! Remove when rmcp's discovery falls back to the 2025-03-26 rules for such servers.

use std::time::Duration;

use rmcp::transport::auth::{AuthError, AuthorizationMetadata};
use url::Url;

use crate::transport::http::parse_challenge;

/// Bound on a metadata document read here.
const MAX_METADATA_BYTES: usize = 64 * 1024;

/// Bound on each request made here.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether `error` is the issuer check rmcp applies to RFC 8414 metadata.
pub(crate) fn is_issuer_mismatch(error: &AuthError) -> bool {
    matches!(error, AuthError::AuthorizationServerMismatch { .. })
}

/// The 2025-03-26 metadata of the server at `server_url`: `None` when the server publishes
/// protected-resource metadata (the current discovery applies), has no metadata at its
/// origin, or names an issuer on another origin.
pub(crate) async fn legacy_metadata(
    client: &reqwest::Client,
    server_url: &str,
    challenge: Option<&str>,
) -> Option<AuthorizationMetadata> {
    if challenge.is_some_and(|challenge| parse_challenge(challenge).resource_metadata.is_some()) {
        return None;
    }
    let server = Url::parse(server_url).ok()?;
    let origin = server.join("/").ok()?;
    let path = server.path().trim_end_matches('/');
    let mut resource_metadata = vec![origin.join("/.well-known/oauth-protected-resource").ok()?];
    if !path.is_empty() {
        resource_metadata.insert(
            0,
            origin
                .join(&format!("/.well-known/oauth-protected-resource{path}"))
                .ok()?,
        );
    }
    // A document there, or no clear answer: not (provably) a 2025-03-26 server.
    for url in resource_metadata {
        if fetch(client, url).await.ok()?.is_some() {
            return None;
        }
    }
    let body = fetch(
        client,
        origin
            .join("/.well-known/oauth-authorization-server")
            .ok()?,
    )
    .await
    .ok()??;
    let metadata: AuthorizationMetadata = serde_json::from_slice(&body).ok()?;
    let same_origin =
        |endpoint: &str| Url::parse(endpoint).is_ok_and(|url| url.origin() == server.origin());
    if let Some(issuer) = &metadata.issuer
        && !same_origin(issuer)
    {
        tracing::debug!(%issuer, "legacy metadata names an issuer on another origin");
        return None;
    }
    Some(metadata)
}

/// The body of a `200` answer to a GET of `url`; `None` for any other status; an error when
/// there was no answer in time or the body was too large.
async fn fetch(client: &reqwest::Client, url: Url) -> Result<Option<Vec<u8>>, ()> {
    let request = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send();
    let response = tokio::time::timeout(FETCH_TIMEOUT, request)
        .await
        .map_err(drop)?
        .map_err(drop)?;
    if response.status() != reqwest::StatusCode::OK {
        return Ok(None);
    }
    if response
        .content_length()
        .is_some_and(|length| length > MAX_METADATA_BYTES as u64)
    {
        return Err(());
    }
    let body = tokio::time::timeout(FETCH_TIMEOUT, response.bytes())
        .await
        .map_err(drop)?
        .map_err(drop)?;
    if body.len() > MAX_METADATA_BYTES {
        return Err(());
    }
    Ok(Some(body.to_vec()))
}

//! Workload identity (SEP-1933): a JWT the platform issued to the workload is presented to the
//! authorization server as an RFC 7523 JWT-bearer grant. One request, no retry: a rejected
//! assertion is reported as the server's error.

use rmcp::transport::auth::AuthorizationMetadata;

use super::{OAuth, TokenSource};

/// The RFC 7523 grant type (a JWT as the grant): this one's and, for the ID-JAG, the
/// enterprise-managed one's.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The largest token response read.
const MAX_RESPONSE: usize = 64 * 1024;

/// How long the token request may take (rmcp's OAuth requests get as long).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A token request that got no (complete) answer.
fn unanswered(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        format!(
            "the token endpoint did not answer within {} s",
            TIMEOUT.as_secs()
        )
    } else {
        format!("the token endpoint could not be reached: {error}")
    }
}

/// Whether the authorization server takes JWT-bearer grants: its metadata lists them, or lists
/// no grant types at all (trying is then the only way to know).
pub(super) fn takes_jwt_bearer(metadata: &AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("grant_types_supported")
        .and_then(serde_json::Value::as_array)
        .is_none_or(|grants| grants.iter().any(|listed| listed == JWT_BEARER))
}

/// The token response for `assertion`'s JWT, asking for `scopes` of `resource`.
///
/// Errors are sentences for [`McpError::Authorization`](crate::McpError): the server's
/// OAuth error code and description, never the assertion.
pub(super) async fn exchange(
    oauth: &OAuth,
    assertion: &TokenSource,
    metadata: &AuthorizationMetadata,
    resource: &str,
    scopes: &[String],
) -> Result<serde_json::Value, String> {
    if !takes_jwt_bearer(metadata) {
        return Err(
            "the authorization server does not take JWT-bearer grants (its metadata's grant_types_supported)"
                .to_owned(),
        );
    }
    let assertion = assertion()
        .await
        .map_err(|error| format!("no workload identity token: {error}"))?;
    let mut form = vec![
        ("grant_type", JWT_BEARER),
        ("assertion", assertion.as_str()),
        ("resource", resource),
    ];
    let scope = scopes.join(" ");
    if !scope.is_empty() {
        form.push(("scope", &scope));
    }
    let client = aquaregia::http::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .build()
        .map_err(|error| format!("no HTTP client: {error}"))?;
    let mut request = client
        .post(&metadata.token_endpoint)
        .header(reqwest::header::ACCEPT, "application/json");
    match (&oauth.client_id, &oauth.client_secret) {
        (Some(id), Some(secret)) => request = request.basic_auth(id, Some(secret)),
        (Some(id), None) => form.push(("client_id", id)),
        (None, _) => {}
    }
    // Built before the await: the serializer is not `Send`.
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|error| unanswered(&error))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|error| unanswered(&error))?;
    if body.len() > MAX_RESPONSE {
        return Err(format!("the token response is over {MAX_RESPONSE} bytes"));
    }
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if !status.is_success() {
        let code = json["error"].as_str().unwrap_or("no OAuth error code");
        let description = json["error_description"]
            .as_str()
            .filter(|description| !description.contains(assertion.as_str()));
        return Err(match description {
            Some(description) => {
                format!(
                    "the authorization server rejected the workload identity token (HTTP {status}, {code}: {description})"
                )
            }
            None => format!(
                "the authorization server rejected the workload identity token (HTTP {status}, {code})"
            ),
        });
    }
    if !json["access_token"].is_string() {
        return Err("the token response has no access_token".to_owned());
    }
    Ok(json)
}

//! Google OAuth 2.0 access tokens for Vertex AI, from a credentials file: a service-account
//! key (a JWT signed with its RSA key, RS256 through `jsonwebtoken` on aws-lc-rs, exchanged
//! at its `token_uri`) or gcloud's `authorized_user` application-default credentials (a
//! refresh-token grant).
//!
//! The file is the one given to the builder, else `GOOGLE_APPLICATION_CREDENTIALS`, else
//! gcloud's application-default credentials (`$CLOUDSDK_CONFIG`, else
//! `~/.config/gcloud` or `%APPDATA%\gcloud`, `/application_default_credentials.json`).
//! Tokens are kept until [`REFRESH_MARGIN`] before they expire and renewed by one caller at a
//! time ([`TokenSigner`]). The metadata server, workload identity federation and
//! impersonation are not read: such a file is refused, saying what to use instead.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::{ConfigError, Error};
use crate::http::{HttpConfig, RequestSigner, encode_component, safe_url, truncate};

/// The scope Vertex AI's access tokens are asked for.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Where tokens are minted when the credentials name no `token_uri`.
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The grant type of a signed-JWT exchange (RFC 7523).
const JWT_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// How long a minted JWT is valid: the most Google accepts.
const JWT_LIFETIME_SECS: u64 = 3600;
/// A token is renewed this long before it expires (Google's own libraries use 3 min 45 s).
const REFRESH_MARGIN: Duration = Duration::from_secs(225);
/// The longest one token exchange may take (within the request's own timeout).
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a credentials file read: real ones are a few kilobytes.
const MAX_FILE_SIZE: u64 = 1024 * 1024;
/// The provider name of token-endpoint errors.
const TOKEN_PROVIDER: &str = "google-oauth";
/// What to do when no credentials are found.
const HOW_TO_AUTHENTICATE: &str = "set GOOGLE_APPLICATION_CREDENTIALS to a service-account key \
     file, run `gcloud auth application-default login`, or set GOOGLE_CLOUD_ACCESS_TOKEN to an \
     access token";

/// Credentials that mint access tokens.
pub(crate) enum Credentials {
    /// A service-account key: a JWT signed with its key, exchanged at `token_uri`.
    ServiceAccount {
        email: String,
        key: EncodingKey,
        key_id: Option<String>,
        token_uri: String,
        project_id: Option<String>,
    },
    /// gcloud's user credentials: a refresh token exchanged at `token_uri`.
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
        quota_project: Option<String>,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ServiceAccount {
                email, token_uri, ..
            } => f
                .debug_struct("ServiceAccount")
                .field("email", email)
                .field("token_uri", token_uri)
                .finish_non_exhaustive(),
            Self::AuthorizedUser {
                client_id,
                token_uri,
                ..
            } => f
                .debug_struct("AuthorizedUser")
                .field("client_id", client_id)
                .field("token_uri", token_uri)
                .finish_non_exhaustive(),
        }
    }
}

/// A credentials file as Google writes them (both kinds; unknown fields ignored).
#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    project_id: Option<String>,
    private_key_id: Option<String>,
    private_key: Option<String>,
    client_email: Option<String>,
    token_uri: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    refresh_token: Option<String>,
    quota_project_id: Option<String>,
}

fn credentials_error(message: String) -> Error {
    Error::Config(ConfigError::Credentials(message))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// gcloud's application-default credentials file.
fn gcloud_adc_file() -> Option<PathBuf> {
    let dir = match env("CLOUDSDK_CONFIG") {
        Some(dir) => PathBuf::from(dir),
        None if cfg!(windows) => PathBuf::from(env("APPDATA")?).join("gcloud"),
        None => dirs::home_dir()?.join(".config").join("gcloud"),
    };
    Some(dir.join("application_default_credentials.json"))
}

impl Credentials {
    /// The credentials of `explicit`, else of `GOOGLE_APPLICATION_CREDENTIALS`, else of
    /// gcloud's application-default credentials file.
    pub(crate) fn find(explicit: Option<&Path>) -> Result<Self, Error> {
        if let Some(path) = explicit {
            return Self::load(path, "the credentials file given");
        }
        if let Some(path) = env("GOOGLE_APPLICATION_CREDENTIALS") {
            return Self::load(Path::new(&path), "GOOGLE_APPLICATION_CREDENTIALS");
        }
        match gcloud_adc_file() {
            Some(path) if path.is_file() => {
                Self::load(&path, "gcloud's application-default credentials")
            }
            _ => Err(credentials_error(format!(
                "no Google Cloud credentials for Vertex AI: {HOW_TO_AUTHENTICATE}"
            ))),
        }
    }

    /// The credentials in the file at `path`; `source` says where the path came from.
    fn load(path: &Path, source: &str) -> Result<Self, Error> {
        let shown = path.display();
        let unreadable = |reason: &dyn std::fmt::Display| {
            credentials_error(format!("{source}: cannot read {shown}: {reason}"))
        };
        let size = std::fs::metadata(path)
            .map_err(|error| unreadable(&error))?
            .len();
        if size > MAX_FILE_SIZE {
            return Err(unreadable(&format!(
                "{size} bytes is too large for a credentials file"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|error| unreadable(&error))?;
        let file: CredentialsFile = serde_json::from_str(&text).map_err(|error| {
            // serde's message names the place, never the value.
            credentials_error(format!(
                "{source}: {shown} is not a Google credentials file (JSON): {error}"
            ))
        })?;
        let missing = |field: &str| {
            credentials_error(format!(
                "{source}: {shown} has no `{field}`, which a {} credentials file needs",
                file.kind.as_deref().unwrap_or("Google")
            ))
        };
        let token_uri = match file.token_uri.clone() {
            Some(uri) => {
                let parsed = Url::parse(&uri).map_err(|error| {
                    credentials_error(format!(
                        "{source}: {shown} has a `token_uri` that is not a URL: {error}"
                    ))
                })?;
                if !matches!(parsed.scheme(), "https" | "http") {
                    return Err(credentials_error(format!(
                        "{source}: {shown} has a `token_uri` that is not an http(s) URL"
                    )));
                }
                uri
            }
            None => DEFAULT_TOKEN_URI.to_owned(),
        };
        match file.kind.as_deref() {
            Some("service_account") => {
                let pem = file
                    .private_key
                    .as_deref()
                    .ok_or_else(|| missing("private_key"))?;
                let key = EncodingKey::from_rsa_pem(pem.as_bytes()).map_err(|error| {
                    credentials_error(format!(
                        "{source}: the `private_key` of {shown} is not an RSA private key in \
                         PEM form ({error})"
                    ))
                })?;
                Ok(Self::ServiceAccount {
                    email: file.client_email.ok_or_else(|| missing("client_email"))?,
                    key,
                    key_id: file.private_key_id,
                    token_uri,
                    project_id: file.project_id,
                })
            }
            Some("authorized_user") => Ok(Self::AuthorizedUser {
                client_id: file.client_id.clone().ok_or_else(|| missing("client_id"))?,
                client_secret: file
                    .client_secret
                    .clone()
                    .ok_or_else(|| missing("client_secret"))?,
                refresh_token: file
                    .refresh_token
                    .clone()
                    .ok_or_else(|| missing("refresh_token"))?,
                token_uri,
                quota_project: file.quota_project_id,
            }),
            Some(other) => Err(credentials_error(format!(
                "{source}: {shown} holds credentials of type `{other}`, which aquaregia does not \
                 read (only `service_account` keys and `authorized_user` credentials): \
                 {HOW_TO_AUTHENTICATE}"
            ))),
            None => Err(missing("type")),
        }
    }

    /// The project the credentials belong to (a key's `project_id`, a user's quota project).
    pub(crate) fn project(&self) -> Option<&str> {
        match self {
            Self::ServiceAccount { project_id, .. } => project_id.as_deref(),
            Self::AuthorizedUser { quota_project, .. } => quota_project.as_deref(),
        }
    }

    fn token_uri(&self) -> &str {
        match self {
            Self::ServiceAccount { token_uri, .. } | Self::AuthorizedUser { token_uri, .. } => {
                token_uri
            }
        }
    }
}

/// The claims of a service account's token request.
#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'static str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

/// A JWT asserting `email`, for `token_uri`, issued at `now` (seconds since the epoch),
/// signed RS256 with `key`.
fn service_account_jwt(
    email: &str,
    key: &EncodingKey,
    key_id: Option<&str>,
    token_uri: &str,
    now: u64,
) -> Result<String, Error> {
    use_aws_lc_for_jwts();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = key_id.map(str::to_owned);
    let claims = Claims {
        iss: email,
        scope: SCOPE,
        aud: token_uri,
        iat: now,
        exp: now + JWT_LIFETIME_SECS,
    };
    jsonwebtoken::encode(&header, &claims, key).map_err(|error| {
        credentials_error(format!(
            "cannot sign the token request of service account {email}: {error}"
        ))
    })
}

/// Makes aws-lc-rs `jsonwebtoken`'s crypto provider unless one was chosen already: it picks
/// one by itself only when exactly one of its backends is compiled in, and another crate of
/// the build may have turned on the other.
fn use_aws_lc_for_jwts() {
    static CHOSEN: std::sync::Once = std::sync::Once::new();
    CHOSEN.call_once(|| {
        // Err: the process already has one, which is then used.
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
    });
}

/// A token endpoint's answer.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    /// Seconds; Google always sends it (an hour), absent means an hour too.
    expires_in: Option<u64>,
}

/// An access token, as the header that carries it.
struct CachedToken {
    header: HeaderValue,
    /// When it is to be renewed ([`REFRESH_MARGIN`] before it expires).
    refresh_at: Instant,
    /// When it expires.
    expires_at: Instant,
}

/// Sends `Authorization: Bearer <access token>`, minting the token from the credentials and
/// keeping it until shortly before it expires. One caller renews it; the others wait for
/// that token rather than minting their own.
pub(crate) struct TokenSigner {
    credentials: Credentials,
    cached: Mutex<Option<CachedToken>>,
    /// How many tokens were minted, so a caller that waited for a renewal uses its token.
    minted: Mutex<u64>,
    /// Held by the caller that renews the token.
    renewal: tokio::sync::Mutex<()>,
    /// `x-goog-user-project`, for user credentials with a quota project.
    user_project: Option<HeaderValue>,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl TokenSigner {
    pub(crate) fn new(credentials: Credentials) -> Self {
        if let Credentials::AuthorizedUser {
            client_secret,
            refresh_token,
            ..
        } = &credentials
        {
            crate::redact::register(client_secret);
            crate::redact::register(refresh_token);
        }
        let user_project = match &credentials {
            Credentials::AuthorizedUser {
                quota_project: Some(project),
                ..
            } => HeaderValue::from_str(project).ok(),
            _ => None,
        };
        Self {
            credentials,
            cached: Mutex::new(None),
            minted: Mutex::new(0),
            renewal: tokio::sync::Mutex::new(()),
            user_project,
        }
    }

    /// The cached token's header while it is not due for renewal.
    fn fresh(&self) -> Option<HeaderValue> {
        let cached = crate::sync::lock(&self.cached);
        cached
            .as_ref()
            .filter(|token| Instant::now() < token.refresh_at)
            .map(|token| token.header.clone())
    }

    /// The `Authorization` header: the cached token, or a new one.
    async fn authorization(&self, http: &HttpConfig) -> Result<HeaderValue, Error> {
        if let Some(header) = self.fresh() {
            return Ok(header);
        }
        let minted_before = *crate::sync::lock(&self.minted);
        let _renewal = self.renewal.lock().await;
        if *crate::sync::lock(&self.minted) != minted_before {
            // Renewed while this caller waited: that token serves, even when it is short-lived.
            let cached = crate::sync::lock(&self.cached);
            if let Some(token) = cached.as_ref().filter(|t| Instant::now() < t.expires_at) {
                return Ok(token.header.clone());
            }
        }
        let (token, lifetime) = self.exchange(http).await?;
        crate::redact::register(&token);
        let mut header =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| Error::Decode {
                provider: TOKEN_PROVIDER,
                message: "the access token cannot be sent in a header".to_owned(),
                body: String::new(),
            })?;
        header.set_sensitive(true);
        let now = Instant::now();
        *crate::sync::lock(&self.cached) = Some(CachedToken {
            header: header.clone(),
            refresh_at: now + lifetime.saturating_sub(REFRESH_MARGIN),
            expires_at: now + lifetime,
        });
        *crate::sync::lock(&self.minted) += 1;
        tracing::debug!(credentials = ?self.credentials, ?lifetime, "minted a Google access token");
        Ok(header)
    }

    /// Asks the token endpoint for a token: the token and how long it lives.
    async fn exchange(&self, http: &HttpConfig) -> Result<(String, Duration), Error> {
        let token_uri = self.credentials.token_uri();
        let (form, what) = match &self.credentials {
            Credentials::ServiceAccount {
                email,
                key,
                key_id,
                token_uri,
                ..
            } => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |since| since.as_secs());
                let jwt = service_account_jwt(email, key, key_id.as_deref(), token_uri, now)?;
                (
                    form(&[("grant_type", JWT_GRANT), ("assertion", &jwt)]),
                    "the service account's signed JWT",
                )
            }
            Credentials::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                ..
            } => (
                form(&[
                    ("grant_type", "refresh_token"),
                    ("client_id", client_id),
                    ("client_secret", client_secret),
                    ("refresh_token", refresh_token),
                ]),
                "the refresh token",
            ),
        };
        let url = Url::parse(token_uri).map_err(|error| {
            Error::Config(ConfigError::InvalidUrl {
                url: safe_url(token_uri),
                reason: error.to_string(),
            })
        })?;
        let mut request = reqwest::Request::new(Method::POST, url);
        request.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        *request.body_mut() = Some(form.into());
        let bound = EXCHANGE_TIMEOUT.min(http.timeout);
        let timed_out = |_| Error::Timeout { after: bound };
        let response = tokio::time::timeout(bound, http.reqwest()?.execute(request))
            .await
            .map_err(timed_out)?
            .map_err(|error| crate::http::transport_error(token_uri, error))?;
        let status = response.status().as_u16();
        let body = tokio::time::timeout(bound, response.bytes())
            .await
            .map_err(timed_out)?
            .map_err(|error| crate::http::transport_error(token_uri, error))?;
        if !(200..300).contains(&status) {
            return Err(refusal(token_uri, what, status, &body));
        }
        let answer: TokenResponse =
            serde_json::from_slice(&body).map_err(|error| Error::Decode {
                provider: TOKEN_PROVIDER,
                message: format!("the token endpoint's answer is not a token: {error}"),
                // The body holds the token: never kept.
                body: String::new(),
            })?;
        let lifetime = Duration::from_secs(answer.expires_in.unwrap_or(JWT_LIFETIME_SECS));
        Ok((answer.access_token, lifetime))
    }
}

/// `key=value&...`, each part percent-encoded.
fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(key, value)| format!("{}={}", encode_component(key), encode_component(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// [`Error::Provider`] for a token endpoint's refusal: OAuth's `error` and
/// `error_description` (`invalid_grant`, "Invalid JWT Signature.").
fn refusal(token_uri: &str, what: &str, status: u16, body: &[u8]) -> Error {
    let text = crate::redact::redact(&String::from_utf8_lossy(body)).into_owned();
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |key: &str| {
        parsed
            .as_ref()
            .and_then(|value| value.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let code = field("error");
    let reason = match (&code, field("error_description")) {
        (Some(code), Some(description)) => format!("{code}: {description}"),
        (Some(code), None) => code.clone(),
        (None, _) if text.trim().is_empty() => format!("HTTP {status} with an empty body"),
        (None, _) => truncate(&text, 300),
    };
    Error::Provider {
        provider: TOKEN_PROVIDER,
        status,
        message: crate::redact::redact(&format!(
            "the token endpoint {} refused {what}: {reason}",
            safe_url(token_uri)
        ))
        .into_owned(),
        code,
        body: text,
        request_id: None,
        retry_after: None,
    }
}

impl RequestSigner for TokenSigner {
    fn sign<'a>(
        &'a self,
        http: &'a HttpConfig,
        _url: &'a Url,
        _headers: &'a HeaderMap,
        _body: &'a [u8],
    ) -> BoxFuture<'a, Result<Vec<(HeaderName, HeaderValue)>, Error>> {
        Box::pin(async move {
            let mut headers = vec![(AUTHORIZATION, self.authorization(http).await?)];
            if let Some(project) = &self.user_project {
                headers.push((
                    HeaderName::from_static("x-goog-user-project"),
                    project.clone(),
                ));
            }
            Ok(headers)
        })
    }
}

//! Google's OAuth 2.0 token endpoint as Vertex AI clients use it, on 127.0.0.1: the
//! service-account JWT grant (`urn:ietf:params:oauth:grant-type:jwt-bearer`, the assertion's
//! RS256 signature checked with the public half of [`TEST_ONLY_PRIVATE_KEY`], its claims
//! checked) and the `authorized_user` refresh-token grant. Each exchange is counted; the
//! lifetime of the tokens issued and a refusal of every exchange are settings, and an exchange
//! can be held until the test releases it ([`GoogleTokenServer::hold`]).
//!
//! The key pair in `fixtures/` was generated for these tests only: it signs nothing anywhere
//! else and guards nothing.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

/// A 2048-bit RSA private key (PKCS#8 PEM) made for these tests only.
pub const TEST_ONLY_PRIVATE_KEY: &str = include_str!("../fixtures/google-test-only-key.pem");
/// Another test-only key, not the one the endpoint checks signatures with.
pub const TEST_ONLY_OTHER_PRIVATE_KEY: &str =
    include_str!("../fixtures/google-test-only-other-key.pem");
/// The public half of [`TEST_ONLY_PRIVATE_KEY`].
pub const TEST_ONLY_PUBLIC_KEY: &str = include_str!("../fixtures/google-test-only-key.pub.pem");
/// The service account the key file of [`GoogleTokenServer::service_account_key`] names.
pub const CLIENT_EMAIL: &str = "vertex-tests@aquaregia-tests.iam.gserviceaccount.com";
/// The key id of that key file.
pub const KEY_ID: &str = "0123456789abcdef0123456789abcdef01234567";
/// The scope a Vertex AI token is asked for.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The client id, secret and refresh token of [`GoogleTokenServer::authorized_user`].
pub const USER_CLIENT_ID: &str = "764086051850-test.apps.googleusercontent.com";
/// See [`USER_CLIENT_ID`].
pub const USER_CLIENT_SECRET: &str = "d-FL95Q19q7MQmFpd7hHD0Ty";
/// See [`USER_CLIENT_ID`].
pub const USER_REFRESH_TOKEN: &str = "1//test-refresh-token-for-aquaregia";
/// How long a wait for an exchange lasts at most.
const WAIT_BOUND: Duration = Duration::from_secs(30);

/// The claims of an accepted assertion.
#[derive(Debug, Clone)]
pub struct Assertion {
    /// `iss`: the service account.
    pub iss: String,
    /// `scope`.
    pub scope: String,
    /// `aud`: the token endpoint.
    pub aud: String,
    /// `iat`, seconds since the epoch.
    pub iat: u64,
    /// `exp`, seconds since the epoch.
    pub exp: u64,
    /// The JWT header's `kid`.
    pub kid: Option<String>,
}

struct Inner {
    url: String,
    expires_in: AtomicU64,
    /// Every exchange is refused with this status and body.
    refusal: Mutex<Option<(u16, Value)>>,
    /// The next exchange waits for it.
    hold: Mutex<Option<Arc<Notify>>>,
    exchanges: AtomicUsize,
    arrived: watch::Sender<usize>,
    assertions: Mutex<Vec<Assertion>>,
    /// Why the last rejected request was rejected.
    rejections: Mutex<Vec<String>>,
}

/// The token endpoint; stopped when dropped.
pub struct GoogleTokenServer {
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GoogleTokenServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GoogleTokenServer {
    /// Starts the endpoint; tokens live an hour until [`set_expires_in`](Self::set_expires_in).
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let inner = Arc::new(Inner {
            url: format!("http://{addr}/token"),
            expires_in: AtomicU64::new(3599),
            refusal: Mutex::new(None),
            hold: Mutex::new(None),
            exchanges: AtomicUsize::new(0),
            arrived: watch::Sender::new(0),
            assertions: Mutex::new(Vec::new()),
            rejections: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/token", post(token))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { inner, task }
    }

    /// The token endpoint's URL (a key file's `token_uri`).
    pub fn token_uri(&self) -> &str {
        &self.inner.url
    }

    /// The `expires_in` of the tokens issued from now on.
    pub fn set_expires_in(&self, seconds: u64) {
        self.inner.expires_in.store(seconds, Ordering::SeqCst);
    }

    /// Refuses every exchange from now on with `status` and `body`.
    pub fn refuse(&self, status: u16, body: Value) {
        *self.inner.refusal.lock().unwrap() = Some((status, body));
    }

    /// Holds the next exchange until the returned gate is notified (`notify_waiters`), or 2
    /// minutes.
    pub fn hold(&self) -> Arc<Notify> {
        let gate = Arc::new(Notify::new());
        *self.inner.hold.lock().unwrap() = Some(gate.clone());
        gate
    }

    /// How many exchanges arrived (accepted or not).
    pub fn exchanges(&self) -> usize {
        self.inner.exchanges.load(Ordering::SeqCst)
    }

    /// Waits until `count` exchanges arrived (at most 30 s).
    pub async fn wait_exchanges(&self, count: usize) {
        let mut arrived = self.inner.arrived.subscribe();
        tokio::time::timeout(WAIT_BOUND, arrived.wait_for(|n| *n >= count))
            .await
            .expect("token exchanges arrive")
            .expect("server alive");
    }

    /// The claims of the assertions accepted so far.
    pub fn assertions(&self) -> Vec<Assertion> {
        self.inner.assertions.lock().unwrap().clone()
    }

    /// Why requests were rejected (bad signature, wrong claims...), in order.
    pub fn rejections(&self) -> Vec<String> {
        self.inner.rejections.lock().unwrap().clone()
    }

    /// A service-account key file's JSON whose `token_uri` is this endpoint, with
    /// [`TEST_ONLY_PRIVATE_KEY`], [`CLIENT_EMAIL`], [`KEY_ID`] and `project_id`.
    pub fn service_account_key(&self, project_id: &str) -> Value {
        json!({
            "type": "service_account",
            "project_id": project_id,
            "private_key_id": KEY_ID,
            "private_key": TEST_ONLY_PRIVATE_KEY,
            "client_email": CLIENT_EMAIL,
            "client_id": "109876543210987654321",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.inner.url,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/vertex-tests%40aquaregia-tests.iam.gserviceaccount.com",
            "universe_domain": "googleapis.com"
        })
    }

    /// gcloud's `authorized_user` credentials (as `gcloud auth application-default login`
    /// writes them) with this endpoint as `token_uri` and `quota_project_id`.
    pub fn authorized_user(&self, quota_project_id: &str) -> Value {
        json!({
            "account": "",
            "client_id": USER_CLIENT_ID,
            "client_secret": USER_CLIENT_SECRET,
            "quota_project_id": quota_project_id,
            "refresh_token": USER_REFRESH_TOKEN,
            "type": "authorized_user",
            "universe_domain": "googleapis.com",
            "token_uri": self.inner.url
        })
    }
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn token(State(inner): State<Arc<Inner>>, body: Bytes) -> Response {
    let count = inner.exchanges.fetch_add(1, Ordering::SeqCst) + 1;
    inner.arrived.send_replace(count);
    // Only the first exchange after `hold` waits.
    let gate = inner.hold.lock().unwrap().take();
    if let Some(gate) = gate {
        let _ = tokio::time::timeout(Duration::from_secs(120), gate.notified()).await;
    }
    let refusal = inner.refusal.lock().unwrap().clone();
    if let Some((status, body)) = refusal {
        return (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    }
    let form: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let field = |name: &str| {
        form.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let reject = |why: String| {
        inner.rejections.lock().unwrap().push(why.clone());
        oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", &why)
    };
    match field("grant_type") {
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer") => {
            let Some(jwt) = field("assertion") else {
                return reject("no assertion".into());
            };
            match verify(jwt, &inner.url) {
                Ok(assertion) => inner.assertions.lock().unwrap().push(assertion),
                Err(why) => return reject(why),
            }
        }
        Some("refresh_token") => {
            let expected = [
                ("client_id", USER_CLIENT_ID),
                ("client_secret", USER_CLIENT_SECRET),
                ("refresh_token", USER_REFRESH_TOKEN),
            ];
            for (name, value) in expected {
                if field(name) != Some(value) {
                    return reject(format!("wrong or missing {name}"));
                }
            }
        }
        other => return reject(format!("unsupported grant_type {other:?}")),
    }
    axum::Json(json!({
        "access_token": format!("ya29.test-access-token-{count}"),
        "expires_in": inner.expires_in.load(Ordering::SeqCst),
        "token_type": "Bearer"
    }))
    .into_response()
}

/// Checks the assertion's signature with the test key's public half, and its claims: the
/// test service account as issuer, the endpoint as audience, the cloud-platform scope, an
/// hour's lifetime issued now.
fn verify(jwt: &str, token_uri: &str) -> Result<Assertion, String> {
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};
    let key = DecodingKey::from_rsa_pem(TEST_ONLY_PUBLIC_KEY.as_bytes()).unwrap();
    let header = jsonwebtoken::decode_header(jwt).map_err(|e| format!("bad JWT header: {e}"))?;
    if header.alg != Algorithm::RS256 {
        return Err(format!("alg {:?} is not RS256", header.alg));
    }
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_audience(&[token_uri]);
    validation.set_issuer(&[CLIENT_EMAIL]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
    let data = jsonwebtoken::decode::<Value>(jwt, &key, &validation)
        .map_err(|e| format!("Invalid JWT: {e}"))?;
    let text = |name: &str| data.claims[name].as_str().unwrap_or_default().to_owned();
    let number = |name: &str| data.claims[name].as_u64().unwrap_or_default();
    let claims = Assertion {
        iss: text("iss"),
        scope: text("scope"),
        aud: text("aud"),
        iat: number("iat"),
        exp: number("exp"),
        kid: header.kid,
    };
    if claims.scope != SCOPE {
        return Err(format!("scope {} is not {SCOPE}", claims.scope));
    }
    if claims.exp != claims.iat + 3600 {
        return Err("the assertion does not live an hour".into());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if claims.iat.abs_diff(now) > 60 {
        return Err(format!("iat {} is not now ({now})", claims.iat));
    }
    Ok(claims)
}

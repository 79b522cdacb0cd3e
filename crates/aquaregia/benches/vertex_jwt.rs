//! What minting a Vertex AI access token costs on this side: the service-account JWT signed
//! RS256 with a 2048-bit key (`jsonwebtoken` on aws-lc-rs, as the `vertex` provider calls it:
//! header with `kid`, the cloud-platform scope, an hour's lifetime), and reading the key's PEM.
//! A token is minted once an hour per client; the requests in between send the cached one.
//! `cargo bench -p aquaregia --features vertex --bench vertex_jwt`.
#![allow(missing_docs, clippy::print_stdout)]
// Bench code: a failed setup should stop it loudly.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aquaregia_test_support::google_token_server::{CLIENT_EMAIL, KEY_ID, TEST_ONLY_PRIVATE_KEY};
use jsonwebtoken::{Algorithm, EncodingKey, Header};

#[derive(serde::Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

fn mint(key: &EncodingKey, now: u64) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(KEY_ID.to_owned());
    let claims = Claims {
        iss: CLIENT_EMAIL,
        scope: "https://www.googleapis.com/auth/cloud-platform",
        aud: "https://oauth2.googleapis.com/token",
        iat: now,
        exp: now + 3600,
    };
    jsonwebtoken::encode(&header, &claims, key).expect("signed")
}

/// The median over 21 runs of `per_run` calls of `f`, per call.
fn median_per_call(per_run: u32, mut f: impl FnMut()) -> Duration {
    let mut runs: Vec<Duration> = (0..21)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_run {
                f();
            }
            start.elapsed() / per_run
        })
        .collect();
    runs.sort();
    runs[10]
}

fn main() {
    let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let key = EncodingKey::from_rsa_pem(TEST_ONLY_PRIVATE_KEY.as_bytes()).expect("key");
    let sign = median_per_call(200, || {
        black_box(mint(black_box(&key), now));
    });
    let parse = median_per_call(2_000, || {
        black_box(EncodingKey::from_rsa_pem(black_box(TEST_ONLY_PRIVATE_KEY.as_bytes())).ok());
    });
    println!("what                               per call (median of 21 runs)");
    println!(
        "JWT signed RS256 (2048-bit key)    {:>9.1} µs",
        sign.as_secs_f64() * 1e6
    );
    println!(
        "service-account key PEM read       {:>9.1} µs",
        parse.as_secs_f64() * 1e6
    );
}

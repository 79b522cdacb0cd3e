//! SigV4 signing cost per request, as the `bedrock` provider signs each attempt: a POST to a
//! Bedrock runtime URL with its content type and a JSON body of 1, 16 and 128 KiB (a short
//! conversation, a long one, one with an image), with a session token. Three columns: the
//! provider's direct signer (the canonical request written out, the signing key derived once a
//! day), `aws-sigv4`'s general signer as the provider called it until 2026-12-02, and SHA-256
//! of the body alone (which any SigV4 signature of the body pays).
//! `cargo bench -p aquaregia --features bedrock --bench sigv4`.
#![allow(missing_docs, clippy::print_stdout)]
// Bench code: a failed setup should stop it loudly.
#![allow(clippy::expect_used)]

// The provider's signer, compiled here as it is in the library.
#[allow(dead_code, unreachable_pub)]
#[path = "../src/provider/bedrock/sigv4/direct.rs"]
mod direct;

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use sha2::{Digest, Sha256};

const ACCESS_KEY_ID: &str = "AKIDBENCH";
const SECRET: &str = "bench/secret/access/key";
const TOKEN: &str = "session-token";
const URL: &str = "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";

fn aws_sigv4_once(identity: &Identity, body: &[u8]) -> usize {
    let params = v4::SigningParams::builder()
        .identity(identity)
        .region("us-east-1")
        .name("bedrock")
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .expect("params")
        .into();
    let request = SignableRequest::new(
        "POST",
        URL,
        [("content-type", "application/json")].into_iter(),
        SignableBody::Bytes(body),
    )
    .expect("request");
    let (instructions, signature) = sign(request, &params).expect("sign").into_parts();
    instructions.headers().count() + signature.len()
}

/// The median over 21 runs of 2,000 calls of `f`, per call.
fn median_per_call(mut f: impl FnMut()) -> Duration {
    let mut runs: Vec<Duration> = (0..21)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..2_000 {
                f();
            }
            start.elapsed() / 2_000
        })
        .collect();
    runs.sort();
    runs[10]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn main() {
    let identity: Identity = aws_credential_types::Credentials::new(
        ACCESS_KEY_ID,
        SECRET,
        Some(TOKEN.to_owned()),
        None,
        "bench",
    )
    .into();
    let signer =
        direct::DirectSigner::new(ACCESS_KEY_ID, SECRET, Some(TOKEN), "us-east-1", "bedrock");
    let url = reqwest::Url::parse(URL).expect("url");
    println!("per request (median of 21 runs of 2,000)");
    println!("body        direct signer    aws-sigv4    SHA-256 of the body");
    for kib in [1usize, 16, 128] {
        let body = vec![b'x'; kib * 1024];
        let direct = median_per_call(|| {
            let headers = signer
                .sign(
                    SystemTime::now(),
                    "POST",
                    &url,
                    Some("application/json"),
                    black_box(&body),
                )
                .expect("the provider's shape");
            black_box(headers);
        });
        let general = median_per_call(|| {
            black_box(aws_sigv4_once(&identity, black_box(&body)));
        });
        let hash = median_per_call(|| {
            black_box(Sha256::digest(black_box(&body)));
        });
        println!(
            "{kib:>4} KiB    {:>10.2} µs  {:>8.2} µs  {:>10.2} µs",
            micros(direct),
            micros(general),
            micros(hash)
        );
    }
}

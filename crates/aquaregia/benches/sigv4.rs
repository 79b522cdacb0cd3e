//! SigV4 signing cost per request, as the `bedrock` provider signs each attempt: `aws-sigv4`
//! over a POST to a Bedrock runtime URL with its content type and a JSON body of 1, 16 and
//! 128 KiB (a short conversation, a long one, one with an image), with a session token.
//! `cargo bench -p aquaregia --features bedrock --bench sigv4`.
#![allow(missing_docs, clippy::print_stdout)]
// Bench code: a failed setup should stop it loudly.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;

fn sign_once(identity: &Identity, url: &str, body: &[u8]) -> usize {
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
        url,
        [("content-type", "application/json")].into_iter(),
        SignableBody::Bytes(body),
    )
    .expect("request");
    let (instructions, signature) = sign(request, &params).expect("sign").into_parts();
    instructions.headers().count() + signature.len()
}

fn main() {
    let identity: Identity = aws_credential_types::Credentials::new(
        "AKIDBENCH",
        "bench/secret/access/key",
        Some("session-token".to_owned()),
        None,
        "bench",
    )
    .into();
    let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";
    println!("body        per request (median of 21 runs of 2,000)");
    for kib in [1usize, 16, 128] {
        let body = vec![b'x'; kib * 1024];
        let mut runs: Vec<Duration> = (0..21)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..2_000 {
                    black_box(sign_once(&identity, url, black_box(&body)));
                }
                start.elapsed() / 2_000
            })
            .collect();
        runs.sort();
        println!("{kib:>4} KiB    {:>8.2} µs", runs[10].as_secs_f64() * 1e6);
    }
}

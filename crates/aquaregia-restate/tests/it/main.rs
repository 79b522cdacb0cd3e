//! aquaregia-restate's integration tests, one module per behaviour, against a real
//! `restate-server` (`scripts/test-deps.sh restate`) and the `durable_agent` example as the
//! service process. They run with the `real-peers` feature (as `cargo test --workspace
//! --all-features` does); without it they are listed as ignored.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approval;
mod cancel;
mod crash_resume;
mod mcp_task;
mod support;

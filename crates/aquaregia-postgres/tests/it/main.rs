//! `PostgresSessionStore` against a real PostgreSQL: a throwaway cluster per test binary
//! (`aquaregia_test_support::postgres`), a fresh database per test. Where PostgreSQL is missing
//! and cannot be installed (not root), each test says it is skipped and passes.

// Test code: a failed setup or expectation should stop the test loudly, and nothing here is
// public API that would need `Debug`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_debug_implementations
)]

mod concurrency;
mod contract;
mod damaged;
mod migrations;
mod support;

//! `PostgresSessionStore` against a real PostgreSQL: a throwaway cluster per test binary
//! (`aquaregia_test_support::postgres`), a fresh database per test.

mod concurrency;
mod contract;
mod damaged;
mod migrations;
mod support;

//! The behaviour every `SessionStore` shares (`aquaregia_test_support::session_contract`, the
//! suite the file store passes too), on a fresh database each; a handle is a new store with a
//! connection pool of its own, as another process would have.

use crate::support::Database;

aquaregia_test_support::session_store_contract!(async { Database::new("contract") });

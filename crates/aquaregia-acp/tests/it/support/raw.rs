//! The hand-written ACP client (`aquaregia_test_support::acp_client`) connected to an
//! in-memory [`AcpServer`]: [`RawClient::connect`] serves the agent over a duplex pipe, and
//! [`RawClient::finish`] closes the client's write side and waits for `serve` to return.

use std::ops::Deref;

use aquaregia_acp::{AcpError, AcpServer};
use aquaregia_test_support::acp_client;
use tokio::task::JoinHandle;

pub use aquaregia_test_support::acp_client::{Handler, error, ok, stateless_server};

use super::{BOUND, serve_in_memory};

/// [`acp_client::RawClient`] with the in-memory agent it talks to.
pub struct RawClient {
    client: acp_client::RawClient,
    serve: Option<JoinHandle<Result<(), AcpError>>>,
}

impl Deref for RawClient {
    type Target = acp_client::RawClient;

    fn deref(&self) -> &Self::Target {
        &self.client
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        if let Some(serve) = &self.serve {
            serve.abort();
        }
    }
}

impl RawClient {
    /// Starts `server` in memory and connects to it.
    pub fn connect(server: AcpServer) -> Self {
        let (end, serve) = serve_in_memory(server);
        Self {
            client: acp_client::RawClient::in_memory(end),
            serve: Some(serve),
        }
    }

    /// Closes our write side and waits for `serve` to return.
    pub async fn finish(mut self) -> Result<(), AcpError> {
        self.close_write().await;
        let serve = self.serve.take().expect("serve runs until finish");
        tokio::time::timeout(BOUND, serve)
            .await
            .expect("serve returned after the end of input")
            .expect("serve did not panic")
    }
}

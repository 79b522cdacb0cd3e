//! Any of these servers over Streamable HTTP on 127.0.0.1, for a client in another process
//! (a binary under test, a service the test restarts).

use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// A server handler served at `http://127.0.0.1:<port>/mcp`, one rmcp session per client
/// session, all sessions sharing `handler`'s state (it is cloned per session). Stopped when
/// dropped.
pub struct HttpMcpServer {
    /// The endpoint's URL.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl HttpMcpServer {
    /// Serves `handler` on a free port of 127.0.0.1.
    pub async fn start<S>(handler: S) -> Self
    where
        S: ServerHandler + Clone + Send + Sync + 'static,
    {
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            std::sync::Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port on 127.0.0.1");
        let address = listener.local_addr().expect("the bound address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            url: format!("http://{address}/mcp"),
            task,
        }
    }
}

impl Drop for HttpMcpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

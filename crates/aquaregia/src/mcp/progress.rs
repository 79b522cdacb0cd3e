//! `notifications/progress` routed to the tool call that asked for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;

/// The calls waiting for progress, by progress token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, mpsc::UnboundedSender<ProgressNotificationParam>>>,
}

impl ProgressRoutes {
    fn routes(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        HashMap<ProgressToken, mpsc::UnboundedSender<ProgressNotificationParam>>,
    > {
        self.routes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Progress for `token` arrives on the receiver until the route is dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        token: ProgressToken,
    ) -> (Route, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.routes().insert(token.clone(), sender);
        let route = Route {
            routes: self.clone(),
            token,
        };
        (route, receiver)
    }

    /// Hands a notification to its call; progress for no running call is dropped.
    pub(crate) fn deliver(&self, progress: ProgressNotificationParam) {
        if let Some(sender) = self.routes().get(&progress.progress_token) {
            let _ = sender.send(progress);
        }
    }
}

/// A registered call; unregisters when dropped.
pub(crate) struct Route {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.routes().remove(&self.token);
    }
}

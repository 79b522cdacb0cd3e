//! `notifications/progress` routed to the tool call that asked for it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::Notify;

/// The calls waiting for progress, by progress token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, Arc<Inbox>>>,
}

/// One call's undelivered progress. Lighter than a channel: registering is on every call's
/// path, and most calls never get progress.
#[derive(Default)]
pub(crate) struct Inbox {
    queue: Mutex<VecDeque<ProgressNotificationParam>>,
    ready: Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ProgressRoutes {
    /// Progress for `token` arrives in the inbox until the route is dropped.
    pub(crate) fn register(self: &Arc<Self>, token: ProgressToken) -> (Route, Arc<Inbox>) {
        let inbox = Arc::<Inbox>::default();
        lock(&self.routes).insert(token.clone(), inbox.clone());
        let route = Route {
            routes: self.clone(),
            token,
        };
        (route, inbox)
    }

    /// Hands a notification to its call; progress for no running call is dropped.
    pub(crate) fn deliver(&self, progress: ProgressNotificationParam) {
        let inbox = lock(&self.routes).get(&progress.progress_token).cloned();
        if let Some(inbox) = inbox {
            lock(&inbox.queue).push_back(progress);
            inbox.ready.notify_one();
        }
    }
}

impl Inbox {
    /// The next notification, in arrival order; waits for one.
    pub(crate) async fn recv(&self) -> ProgressNotificationParam {
        loop {
            if let Some(progress) = lock(&self.queue).pop_front() {
                return progress;
            }
            // A notification pushed since the check left a permit: this returns at once.
            self.ready.notified().await;
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
        lock(&self.routes.routes).remove(&self.token);
    }
}

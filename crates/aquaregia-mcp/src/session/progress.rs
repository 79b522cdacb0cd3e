//! `notifications/progress` routed to the tool call that asked for it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use aquaregia::sync::lock;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::Notify;

/// How many notifications for no registered call are kept: a server may report progress
/// before the call that sent the request has registered its token (the request goes out
/// before rmcp hands the token back), so such early reports wait for their call. Reports for
/// calls that already finished end up here too, hence the bound.
const EARLY_CAPACITY: usize = 64;

/// The calls waiting for progress, by progress token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    routes: HashMap<ProgressToken, Arc<Inbox>>,
    /// Notifications that arrived before their call registered, oldest first.
    early: VecDeque<ProgressNotificationParam>,
}

/// One call's undelivered progress. Lighter than a channel: registering is on every call's
/// path, and most calls never get progress.
#[derive(Default)]
pub(crate) struct Inbox {
    queue: Mutex<VecDeque<ProgressNotificationParam>>,
    ready: Notify,
}

impl ProgressRoutes {
    /// Progress for `token` arrives in the inbox (what arrived before, first) until the
    /// route is dropped.
    pub(crate) fn register(self: &Arc<Self>, token: ProgressToken) -> (Route, Arc<Inbox>) {
        let inbox = Arc::<Inbox>::default();
        let mut state = lock(&self.state);
        if !state.early.is_empty() {
            let early = std::mem::take(&mut state.early);
            let mut queue = lock(&inbox.queue);
            for progress in early {
                if progress.progress_token == token {
                    queue.push_back(progress);
                } else {
                    state.early.push_back(progress);
                }
            }
        }
        state.routes.insert(token.clone(), inbox.clone());
        drop(state);
        let route = Route {
            routes: self.clone(),
            token,
        };
        (route, inbox)
    }

    /// Hands a notification to its call; one for no running call is kept (a few) in case
    /// its call is about to register.
    pub(crate) fn deliver(&self, progress: ProgressNotificationParam) {
        let mut state = lock(&self.state);
        if let Some(inbox) = state.routes.get(&progress.progress_token).cloned() {
            drop(state);
            lock(&inbox.queue).push_back(progress);
            inbox.ready.notify_one();
            return;
        }
        if state.early.len() == EARLY_CAPACITY {
            state.early.pop_front();
        }
        state.early.push_back(progress);
    }
}

impl Inbox {
    /// The next notification, in arrival order; waits for one.
    pub(crate) async fn recv(&self) -> ProgressNotificationParam {
        loop {
            if let Some(progress) = self.try_recv() {
                return progress;
            }
            // A notification pushed since the check left a permit: this returns at once.
            self.ready.notified().await;
        }
    }

    /// The next notification if one is waiting.
    fn try_recv(&self) -> Option<ProgressNotificationParam> {
        lock(&self.queue).pop_front()
    }
}

/// A registered call; unregisters when dropped.
pub(crate) struct Route {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        lock(&self.routes.state).routes.remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn progress(token: i64, value: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(token)), value)
    }

    #[test]
    fn progress_that_arrives_before_its_call_registers_is_not_lost() {
        let routes = Arc::new(ProgressRoutes::default());
        routes.deliver(progress(1, 1.0));
        routes.deliver(progress(2, 5.0));
        let (_route, received) = routes.register(ProgressToken(NumberOrString::Number(1)));
        routes.deliver(progress(1, 2.0));
        let values: Vec<f64> = std::iter::from_fn(|| received.try_recv())
            .map(|progress| progress.progress)
            .collect();
        assert_eq!(values, [1.0, 2.0]);
        // The other call's report still waits for it.
        let (_other, received) = routes.register(ProgressToken(NumberOrString::Number(2)));
        assert_eq!(received.try_recv().map(|p| p.progress), Some(5.0));
    }

    #[test]
    fn reports_for_no_call_are_bounded() {
        let routes = ProgressRoutes::default();
        for token in 0..(EARLY_CAPACITY as i64 + 10) {
            routes.deliver(progress(token, 1.0));
        }
        assert_eq!(lock(&routes.state).early.len(), EARLY_CAPACITY);
    }
}

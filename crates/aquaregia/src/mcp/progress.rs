//! `notifications/progress` routed to the tool call that asked for it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;

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
    routes: HashMap<ProgressToken, mpsc::UnboundedSender<ProgressNotificationParam>>,
    /// Notifications that arrived before their call registered, oldest first.
    early: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Progress for `token` arrives on the receiver (what arrived before, first) until the
    /// route is dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        token: ProgressToken,
    ) -> (Route, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut state = self.state();
        let early = std::mem::take(&mut state.early);
        for progress in early {
            if progress.progress_token == token {
                let _ = sender.send(progress);
            } else {
                state.early.push_back(progress);
            }
        }
        state.routes.insert(token.clone(), sender);
        drop(state);
        let route = Route {
            routes: self.clone(),
            token,
        };
        (route, receiver)
    }

    /// Hands a notification to its call; one for no running call is kept (a few) in case
    /// its call is about to register.
    pub(crate) fn deliver(&self, progress: ProgressNotificationParam) {
        let mut state = self.state();
        if let Some(sender) = state.routes.get(&progress.progress_token) {
            let _ = sender.send(progress);
            return;
        }
        if state.early.len() == EARLY_CAPACITY {
            state.early.pop_front();
        }
        state.early.push_back(progress);
    }
}

/// A registered call; unregisters when dropped.
pub(crate) struct Route {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.state().routes.remove(&self.token);
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
        let (_route, mut received) = routes.register(ProgressToken(NumberOrString::Number(1)));
        routes.deliver(progress(1, 2.0));
        let values: Vec<f64> = std::iter::from_fn(|| received.try_recv().ok())
            .map(|progress| progress.progress)
            .collect();
        assert_eq!(values, [1.0, 2.0]);
        // The other call's report still waits for it.
        let (_other, mut received) = routes.register(ProgressToken(NumberOrString::Number(2)));
        assert_eq!(received.try_recv().map(|p| p.progress).ok(), Some(5.0));
    }

    #[test]
    fn reports_for_no_call_are_bounded() {
        let routes = ProgressRoutes::default();
        for token in 0..(EARLY_CAPACITY as i64 + 10) {
            routes.deliver(progress(token, 1.0));
        }
        assert_eq!(routes.state().early.len(), EARLY_CAPACITY);
    }
}

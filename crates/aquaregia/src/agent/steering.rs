//! [`Steering`]: messages for a run that is already working.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::message::{ContentPart, Message, Role};

/// Messages for a running agent: what a user types while the agent works.
///
/// Hold a clone, give one to the agent ([`AgentBuilder::steering`](super::AgentBuilder::steering)
/// or [`Agent::with_steering`](super::Agent::with_steering)) and [`send`](Self::send) while a
/// run works. The run takes every queued message at its next tool boundary, after the current
/// step's tool results and before the next model call, and appends each as a user message to
/// its conversation (so the model sees it in its next request, and the message is part of
/// [`AgentRun::messages`](super::AgentRun::messages) and of the output), announcing each with
/// [`AgentEvent::Steered`](super::AgentEvent::Steered). A message sent when the run makes no
/// more model calls (its last answer is streaming, or it ended) stays queued: take it with
/// [`take_pending`](Self::take_pending) for the next turn, or leave it and the next run on
/// this agent takes it before its first model call. A queued message can be
/// [`revoke`](Self::revoke)d until a run takes it.
///
/// ```
/// # async fn demo(agent: aquaregia::Agent) -> Result<(), aquaregia::Error> {
/// let steering = aquaregia::Steering::new();
/// let agent = agent.with_steering(steering.clone());
/// let run = tokio::spawn({
///     let agent = agent.clone();
///     async move { agent.run("Refactor the parser").await }
/// });
/// let id = steering.send("Keep the public API unchanged");
/// # let _ = id;
/// let output = run.await.expect("the run task")?;
/// // Messages the run did not reach: the next turn's.
/// let next_turn = steering.take_pending();
/// # let _ = (output, next_turn);
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Steering {
    queue: Arc<Mutex<Queue>>,
}

#[derive(Default)]
struct Queue {
    next_id: u64,
    pending: VecDeque<SteeringMessage>,
}

/// The id of a message sent with [`Steering::send`], unique for its [`Steering`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SteeringId(pub u64);

impl fmt::Display for SteeringId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A message waiting in a [`Steering`] queue.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct SteeringMessage {
    /// Its id, to [`revoke`](Steering::revoke) it.
    pub id: SteeringId,
    /// The user message, as the model will see it.
    pub message: Message,
}

impl fmt::Debug for Steering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steering")
            .field("pending", &self.lock().pending.len())
            .finish()
    }
}

impl Steering {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue holds plain data that no panic can leave half-written.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `text` as a user message for the run's next tool boundary; returns its id.
    pub fn send(&self, text: impl Into<String>) -> SteeringId {
        self.send_parts(vec![ContentPart::Text { text: text.into() }])
    }

    /// Queues a user message made of `content` (text, images, files), like
    /// [`send`](Self::send).
    pub fn send_parts(&self, content: Vec<ContentPart>) -> SteeringId {
        let mut queue = self.lock();
        let id = SteeringId(queue.next_id);
        queue.next_id += 1;
        queue.pending.push_back(SteeringMessage {
            id,
            message: Message::new(Role::User, content),
        });
        id
    }

    /// Takes the message `id` back if no run has taken it yet: `true` when it was still
    /// queued (it will never be sent), `false` when it was already injected, taken, revoked,
    /// or never sent here.
    pub fn revoke(&self, id: SteeringId) -> bool {
        let mut queue = self.lock();
        match queue.pending.iter().position(|queued| queued.id == id) {
            Some(position) => queue.pending.remove(position).is_some(),
            None => false,
        }
    }

    /// The messages still queued, oldest first.
    pub fn pending(&self) -> Vec<SteeringMessage> {
        self.lock().pending.iter().cloned().collect()
    }

    /// Whether no message is queued.
    pub fn is_empty(&self) -> bool {
        self.lock().pending.is_empty()
    }

    /// Takes every queued message, oldest first (e.g. to make them the next turn's prompt):
    /// they are no longer queued, so no run injects them.
    pub fn take_pending(&self) -> Vec<SteeringMessage> {
        self.lock().pending.drain(..).collect()
    }
}

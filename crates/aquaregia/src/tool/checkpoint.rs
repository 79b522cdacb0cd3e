//! Checkpoints of a running tool call: what a durable runner keeps so that a later attempt of
//! the same call picks up the work instead of starting it again.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

tokio::task_local! {
    /// `None` inside a subagent's run: its calls are not the call the checkpoint is for.
    static CURRENT: Option<ToolCheckpoint>;
}

/// Where a tool call leaves what a later attempt of the *same* call needs to pick up its work,
/// and where that attempt finds it: set by a durable runner around each call, read by the
/// tool (in the task running the call) with [`ToolCheckpoint::current`]. The calls a
/// subagent makes inside that call ([`Agent::into_tool`](crate::Agent::into_tool)) see none.
///
/// A tool whose work outlives the request that started it (an MCP tool the server runs as a
/// task, a job submitted to a queue) [`record`](Self::record)s a handle on that work as soon
/// as it has one; the runner journals it (aquaregia-restate writes it to Restate's journal).
/// When the runner's process dies before the call ends, the next attempt runs the call with
/// that handle as [`resumed`](Self::resumed), and the tool follows the work it already started
/// instead of starting it again: no second side effect. Outside a durable runner there is no
/// checkpoint and tools behave as always.
///
/// Once a tool has recorded a handle, dropping the call (the runner's process going away, an
/// attempt being abandoned) must leave the work running, since a later attempt will resume
/// it, unless the runner [`cancel`](Self::cancel)led the call first (the run itself was
/// cancelled: nothing will resume it); a timeout still stops it.
///
/// ```
/// # async fn demo() {
/// use std::sync::{Arc, Mutex};
/// use aquaregia::ToolCheckpoint;
/// use serde_json::json;
///
/// let journal = Arc::new(Mutex::new(None));
/// let sink = journal.clone();
/// let checkpoint = ToolCheckpoint::new(None, move |state| *sink.lock().unwrap() = Some(state));
/// checkpoint
///     .scope(async {
///         // Inside a tool's `execute`:
///         if let Some(checkpoint) = ToolCheckpoint::current() {
///             match checkpoint.resumed() {
///                 Some(job) => { /* follow `job` */ }
///                 None => checkpoint.record(json!({"job": 42})),
///             }
///         }
///     })
///     .await;
/// assert_eq!(*journal.lock().unwrap(), Some(json!({"job": 42})));
/// # }
/// ```
#[derive(Clone)]
pub struct ToolCheckpoint {
    resumed: Option<Arc<Value>>,
    sink: Arc<dyn Fn(Value) + Send + Sync>,
    cancelled: Arc<AtomicBool>,
}

impl fmt::Debug for ToolCheckpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCheckpoint")
            .field("resumed", &self.resumed)
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl ToolCheckpoint {
    /// A checkpoint for one attempt of a call: `resumed` is what an earlier attempt of the
    /// same call recorded (`None` on the first attempt); `sink` takes what this attempt
    /// records (it must not block).
    pub fn new(resumed: Option<Value>, sink: impl Fn(Value) + Send + Sync + 'static) -> Self {
        Self {
            resumed: resumed.map(Arc::new),
            sink: Arc::new(sink),
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The checkpoint of the tool call running in this task, if its runner keeps them.
    pub fn current() -> Option<Self> {
        CURRENT.try_with(Clone::clone).ok().flatten()
    }

    /// What an earlier attempt of this call recorded: the work to follow rather than start.
    pub fn resumed(&self) -> Option<&Value> {
        self.resumed.as_deref()
    }

    /// Records the handle a later attempt of this call needs to resume the work (the latest
    /// record wins).
    pub fn record(&self, state: Value) {
        (self.sink)(state);
    }

    /// Gives the call up for good (the run was cancelled), before the runner drops it: the
    /// tool then stops the work it recorded instead of leaving it for a later attempt. Every
    /// clone of this checkpoint sees it.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    /// Whether the runner gave the call up ([`cancel`](Self::cancel)).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Runs `future` (a tool call) with this checkpoint as [`current`](Self::current).
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        CURRENT.scope(Some(self), future).await
    }

    /// Runs `future` (the run of a subagent called as a tool) with no checkpoint: the
    /// checkpoint belongs to the call of the subagent, not to the calls the subagent makes.
    pub(crate) async fn hidden<F: Future>(future: F) -> F::Output {
        CURRENT.scope(None, future).await
    }
}

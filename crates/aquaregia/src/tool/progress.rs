//! Progress reports from a running tool call to whoever runs it (the agent loop).

use std::fmt;
use std::sync::Arc;

tokio::task_local! {
    static CURRENT: ProgressReporter;
}

/// How far a running tool call has come.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct ToolProgress {
    /// The progress so far; it grows with every report, even when the total is unknown.
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// What is happening, for people.
    pub message: Option<String>,
}

impl ToolProgress {
    /// Progress without a known total or a message.
    pub fn new(progress: f64) -> Self {
        Self {
            progress,
            total: None,
            message: None,
        }
    }

    /// With the total.
    #[must_use]
    pub fn total(mut self, total: impl Into<Option<f64>>) -> Self {
        self.total = total.into();
        self
    }

    /// With a message.
    #[must_use]
    pub fn message(mut self, message: impl Into<Option<String>>) -> Self {
        self.message = message.into();
        self
    }
}

/// Where a tool call's progress goes: set by the agent loop around each call, read by the tool
/// (in the task running the call) with [`ProgressReporter::current`].
///
/// ```
/// # async fn demo() {
/// use std::sync::{Arc, Mutex};
/// use aquaregia::{ProgressReporter, ToolProgress};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = seen.clone();
/// let reporter = ProgressReporter::new(move |progress| sink.lock().unwrap().push(progress));
/// reporter
///     .scope(async {
///         // Inside a tool's `execute`:
///         if let Some(progress) = ProgressReporter::current() {
///             progress.report(ToolProgress::new(1.0).total(2.0));
///         }
///     })
///     .await;
/// assert_eq!(seen.lock().unwrap()[0].total, Some(2.0));
/// # }
/// ```
#[derive(Clone)]
pub struct ProgressReporter {
    sink: Arc<dyn Fn(ToolProgress) + Send + Sync>,
}

impl fmt::Debug for ProgressReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgressReporter").finish_non_exhaustive()
    }
}

impl ProgressReporter {
    /// A reporter handing every report to `sink` (which must not block).
    pub fn new(sink: impl Fn(ToolProgress) + Send + Sync + 'static) -> Self {
        Self {
            sink: Arc::new(sink),
        }
    }

    /// The reporter of the tool call running in this task, if its runner wants progress.
    pub fn current() -> Option<Self> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Reports progress.
    pub fn report(&self, progress: ToolProgress) {
        (self.sink)(progress);
    }

    /// Runs `future` (a tool call) with this reporter as [`current`](Self::current).
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        CURRENT.scope(self, future).await
    }
}

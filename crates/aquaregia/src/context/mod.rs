//! Keeping a run within its model's context: token estimates, tool output budgets,
//! compaction and tool deferral. The agent loop applies them; nothing here knows about MCP.

mod budget;
mod compact;
mod deferral;
mod store;
mod tokens;

pub use crate::model::{DEFAULT_CONTEXT_WINDOW, context_window_for, known_context_window};
pub use crate::tool::OutputBudget;
pub(crate) use budget::{MIN_BUDGET_TOKENS, fit_output};
pub(crate) use compact::Compaction;
pub use compact::CompactionReport;
pub(crate) use deferral::Deferral;
pub use deferral::{MAX_REQUEST_TOOLS, SEARCH_TOOLS, ToolDeferral};
pub use store::{OutputSlice, READ_TOOL_OUTPUT, ToolOutputStore};
pub use tokens::{
    BYTES_PER_TOKEN, estimate_image_tokens, estimate_request_tokens, estimate_tokens,
};
pub(crate) use tokens::{estimate_descriptor_tokens, estimate_messages_tokens, estimator_kind};

/// Output tokens kept free for the answer when `max_output_tokens` is not set (at most a
/// quarter of the window).
pub const DEFAULT_RESERVED_OUTPUT_TOKENS: u64 = 8_192;

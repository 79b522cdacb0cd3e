//! Which MCP servers' hints are believed, and the review of tools that are new or changed
//! since they were pinned.
//!
//! A server's annotations (`readOnlyHint`...) are hints: they let a read-only tool run
//! without a question only for a server the user trusts, named by the embedding application
//! ([`AcpServer::trust_server`](crate::AcpServer::trust_server)), marked trusted in the pin
//! file (`aquaregia mcp trust`, which writes the same file), or trusted by answering a
//! permission question about one of its read-only tools with "always".
//!
//! With a pin file, a tool that is new or changed since it was pinned is withheld from the
//! model until the user approves it in a `session/request_permission` that shows what
//! changed. It is asked when the session's tools are listed for a prompt turn: at the start
//! of the first turn (not when the session opens, as the client knows no session before
//! `session/new` is answered, and shows questions within a turn), and again whenever a server
//! says its tools changed (`tools/list_changed`, picked up between steps). A session that is
//! never prompted asks nothing.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionId, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use aquaregia::sync::lock;
use aquaregia_mcp::{PinChange, PinError, PinFile, PinReview};
use serde_json::json;

use crate::rpc::CancelOnDrop;
use crate::state::SharedState;
use crate::updates;

/// The servers whose hints are believed, shared by every session of a connection.
#[derive(Debug, Default)]
pub(crate) struct Trust {
    /// Where trust is kept across runs (`None`: only for this process).
    pins: Option<PinFile>,
    /// Servers trusted by name: by the application, or by an answer in this process.
    names: Mutex<HashSet<String>>,
}

impl Trust {
    pub(crate) fn new(pins: Option<PinFile>, names: impl IntoIterator<Item = String>) -> Self {
        Self {
            pins,
            names: Mutex::new(names.into_iter().collect()),
        }
    }

    /// The pin file, if tools are pinned.
    pub(crate) fn pins(&self) -> Option<&PinFile> {
        self.pins.as_ref()
    }

    /// Whether `server` is trusted by name (its tools' own flag covers the pin file).
    pub(crate) fn trusts(&self, server: &str) -> bool {
        lock(&self.names).contains(server)
    }

    /// The servers trusted by name now.
    pub(crate) fn names(&self) -> Vec<String> {
        lock(&self.names).iter().cloned().collect()
    }

    /// Trusts `server` from now on: in this process, and in the pin file when there is one.
    pub(crate) fn trust(&self, server: &str) -> Result<(), PinError> {
        lock(&self.names).insert(server.to_owned());
        match &self.pins {
            Some(pins) => pins.set_trusted(server, true).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Where an answer trusting a server is kept, for the option's label.
    pub(crate) fn kept_where(&self) -> &'static str {
        if self.pins.is_some() {
            "kept in the tool pins"
        } else {
            "until the agent stops"
        }
    }
}

/// One session's reviews of new and changed tools, asked of the client.
pub(crate) struct PinReviews {
    cx: ConnectionTo<Client>,
    session_id: String,
    /// The session's state (for the prompt's cancel).
    state: SharedState,
    /// For the reviews' tool call ids.
    next: AtomicU64,
}

/// The options of a review.
const APPROVE: &str = "approve";
const WITHHOLD: &str = "withhold";

impl PinReviews {
    pub(crate) fn new(
        cx: ConnectionTo<Client>,
        session_id: String,
        state: SharedState,
    ) -> Arc<Self> {
        Arc::new(Self {
            cx,
            session_id,
            state,
            next: AtomicU64::new(1),
        })
    }

    /// Asks the user whether the model may use a new or changed tool: a `tool_call` showing
    /// the review, the permission request (approve / withhold), and the call completed
    /// (approved) or failed (withheld). A tool withheld stays withheld for this session.
    pub(crate) async fn ask(self: Arc<Self>, review: PinReview) -> bool {
        let id = format!("pin-review-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (server, tool) = (&review.server, &review.tool);
        let title = match review.change {
            PinChange::New => {
                format!("MCP server `{server}` has a new tool `{tool}`: approve it before use")
            }
            _ => format!(
                "Tool `{tool}` of MCP server `{server}` changed since it was approved: approve \
                 it before use"
            ),
        };
        let mut text = format!(
            "MCP server `{server}` {}. Until it is approved the model does not see it.\n",
            match review.change {
                PinChange::New => format!("offers a tool `{tool}` it did not have when pinned"),
                _ => format!("changed its tool `{tool}` since it was pinned"),
            }
        );
        // A changed command is in the diff already.
        if let Some(command) = review
            .command
            .as_ref()
            .filter(|_| !review.diff.starts_with("- command:"))
        {
            text.push_str(&format!("\nThe server runs: {}\n", command.join(" ")));
        }
        text.push_str(&format!(
            "\nWhat changed (- as approved, + as now):\n```diff\n{}```\n",
            review.diff
        ));
        let raw_input = json!({
            "server": server,
            "tool": tool,
            "change": match review.change { PinChange::New => "new", _ => "changed" },
        });
        let content = vec![ToolCallContent::from(updates::text_block(&text))];
        updates::send(
            &self.cx,
            &self.session_id,
            updates::tool_call(
                &id,
                &title,
                ToolKind::Other,
                &raw_input,
                (content.clone(), Vec::new()),
            ),
        );
        let option = |id: &'static str, name: String, kind| {
            PermissionOption::new(PermissionOptionId::new(id), name, kind)
        };
        let request = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(
                id.clone(),
                ToolCallUpdateFields::new()
                    .title(title)
                    .kind(ToolKind::Other)
                    .status(ToolCallStatus::Pending)
                    .content(content.clone())
                    .raw_input(raw_input),
            ),
            vec![
                option(
                    APPROVE,
                    format!("Approve `{tool}` of `{server}` (pin it as it is now)"),
                    PermissionOptionKind::AllowOnce,
                ),
                option(
                    WITHHOLD,
                    format!("Withhold `{tool}` from the model in this session"),
                    PermissionOptionKind::RejectOnce,
                ),
            ],
        );
        let sent = self.cx.send_request(updates::redacted(request));
        // A cancelled prompt drops this future: the client is told to stop asking.
        let mut guard = CancelOnDrop(Some(sent.cancellation_handle()));
        let reply = sent.block_task().await;
        guard.0 = None;
        let approved = match &reply {
            Ok(RequestPermissionResponse {
                outcome: RequestPermissionOutcome::Selected(selected),
                ..
            }) => &*selected.option_id.0 == APPROVE,
            Ok(_) => {
                // Answered "cancelled" because the prompt was: not a decision. The turn ends
                // (it selects on the cancellation) and the next one asks again.
                if self.prompt_cancelled() {
                    return std::future::pending().await;
                }
                false
            }
            Err(error) => {
                tracing::warn!(error = %error.message, "session/request_permission failed");
                false
            }
        };
        let (status, outcome) = if approved {
            (
                ToolCallStatus::Completed,
                format!("Approved: `{tool}` is pinned as it is now and the model can use it."),
            )
        } else {
            (
                ToolCallStatus::Failed,
                format!(
                    "Withheld: the model does not see `{tool}` in this session; a new session \
                     asks again."
                ),
            )
        };
        tracing::info!(session = %self.session_id, server, tool, approved, "tool pin review");
        let mut content = content;
        content.push(ToolCallContent::from(updates::text_block(&outcome)));
        updates::send(
            &self.cx,
            &self.session_id,
            agent_client_protocol::v1::schema::SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                id,
                ToolCallUpdateFields::new()
                    .status(status)
                    .content(content)
                    .raw_output(json!({ "approved": approved, "message": outcome })),
            )),
        );
        approved
    }

    fn prompt_cancelled(&self) -> bool {
        self.state
            .prompt_token()
            .is_some_and(|token| token.is_cancelled())
    }
}

//! Approvals that outlive the process: a decision on one exact tool call, signed with a key
//! the session store does not hold, and runs paused on them saved in a [`SessionStore`].

use std::fmt;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::machine::AgentRun;
use crate::error::Error;
use crate::message::ToolCall;
use crate::session::{SessionId, SessionStore, SessionUpdate};

type HmacSha256 = Hmac<Sha256>;

/// The shortest [`ApprovalKey`] secret, in bytes.
pub const MIN_APPROVAL_KEY_BYTES: usize = 32;

/// The session metadata entry a paused run is saved under (see [`AgentRun::save_paused`]).
pub const PAUSED_RUN_METADATA_KEY: &str = "aquaregia.paused_run";

/// What is signed, so a signature of another kind of message can never pass for an approval.
const DOMAIN: &[u8] = b"aquaregia.approval.v1";

/// The secret that signs and checks [`Approval`]s (HMAC-SHA256). Keep it away from the session
/// store: whoever can write the store but does not hold the key cannot forge an approval, nor
/// move one to another call. Its `Debug` output never shows the secret.
#[derive(Clone)]
pub struct ApprovalKey {
    /// HMAC-SHA256 keyed with the secret, cloned for each signature.
    mac: HmacSha256,
}

impl fmt::Debug for ApprovalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalKey").finish_non_exhaustive()
    }
}

impl ApprovalKey {
    /// A key from a secret of at least [`MIN_APPROVAL_KEY_BYTES`] random bytes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when the secret is shorter.
    pub fn new(secret: impl Into<Vec<u8>>) -> Result<Self, Error> {
        let secret = secret.into();
        if secret.len() < MIN_APPROVAL_KEY_BYTES {
            return Err(Error::InvalidRequest(format!(
                "an approval key needs at least {MIN_APPROVAL_KEY_BYTES} bytes of secret, not {}",
                secret.len()
            )));
        }
        let mac = HmacSha256::new_from_slice(&secret).map_err(|error| {
            Error::InvalidRequest(format!("the approval key is not usable: {error}"))
        })?;
        Ok(Self { mac })
    }

    /// Approves `call` exactly as it is (id, tool, arguments).
    pub fn approve(&self, call: &ToolCall) -> Approval {
        self.decide(call, ApprovalDecision::Approved)
    }

    /// Denies `call`; the model is told `reason`.
    pub fn deny(&self, call: &ToolCall, reason: impl Into<String>) -> Approval {
        self.decide(
            call,
            ApprovalDecision::Denied {
                reason: reason.into(),
            },
        )
    }

    fn decide(&self, call: &ToolCall, decision: ApprovalDecision) -> Approval {
        let mut approval = Approval {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments_sha256: arguments_sha256(call),
            decision,
            signature: String::new(),
        };
        approval.signature = hex(&self.mac(&approval).finalize().into_bytes());
        approval
    }

    fn mac(&self, approval: &Approval) -> HmacSha256 {
        let (decision, reason) = match &approval.decision {
            ApprovalDecision::Approved => ("approved", ""),
            ApprovalDecision::Denied { reason } => ("denied", reason.as_str()),
        };
        let mut mac = self.mac.clone();
        for field in [
            DOMAIN,
            approval.call_id.as_bytes(),
            approval.tool.as_bytes(),
            approval.arguments_sha256.as_bytes(),
            decision.as_bytes(),
            reason.as_bytes(),
        ] {
            // Length-prefixed, so no two different approvals sign the same bytes.
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field);
        }
        mac
    }

    /// Whether `approval` approves exactly `call` and was signed with this key.
    pub(super) fn approves(&self, approval: &Approval, call: &ToolCall) -> bool {
        approval.decision == ApprovalDecision::Approved
            && approval.call_id == call.id
            && approval.tool == call.name
            && approval.arguments_sha256 == arguments_sha256(call)
            && self.verify(approval)
    }

    /// Whether `approval` was signed with this key (compared in constant time).
    fn verify(&self, approval: &Approval) -> bool {
        let Some(signature) = unhex(&approval.signature) else {
            return false;
        };
        self.mac(approval).verify_slice(&signature).is_ok()
    }
}

/// A signed decision on one tool call of a paused run: made by [`ApprovalKey::approve`] or
/// [`ApprovalKey::deny`], applied with [`AgentRun::apply_approval`] (or
/// [`RunStepper::approve`](super::RunStepper::approve)). Serde data, to carry from whoever
/// decides (a CLI, a web page) to whoever resumes the run.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The call's id.
    pub call_id: String,
    /// The tool the call names.
    pub tool: String,
    /// SHA-256 (hex) of the call's arguments as JSON.
    pub arguments_sha256: String,
    /// What was decided.
    pub decision: ApprovalDecision,
    /// HMAC-SHA256 (hex) of all the above under the [`ApprovalKey`].
    pub signature: String,
}

/// What an [`Approval`] decides.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// The call runs.
    Approved,
    /// The call does not run; the model is told it was rejected, with this reason.
    Denied {
        /// Why.
        reason: String,
    },
}

/// SHA-256 (hex) of a call's arguments as JSON.
fn arguments_sha256(call: &ToolCall) -> String {
    let json = serde_json::to_vec(&call.arguments).unwrap_or_default();
    hex(&Sha256::digest(json))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|start| u8::from_str_radix(text.get(start..start + 2)?, 16).ok())
        .collect()
}

impl AgentRun {
    /// Applies a signed decision to the call of the current step that waits for it (see
    /// [`NextAction::AwaitApproval`](super::NextAction::AwaitApproval)): an approved call
    /// becomes ready to run, a denied one gets [`ToolExecError::Denied`](crate::ToolExecError::Denied)
    /// as its result. Prefer [`RunStepper::approve`](super::RunStepper::approve), which also
    /// ends the step when that was its last call.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`], and the run is unchanged, when no call with the approval's
    /// id waits for approval, when the call names another tool or has other arguments than
    /// the approval was made for (a saved run edited since), or when the signature is not
    /// this key's (a forged or edited approval).
    pub fn apply_approval(&mut self, approval: &Approval, key: &ApprovalKey) -> Result<(), Error> {
        let Some(position) = self.position_awaiting(&approval.call_id) else {
            return Err(Error::InvalidRequest(format!(
                "no tool call `{}` of this run waits for approval",
                approval.call_id
            )));
        };
        let Some(call) = self
            .tool_phase()
            .and_then(|tools| tools.calls.get(position))
        else {
            return Err(Error::InvalidRequest("the approved call is gone".into()));
        };
        if call.call.name != approval.tool {
            return Err(Error::InvalidRequest(format!(
                "the approval is for tool `{}`, but call `{}` names `{}`",
                approval.tool, approval.call_id, call.call.name
            )));
        }
        if arguments_sha256(&call.call) != approval.arguments_sha256 {
            return Err(Error::InvalidRequest(format!(
                "the approval is for other arguments than call `{}` has",
                approval.call_id
            )));
        }
        if !key.verify(approval) {
            return Err(Error::InvalidRequest(format!(
                "the approval of call `{}` is not signed with this key",
                approval.call_id
            )));
        }
        self.decide(position, approval);
        Ok(())
    }

    /// Saves this run in session `id` of `store` (as the metadata entry
    /// [`PAUSED_RUN_METADATA_KEY`]), to resume it in another process with
    /// [`load_paused`](Self::load_paused). The store holds the run, never the
    /// [`ApprovalKey`].
    ///
    /// # Errors
    ///
    /// What the store failed with.
    pub async fn save_paused(&self, store: &dyn SessionStore, id: &SessionId) -> Result<(), Error> {
        let value = serde_json::to_value(self)
            .map_err(|error| Error::InvalidRequest(format!("the run cannot be saved: {error}")))?;
        let mut update = SessionUpdate::new();
        update
            .metadata
            .insert(PAUSED_RUN_METADATA_KEY.to_owned(), value);
        store
            .update(id, update)
            .await
            .map_err(|error| Error::Other(Box::new(error)))?;
        Ok(())
    }

    /// The run [`save_paused`](Self::save_paused) left in session `id` of `store`, if any.
    ///
    /// # Errors
    ///
    /// What the store failed with; [`Error::InvalidRequest`] when the saved run does not load
    /// (another format version, parts that do not fit together).
    pub async fn load_paused(
        store: &dyn SessionStore,
        id: &SessionId,
    ) -> Result<Option<Self>, Error> {
        let session = store
            .load(id)
            .await
            .map_err(|error| Error::Other(Box::new(error)))?;
        match session.meta.metadata.get(PAUSED_RUN_METADATA_KEY) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(value) => serde_json::from_value(value.clone())
                .map(Some)
                .map_err(|error| {
                    Error::InvalidRequest(format!("the paused run does not load: {error}"))
                }),
        }
    }
}

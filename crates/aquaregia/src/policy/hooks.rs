//! [`PolicyHooks`]: a [`PermissionPolicy`] as agent hooks.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Decision, POLICY_TARGET, PermissionPolicy, PolicyRequest};
use crate::agent::{AgentHooks, ToolCallDecision};
use crate::message::ToolCall;
use crate::tool::Tool;

/// Answers a [`Decision::Ask`]: `true` runs the call, `false` refuses it.
pub type AskHandler = dyn Fn(PolicyRequest) -> BoxFuture<'static, bool> + Send + Sync;

/// The reason a call the policy wanted asked about is refused when there is no one to ask.
const NO_ONE_TO_ASK: &str = "this tool call needs approval and no one can be asked";
/// The reason a call is refused when the ask handler said no.
const REFUSED: &str = "the user rejected this tool call";

/// Decides every tool call of an agent with a [`PermissionPolicy`]: `Allow` runs it, `Deny`
/// refuses it with the reason (the model gets it), `Ask` calls the ask handler, and without
/// one refuses the call ("this tool call needs approval and no one can be asked").
///
/// ```no_run
/// # async fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
/// use aquaregia::policy::{PermissionPolicy, PolicyHooks};
///
/// let policy = PermissionPolicy::new().deny(["delete_*"]).allow_read_only();
/// let hooks = PolicyHooks::new(policy).on_ask(|request| {
///     Box::pin(async move { request.tool == "write_file" })
/// });
/// let agent = client.agent("gpt-5-mini").hooks(hooks).build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PolicyHooks {
    policy: Arc<PermissionPolicy>,
    principal: String,
    front_end: String,
    ask: Option<Arc<AskHandler>>,
}

impl fmt::Debug for PolicyHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyHooks")
            .field("policy", &self.policy)
            .field("principal", &self.principal)
            .field("front_end", &self.front_end)
            .field("ask", &self.ask.is_some())
            .finish()
    }
}

impl PolicyHooks {
    /// Hooks deciding with `policy`, as principal `"sdk"` of front end `"sdk"`, with no ask
    /// handler.
    pub fn new(policy: impl Into<Arc<PermissionPolicy>>) -> Self {
        Self {
            policy: policy.into(),
            principal: "sdk".into(),
            front_end: "sdk".into(),
            ask: None,
        }
    }

    /// The principal (the session id) the requests name.
    #[must_use]
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = principal.into();
        self
    }

    /// The front end the requests name.
    #[must_use]
    pub fn front_end(mut self, front_end: impl Into<String>) -> Self {
        self.front_end = front_end.into();
        self
    }

    /// What answers a [`Decision::Ask`].
    #[must_use]
    pub fn on_ask(
        mut self,
        ask: impl Fn(PolicyRequest) -> BoxFuture<'static, bool> + Send + Sync + 'static,
    ) -> Self {
        self.ask = Some(Arc::new(ask));
        self
    }

    /// The request for one call, as these hooks put it to the policy.
    pub fn request(&self, call: &ToolCall, tool: Option<&Tool>) -> PolicyRequest {
        PolicyRequest::new(self.principal.clone(), call, tool).front_end(self.front_end.clone())
    }
}

#[async_trait::async_trait]
impl AgentHooks for PolicyHooks {
    async fn on_tool_call_start(&self, call: &ToolCall, tool: Option<&Tool>) -> ToolCallDecision {
        let request = self.request(call, tool);
        match self.policy.decide(&request) {
            Decision::Allow => ToolCallDecision::Allow,
            Decision::Deny(reason) => {
                tracing::debug!(target: POLICY_TARGET, tool = %call.name, %reason, "refused");
                ToolCallDecision::Deny(reason)
            }
            Decision::Ask => match &self.ask {
                Some(ask) if ask(request).await => ToolCallDecision::Allow,
                Some(_) => ToolCallDecision::Deny(REFUSED.into()),
                None => ToolCallDecision::Deny(NO_ONE_TO_ASK.into()),
            },
        }
    }
}

//! [`AgentBuilder`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::Steering;
use super::hooks::HookChain;
use super::{Agent, AgentConfig, AgentHooks, StepContext, StepOverrides, ToolErrorPolicy};
use crate::context::{MIN_BUDGET_TOKENS, OutputBudget, ToolDeferral, ToolOutputStore};
use crate::error::Error;
use crate::model::{LanguageModel, ToolChoice};
use crate::pricing::PriceTable;
use crate::prompt_cache::PromptCaching;
use crate::telemetry::Telemetry;
use crate::tool::{Tool, ToolRegistry};

pub(crate) type PrepareStepFn = dyn for<'a> Fn(&StepContext<'a>) -> BoxFuture<'static, Result<StepOverrides, Error>>
    + Send
    + Sync;

/// Configures an [`Agent`]: start with [`AgentBuilder::new`] on any [`LanguageModel`], or with
/// [`Client::agent`](crate::Client::agent).
///
/// ```no_run
/// # async fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
/// let agent = client
///     .agent("gpt-5-mini")
///     .instructions("Answer in one sentence.")
///     .max_steps(8)
///     .build()?;
/// let output = agent.run("Why is the sky blue?").await?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct AgentBuilder {
    language_model: Arc<dyn LanguageModel>,
    model: String,
    instructions: Option<String>,
    tools: Vec<Tool>,
    max_steps: usize,
    max_tool_concurrency: usize,
    tool_error_policy: ToolErrorPolicy,
    approval_required: Vec<String>,
    approval_key: Option<super::ApprovalKey>,
    prepare_step: Option<Arc<PrepareStepFn>>,
    hooks: Vec<Arc<dyn AgentHooks>>,
    cancellation: Option<CancellationToken>,
    steering: Option<Steering>,
    temperature: Option<f32>,
    max_output_tokens: Option<u32>,
    tool_choice: ToolChoice,
    extra_body: Option<Map<String, Value>>,
    prices: Option<Arc<PriceTable>>,
    prompt_caching: PromptCaching,
    output_budget: Option<OutputBudget>,
    output_store: Option<ToolOutputStore>,
    context_window: Option<u64>,
    deferral: ToolDeferral,
    telemetry: Telemetry,
}

impl fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model", &self.model)
            .field("tools", &self.tools.len())
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// Starts an agent on `model`, with no instructions or tools, at most 20 steps and up to 8
    /// tool calls at once.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), aquaregia::Error> {
    /// use std::sync::Arc;
    /// let model = aquaregia::Client::anthropic().build()?.model("claude-sonnet-4-5");
    /// let agent = aquaregia::AgentBuilder::new(Arc::new(model)).max_steps(8).build()?;
    /// # Ok(()) }
    /// ```
    pub fn new(model: Arc<dyn LanguageModel>) -> Self {
        Self {
            model: model.model_id().to_owned(),
            language_model: model,
            instructions: None,
            tools: Vec::new(),
            max_steps: 20,
            max_tool_concurrency: 8,
            tool_error_policy: ToolErrorPolicy::ReturnToModel,
            approval_required: Vec::new(),
            approval_key: None,
            prepare_step: None,
            hooks: Vec::new(),
            cancellation: None,
            steering: None,
            temperature: None,
            max_output_tokens: None,
            tool_choice: ToolChoice::Auto,
            extra_body: None,
            prices: None,
            prompt_caching: PromptCaching::none(),
            output_budget: None,
            output_store: None,
            context_window: None,
            deferral: ToolDeferral::new(),
            telemetry: Telemetry::new(),
        }
    }

    /// System instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Adds one tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds several tools (e.g. everything an MCP server offers).
    pub fn tools(mut self, tools: Vec<Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The most model calls one run may make (default 20, at least 1).
    pub fn max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// How many tool calls of one step may run at once (default 8, at least 1).
    pub fn max_tool_concurrency(mut self, max_tool_concurrency: usize) -> Self {
        self.max_tool_concurrency = max_tool_concurrency;
        self
    }

    /// What a failing tool does to the run (default [`ToolErrorPolicy::ReturnToModel`]).
    pub fn tool_error_policy(mut self, policy: ToolErrorPolicy) -> Self {
        self.tool_error_policy = policy;
        self
    }

    /// Calls of these tools (by name) wait for an [`Approval`](crate::Approval) signed with
    /// `key` before they run: the run pauses on
    /// [`NextAction::AwaitApproval`](crate::NextAction::AwaitApproval), to be saved
    /// ([`AgentRun::save_paused`](crate::AgentRun::save_paused)) and continued with
    /// [`RunStepper::approve`](crate::RunStepper::approve) in this process or another (whose
    /// agent holds the same key). Whenever a run is loaded, which of its calls wait is derived
    /// again from these settings and the approvals it holds, each checked with `key`, so an
    /// edited saved run cannot let a call skip its approval. Such runs are driven with
    /// [`Agent::stepper`](crate::Agent::stepper); [`Agent::run`] fails with
    /// [`Error::InvalidRequest`] when it reaches a call waiting for approval. Calling this
    /// again adds tools and replaces the key.
    pub fn require_approval<I, S>(mut self, key: super::ApprovalKey, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.approval_required
            .extend(tools.into_iter().map(Into::into));
        self.approval_key = Some(key);
        self
    }

    /// Runs before every model call and may change that step: tools, model, messages...
    ///
    /// ```no_run
    /// # async fn demo(client: aquaregia::Client, mcp: aquaregia::Tool) -> Result<(), aquaregia::Error> {
    /// use aquaregia::StepOverrides;
    /// let agent = client
    ///     .agent("gpt-5-mini")
    ///     .prepare_step(|ctx| {
    ///         let late = ctx.step() >= 3;
    ///         async move {
    ///             Ok(if late { StepOverrides::new().active_tools(Vec::<String>::new()) } else { StepOverrides::new() })
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn prepare_step<F, Fut>(mut self, prepare: F) -> Self
    where
        F: Fn(&StepContext<'_>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<StepOverrides, Error>> + Send + 'static,
    {
        self.prepare_step = Some(Arc::new(move |ctx: &StepContext<'_>| {
            Box::pin(prepare(ctx)) as BoxFuture<'static, _>
        }));
        self
    }

    /// Adds callbacks around steps and tool calls. Several can be added: they run in the
    /// order added; for a tool call the first denial wins and a rewrite is what later hooks see.
    pub fn hooks(mut self, hooks: impl AgentHooks + 'static) -> Self {
        self.hooks.push(Arc::new(hooks));
        self
    }

    /// Like [`hooks`](Self::hooks), for hooks already behind an `Arc`.
    pub fn shared_hooks(mut self, hooks: Arc<dyn AgentHooks>) -> Self {
        self.hooks.push(hooks);
        self
    }

    /// Messages to inject into the agent's runs while they work (see [`Steering`]): each
    /// queued message joins the conversation at the next tool boundary.
    pub fn steering(mut self, steering: Steering) -> Self {
        self.steering = Some(steering);
        self
    }

    /// Cancelling this token stops the run promptly with [`StopReason::Cancelled`](super::StopReason::Cancelled).
    pub fn cancellation_token(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }

    /// Sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Output token limit per model call.
    pub fn max_output_tokens(mut self, max_output_tokens: u32) -> Self {
        self.max_output_tokens = Some(max_output_tokens);
        self
    }

    /// Whether the model may, must or must not call tools (default auto).
    pub fn tool_choice(mut self, tool_choice: ToolChoice) -> Self {
        self.tool_choice = tool_choice;
        self
    }

    /// Provider-specific top-level request fields (e.g. Anthropic `thinking`).
    pub fn extra_body(mut self, extra_body: Map<String, Value>) -> Self {
        self.extra_body = Some(extra_body);
        self
    }

    /// Prices per model: steps, [`AgentEvent::Usage`](super::AgentEvent::Usage) and the run's
    /// output then carry a [`Cost`](crate::Cost) next to their usage.
    ///
    /// ```no_run
    /// # fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
    /// use aquaregia::{ModelPrice, PriceTable};
    /// let agent = client
    ///     .agent("gpt-4o-mini")
    ///     .price_table(PriceTable::new().with("gpt-4o-mini", ModelPrice::new(0.15, 0.60)))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn price_table(mut self, prices: PriceTable) -> Self {
        self.prices = Some(Arc::new(prices));
        self
    }

    /// What the provider should cache across this agent's requests (default: nothing
    /// explicit). [`PromptCaching::breakpoints`] suits Anthropic agents; a per-session
    /// [`key`](PromptCaching::key) suits OpenAI ones.
    ///
    /// ```no_run
    /// # fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
    /// use aquaregia::PromptCaching;
    /// let agent = client
    ///     .agent("claude-sonnet-4-5")
    ///     .prompt_caching(PromptCaching::breakpoints())
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn prompt_caching(mut self, prompt_caching: PromptCaching) -> Self {
        self.prompt_caching = prompt_caching;
        self
    }

    /// Limits what one tool result may put into the context (off by default). A longer result
    /// reaches the model as its head and tail with a marker saying what was cut; the full
    /// output is kept in the [`tool_output_store`](Self::tool_output_store) and the built-in
    /// `read_tool_output(id, offset, length)` tool, added to the agent's tools (and offered to
    /// the model once the store holds something), reads it.
    /// A tool's own [`Tool::with_output_budget`] wins over this one.
    ///
    /// ```no_run
    /// # fn demo(client: aquaregia::Client) -> Result<(), aquaregia::Error> {
    /// use aquaregia::OutputBudget;
    /// let agent = client.agent("gpt-5-mini").tool_output_budget(OutputBudget::tokens(25_000)).build()?;
    /// # Ok(()) }
    /// ```
    pub fn tool_output_budget(mut self, budget: OutputBudget) -> Self {
        self.output_budget = Some(budget);
        self
    }

    /// Where cut and elided tool outputs are kept (default: in memory). Setting one also adds
    /// `read_tool_output`. Share a store between agents to keep outputs across them.
    pub fn tool_output_store(mut self, store: ToolOutputStore) -> Self {
        self.output_store = Some(store);
        self
    }

    /// The model's context window in tokens (default: from
    /// [`context_window_for`](crate::context_window_for)). Before each model call, a request
    /// estimated over the window minus the reserved output (`max_output_tokens`, or
    /// [`DEFAULT_RESERVED_OUTPUT_TOKENS`](crate::DEFAULT_RESERVED_OUTPUT_TOKENS) up to a
    /// quarter of the window) is compacted: older tool results are elided first, then older
    /// turns are summarised by the model. A request that still does not fit fails with
    /// [`Error::ContextWindowExceeded`] before it is sent.
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// When tools are deferred behind `search_tools` (default: above 64 tools).
    pub fn tool_deferral(mut self, deferral: ToolDeferral) -> Self {
        self.deferral = deferral;
        self
    }

    /// What the run's GenAI spans record (`invoke_agent`, `chat`, `execute_tool`; see
    /// [`TELEMETRY_TARGET`](crate::TELEMETRY_TARGET)): the agent's name, the conversation id,
    /// and whether prompts, answers and tool arguments and results are recorded (off by
    /// default).
    pub fn telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// Checks the configuration (tool names, limits) and builds the agent.
    pub fn build(mut self) -> Result<Agent, Error> {
        if self.max_steps == 0 {
            return Err(Error::InvalidRequest("max_steps must be at least 1".into()));
        }
        if self.max_tool_concurrency == 0 {
            return Err(Error::InvalidRequest(
                "max_tool_concurrency must be at least 1".into(),
            ));
        }
        if self.model.trim().is_empty() {
            return Err(Error::InvalidRequest("the model name is empty".into()));
        }
        if let Some(budget) = self.output_budget
            && budget.max_tokens() < MIN_BUDGET_TOKENS
        {
            return Err(Error::InvalidRequest(format!(
                "the tool output budget must be at least {MIN_BUDGET_TOKENS} tokens ({} bytes)",
                OutputBudget::tokens(MIN_BUDGET_TOKENS).max_bytes()
            )));
        }
        if self.context_window == Some(0) {
            return Err(Error::InvalidRequest(
                "the context window must not be 0".into(),
            ));
        }
        self.deferral.validate()?;
        let largest_tool_budget = self
            .tools
            .iter()
            .filter_map(Tool::output_budget)
            .max_by_key(|b| b.max_bytes());
        let output_store = match (
            self.output_store,
            self.output_budget.or(largest_tool_budget),
        ) {
            (Some(store), _) => Some(store),
            (None, Some(_)) => Some(ToolOutputStore::in_memory()),
            (None, None) => None,
        };
        let mut tools = self.tools;
        if let Some(store) = &output_store {
            let budget = self
                .output_budget
                .or(largest_tool_budget)
                .unwrap_or(OutputBudget::tokens(25_000));
            tools.push(store.read_tool(budget.max_bytes_usize().saturating_sub(512).max(512)));
        }
        let tools = Arc::new(ToolRegistry::from_tools(tools)?);
        Ok(Agent {
            inner: Arc::new(AgentConfig {
                language_model: self.language_model,
                model: self.model,
                instructions: self.instructions,
                tools,
                max_steps: self.max_steps,
                max_tool_concurrency: self.max_tool_concurrency,
                tool_error_policy: self.tool_error_policy,
                approval_required: self.approval_required,
                approval_key: self.approval_key,
                prepare_step: self.prepare_step,
                hooks: match self.hooks.len() {
                    0 => None,
                    1 => self.hooks.pop(),
                    _ => Some(Arc::new(HookChain(self.hooks))),
                },
                cancellation: self.cancellation,
                steering: self.steering,
                temperature: self.temperature,
                max_output_tokens: self.max_output_tokens,
                tool_choice: self.tool_choice,
                extra_body: self.extra_body,
                prices: self.prices,
                prompt_caching: self.prompt_caching,
                output_schema: None,
                output_budget: self.output_budget,
                output_store,
                context_window: self.context_window,
                deferral: self.deferral,
                telemetry: self.telemetry,
            }),
        })
    }
}

impl crate::client::Client {
    /// Starts building an agent on `model`: short for
    /// `AgentBuilder::new(Arc::new(client.model(model)))`.
    pub fn agent(&self, model: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(Arc::new(self.model(model)))
    }
}

//! # aquaregia
//!
//! An LLM agent SDK whose tools come from anywhere: Rust closures, any MCP server
//! ([`aquaregia-mcp`](https://docs.rs/aquaregia-mcp)), or MCP servers an editor tunnels over
//! ACP ([`aquaregia-acp`](https://docs.rs/aquaregia-acp)). One [`Client`] per provider, an
//! [`Agent`] loop with hooks, an error policy and an async `prepare_step`, and [`Tool`]s that
//! all look the same to the loop.
//!
//! ```no_run
//! use aquaregia::{Client, tool};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), aquaregia::Error> {
//! let (client, model) = Client::from_model_spec("openai-chat:gpt-4o-mini")?;
//! let add = tool("add")
//!     .description("Adds two numbers")
//!     .raw_schema(json!({
//!         "type": "object",
//!         "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
//!         "required": ["a", "b"]
//!     }))
//!     .execute_raw(|args| async move {
//!         Ok(args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0))
//!     });
//! let agent = client.agent(model).tool(add).build()?;
//! let output = agent.run("What is 2.5 + 4?").await?;
//! println!("{}", output.text);
//! # Ok(()) }
//! ```
//!
//! ## Providers
//!
//! | builder | wire API | key / URL from |
//! |---|---|---|
//! | [`Client::openai`] | OpenAI Responses | `OPENAI_API_KEY`, `OPENAI_BASE_URL` |
//! | [`Client::openai_chat`] | Chat Completions (OpenAI, vLLM, llama.cpp, DeepSeek, Groq...) | `OPENAI_API_KEY`, `OPENAI_BASE_URL` |
//! | [`Client::anthropic`] | Anthropic Messages | `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` |
//! | [`Client::gemini`] | Gemini `generateContent` | `GEMINI_API_KEY` or `GOOGLE_API_KEY`, `GOOGLE_GEMINI_BASE_URL` |
//! | [`Client::ollama`] | Chat Completions at `OLLAMA_HOST` | no key |
//!
//! An agent runs on any [`LanguageModel`]: [`Client::model`] is one, [`Fallback`] wraps several
//! (the next one on rate limits, overload and outages), and a provider of your own is one trait
//! implementation away ([`AgentBuilder::new`]; `examples/custom_provider.rs`).
//!
//! ## Middleware
//!
//! Wrappers that are [`LanguageModel`]s themselves, stacked with [`LanguageModelExt`]
//! (`model.with_rate_limit(limiter).with_retry(policy)`; the last one added is the
//! outermost): [`Retry`] tries retryable failures again after the provider's `Retry-After`
//! ([`Error::retry_after`]) or backoff with jitter, within a [`RetryPolicy`] and an optional
//! shared [`RetryBudget`] (the client's own retries are off beneath it, so attempts never
//! multiply); [`RateLimited`] keeps calls within a shared [`RateLimiter`]'s requests and
//! tokens per minute; [`Cassette`] records answers to a JSON file and replays them in tests,
//! secrets scrubbed, with no network or key. [`StepOverrides::language_model`] runs one step
//! on another model (a cheap one for steps that only call tools).
//!
//! ## Usage, cost, caching, typed answers
//!
//! Every step reports a [`Usage`] normalised across providers, [`AgentEvent::Usage`] follows
//! each model call, and a [`PriceTable`] ([`AgentBuilder::price_table`]) adds a [`Cost`].
//! [`PromptCaching`] asks providers to cache the prompt prefix. [`Agent::run_typed`] and
//! [`Client::generate_object`] return a value of a `schemars` type ([`OutputSchema`]).
//!
//! ## Staying within the context
//!
//! [`AgentBuilder::tool_output_budget`] cuts long tool results to head and tail (the built-in
//! `read_tool_output` tool reads the rest from a [`ToolOutputStore`]); before each model call
//! a request over the model's window ([`context_window_for`],
//! [`AgentBuilder::context_window`]) is compacted ([`AgentEvent::Compacted`],
//! [`Agent::compact`]); above 64 tools the model finds tools with `search_tools`
//! ([`ToolDeferral`]). Token counts come from one estimator, [`estimate_tokens`].
//!
//! ## Runs as data
//!
//! A run is an [`AgentRun`]: serde data (conversation, steps, usage, the current step's tool
//! calls and their results) with [`AgentRun::next_action`] saying what it needs next.
//! [`Agent::start`] makes one, [`Agent::resume`] finishes a saved one, and [`RunStepper`]
//! ([`Agent::stepper`]) drives it one model call or tool call at a time, which is what a
//! durable execution engine records; [`Agent::run`] and [`Agent::stream`] drive the same
//! machine.
//!
//! ## Subagents
//!
//! [`Agent::into_tool`] makes an agent a tool another agent calls with a task: it runs with
//! its own model, tools and limits, its events nested under the parent's call
//! ([`AgentEvent::SubAgent`]), its tool calls decided by the parent run's hooks
//! ([`AgentHooks::on_subagent_start`]), its tokens counted in the parent's totals.
//!
//! ## Observability
//!
//! Runs emit `tracing` spans that follow the OpenTelemetry GenAI semantic conventions, with
//! the target [`TELEMETRY_TARGET`]: `invoke_agent` per run, `chat {model}` per model call
//! (provider, models, usage, finish reasons) and `execute_tool {tool}` per tool call
//! (`aquaregia-mcp` adds `tools/call {tool}` per MCP request, under the same target). Export
//! them with `tracing-opentelemetry`; the `otel` feature adds the attributes plain `tracing`
//! fields cannot carry (arrays). Prompts, answers and tool arguments are recorded only when
//! [`Telemetry::record_content`] is set ([`AgentBuilder::telemetry`]).
//!
//! ```no_run
//! // With opentelemetry_sdk, tracing-opentelemetry and tracing-subscriber:
//! use opentelemetry::trace::TracerProvider as _;
//! use tracing_subscriber::filter::Targets;
//! use tracing_subscriber::{Layer, layer::SubscriberExt, util::SubscriberInitExt};
//!
//! let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
//!     // .with_batch_exporter(an OTLP exporter)
//!     .build();
//! let layer = tracing_opentelemetry::layer()
//!     // The conventions' attributes only, and about half the cost per span.
//!     .with_location(false)
//!     .with_threads(false)
//!     .with_tracked_inactivity(false)
//!     .with_tracer(provider.tracer("my-app"))
//!     .with_filter(Targets::new().with_target(aquaregia::TELEMETRY_TARGET, tracing::Level::INFO));
//! tracing_subscriber::registry().with(layer).init();
//! ```
//!
//! ## Cargo features
//!
//! With `default-features = false` and no TLS feature, only `http://` endpoints (a local model
//! server, say) can be reached.
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `rustls` | on | HTTPS through rustls with the aws-lc-rs provider and the platform verifier |
//! | `rustls-no-provider` | off | HTTPS through rustls with a crypto provider you install (e.g. `ring`) |
//! | `native-tls` | off | HTTPS through the platform's TLS library (OpenSSL, Secure Transport, SChannel) |
//! | `jsonschema` | on | tool arguments and typed answers checked against their schemas |
//! | `otel` | off | OpenTelemetry: array attributes on the spans (`opentelemetry`, `tracing-opentelemetry`) |
//! | `test-utils` | off | `test_utils::ScriptedModel`: a scripted in-process model for agent tests (no dependencies) |
//! | `cedar` | off | tool-call permission policies in Cedar ([`policy::PermissionPolicy::cedar`](policy::PermissionPolicy)) |
//! | `bedrock` | off | Amazon Bedrock's Converse API (`bedrock:<model-id>`): SigV4 signing (`aws-sigv4`) and ConverseStream's event-stream framing (`aws-smithy-eventstream`) |
//! | `vertex` | off | Google Vertex AI: Gemini (`vertex:<model>`) and Claude (`vertex-anthropic:<model>`), with OAuth access tokens minted from a service-account key (RS256 JWTs, `jsonwebtoken` on aws-lc-rs) or gcloud's application-default credentials |
//!
//! MCP servers' tools come from the [`aquaregia-mcp`](https://docs.rs/aquaregia-mcp) crate, so
//! this one does not depend on rmcp.
//!
//! ## Skills
//!
//! [`Skills::discover`] reads Agent Skills (`SKILL.md` folders) from the user's and the
//! project's skill folders; [`Skills::tool`] offers them to the model by name and description
//! only, and loads one's instructions when the model calls it (progressive disclosure).
//! `aquaregia-mcp` adds MCP servers' skills (the skills extension, SEP-2640).
//!
//! ## Sessions
//!
//! [`SessionStore`] keeps conversations across processes; [`FileSessionStore`] (always
//! compiled) appends one JSON line per turn to a file per session in the user's data dir.
//! [`Conversation`] is what a chat front end keeps between prompts: the history the model
//! continues from, saved turn by turn in a store (the CLI's `chat` and the ACP agent both use
//! it), with compaction stored beside the turns and another process's turns merged.

mod agent;
mod client;
mod context;
mod conversation;
mod error;
pub mod files;
pub mod http;
mod message;
mod middleware;
mod model;
pub mod permission_rules;
pub mod policy;
mod pricing;
mod prompt_cache;
mod provider;
pub mod redact;
mod schema_check;
mod session;
mod skills;
mod structured;
pub mod sync;
mod telemetry;
#[cfg(feature = "test-utils")]
pub mod test_utils;
mod tool;
mod usage;
pub mod workspace;

pub use agent::{
    AGENT_RUN_FORMAT_VERSION, Agent, AgentBuilder, AgentEvent, AgentHooks, AgentInput, AgentOutput,
    AgentRun, AgentStream, Approval, ApprovalDecision, ApprovalKey, MIN_APPROVAL_KEY_BYTES,
    NextAction, PAUSED_RUN_METADATA_KEY, RunStepper, Steering, SteeringId, SteeringMessage,
    StepContext, StepOverrides, StepResult, StopReason, SubAgentSetup, ToolCallDecision,
    ToolCallOutcome, ToolErrorPolicy, TypedOutput,
};
pub use client::{Client, ClientBuilder, ClientModel};
pub use context::{
    BYTES_PER_TOKEN, CompactionReport, DEFAULT_CONTEXT_WINDOW, DEFAULT_RESERVED_OUTPUT_TOKENS,
    MAX_REQUEST_TOOLS, OutputBudget, OutputSlice, READ_TOOL_OUTPUT, SEARCH_TOOLS, ToolDeferral,
    ToolOutputStore, context_window_for, estimate_image_tokens, estimate_request_tokens,
    estimate_tokens, known_context_window,
};
pub use conversation::{Conversation, ForkOrigin, Recorded, SlashCommand, continued_history};
pub use error::{ConfigError, Error};
pub use message::{ContentPart, ImageSource, Message, Reasoning, Role, ToolCall, ToolResult};
pub use middleware::{
    Cassette, CassetteBuilder, CassetteMode, LanguageModelExt, RateLimited, RateLimiter,
    RateLimiterBuilder, Retry, RetryBudget, RetryPolicy,
};
pub use model::{
    Fallback, FinishReason, GeneratedObject, LanguageModel, ModelRequest, ModelResponse,
    ModelState, ModelStream, ProviderKind, StreamEvent, ToolChoice, generate_object,
};
pub use pricing::{Cost, ModelPrice, PriceTable};
pub use prompt_cache::PromptCaching;
pub use session::{
    FileSessionStore, NewSession, SessionError, SessionId, SessionMeta, SessionPage, SessionQuery,
    SessionStore, SessionTurn, SessionUpdate, StoredSession, Timestamp, TimestampParseError,
};
pub use skills::{
    MAX_SKILL_FILE_BYTES, SKILL_TOOL, Skill, SkillError, SkillIssue, SkillOrigin, SkillSource,
    Skills,
};
pub use structured::OutputSchema;
pub use telemetry::{TELEMETRY_TARGET, Telemetry};
pub use tool::{
    ContentBlock, IntoToolOutput, Json, MAX_TOOL_NAME_LEN, Tool, ToolAnnotations, ToolBuilder,
    ToolDescriptor, ToolExecError, ToolExecutor, ToolOutput, ToolRegistry, TypedToolBuilder,
    is_valid_tool_name, tool,
};
pub use tool::{ProgressReporter, ToolCheckpoint, ToolProgress};
pub use usage::Usage;

/// The README's examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// Re-exported so [`ToolExecutor`] and [`AgentHooks`] can be implemented without adding the
/// dependency yourself.
pub use async_trait::async_trait;
/// Re-exported for [`AgentBuilder::cancellation_token`].
pub use tokio_util::sync::CancellationToken;

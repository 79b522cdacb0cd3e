//! Durable aquaregia agent runs on [Restate](https://restate.dev): a run outlives the process
//! (and the machine) that started it.
//!
//! [`DurableAgent`] serves an [`Agent`](aquaregia::Agent) as the Restate workflow `AgentRun`,
//! keyed by run id. The run is the core's sans-IO [`AgentRun`](aquaregia::AgentRun), driven
//! step by step ([`RunStepper`](aquaregia::RunStepper)); every model call and every tool call
//! is one journaled step (`ctx.run`), so when the service process dies in the middle of a run,
//! Restate invokes it again and the replay returns the recorded answers and results: the run
//! finishes with the same answer, completed tool calls are not made again and completed model
//! calls are not sent again. Tool calls that need approval suspend the run on a durable
//! promise until someone holding the [`ApprovalKey`](aquaregia::ApprovalKey) signs a decision
//! and sends it to the workflow's `approve` handler, from any process, hours or days later,
//! across restarts.
//!
//! ```no_run
//! use aquaregia::{ApprovalKey, Client, tool};
//! use aquaregia_restate::DurableAgent;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let key = ApprovalKey::new(std::env::var("AQUAREGIA_APPROVAL_KEY")?)?;
//! let (client, model) = Client::from_env()?;
//! let agent = client
//!     .agent(model)
//!     .tool(
//!         tool("deploy")
//!             .description("Deploys the site")
//!             .execute_raw(|_| async { Ok::<_, aquaregia::ToolExecError>("deployed") }),
//!     )
//!     .require_approval(key.clone(), ["deploy"])
//!     .build()?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9080").await?;
//! DurableAgent::new(agent)
//!     .approval_key(key)
//!     .serve(listener, tokio::signal::ctrl_c())
//!     .await;
//! # Ok(()) }
//! ```
//!
//! Then register the service with Restate and start runs through its ingress:
//!
//! ```text
//! curl -X POST localhost:9070/deployments -H 'content-type: application/json' \
//!      -d '{"uri": "http://127.0.0.1:9080"}'
//! curl -X POST localhost:8080/AgentRun/run-1/run/send -H 'content-type: application/json' \
//!      -d '{"prompt": "Deploy the site"}'
//! curl -X POST localhost:8080/AgentRun/run-1/pending          # the calls waiting
//! curl -X POST localhost:8080/AgentRun/run-1/approve -H 'content-type: application/json' \
//!      -d "$SIGNED_APPROVAL"                                   # an `Approval` as JSON
//! curl localhost:8080/restate/workflow/AgentRun/run-1/attach  # the RunResult
//! ```
//!
//! The crate's `durable_agent` example is such a service and the command that approves.
//!
//! # Cargo features
//!
//! | feature | what it adds |
//! |---|---|
//! | `real-peers` | the integration tests against a real `restate-server` (tests only) |

mod cancel;
mod journal;
mod run;
mod workflow;

pub use run::{PendingApprovals, RunRequest, RunResult};
pub use workflow::{DurableAgent, WORKFLOW_NAME};

/// The Restate SDK this crate builds on, for serving [`DurableAgent`] next to services of
/// your own (`Endpoint::builder().bind(durable_agent).bind(other)`).
pub use restate_sdk;

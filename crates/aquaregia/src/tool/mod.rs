//! Tools: what a model can call, however it is implemented.

mod budget;
mod builder;
mod checkpoint;
mod output;
mod progress;
mod registry;

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::error::Error;
use crate::schema_check::SchemaCheck;

pub use budget::{BYTES_PER_TOKEN, OutputBudget};
pub use builder::{ToolBuilder, TypedToolBuilder, tool};
pub use checkpoint::ToolCheckpoint;
pub use output::{ContentBlock, IntoToolOutput, Json, ToolOutput};
pub use progress::{ProgressReporter, ToolProgress};
pub use registry::{ToolRegistry, is_valid_tool_name};

/// The longest tool name providers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// What the model is told about a tool: its name, what it does, and its arguments' JSON schema.
///
/// The schema is kept exactly as given (`$schema`, `$defs`, `$ref`, `anyOf`...); any adaptation a
/// provider needs happens when a request is built.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescriptor {
    /// The name the model calls the tool by: 1-64 characters of `[A-Za-z0-9_-]`.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON schema of the arguments object.
    pub input_schema: Value,
}

/// Hints about a tool's behaviour (from MCP annotations or set by hand).
///
/// They never reach the model; agents use them for permission prompts and UI.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolAnnotations {
    /// A human-readable title.
    pub title: Option<String>,
    /// The tool does not change its environment.
    pub read_only: Option<bool>,
    /// The tool may destroy or overwrite data.
    pub destructive: Option<bool>,
    /// Calling it twice with the same arguments has no further effect.
    pub idempotent: Option<bool>,
    /// The tool reaches an open world (the internet...).
    pub open_world: Option<bool>,
}

impl ToolAnnotations {
    /// Empty annotations.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Marks the tool read-only (or not).
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = Some(read_only);
        self
    }

    /// Marks the tool destructive (or not).
    #[must_use]
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.destructive = Some(destructive);
        self
    }
}

/// Why a tool call failed.
///
/// The `Display` text is what the model is told. Two errors are equal when they are the same
/// variant with the same text ([`Failed`](Self::Failed) compares its error's text).
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolExecError {
    /// The tool ran and reported a failure.
    #[error("{0}")]
    Execution(String),
    /// The tool failed with an error of its own, kept whole: its text is what the model is
    /// told; downcast it to act on a particular error, and
    /// [`source`](std::error::Error::source) goes on with its causes. See
    /// [`ToolExecError::failed`].
    #[error(transparent)]
    Failed(Arc<dyn std::error::Error + Send + Sync>),
    /// The arguments did not match the tool's schema (or could not be decoded).
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool took longer than its time limit.
    #[error("the tool call timed out")]
    Timeout,
    /// The model called a tool that does not exist in this step.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// A hook or the user denied the call; the reason is given to the model.
    #[error("the tool call was rejected: {0}")]
    Denied(String),
    /// The run was cancelled while the tool was running.
    #[error("the tool call was cancelled")]
    Cancelled,
}

impl ToolExecError {
    /// A failure carrying `error` as its source ([`ToolExecError::Failed`]).
    ///
    /// ```
    /// use aquaregia::ToolExecError;
    /// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
    /// let error = ToolExecError::failed(io);
    /// assert_eq!(error.to_string(), "no such file");
    /// ```
    pub fn failed(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Failed(Arc::from(error.into()))
    }

    /// The tool's own error as a `T`, when this is [`Failed`](Self::Failed) with one.
    ///
    /// ```
    /// use aquaregia::ToolExecError;
    /// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
    /// let error = ToolExecError::failed(io);
    /// let io = error.downcast_ref::<std::io::Error>().expect("an io::Error");
    /// assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    /// ```
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Self::Failed(error) => error.downcast_ref::<T>(),
            _ => None,
        }
    }
}

impl PartialEq for ToolExecError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Execution(a), Self::Execution(b))
            | (Self::InvalidArguments(a), Self::InvalidArguments(b))
            | (Self::UnknownTool(a), Self::UnknownTool(b))
            | (Self::Denied(a), Self::Denied(b)) => a == b,
            (Self::Failed(a), Self::Failed(b)) => {
                Arc::ptr_eq(a, b) || a.to_string() == b.to_string()
            }
            (Self::Timeout, Self::Timeout) | (Self::Cancelled, Self::Cancelled) => true,
            _ => false,
        }
    }
}

impl Eq for ToolExecError {}

/// How a [`ToolExecError`] is saved (in an [`AgentRun`](crate::AgentRun)): its variant and text.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
enum SavedToolExecError {
    Execution(String),
    Failed(String),
    InvalidArguments(String),
    Timeout,
    UnknownTool(String),
    Denied(String),
    Cancelled,
}

/// Saved as `{"kind": "execution", "message": "..."}`; a [`ToolExecError::Failed`] keeps only
/// its error's text, so a loaded one is a `Failed` whose error is that text (equal to the
/// original, since `Failed` errors compare by text) and no longer downcasts.
impl serde::Serialize for ToolExecError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let saved = match self {
            Self::Execution(message) => SavedToolExecError::Execution(message.clone()),
            Self::Failed(error) => SavedToolExecError::Failed(error.to_string()),
            Self::InvalidArguments(message) => {
                SavedToolExecError::InvalidArguments(message.clone())
            }
            Self::Timeout => SavedToolExecError::Timeout,
            Self::UnknownTool(name) => SavedToolExecError::UnknownTool(name.clone()),
            Self::Denied(reason) => SavedToolExecError::Denied(reason.clone()),
            Self::Cancelled => SavedToolExecError::Cancelled,
        };
        saved.serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for ToolExecError {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match SavedToolExecError::deserialize(deserializer)? {
            SavedToolExecError::Execution(message) => Self::Execution(message),
            SavedToolExecError::Failed(message) => Self::failed(message),
            SavedToolExecError::InvalidArguments(message) => Self::InvalidArguments(message),
            SavedToolExecError::Timeout => Self::Timeout,
            SavedToolExecError::UnknownTool(name) => Self::UnknownTool(name),
            SavedToolExecError::Denied(reason) => Self::Denied(reason),
            SavedToolExecError::Cancelled => Self::Cancelled,
        })
    }
}

impl From<String> for ToolExecError {
    fn from(message: String) -> Self {
        Self::Execution(message)
    }
}

impl From<&str> for ToolExecError {
    fn from(message: &str) -> Self {
        Self::Execution(message.to_owned())
    }
}

impl From<std::io::Error> for ToolExecError {
    fn from(error: std::io::Error) -> Self {
        Self::failed(error)
    }
}

impl From<serde_json::Error> for ToolExecError {
    fn from(error: serde_json::Error) -> Self {
        Self::failed(error)
    }
}

impl From<Error> for ToolExecError {
    fn from(error: Error) -> Self {
        match error {
            Error::Tool { source, .. } => source,
            Error::Cancelled => Self::Cancelled,
            other => Self::failed(other),
        }
    }
}

/// Runs a tool. Object-safe, so any implementation can sit behind `Arc<dyn ToolExecutor>`.
///
/// ```
/// use aquaregia::{ToolExecError, ToolExecutor, ToolOutput};
/// use serde_json::Value;
///
/// struct Echo;
///
/// #[aquaregia::async_trait]
/// impl ToolExecutor for Echo {
///     async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
///         Ok(ToolOutput::Json(args))
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Runs the tool with already-validated arguments.
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError>;
}

/// A tool the model can call: a [`ToolDescriptor`] plus the executor that runs it.
///
/// Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
}

struct ToolInner {
    descriptor: Arc<ToolDescriptor>,
    annotations: ToolAnnotations,
    executor: Arc<dyn ToolExecutor>,
    output_budget: Option<OutputBudget>,
    /// Whether the annotations come from someone the user trusts (see
    /// [`Tool::hints_trusted`]).
    hints_trusted: bool,
    /// Compiled once, on first use; `None` when the schema cannot be compiled.
    validator: OnceLock<Option<SchemaCheck>>,
}

impl Tool {
    /// A tool from a descriptor and an executor.
    pub fn new(descriptor: ToolDescriptor, executor: Arc<dyn ToolExecutor>) -> Self {
        Self::with_parts(descriptor, ToolAnnotations::default(), executor)
    }

    pub(crate) fn with_parts(
        descriptor: ToolDescriptor,
        annotations: ToolAnnotations,
        executor: Arc<dyn ToolExecutor>,
    ) -> Self {
        Self {
            inner: Arc::new(ToolInner {
                descriptor: Arc::new(descriptor),
                annotations,
                executor,
                output_budget: None,
                hints_trusted: true,
                validator: OnceLock::new(),
            }),
        }
    }

    /// This tool with the given annotations.
    #[must_use]
    pub fn with_annotations(self, annotations: ToolAnnotations) -> Self {
        Self::with_parts(
            ToolDescriptor::clone(&self.inner.descriptor),
            annotations,
            self.inner.executor.clone(),
        )
        .budget(self.inner.output_budget)
        .with_trusted_hints(self.inner.hints_trusted)
    }

    /// This tool with its own limit on what one result may put into the context (an MCP
    /// server's limit, say); it overrides the agent's
    /// [`tool_output_budget`](crate::AgentBuilder::tool_output_budget).
    #[must_use]
    pub fn with_output_budget(self, budget: OutputBudget) -> Self {
        self.budget(Some(budget))
    }

    /// The tool's own output budget, if it has one.
    pub fn output_budget(&self) -> Option<OutputBudget> {
        self.inner.output_budget
    }

    fn budget(self, output_budget: Option<OutputBudget>) -> Self {
        Self {
            inner: Arc::new(ToolInner {
                descriptor: self.inner.descriptor.clone(),
                annotations: self.inner.annotations.clone(),
                executor: self.inner.executor.clone(),
                output_budget,
                hints_trusted: self.inner.hints_trusted,
                validator: OnceLock::new(),
            }),
        }
    }

    /// This tool under another name (same executor, schema and annotations).
    #[must_use]
    pub fn renamed(self, name: impl Into<String>) -> Self {
        let descriptor = ToolDescriptor {
            name: name.into(),
            ..ToolDescriptor::clone(&self.inner.descriptor)
        };
        Self::with_parts(
            descriptor,
            self.inner.annotations.clone(),
            self.inner.executor.clone(),
        )
        .budget(self.inner.output_budget)
        .with_trusted_hints(self.inner.hints_trusted)
    }

    /// The name, description and schema the model sees.
    pub fn descriptor(&self) -> &ToolDescriptor {
        &self.inner.descriptor
    }

    /// The descriptor, shared: what a [`ModelRequest`](crate::ModelRequest) carries.
    pub fn shared_descriptor(&self) -> Arc<ToolDescriptor> {
        self.inner.descriptor.clone()
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.inner.descriptor.name
    }

    /// Behaviour hints (read-only, destructive...).
    pub fn annotations(&self) -> &ToolAnnotations {
        &self.inner.annotations
    }

    /// Whether [`annotations`](Self::annotations) may be believed, e.g. to run a
    /// `read_only` tool without asking: true for tools written in Rust (with [`tool`] or
    /// [`Tool::new`]: the developer set the hints), and for an MCP server's tools only when
    /// the server is trusted (`"trust": true` in its config, or `aquaregia-mcp`'s
    /// `McpToolsetBuilder::trust` / `McpConnection::with_trusted_hints`).
    /// A server that is not trusted can claim anything, so a permission check should treat
    /// its tools as if they had no annotations.
    pub fn hints_trusted(&self) -> bool {
        self.inner.hints_trusted
    }

    /// This tool with its [`annotations`](Self::annotations) believed or not (see
    /// [`hints_trusted`](Self::hints_trusted)): a tool source whose hints nobody vouches for,
    /// such as an MCP server the user did not trust, hands its tools out with `false`.
    #[must_use]
    pub fn with_trusted_hints(self, trusted: bool) -> Self {
        if self.inner.hints_trusted == trusted {
            return self;
        }
        Self {
            inner: Arc::new(ToolInner {
                descriptor: self.inner.descriptor.clone(),
                annotations: self.inner.annotations.clone(),
                executor: self.inner.executor.clone(),
                output_budget: self.inner.output_budget,
                hints_trusted: trusted,
                validator: OnceLock::new(),
            }),
        }
    }

    /// The executor behind this tool.
    pub fn executor(&self) -> &Arc<dyn ToolExecutor> {
        &self.inner.executor
    }

    /// Checks `args` against the input schema (compiled once per tool and cached).
    pub fn validate(&self, args: &Value) -> Result<(), ToolExecError> {
        let validator = self.inner.validator.get_or_init(|| {
            match SchemaCheck::compile(&self.inner.descriptor.input_schema) {
                Ok(validator) => Some(validator),
                Err(error) => {
                    tracing::warn!(
                        tool = %self.inner.descriptor.name,
                        %error,
                        "tool input schema does not compile; arguments will not be validated"
                    );
                    None
                }
            }
        });
        let Some(validator) = validator else {
            return Ok(());
        };
        let problems = validator.problems(args, 5);
        if problems.is_empty() {
            return Ok(());
        }
        Err(ToolExecError::InvalidArguments(problems.join("; ")))
    }

    /// Validates `args` against the schema, then runs the executor.
    ///
    /// `null` for an optional argument the schema does not allow to be `null` means "absent"
    /// (models send it for parameters they skip): such keys are dropped before the executor
    /// sees the arguments.
    ///
    /// This is what the agent loop calls; it also lets a tool be used without a model.
    pub async fn execute(&self, mut args: Value) -> Result<ToolOutput, ToolExecError> {
        if let Err(error) = self.validate(&args) {
            if !self.drop_optional_nulls(&mut args) {
                return Err(error);
            }
            self.validate(&args)?;
        }
        self.inner.executor.execute(args).await
    }

    /// Removes top-level `null` values of properties the schema does not require. Returns
    /// whether anything was removed.
    fn drop_optional_nulls(&self, args: &mut Value) -> bool {
        let Value::Object(map) = args else {
            return false;
        };
        let required = self.inner.descriptor.input_schema.get("required");
        let is_required = |key: &str| {
            required
                .and_then(Value::as_array)
                .is_some_and(|names| names.iter().any(|name| name == key))
        };
        let before = map.len();
        map.retain(|key, value| !value.is_null() || is_required(key));
        map.len() != before
    }
}

impl From<Tool> for Arc<ToolDescriptor> {
    fn from(tool: Tool) -> Self {
        tool.shared_descriptor()
    }
}

impl From<&Tool> for Arc<ToolDescriptor> {
    fn from(tool: &Tool) -> Self {
        tool.shared_descriptor()
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.inner.descriptor.name)
            .field("description", &self.inner.descriptor.description)
            .field("annotations", &self.inner.annotations)
            .field("hints_trusted", &self.inner.hints_trusted)
            .finish_non_exhaustive()
    }
}

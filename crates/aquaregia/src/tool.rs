//! Tools: what a model can call, however it is implemented.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Error;

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
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolExecError {
    /// The tool ran and reported a failure.
    #[error("{0}")]
    Execution(String),
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
        Self::Execution(error.to_string())
    }
}

impl From<serde_json::Error> for ToolExecError {
    fn from(error: serde_json::Error) -> Self {
        Self::Execution(error.to_string())
    }
}

impl From<Error> for ToolExecError {
    fn from(error: Error) -> Self {
        match error {
            Error::Tool { source, .. } => source,
            Error::Cancelled => Self::Cancelled,
            other => Self::Execution(other.to_string()),
        }
    }
}

/// Runs a tool. Object-safe, so any implementation can sit behind `Arc<dyn ToolExecutor>`.
///
/// ```
/// use aquaregia::{ToolExecError, ToolExecutor};
/// use serde_json::Value;
///
/// struct Echo;
///
/// #[aquaregia::async_trait]
/// impl ToolExecutor for Echo {
///     async fn execute(&self, args: Value) -> Result<Value, ToolExecError> {
///         Ok(args)
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Runs the tool with already-validated arguments.
    async fn execute(&self, args: Value) -> Result<Value, ToolExecError>;
}

/// A tool the model can call: a [`ToolDescriptor`] plus the executor that runs it.
///
/// Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
}

struct ToolInner {
    descriptor: ToolDescriptor,
    annotations: ToolAnnotations,
    executor: Arc<dyn ToolExecutor>,
    /// Compiled once, on first use; `None` when the schema cannot be compiled.
    validator: OnceLock<Option<jsonschema::Validator>>,
}

impl Tool {
    /// A tool from a descriptor and an executor.
    pub fn new(descriptor: ToolDescriptor, executor: Arc<dyn ToolExecutor>) -> Self {
        Self::with_parts(descriptor, ToolAnnotations::default(), executor)
    }

    fn with_parts(
        descriptor: ToolDescriptor,
        annotations: ToolAnnotations,
        executor: Arc<dyn ToolExecutor>,
    ) -> Self {
        Self {
            inner: Arc::new(ToolInner {
                descriptor,
                annotations,
                executor,
                validator: OnceLock::new(),
            }),
        }
    }

    /// This tool with the given annotations.
    #[must_use]
    pub fn with_annotations(self, annotations: ToolAnnotations) -> Self {
        Self::with_parts(
            self.inner.descriptor.clone(),
            annotations,
            self.inner.executor.clone(),
        )
    }

    /// This tool under another name (same executor, schema and annotations).
    #[must_use]
    pub fn renamed(self, name: impl Into<String>) -> Self {
        let descriptor = ToolDescriptor {
            name: name.into(),
            ..self.inner.descriptor.clone()
        };
        Self::with_parts(
            descriptor,
            self.inner.annotations.clone(),
            self.inner.executor.clone(),
        )
    }

    /// Whether both are the same tool (clones of one `Tool`).
    pub(crate) fn ptr_eq(&self, other: &Tool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The name, description and schema the model sees.
    pub fn descriptor(&self) -> &ToolDescriptor {
        &self.inner.descriptor
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.inner.descriptor.name
    }

    /// Behaviour hints (read-only, destructive...).
    pub fn annotations(&self) -> &ToolAnnotations {
        &self.inner.annotations
    }

    /// The executor behind this tool.
    pub fn executor(&self) -> &Arc<dyn ToolExecutor> {
        &self.inner.executor
    }

    /// Checks `args` against the input schema (compiled once per tool and cached).
    pub fn validate(&self, args: &Value) -> Result<(), ToolExecError> {
        let validator = self.inner.validator.get_or_init(|| {
            match jsonschema::validator_for(&self.inner.descriptor.input_schema) {
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
        if validator.is_valid(args) {
            return Ok(());
        }
        let problems: Vec<String> = validator
            .iter_errors(args)
            .take(5)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("{path}: {error}")
                }
            })
            .collect();
        Err(ToolExecError::InvalidArguments(problems.join("; ")))
    }

    /// Validates `args` against the schema, then runs the executor.
    ///
    /// This is what the agent loop calls; it also lets a tool be used without a model.
    pub async fn execute(&self, args: Value) -> Result<Value, ToolExecError> {
        self.validate(&args)?;
        self.inner.executor.execute(args).await
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.inner.descriptor.name)
            .field("description", &self.inner.descriptor.description)
            .field("annotations", &self.inner.annotations)
            .finish_non_exhaustive()
    }
}

/// A validated set of tools, looked up by name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
}

impl ToolRegistry {
    /// Checks names (1-64 characters of `[A-Za-z0-9_-]`, no duplicates) and indexes the tools.
    ///
    /// The error names every offending tool.
    ///
    /// ```
    /// use aquaregia::{ToolRegistry, tool};
    /// use serde_json::json;
    ///
    /// let make = |name: &str| tool(name).execute_raw(|_| async { Ok(json!(null)) });
    /// assert!(ToolRegistry::from_tools(vec![make("a"), make("b")]).is_ok());
    /// let err = ToolRegistry::from_tools(vec![make("a"), make("a"), make("b c")]).unwrap_err();
    /// assert!(err.to_string().contains("`a`") && err.to_string().contains("`b c`"));
    /// ```
    pub fn from_tools(tools: Vec<Tool>) -> Result<Self, Error> {
        let mut by_name = HashMap::with_capacity(tools.len());
        let mut invalid = Vec::new();
        let mut duplicates = Vec::new();
        for (index, tool) in tools.iter().enumerate() {
            let name = tool.name();
            if !is_valid_tool_name(name) {
                invalid.push(format!("`{name}`"));
            } else if by_name.insert(name.to_owned(), index).is_some()
                && !duplicates.contains(&format!("`{name}`"))
            {
                duplicates.push(format!("`{name}`"));
            }
        }
        let mut problems = Vec::new();
        if !invalid.is_empty() {
            problems.push(format!(
                "invalid tool names (need 1-{MAX_TOOL_NAME_LEN} characters of A-Z a-z 0-9 _ -): {}",
                invalid.join(", ")
            ));
        }
        if !duplicates.is_empty() {
            problems.push(format!("duplicate tool names: {}", duplicates.join(", ")));
        }
        if !problems.is_empty() {
            return Err(Error::ToolRegistry(problems.join("; ")));
        }
        Ok(Self { tools, by_name })
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// All tools, in the order given.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Keeps only the tools whose names are listed.
    #[must_use]
    pub(crate) fn retain_names<S: AsRef<str>>(self, names: &[S]) -> Self {
        let tools: Vec<Tool> = self
            .tools
            .into_iter()
            .filter(|tool| names.iter().any(|name| name.as_ref() == tool.name()))
            .collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.name().to_owned(), index))
            .collect();
        Self { tools, by_name }
    }
}

/// Whether `name` is 1-64 characters of `[A-Za-z0-9_-]`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Starts building a tool from a closure.
///
/// ```
/// use aquaregia::tool;
/// use serde_json::{Value, json};
///
/// let add = tool("add")
///     .description("Adds two integers")
///     .raw_schema(json!({
///         "type": "object",
///         "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
///         "required": ["a", "b"]
///     }))
///     .execute_raw(|args: Value| async move {
///         Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
///     });
/// assert_eq!(add.name(), "add");
/// ```
///
/// The typed form derives the schema with `schemars` and decodes the arguments:
///
/// ```
/// use aquaregia::tool;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather {
///     /// City name
///     city: String,
/// }
///
/// let weather = tool("get_weather")
///     .description("Current weather in a city")
///     .input::<Weather>()
///     .execute(|w: Weather| async move { Ok(format!("sunny in {}", w.city)) });
/// assert_eq!(weather.descriptor().input_schema["properties"]["city"]["type"], "string");
/// ```
pub fn tool(name: impl Into<String>) -> ToolBuilder {
    ToolBuilder {
        name: name.into(),
        description: String::new(),
        schema: None,
        annotations: ToolAnnotations::default(),
    }
}

/// Builder returned by [`tool()`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ToolBuilder {
    name: String,
    description: String,
    schema: Option<Value>,
    annotations: ToolAnnotations,
}

impl ToolBuilder {
    /// What the tool does, for the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The arguments' JSON schema, kept verbatim. Default: an object with no properties.
    pub fn raw_schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Behaviour hints for agents and UIs.
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Typed arguments: the schema is derived from `T`, and `T` is decoded for the executor.
    pub fn input<T: JsonSchema + DeserializeOwned>(self) -> TypedToolBuilder<T> {
        let schema = serde_json::to_value(schemars::schema_for!(T))
            .unwrap_or_else(|_| empty_object_schema());
        TypedToolBuilder {
            builder: self.raw_schema(schema),
            _input: PhantomData,
        }
    }

    /// Finishes the tool with a closure over the raw JSON arguments.
    pub fn execute_raw<F, Fut, R>(self, f: F) -> Tool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolExecError>> + Send + 'static,
        R: Serialize,
    {
        self.finish(Arc::new(RawExecutor(f)))
    }

    fn finish(self, executor: Arc<dyn ToolExecutor>) -> Tool {
        let descriptor = ToolDescriptor {
            name: self.name,
            description: self.description,
            input_schema: self.schema.unwrap_or_else(empty_object_schema),
        };
        Tool::with_parts(descriptor, self.annotations, executor)
    }
}

/// Builder for a tool with typed arguments; see [`ToolBuilder::input`].
#[must_use]
pub struct TypedToolBuilder<T> {
    builder: ToolBuilder,
    _input: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for TypedToolBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedToolBuilder")
            .field("builder", &self.builder)
            .finish()
    }
}

impl<T: DeserializeOwned + Send + 'static> TypedToolBuilder<T> {
    /// What the tool does, for the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.builder = self.builder.description(description);
        self
    }

    /// Finishes the tool with a closure over the decoded arguments.
    pub fn execute<F, Fut, R>(self, f: F) -> Tool
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolExecError>> + Send + 'static,
        R: Serialize,
    {
        self.builder.finish(Arc::new(TypedExecutor {
            f,
            _input: PhantomData::<fn() -> T>,
        }))
    }
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

fn to_output<R: Serialize>(value: R) -> Result<Value, ToolExecError> {
    serde_json::to_value(value)
        .map_err(|error| ToolExecError::Execution(format!("tool output is not JSON: {error}")))
}

struct RawExecutor<F>(F);

#[async_trait::async_trait]
impl<F, Fut, R> ToolExecutor for RawExecutor<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<R, ToolExecError>> + Send,
    R: Serialize,
{
    async fn execute(&self, args: Value) -> Result<Value, ToolExecError> {
        to_output((self.0)(args).await?)
    }
}

struct TypedExecutor<F, T> {
    f: F,
    _input: PhantomData<fn() -> T>,
}

#[async_trait::async_trait]
impl<F, Fut, R, T> ToolExecutor for TypedExecutor<F, T>
where
    F: Fn(T) -> Fut + Send + Sync,
    Fut: Future<Output = Result<R, ToolExecError>> + Send,
    R: Serialize,
    T: DeserializeOwned + Send,
{
    async fn execute(&self, args: Value) -> Result<Value, ToolExecError> {
        let input: T = serde_json::from_value(args)
            .map_err(|error| ToolExecError::InvalidArguments(error.to_string()))?;
        to_output((self.f)(input).await?)
    }
}

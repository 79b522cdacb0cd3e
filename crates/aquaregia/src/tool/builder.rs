//! [`tool()`]: tools from closures, over raw JSON or typed arguments.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    IntoToolOutput, Tool, ToolAnnotations, ToolDescriptor, ToolExecError, ToolExecutor, ToolOutput,
};

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
        R: IntoToolOutput,
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
        R: IntoToolOutput,
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

struct RawExecutor<F>(F);

#[async_trait::async_trait]
impl<F, Fut, R> ToolExecutor for RawExecutor<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<R, ToolExecError>> + Send,
    R: IntoToolOutput,
{
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        (self.0)(args).await?.into_tool_output()
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
    R: IntoToolOutput,
    T: DeserializeOwned + Send,
{
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        let input: T = serde_json::from_value(args)
            .map_err(|error| ToolExecError::InvalidArguments(error.to_string()))?;
        (self.f)(input).await?.into_tool_output()
    }
}

//! Structured output: answers that are JSON values of a schema, parsed into Rust types.
//!
//! [`OutputSchema`] travels on the request; each provider asks for it its own way (OpenAI
//! `json_schema` response formats, strict when the schema allows it; an Anthropic tool the
//! model is made to call; Gemini `responseJsonSchema`; Ollama through its OpenAI-compatible
//! `response_format`). The answer is checked against the schema and decoded; a failing one
//! gets one repair round. [`generate_object`](crate::generate_object) (on any [`LanguageModel`](crate::LanguageModel)),
//! [`Client::generate_object`](crate::Client::generate_object) and
//! [`Agent::run_typed`](crate::Agent::run_typed) are the entry points.

pub(crate) mod strict;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::message::Message;
use crate::schema_check::SchemaCheck;

/// The property a non-object answer is wrapped in where answers must be objects.
pub(crate) const WRAPPED_FIELD: &str = "value";

/// The longest name OpenAI accepts for a response format.
const MAX_NAME_LEN: usize = 64;

/// The JSON schema an answer must follow, with a name (for the providers that want one) and
/// its strict-mode form when it has one.
///
/// ```
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather {
///     city: String,
///     celsius: f64,
///     note: Option<String>,
/// }
/// let schema = aquaregia::OutputSchema::of::<Weather>();
/// assert_eq!(schema.name(), "Weather");
/// // Strict mode wants every property required, `note` nullable instead.
/// assert_eq!(schema.strict_schema().unwrap()["required"].as_array().unwrap().len(), 3);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    name: String,
    description: Option<String>,
    schema: Value,
    strict: Option<Value>,
}

impl OutputSchema {
    /// A schema named `name` (kept to the letters, digits, `_` and `-` OpenAI accepts, at most
    /// 64 of them; `output` when nothing is left).
    pub fn new(name: &str, schema: Value) -> Self {
        let mut name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(MAX_NAME_LEN)
            .collect();
        if name.trim_matches('_').is_empty() {
            name = "output".to_owned();
        }
        let description = schema
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Self {
            name,
            description,
            strict: strict::strict_form(&schema),
            schema,
        }
    }

    /// The schema of `T`, derived by `schemars`, named after its title (the type's name).
    pub fn of<T: JsonSchema>() -> Self {
        let schema = schemars::schema_for!(T).to_value();
        let name = schema
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("output")
            .to_owned();
        Self::new(&name, schema)
    }

    /// Sets the description providers show the model.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The name sent to providers (and the name of Anthropic's answer tool).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description, if any.
    pub fn description_text(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The schema as given; answers are checked against it.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The strict-mode form sent to OpenAI (every property required, optional ones nullable,
    /// objects closed); `None` when the schema cannot have one, and is sent non-strict.
    pub fn strict_schema(&self) -> Option<&Value> {
        self.strict.as_ref()
    }

    /// The schema as sent where strict mode does not apply: without its `$schema` key.
    pub(crate) fn plain_schema(&self) -> Value {
        let mut schema = self.schema.clone();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
        }
        schema
    }

    /// The schema as an object, for answers that must be objects (an Anthropic tool's input):
    /// the plain schema, or, when its root is not an object, `{"value": schema}` with the
    /// definitions kept at the root so references still resolve. The flag says it is wrapped.
    pub(crate) fn object_schema(&self) -> (Value, bool) {
        let mut schema = self.plain_schema();
        if schema.get("type").and_then(Value::as_str) == Some("object") {
            return (schema, false);
        }
        let mut wrapper = serde_json::Map::new();
        if let Value::Object(map) = &mut schema {
            for key in ["$defs", "definitions"] {
                if let Some(defs) = map.remove(key) {
                    wrapper.insert(key.to_owned(), defs);
                }
            }
        }
        wrapper.insert("type".into(), "object".into());
        wrapper.insert(
            "properties".into(),
            serde_json::json!({ WRAPPED_FIELD: schema }),
        );
        wrapper.insert("required".into(), serde_json::json!([WRAPPED_FIELD]));
        (Value::Object(wrapper), true)
    }

    /// What OpenAI gets: the strict form and `true`, or the plain schema and `false`.
    pub(crate) fn openai_schema(&self) -> (Value, bool) {
        match &self.strict {
            Some(strict) => (strict.clone(), true),
            None => (self.plain_schema(), false),
        }
    }

    /// Reads an answer: JSON (a Markdown code fence around it is allowed) that matches the
    /// schema and decodes into `T`. The error says what is wrong, for the repair round.
    pub(crate) fn parse<T: DeserializeOwned>(&self, text: &str) -> Result<T, String> {
        let json = strip_fence(text.trim());
        if json.is_empty() {
            return Err("the answer is empty".to_owned());
        }
        let mut value: Value = serde_json::from_str(json)
            .map_err(|error| format!("the answer is not valid JSON: {error}"))?;
        if self.strict.is_some() {
            strict::remove_added_nulls(&mut value, &self.schema, &self.schema);
        }
        match SchemaCheck::compile(&self.schema) {
            Ok(validator) => {
                let problems = validator.problems(&value, 5);
                if !problems.is_empty() {
                    return Err(format!(
                        "the answer does not match the schema: {}",
                        problems.join("; ")
                    ));
                }
            }
            Err(error) => {
                tracing::warn!(%error, "output schema does not compile; answers are not checked");
            }
        }
        serde_json::from_value(value)
            .map_err(|error| format!("the answer does not decode into the expected type: {error}"))
    }
}

/// The text inside a ```` ```json ```` fence, or `text` itself.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// The message asking for a corrected answer.
pub(crate) fn repair_message(problem: &str) -> Message {
    Message::user(format!(
        "Your answer could not be used: {problem}. Answer again with only the JSON value \
         that matches the schema, nothing else."
    ))
}

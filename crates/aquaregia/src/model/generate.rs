//! [`generate_object`]: one model call whose answer is a typed value.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use super::{LanguageModel, ModelRequest, ModelResponse, ModelState, Usage};
use crate::error::Error;
use crate::structured::{OutputSchema, repair_message};

/// What [`generate_object`] and [`Client::generate_object`](crate::Client::generate_object)
/// return.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedObject<T> {
    /// The answer, decoded.
    pub value: T,
    /// The model's last response (the repaired one, after a repair round).
    pub response: ModelResponse,
    /// Tokens used by every call, the repair round's included.
    pub usage: Usage,
}

/// One call of `model` whose answer is a `T`: the request asks for `T`'s JSON schema (derived
/// by `schemars`), and the answer is checked against it and decoded. An answer that fails is
/// sent back once with what was wrong; a second failure is [`Error::StructuredOutput`] with the
/// raw answer.
///
/// ```no_run
/// # async fn demo(model: &dyn aquaregia::LanguageModel) -> Result<(), aquaregia::Error> {
/// use aquaregia::{Message, ModelRequest, generate_object};
/// #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
/// struct City {
///     name: String,
///     country: String,
/// }
/// let request = ModelRequest::new(model.model_id(), vec![Message::user("The capital of France?")]);
/// let city = generate_object::<City>(model, &request).await?.value;
/// # Ok(()) }
/// ```
pub async fn generate_object<T: JsonSchema + DeserializeOwned>(
    model: &dyn LanguageModel,
    request: &ModelRequest,
) -> Result<GeneratedObject<T>, Error> {
    let schema = OutputSchema::of::<T>();
    let mut request = request.clone();
    request.output_schema = Some(schema.clone());
    // One state for both calls: the repair round only appends to the conversation.
    let mut state = ModelState::new();
    let response = model.generate(&request, &mut state).await?;
    let mut usage = response.usage;
    let problem = match schema.parse(&response.text()) {
        Ok(value) => {
            return Ok(GeneratedObject {
                value,
                response,
                usage,
            });
        }
        Err(problem) => problem,
    };
    tracing::debug!(%problem, "structured answer rejected; asking once more");
    request.messages.push(response.message);
    request.messages.push(repair_message(&problem));
    let response = model.generate(&request, &mut state).await?;
    usage += response.usage;
    let text = response.text();
    match schema.parse(&text) {
        Ok(value) => Ok(GeneratedObject {
            value,
            response,
            usage,
        }),
        Err(message) => Err(Error::StructuredOutput { message, raw: text }),
    }
}

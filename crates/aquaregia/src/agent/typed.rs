//! [`Agent::run_typed`]: a run whose final answer is a typed value.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use super::{Agent, AgentInput, AgentOutput, StopReason, run};
use crate::error::Error;
use crate::structured::{OutputSchema, repair_message};

/// What [`Agent::run_typed`] returns.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct TypedOutput<T> {
    /// The final answer, decoded.
    pub value: T,
    /// The whole run (the repair round's steps included, numbered after the first ones).
    pub output: AgentOutput,
}

impl Agent {
    /// Runs to the end like [`Agent::run`], with a final answer that is a `T`: every model
    /// call asks for `T`'s JSON schema (derived by `schemars`); tools can still be called
    /// before the answer. The answer is checked against the schema and decoded; one that
    /// fails is sent back once with what was wrong (the run continues for a repair round), and
    /// a second failure is [`Error::StructuredOutput`] with the raw answer.
    ///
    /// On Anthropic the answer is the input of a tool named after the schema that the model
    /// must call (when the agent has tools, it must call one of them or that one), so it does
    /// not combine with extended thinking, which forbids forced tool use; an answer that is
    /// not an object travels wrapped as `{"value": ...}`. Gemini models before Gemini 3 may
    /// reject a response schema together with tools.
    ///
    /// A cancelled run is [`Error::Cancelled`] (there is no answer to decode). The hooks'
    /// `on_finish` runs once per round.
    ///
    /// ```no_run
    /// # async fn demo(agent: aquaregia::Agent) -> Result<(), aquaregia::Error> {
    /// #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    /// struct Forecast {
    ///     city: String,
    ///     high_celsius: f64,
    /// }
    /// let forecast = agent.run_typed::<Forecast>("Tomorrow's high in Paris?").await?.value;
    /// println!("{forecast:?}");
    /// # Ok(()) }
    /// ```
    pub async fn run_typed<T: JsonSchema + DeserializeOwned>(
        &self,
        input: impl Into<AgentInput>,
    ) -> Result<TypedOutput<T>, Error> {
        let schema = OutputSchema::of::<T>();
        let mut config = (*self.inner).clone();
        config.output_schema = Some(schema.clone());
        let first = run::drive(&config, config.start(input.into()), None).await?;
        if first.stop_reason == StopReason::Cancelled {
            return Err(Error::Cancelled);
        }
        let problem = match schema.parse(&first.text) {
            Ok(value) => {
                return Ok(TypedOutput {
                    value,
                    output: first,
                });
            }
            Err(problem) => problem,
        };
        tracing::debug!(%problem, "structured answer rejected; asking once more");
        let mut messages = first.messages.clone();
        messages.push(repair_message(&problem));
        let second =
            run::drive(&config, config.start(AgentInput::Messages(messages)), None).await?;
        if second.stop_reason == StopReason::Cancelled {
            return Err(Error::Cancelled);
        }
        let parsed = schema.parse(&second.text);
        let output = merge(first, second);
        match parsed {
            Ok(value) => Ok(TypedOutput { value, output }),
            Err(message) => Err(Error::StructuredOutput {
                message,
                raw: output.text,
            }),
        }
    }
}

/// One output for a run and its repair round.
fn merge(first: AgentOutput, mut second: AgentOutput) -> AgentOutput {
    let offset = first.steps.len();
    for step in &mut second.steps {
        step.index += offset;
    }
    let mut steps = first.steps;
    steps.append(&mut second.steps);
    AgentOutput {
        steps,
        usage: first.usage + second.usage,
        cost: first.cost.zip(second.cost).map(|(a, b)| a + b),
        ..second
    }
}

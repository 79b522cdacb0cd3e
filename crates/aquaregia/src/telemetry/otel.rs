//! What needs the OpenTelemetry API itself: array attributes.

use opentelemetry::{Array, StringValue, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// `gen_ai.response.finish_reasons`, a string array (which `tracing` fields cannot carry).
pub(crate) fn set_finish_reasons(span: &Span, reason: &str) {
    span.set_attribute(
        "gen_ai.response.finish_reasons",
        Value::Array(Array::String(vec![StringValue::from(reason.to_owned())])),
    );
}

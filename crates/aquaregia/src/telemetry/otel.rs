//! What needs the OpenTelemetry API itself: array attributes, and the W3C trace context of a
//! span for requests that leave the process (MCP `tools/call` `_meta`).

use std::collections::HashMap;

use opentelemetry::trace::TraceContextExt;
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

/// The propagation fields of `span`'s context (`traceparent`, `tracestate`, and whatever
/// else the global propagator adds, such as `baggage`). W3C trace context is written even
/// when no global propagator is set; nothing when the span is not exported.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn propagation_fields(span: &Span) -> HashMap<String, String> {
    let context = span.context();
    let mut fields = HashMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut fields);
    });
    let otel_span = context.span();
    let span_context = otel_span.span_context();
    if span_context.is_valid() && !fields.contains_key("traceparent") {
        fields.insert(
            "traceparent".to_owned(),
            format!(
                "00-{}-{}-{:02x}",
                span_context.trace_id(),
                span_context.span_id(),
                span_context.trace_flags().to_u8()
            ),
        );
        let state = span_context.trace_state().header();
        if !state.is_empty() {
            fields.insert("tracestate".to_owned(), state);
        }
    }
    fields
}

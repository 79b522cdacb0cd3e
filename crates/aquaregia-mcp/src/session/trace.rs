//! The MCP client's `tools/call` spans (OpenTelemetry MCP semantic conventions) and, with the
//! `otel` feature, the W3C trace context sent to the server in the request's `_meta`.

use aquaregia::{TELEMETRY_TARGET, ToolExecError};
use rmcp::model::{RequestId, RequestMetaObject};
use tracing::Span;
use tracing::field::Empty;

use crate::error::McpError;
use crate::transport::http::SessionIdSlot;

/// Where a session's server is, as the spans name it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Endpoint {
    /// `network.transport`: `pipe` for stdio, `tcp` for HTTP.
    transport: Option<&'static str>,
    address: Option<String>,
    port: Option<u16>,
    session: Option<SessionIdSlot>,
}

impl Endpoint {
    pub(crate) fn new(stdio: bool, url: Option<&str>, session: Option<SessionIdSlot>) -> Self {
        if stdio {
            return Self {
                transport: Some("pipe"),
                ..Self::default()
            };
        }
        let Some(url) = url.and_then(|url| reqwest::Url::parse(url).ok()) else {
            return Self::default();
        };
        Self {
            transport: Some("tcp"),
            address: url.host_str().map(str::to_owned),
            port: url.port_or_known_default(),
            session,
        }
    }
}

/// What a span says of the server a call goes to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpanServer<'a> {
    pub(crate) endpoint: &'a Endpoint,
    /// The negotiated protocol version.
    pub(crate) protocol_version: &'a str,
    /// The server's name.
    pub(crate) name: &'a str,
}

/// The client span of one `tools/call` of `tool` (the server's name for it).
pub(crate) fn call_span(server: Option<SpanServer<'_>>, tool: &str) -> Span {
    let endpoint = server.map(|server| server.endpoint);
    let span = tracing::info_span!(
        target: TELEMETRY_TARGET,
        "tools/call",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        jsonrpc.request.id = Empty,
        mcp.protocol.version = server.map(|server| server.protocol_version),
        mcp.session.id = Empty,
        network.transport = endpoint.and_then(|endpoint| endpoint.transport),
        server.address = endpoint.and_then(|endpoint| endpoint.address.as_deref()),
        server.port = endpoint.and_then(|endpoint| endpoint.port).map(i64::from),
        aquaregia.mcp.server = server.map(|server| server.name),
    );
    if !span.is_disabled()
        && let Some(id) = endpoint
            .and_then(|endpoint| endpoint.session.as_ref())
            .and_then(SessionIdSlot::get)
    {
        span.record("mcp.session.id", &*id);
    }
    span
}

/// Adds the span's trace context (`traceparent`, `tracestate`, and `baggage` when the
/// global propagator sets it) to the request's `_meta`, unprefixed as SEP-414 says.
#[cfg(feature = "otel")]
pub(crate) fn inject(span: &Span, meta: &mut Option<RequestMetaObject>) {
    if span.is_disabled() {
        return;
    }
    let fields = propagation_fields(span);
    if fields.is_empty() {
        return;
    }
    let meta = meta.get_or_insert_with(RequestMetaObject::default);
    for (key, value) in fields {
        meta.0.0.insert(key, value.into());
    }
}

/// The propagation fields of `span`'s context (`traceparent`, `tracestate`, and whatever
/// else the global propagator adds, such as `baggage`). W3C trace context is written even
/// when no global propagator is set; nothing when the span is not exported.
#[cfg(feature = "otel")]
fn propagation_fields(span: &Span) -> std::collections::HashMap<String, String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let context = span.context();
    let mut fields = std::collections::HashMap::new();
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

/// Without the `otel` feature there is no trace context to send.
#[cfg(not(feature = "otel"))]
pub(crate) fn inject(_span: &Span, _meta: &mut Option<RequestMetaObject>) {}

pub(crate) fn record_request_id(span: &Span, id: &RequestId) {
    if !span.is_disabled() {
        span.record("jsonrpc.request.id", id.to_string().as_str());
    }
}

/// Records a failed call: a JSON-RPC error's code, a tool's own error (`isError`) as
/// `tool_error`, or what went wrong on the way.
pub(crate) fn record_mcp_error(span: &Span, error: &McpError) {
    if span.is_disabled() {
        return;
    }
    let kind = match error {
        McpError::Protocol { code, .. } => {
            let code = code.to_string();
            span.record("rpc.response.status_code", code.as_str());
            return record_failure(span, &code, error);
        }
        McpError::CallTimeout => "timeout",
        McpError::Disconnected | McpError::ServerExited(_) => "disconnected",
        McpError::Http { .. } => "http_error",
        McpError::InvalidResponse { .. } => "invalid_response",
        McpError::AuthRequired { .. } | McpError::Authorization { .. } => "unauthorized",
        _ => "_OTHER",
    };
    record_failure(span, kind, error);
}

pub(crate) fn record_tool_error(span: &Span, error: &ToolExecError) {
    if span.is_disabled() {
        return;
    }
    let kind = match error {
        ToolExecError::InvalidArguments(_) => "invalid_arguments",
        _ => "tool_error",
    };
    record_failure(span, kind, error);
}

fn record_failure(span: &Span, kind: &str, error: &dyn std::fmt::Display) {
    span.record("otel.status_code", "error");
    span.record("otel.status_description", error.to_string().as_str());
    span.record("error.type", kind);
}

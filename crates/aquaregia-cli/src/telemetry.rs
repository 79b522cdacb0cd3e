//! Telemetry settings shared by `run`, `chat` and `acp`, and (feature `otel`) the OTLP/HTTP
//! export of the agent's GenAI spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

use aquaregia::Telemetry;

/// The agent's span settings: prompts and answers are recorded only when
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the variable OpenTelemetry's
/// GenAI instrumentations read).
pub(crate) fn agent_telemetry() -> Telemetry {
    let content = std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
    Telemetry::new()
        .agent_name("aquaregia")
        .record_content(content)
}

#[cfg(feature = "otel")]
pub(crate) use export::{Exporter, start};

/// Without the `otel` feature nothing is exported.
#[cfg(not(feature = "otel"))]
pub(crate) struct Exporter;

#[cfg(not(feature = "otel"))]
impl Exporter {
    pub(crate) fn shutdown(self) {}
}

#[cfg(feature = "otel")]
mod export {
    use std::borrow::Cow;

    use aquaregia::TELEMETRY_TARGET;
    use aquaregia::redact::redact;
    use opentelemetry::trace::Status;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry::{Array, KeyValue, Value};
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use tracing::Level;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::registry::LookupSpan;

    /// The running exporter; [`shutdown`](Self::shutdown) sends what is still buffered.
    pub(crate) struct Exporter {
        provider: SdkTracerProvider,
    }

    impl Exporter {
        /// Flushes the buffered spans and stops the export thread. Blocks (bounded by the
        /// exporter's timeout, `OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default): call it
        /// outside the async runtime.
        pub(crate) fn shutdown(self) {
            if let Err(error) = self.provider.shutdown() {
                eprintln!("warning: could not export the last OpenTelemetry spans: {error}");
            }
        }
    }

    /// A span exporter that redacts every string attribute, event attribute and status
    /// description ([`aquaregia::redact`]) before the one it wraps sends them.
    #[derive(Debug)]
    struct Redacting<E>(E);

    impl<E: SpanExporter> SpanExporter for Redacting<E> {
        fn export(
            &self,
            mut batch: Vec<SpanData>,
        ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
            for span in &mut batch {
                redact_attributes(&mut span.attributes);
                for event in &mut span.events.events {
                    redact_attributes(&mut event.attributes);
                }
                if let Status::Error { description } = &mut span.status
                    && let Cow::Owned(redacted) = redact(description)
                {
                    *description = Cow::Owned(redacted);
                }
            }
            self.0.export(batch)
        }

        fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
            self.0.shutdown_with_timeout(timeout)
        }

        fn force_flush(&self) -> OTelSdkResult {
            self.0.force_flush()
        }

        fn set_resource(&mut self, resource: &Resource) {
            self.0.set_resource(resource);
        }
    }

    fn redact_attributes(attributes: &mut [KeyValue]) {
        for attribute in attributes {
            match &mut attribute.value {
                Value::String(text) => {
                    if let Cow::Owned(redacted) = redact(text.as_str()) {
                        *text = redacted.into();
                    }
                }
                Value::Array(Array::String(items)) => {
                    for text in items {
                        if let Cow::Owned(redacted) = redact(text.as_str()) {
                            *text = redacted.into();
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn set(var: &str) -> bool {
        std::env::var(var).is_ok_and(|value| !value.trim().is_empty())
    }

    /// The layer that exports aquaregia's GenAI spans over OTLP/HTTP (protobuf), when
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set and
    /// `OTEL_SDK_DISABLED` is not `true`. The endpoint, headers and timeout come from the
    /// standard `OTEL_EXPORTER_OTLP_*` variables; the service is `aquaregia` unless
    /// `OTEL_SERVICE_NAME` says otherwise.
    pub(crate) fn start<S>() -> Option<(impl Layer<S> + use<S>, Exporter)>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        let disabled = std::env::var("OTEL_SDK_DISABLED")
            .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
        if disabled
            || !(set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        {
            return None;
        }
        let exporter = match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build()
        {
            Ok(exporter) => exporter,
            Err(error) => {
                eprintln!("warning: OpenTelemetry export is off: {error}");
                return None;
            }
        };
        let mut resource = Resource::builder();
        if !set("OTEL_SERVICE_NAME") {
            resource = resource.with_service_name("aquaregia");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(Redacting(exporter))
            .with_resource(resource.build())
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let layer = tracing_opentelemetry::layer()
            // Only the conventions' attributes: no code location, thread or busy/idle times.
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_tracer(provider.tracer("aquaregia"))
            .with_filter(Targets::new().with_target(TELEMETRY_TARGET, Level::INFO));
        Some((layer, Exporter { provider }))
    }
}

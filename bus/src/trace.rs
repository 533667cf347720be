//! W3C trace context across NATS: the current span's context goes into message headers and the
//! consumer's span continues it, so one client write is one trace.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct HeaderInjector<'a>(&'a mut async_nats::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key, value.as_str());
    }
}

struct HeaderExtractor<'a>(&'a async_nats::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(async_nats::HeaderValue::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_ref()).collect()
    }
}

/// Headers carrying the current tracing span's context (`traceparent`), empty when there is none.
#[must_use]
pub fn current_headers() -> async_nats::HeaderMap {
    let mut headers = async_nats::HeaderMap::new();
    let cx = tracing::Span::current().context();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(&mut headers));
    }
    headers
}

/// Makes `span` a child of the context carried in `headers` (if any).
pub fn continue_from(headers: Option<&async_nats::HeaderMap>, span: &tracing::Span) {
    if let Some(h) = headers {
        let cx = TraceContextPropagator::new().extract(&HeaderExtractor(h));
        if cx.span().span_context().is_valid() {
            let _ = span.set_parent(cx);
        }
    }
}

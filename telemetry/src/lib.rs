//! Telemetry shared by every buzz-relay service: JSON logs with a `RUST_LOG` filter, OpenTelemetry
//! traces over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, Prometheus metrics, and the small
//! admin router (`/healthz`, `/readyz`, `/metrics`) each service serves.

pub mod runtime;
pub mod settings;

use std::sync::OnceLock;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Flushes and shuts the trace exporter down when dropped.
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            if let Err(e) = p.shutdown() {
                eprintln!("trace exporter shutdown failed: {e}");
            }
        }
    }
}

/// Installs logging and tracing for `service`. Call once, first thing in `main`.
/// `RUST_LOG` filters (default `info`); `BUZZ_LOG_FORMAT=text` switches JSON logs to text.
pub fn init(service: &'static str) -> anyhow::Result<TelemetryGuard> {
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let text = std::env::var("BUZZ_LOG_FORMAT").is_ok_and(|v| v == "text");
    let fmt_json = (!text).then(|| tracing_subscriber::fmt::layer().json().with_current_span(true));
    let fmt_text = text.then(tracing_subscriber::fmt::layer);

    let provider = otlp_provider(service)?;
    let otel = provider.as_ref().map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service)));
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt_json)
        .with(fmt_text)
        .with(otel)
        .try_init()
        .map_err(|e| anyhow::anyhow!("telemetry already initialised: {e}"))?;
    if let Some(p) = &provider {
        opentelemetry::global::set_tracer_provider(p.clone());
        tracing::info!(service, "exporting traces over OTLP");
    }
    Ok(TelemetryGuard { provider })
}

/// An OTLP/HTTP trace pipeline when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-specific variable)
/// is set; `OTEL_EXPORTER_OTLP_PROTOCOL=http/json` selects JSON, anything else protobuf.
fn otlp_provider(service: &'static str) -> anyhow::Result<Option<SdkTracerProvider>> {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty());
    if !set("OTEL_EXPORTER_OTLP_ENDPOINT") && !set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return Ok(None);
    }
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    let protocol = match std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
        Ok("http/json") => Protocol::HttpJson,
        _ => Protocol::HttpBinary,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()
        .map_err(|e| anyhow::anyhow!("OTLP exporter: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    Ok(Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build()))
}

/// The process-wide Prometheus recorder (installed on first use).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (tests); metrics then go there.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// `/healthz` (process alive), `/readyz` (from `ready`), `/metrics` (Prometheus text).
pub fn admin_router<F, Fut>(ready: F) -> Router
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let handle = metrics_handle();
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    if ready().await {
                        (StatusCode::OK, "ready")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        )
        .route("/metrics", get(move || std::future::ready(handle.render())))
}

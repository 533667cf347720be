//! Telemetry shared by every buzz-relay service: JSON logs with a `RUST_LOG` filter, OpenTelemetry
//! traces over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, Prometheus metrics, and the small
//! admin router (`/healthz`, `/readyz`, `/metrics`) each service serves on its admin port.

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

/// Histogram buckets (seconds) of every `*_seconds` metric: from a fast cached read (1 ms) to
/// past the bus timeout (5 s). Buckets, not summaries, so that quantiles aggregate across pods
/// (`histogram_quantile` over `sum by (le)`).
pub const SECONDS_BUCKETS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0];

/// The process-wide Prometheus recorder (installed on first use).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new();
            // Only an empty bucket list is refused, and this one is not.
            let builder = builder.set_buckets(&SECONDS_BUCKETS).unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (tests); metrics then go there.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// `/healthz` (process alive), `/readyz` (from `ready`), `/metrics` (Prometheus text): what an
/// admin listener serves, on a port of its own (never the public one).
pub fn admin_router<F, Fut>(ready: F) -> Router
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let handle = metrics_handle();
    probe_router(ready).route("/metrics", get(move || std::future::ready(handle.render())))
}

/// `/healthz` and `/readyz` alone: what a public listener (gateway, operator API) serves besides
/// its own routes, so that load balancers can probe it while metrics stay on the admin port.
pub fn probe_router<F, Fut>(ready: F) -> Router
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    Router::new().route("/healthz", get(|| async { "ok" })).route(
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
}

/// Serves `router` on `listener` until `stop` is cancelled (an admin listener's loop).
pub async fn serve_admin(
    listener: tokio::net::TcpListener,
    router: Router,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await
}

//! `buzz-gateway`: settings, telemetry, then the `Application` until SIGTERM or SIGINT.

use buzz_gateway::{Application, Settings};

/// mimalloc: glibc malloc was about 10 % of the relay's CPU under load (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Before telemetry, so that a bad setting (exit 2) or `--help` prints as plain text.
    let settings = Settings::parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let _telemetry = buzz_telemetry::init("buzz-gateway")?;
    let shutdown = buzz_telemetry::runtime::cancel_on_signal();
    Application::build(settings, shutdown).await?.run().await
}

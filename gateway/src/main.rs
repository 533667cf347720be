use buzz_gateway::{Application, Settings};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = buzz_telemetry::init("buzz-gateway")?;
    let shutdown = CancellationToken::new();
    let app = Application::build(Settings::from_env()?, shutdown.clone()).await?;
    tokio::spawn(async move {
        buzz_telemetry::runtime::shutdown_signal().await;
        shutdown.cancel();
    });
    app.run().await
}

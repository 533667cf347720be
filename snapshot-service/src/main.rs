use buzz_snapshot::{Application, Settings};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = buzz_telemetry::init("buzz-snapshot")?;
    let app = Application::build(Settings::from_env()?).await?;
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            buzz_telemetry::runtime::shutdown_signal().await;
            shutdown.cancel();
        }
    });
    app.run(shutdown).await
}

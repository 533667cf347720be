use buzz_gateway::{Application, Settings};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = buzz_telemetry::init("buzz-gateway")?;
    let shutdown = buzz_telemetry::runtime::cancel_on_signal();
    Application::build(Settings::from_env()?, shutdown).await?.run().await
}

use buzz_snapshot::{Application, Settings};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = buzz_telemetry::init("buzz-snapshot")?;
    let app = Application::build(Settings::from_env()?).await?;
    app.run(buzz_telemetry::runtime::cancel_on_signal()).await
}

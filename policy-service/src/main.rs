use buzz_policy::{Application, Settings};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = buzz_telemetry::init("buzz-policy")?;
    let app = Application::build(Settings::from_env()?).await?;
    app.run(buzz_telemetry::runtime::cancel_on_signal()).await
}

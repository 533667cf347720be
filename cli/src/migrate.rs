//! `buzz migrate`: apply pending database migrations.

/// Applies the pending migrations (up to `to_version` when given) and prints the schema version.
pub async fn run(url: &str, to_version: Option<i64>) -> anyhow::Result<()> {
    let pool = buzz_store::connect(url, 2).await?;
    buzz_store::migrate_to(&pool, to_version.unwrap_or(buzz_store::SCHEMA_VERSION)).await?;
    let version = buzz_store::check_schema(&pool).await?;
    println!("migrations applied (schema version {version})");
    Ok(())
}

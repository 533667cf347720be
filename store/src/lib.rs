//! PostgreSQL schema, migrations, connection setup and the schema-version check of buzz-relay.
#![warn(missing_docs)]

pub mod access;
pub mod current_tags;
pub mod domain;
pub mod fragments;
pub mod tag_rows;

pub use domain::{ChannelType, Role, Visibility};

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// The newest migration this build knows. Services refuse to start on an older schema.
pub const SCHEMA_VERSION: i64 = 15;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The embedded migrations (upgrade tests apply a prefix of them, as an older release did).
#[must_use]
pub fn migrator() -> &'static sqlx::migrate::Migrator {
    &MIGRATOR
}

/// Why the store could not be opened, migrated or checked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL is invalid or the server refused or did not answer.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[source] sqlx::Error),
    /// A migration failed (or the database has one this build does not know).
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database is older than this build needs.
    #[error("database schema is at version {found}, this build needs {needed}: run `buzz migrate`")]
    SchemaTooOld {
        /// The newest applied migration.
        found: i64,
        /// [`SCHEMA_VERSION`].
        needed: i64,
    },
    /// Any other statement failed.
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
}

/// Opens a pool. `max_connections` bounds what one replica can take from the database.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, StoreError> {
    let options: PgConnectOptions = url.parse().map_err(StoreError::Connect)?;
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options.application_name("buzz-relay"))
        .await
        .map_err(StoreError::Connect)
}

/// Applies every pending migration.
pub async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// Fails unless the database has at least [`SCHEMA_VERSION`] applied.
pub async fn check_schema(pool: &PgPool) -> Result<(), StoreError> {
    let found: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool)
        .await
        .or_else(|e| match &e {
            sqlx::Error::Database(db) if db.code().as_deref() == Some("42P01") => Ok(None),
            _ => Err(e),
        })?;
    let found = found.unwrap_or(0);
    if found < SCHEMA_VERSION {
        return Err(StoreError::SchemaTooOld { found, needed: SCHEMA_VERSION });
    }
    Ok(())
}

/// True for a Postgres unique violation (23505).
#[must_use]
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("23505"))
}

/// sha256 of a tag value, the key of the tag index.
#[must_use]
pub fn tag_value_hash(value: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(value.as_bytes()).to_vec()
}

/// Creates the database named in `url` when it does not exist (local development and tests),
/// connecting to the `postgres` maintenance database of the same server.
pub async fn ensure_database(url: &str) -> Result<(), StoreError> {
    use sqlx::ConnectOptions as _;
    let options: PgConnectOptions = url.parse().map_err(StoreError::Connect)?;
    let Some(name) = options.get_database().map(str::to_owned) else { return Ok(()) };
    let mut conn = options.database("postgres").connect().await.map_err(StoreError::Connect)?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(&name)
        .fetch_one(&mut conn)
        .await?;
    if !exists {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        match sqlx::query(&format!("CREATE DATABASE {quoted}")).execute(&mut conn).await {
            Ok(_) => {}
            // Another process created it first.
            Err(e) if matches!(&e, sqlx::Error::Database(db) if db.code().as_deref() == Some("42P04")) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

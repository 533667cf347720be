//! PostgreSQL schema, migrations, connection setup and the schema-version check of buzz-relay.
#![warn(missing_docs)]

pub mod access;
pub mod bans;
pub mod current_tags;
pub mod fragments;
mod migrate;
pub mod relay_state;
pub mod tag_rows;

pub use migrate::{migrate, migrate_to};

/// The stored domain values live in `buzz_core::domain` (one `Role` for the bus and the store).
pub use buzz_core::domain::{self, ChannelType, Lifecycle, Role, Visibility};

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// The newest migration this build knows: `buzz migrate` brings a database to it.
pub const SCHEMA_VERSION: i64 = 6;

/// The oldest schema this build's services run on: the previous release's (expand/contract,
/// docs/operations.md "Changing the schema"). A service refuses to start below it.
pub const MIN_SCHEMA_VERSION: i64 = 1;

/// What `_sqlx_migrations` says a pre-0.1.0 development build applied first (`0001_foundation`).
/// Those databases were migrated by a chain (0001-0015) that 0.1.0 folded into one baseline.
const OLD_CHAIN_FIRST: &str = "foundation";

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
        /// [`MIN_SCHEMA_VERSION`].
        needed: i64,
    },
    /// A migration needs a PostgreSQL extension that `buzz migrate`'s role could not create.
    #[error(
        "migration {version} needs the PostgreSQL extension {extension} (shipped with PostgreSQL's \
         contrib modules), which this role could not create: {cause}. Run `buzz migrate` as the \
         database's owner or a role with CREATE on the database, or have a superuser run `CREATE \
         EXTENSION {extension};` in this database (and install the contrib package on the server \
         if it is missing), then run `buzz migrate` again. Until then the schema stays at \
         version {applied}: the relay keeps running, and searches use the older index \
         (docs/operations.md \"Changing the schema\")"
    )]
    Extension {
        /// The migration that needs it.
        version: i64,
        /// The extension.
        extension: &'static str,
        /// The newest migration applied.
        applied: i64,
        /// What PostgreSQL said.
        cause: String,
    },
    /// The database was migrated by a development build before 0.1.0 (the 0001-0015 chain).
    #[error(
        "this database was migrated by a development build older than buzz-relay 0.1.0 (migrations \
         0001_foundation to 0015), whose schema 0.1.0 folded into one baseline migration; it cannot \
         be upgraded in place. No release before 0.1.0 was published: recreate the database (DROP \
         DATABASE, then `buzz migrate`), or point DATABASE_URL at a new one. scripts/dev.sh does this \
         for its own buzz_dev by itself"
    )]
    OldChain,
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

/// True when `_sqlx_migrations` records the pre-0.1.0 chain (its first migration, `foundation`).
pub(crate) async fn is_old_chain(conn: &mut sqlx::PgConnection) -> Result<bool, StoreError> {
    let first: Option<String> =
        sqlx::query_scalar("SELECT description FROM _sqlx_migrations WHERE version = 1")
            .fetch_optional(&mut *conn)
            .await
            .or_else(|e| if is_undefined_table(&e) { Ok(None) } else { Err(e) })?;
    Ok(first.as_deref() == Some(OLD_CHAIN_FIRST))
}

pub(crate) fn is_undefined_table(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("42P01"))
}

/// Fails unless the database has at least [`MIN_SCHEMA_VERSION`] applied (and was not migrated
/// by the pre-0.1.0 chain); answers the applied version. A newer schema than
/// [`SCHEMA_VERSION`] is accepted: during a rolling upgrade the previous release runs on the
/// next one's expanded schema.
pub async fn check_schema(pool: &PgPool) -> Result<i64, StoreError> {
    let mut conn = pool.acquire().await?;
    if is_old_chain(&mut conn).await? {
        return Err(StoreError::OldChain);
    }
    let found: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
        .fetch_one(&mut *conn)
        .await
        .or_else(|e| if is_undefined_table(&e) { Ok(None) } else { Err(e) })?;
    let found = found.unwrap_or(0);
    if found < MIN_SCHEMA_VERSION {
        return Err(StoreError::SchemaTooOld { found, needed: MIN_SCHEMA_VERSION });
    }
    Ok(found)
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

/// Drops the database named in `url` (closing its sessions) and creates it empty again, through
/// the `postgres` maintenance database of the same server. For local development only: `buzz
/// dev` recreates its own database when a pre-0.1.0 build migrated it ([`StoreError::OldChain`]).
pub async fn recreate_database(url: &str) -> Result<(), StoreError> {
    use sqlx::ConnectOptions as _;
    let options: PgConnectOptions = url.parse().map_err(StoreError::Connect)?;
    let Some(name) = options.get_database().map(str::to_owned) else { return Ok(()) };
    let mut conn = options.database("postgres").connect().await.map_err(StoreError::Connect)?;
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    sqlx::query(&format!("DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")).execute(&mut conn).await?;
    drop(conn);
    ensure_database(url).await
}

//! PostgreSQL schema, migrations, connection setup and the schema-version check of buzz-relay.
#![warn(missing_docs)]

pub mod access;
pub mod current_tags;
pub mod fragments;
pub mod relay_state;
pub mod tag_rows;

/// The stored domain values live in `buzz_core::domain` (one `Role` for the bus and the store).
pub use buzz_core::domain::{self, ChannelType, Lifecycle, Role, Visibility};

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

/// The newest migration this build knows: `buzz migrate` brings a database to it.
pub const SCHEMA_VERSION: i64 = 4;

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

/// How long one migration statement may wait for a lock before the migration gives up (and
/// `migrate` tries again): a DDL statement queued behind a long transaction would otherwise hold
/// every write queued behind it (docs/operations.md "Changing the schema").
const MIGRATION_LOCK_TIMEOUT: &str = "1s";
/// Tries of a migration run that failed on `lock_timeout`.
const MIGRATION_TRIES: u32 = 10;

/// Applies every pending migration; refuses a database of the pre-0.1.0 chain
/// ([`StoreError::OldChain`]). Each statement waits at most [`MIGRATION_LOCK_TIMEOUT`] for a
/// lock; a run that timed out is rolled back and tried again, at most [`MIGRATION_TRIES`] times.
pub async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    migrate_to(pool, SCHEMA_VERSION).await
}

/// [`migrate`], applying only the migrations up to `version` (as an earlier release's migrate
/// Job did: upgrade tests and `scripts/migration-locks.sh` start from there).
pub async fn migrate_to(pool: &PgPool, version: i64) -> Result<(), StoreError> {
    let migrator = sqlx::migrate::Migrator {
        migrations: std::borrow::Cow::Owned(
            MIGRATOR.iter().filter(|m| m.version <= version).cloned().collect(),
        ),
        ..sqlx::migrate::Migrator::DEFAULT
    };
    let mut conn = pool.acquire().await?;
    if is_old_chain(&mut conn).await? {
        return Err(StoreError::OldChain);
    }
    sqlx::query(&format!("SET lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'")).execute(&mut *conn).await?;
    let mut tries = 0;
    loop {
        tries += 1;
        drop_failed_concurrent_indexes(&mut conn, &migrator).await?;
        match migrator.run(&mut *conn).await {
            Ok(()) => break,
            Err(sqlx::migrate::MigrateError::Execute(sqlx::Error::Database(db)))
                if db.code().as_deref() == Some("55P03") && tries < MIGRATION_TRIES =>
            {
                tracing::warn!(tries, "a migration waited longer than lock_timeout for a lock; trying again");
                tokio::time::sleep(Duration::from_millis(500 * u64::from(tries))).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    sqlx::query("RESET lock_timeout").execute(&mut *conn).await?;
    Ok(())
}

/// Drops what an interrupted `CREATE INDEX CONCURRENTLY` left behind: the INVALID index of a
/// pending `-- no-transaction` migration (docs/operations.md "Changing the schema"). PostgreSQL
/// keeps such an index after the build fails (a lock timeout, a crash, a cancelled Job) and sqlx
/// records nothing for the migration, so without this every later run would fail on "already
/// exists". Only indexes a pending migration builds concurrently, and only invalid ones, are
/// dropped; a valid one is left for the migration to meet.
async fn drop_failed_concurrent_indexes(
    conn: &mut sqlx::PgConnection,
    migrator: &sqlx::migrate::Migrator,
) -> Result<(), StoreError> {
    let applied: Vec<i64> = match sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
        .fetch_all(&mut *conn)
        .await
    {
        Ok(v) => v,
        Err(e) if is_undefined_table(&e) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let pending = migrator.iter().filter(|m| m.no_tx && !applied.contains(&m.version));
    for name in pending.filter_map(|m| concurrent_index_name(&m.sql)) {
        let invalid: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
             WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace AND NOT i.indisvalid)",
        )
        .bind(name)
        .fetch_one(&mut *conn)
        .await?;
        if invalid {
            tracing::warn!(index = name, "dropping the invalid index an interrupted concurrent build left");
            sqlx::query(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}")).execute(&mut *conn).await?;
        }
    }
    Ok(())
}

/// The index a `CREATE INDEX CONCURRENTLY [IF NOT EXISTS] <name>` statement in `sql` builds.
fn concurrent_index_name(sql: &str) -> Option<&str> {
    let words: Vec<&str> =
        sql.lines().filter(|l| !l.trim_start().starts_with("--")).flat_map(str::split_whitespace).collect();
    let at = words.windows(3).position(|w| {
        w[0].eq_ignore_ascii_case("create")
            && w[1].eq_ignore_ascii_case("index")
            && w[2].eq_ignore_ascii_case("concurrently")
    })?;
    let rest = &words[at + 3..];
    let name = match rest {
        [i, n, e, name, ..] if [*i, *n, *e].join(" ").eq_ignore_ascii_case("if not exists") => name,
        [name, ..] => name,
        [] => return None,
    };
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_').then_some(*name)
}

/// True when `_sqlx_migrations` records the pre-0.1.0 chain (its first migration, `foundation`).
async fn is_old_chain(conn: &mut sqlx::PgConnection) -> Result<bool, StoreError> {
    let first: Option<String> =
        sqlx::query_scalar("SELECT description FROM _sqlx_migrations WHERE version = 1")
            .fetch_optional(&mut *conn)
            .await
            .or_else(|e| if is_undefined_table(&e) { Ok(None) } else { Err(e) })?;
    Ok(first.as_deref() == Some(OLD_CHAIN_FIRST))
}

fn is_undefined_table(e: &sqlx::Error) -> bool {
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

#[cfg(test)]
mod tests {
    use super::concurrent_index_name;

    #[test]
    fn the_index_a_concurrent_migration_builds_is_named() {
        let sql = "-- no-transaction\n-- CREATE INDEX CONCURRENTLY commented ON x\nCREATE INDEX CONCURRENTLY events_search\n    ON events USING gin (x);";
        assert_eq!(concurrent_index_name(sql), Some("events_search"));
        assert_eq!(
            concurrent_index_name("create index concurrently if not exists a_b on t (c)"),
            Some("a_b")
        );
        assert_eq!(concurrent_index_name("CREATE INDEX plain ON t (c)"), None);
        assert_eq!(concurrent_index_name("CREATE INDEX CONCURRENTLY \"odd;name\" ON t (c)"), None);
    }

    #[test]
    fn every_concurrent_migration_names_its_index() {
        for m in super::migrator().iter().filter(|m| m.no_tx) {
            assert!(concurrent_index_name(&m.sql).is_some(), "migration {} builds no named index", m.version);
        }
    }
}

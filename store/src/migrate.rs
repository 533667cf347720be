//! `buzz migrate`: applies the embedded migrations one at a time, each under the lock limit its
//! kind allows, retries one that gave up on a lock, drops what an interrupted concurrent index
//! build left, and names a missing extension (docs/operations.md "Changing the schema").

use std::time::Duration;

use sqlx::PgPool;

use crate::{is_old_chain, is_undefined_table, StoreError, MIGRATOR, SCHEMA_VERSION};

/// How long one statement of a transactional migration may wait for a lock before the migration
/// gives up (and `migrate` tries again): a DDL statement queued behind a long transaction would
/// otherwise hold every write queued behind it (docs/operations.md "Changing the schema").
const MIGRATION_LOCK_TIMEOUT: &str = "1s";
/// Tries of a migration that failed on `lock_timeout`.
const MIGRATION_TRIES: u32 = 10;

/// Applies every pending migration; refuses a database of the pre-0.1.0 chain
/// ([`StoreError::OldChain`]). Each statement of a transactional migration waits at most
/// [`MIGRATION_LOCK_TIMEOUT`] for a lock; a migration that timed out is rolled back and tried
/// again, at most [`MIGRATION_TRIES`] times. A `-- no-transaction` migration (one `CREATE INDEX
/// CONCURRENTLY`) waits without a limit: its lock (SHARE UPDATE EXCLUSIVE) lets every read and
/// write through, and it must wait out every transaction older than its build, which a limit
/// would turn into a failed build, a rebuild from scratch, and again.
pub async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    migrate_to(pool, SCHEMA_VERSION).await
}

/// [`migrate`], applying only the migrations up to `version` (as an earlier release's migrate
/// Job did: upgrade tests and `scripts/migration-locks.sh` start from there).
pub async fn migrate_to(pool: &PgPool, version: i64) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await?;
    if is_old_chain(&mut conn).await? {
        return Err(StoreError::OldChain);
    }
    // One migration at a time (each run skips what is applied), under its own lock limit; then
    // the whole list once more, which applies nothing and checks what is applied as one run
    // always did (a changed or unknown applied migration is an error).
    for step in MIGRATOR.iter().filter(|m| m.version <= version) {
        let mut migrator = up_to(step.version);
        migrator.ignore_missing = true;
        let limit = if step.no_tx { "0" } else { MIGRATION_LOCK_TIMEOUT };
        sqlx::query(&format!("SET lock_timeout = '{limit}'")).execute(&mut *conn).await?;
        run_with_retries(&mut conn, &migrator).await?;
    }
    sqlx::query(&format!("SET lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'")).execute(&mut *conn).await?;
    run_with_retries(&mut conn, &up_to(version)).await?;
    sqlx::query("RESET lock_timeout").execute(&mut *conn).await?;
    Ok(())
}

/// The embedded migrations up to `version`.
fn up_to(version: i64) -> sqlx::migrate::Migrator {
    sqlx::migrate::Migrator {
        migrations: std::borrow::Cow::Owned(
            MIGRATOR.iter().filter(|m| m.version <= version).cloned().collect(),
        ),
        ..sqlx::migrate::Migrator::DEFAULT
    }
}

/// Runs `migrator`, again (after a growing pause) when a statement gave up on `lock_timeout`.
async fn run_with_retries(
    conn: &mut sqlx::PgConnection,
    migrator: &sqlx::migrate::Migrator,
) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        tries += 1;
        drop_failed_concurrent_indexes(conn, migrator).await?;
        let run = migrator.run(&mut *conn).await;
        if run.is_err() {
            // A failed run returns without releasing the migrator's advisory lock, which this
            // session would keep (a pooled connection, to the next run on another one).
            sqlx::query("SELECT pg_advisory_unlock_all()").execute(&mut *conn).await?;
        }
        match run {
            Ok(()) => return Ok(()),
            Err(e) if sql_state(&e).as_deref() == Some("55P03") && tries < MIGRATION_TRIES => {
                tracing::warn!(tries, "a migration waited longer than lock_timeout for a lock; trying again");
                tokio::time::sleep(Duration::from_millis(500 * u64::from(tries))).await;
            }
            Err(e) => return Err(missing_extension(conn, e).await),
        }
    }
}

/// The SQLSTATE of a statement's failure, whether sqlx reports it for a migration's own SQL
/// (`ExecuteMigration`) or for its bookkeeping (`Execute`).
fn sql_state(e: &sqlx::migrate::MigrateError) -> Option<String> {
    use sqlx::migrate::MigrateError::{Execute, ExecuteMigration};
    match e {
        Execute(sqlx::Error::Database(db)) | ExecuteMigration(sqlx::Error::Database(db), _) => {
            db.code().map(std::borrow::Cow::into_owned)
        }
        _ => None,
    }
}

/// The migrations that create an extension, and which.
const EXTENSIONS: [(i64, &str); 1] = [(5, "btree_gin")];

/// `e`, or [`StoreError::Extension`] when it is a migration of [`EXTENSIONS`] refused for lack of
/// privilege (42501) or of the extension's files on the server (0A000, 58P01).
async fn missing_extension(conn: &mut sqlx::PgConnection, e: sqlx::migrate::MigrateError) -> StoreError {
    let sqlx::migrate::MigrateError::ExecuteMigration(cause, version) = &e else { return e.into() };
    let Some(&(_, extension)) = EXTENSIONS.iter().find(|(v, _)| v == version) else { return e.into() };
    if !matches!(sql_state(&e).as_deref(), Some("42501" | "0A000" | "58P01")) {
        return e.into();
    }
    let applied: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
        .fetch_one(&mut *conn)
        .await
        .unwrap_or_default();
    StoreError::Extension {
        version: *version,
        extension,
        applied: applied.unwrap_or(0),
        cause: cause.to_string(),
    }
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
        for m in crate::migrator().iter().filter(|m| m.no_tx) {
            assert!(concurrent_index_name(&m.sql).is_some(), "migration {} builds no named index", m.version);
        }
    }
}

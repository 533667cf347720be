//! The schema and its migrations (docs/operations.md "Changing the schema"):
//! - `store/schema.sql` is what the migrations create, as `pg_dump --schema-only` prints it
//!   (normalised); a change to one without the other fails here, so every schema change is
//!   visible in review. `BUZZ_UPDATE_SCHEMA=1` (scripts/schema-dump.sh) rewrites the file.
//! - a database migrated by the pre-0.1.0 development chain (0001_foundation .. 0015) is refused
//!   by `buzz migrate` and by every service's start-up check, with what to do;
//! - a database below the oldest schema this build runs on is refused; one newer than the build
//!   knows is accepted (the previous release runs on the next one's expanded schema).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use buzz_tests::cluster::{base_database_url, with_database};
use sqlx::migrate::Migrate;
use sqlx::Connection;
use uuid::Uuid;

/// A fresh, empty database; dropped by [`Scratch::drop_db`].
struct Scratch {
    name: String,
    url: String,
}

impl Scratch {
    async fn new(tag: &str) -> Self {
        let name = format!("buzz_test_{tag}_{}", Uuid::new_v4().simple());
        let url = with_database(&base_database_url(), &name);
        buzz_store::ensure_database(&url).await.unwrap();
        Self { name, url }
    }

    async fn drop_db(self) {
        let admin = buzz_store::connect(&base_database_url(), 1).await.unwrap();
        sqlx::query(&format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name))
            .execute(&admin)
            .await
            .unwrap();
    }
}

/// `pg_dump --schema-only` of `url`, normalised: no comments, `SET`s, `set_config` or
/// `\restrict` lines (pg_dump 15.14+ adds a random key), no runs of blank lines, and not the
/// migrator's own bookkeeping table.
fn schema_of(url: &str) -> String {
    let out = Command::new("pg_dump")
        .args([
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            "--exclude-table=_sqlx_migrations",
            "-d",
            url,
        ])
        .output()
        .expect("pg_dump runs (Debian package postgresql-client)");
    assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim_end) {
        let dropped = line.starts_with("--")
            || line.starts_with("SET ")
            || line.starts_with("SELECT pg_catalog.set_config")
            || line.starts_with("\\restrict")
            || line.starts_with("\\unrestrict");
        if dropped || (line.is_empty() && lines.last().is_none_or(|l| l.is_empty())) {
            continue;
        }
        lines.push(line);
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n") + "\n"
}

const SCHEMA_HEADER: &str = "\
-- buzz-relay's database schema as the migrations in store/migrations/ create it: the output of
-- `pg_dump --schema-only --no-owner --no-privileges` on a freshly migrated database, without
-- comments, SETs and blank-line runs. Generated: do not edit. A test (tests/tests/migrations.rs)
-- fails when the migrations and this file differ; scripts/schema-dump.sh rewrites it.

";

#[tokio::test]
async fn the_migrations_create_exactly_store_schema_sql() {
    let db = Scratch::new("schema").await;
    let pool = buzz_store::connect(&db.url, 2).await.unwrap();
    buzz_store::migrate(&pool).await.unwrap();
    assert_eq!(buzz_store::check_schema(&pool).await.unwrap(), buzz_store::SCHEMA_VERSION);
    pool.close().await;
    let dumped = format!("{SCHEMA_HEADER}{}", schema_of(&db.url));
    db.drop_db().await;

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../store/schema.sql");
    if std::env::var_os("BUZZ_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &dumped).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != dumped {
        let first = committed.lines().zip(dumped.lines()).position(|(a, b)| a != b);
        panic!(
            "store/schema.sql differs from what the migrations create (first differing line: {}).\n\
             Run scripts/schema-dump.sh and commit store/schema.sql with the migration.\n\
             --- what the migrations create ---\n{dumped}",
            first.map_or_else(|| "past the end of one of them".to_owned(), |i| (i + 1).to_string())
        );
    }
}

/// `_sqlx_migrations` as the pre-0.1.0 development chain left it (its first migration was
/// `0001_foundation`), with one of the tables it created.
async fn old_chain(url: &str) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    conn.ensure_migrations_table().await.unwrap();
    let names = [
        "foundation",
        "threads",
        "tokens",
        "read model",
        "access version",
        "channel bans",
        "artifacts",
        "artifact current tags",
        "nip fi receipts",
        "nip fi cas",
        "current tags revision",
        "child rows without row triggers",
        "derived current tags and hex checks",
        "tag rows for generic filters",
        "current tags type column",
    ];
    for (i, name) in names.iter().enumerate() {
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES ($1, $2, true, sha384(convert_to($2, 'UTF8')), 1000)",
        )
        .bind(i64::try_from(i + 1).unwrap())
        .bind(name)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    sqlx::query("CREATE TABLE communities (id uuid PRIMARY KEY, host text NOT NULL UNIQUE)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_database_of_the_pre_release_chain_is_refused_with_what_to_do() {
    let db = Scratch::new("oldchain").await;
    old_chain(&db.url).await;
    let pool = buzz_store::connect(&db.url, 2).await.unwrap();

    let migrate = buzz_store::migrate(&pool).await.unwrap_err();
    assert!(matches!(migrate, buzz_store::StoreError::OldChain), "{migrate}");
    let message = migrate.to_string();
    for says in ["older than buzz-relay 0.1.0", "recreate the database", "buzz migrate"] {
        assert!(message.contains(says), "the refusal says {says:?}: {message}");
    }
    // Nothing was applied on top of it.
    let applied: i64 =
        sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations").fetch_one(&pool).await.unwrap();
    assert_eq!(applied, 15);
    // Every service's start-up check refuses it the same way.
    let start = buzz_store::check_schema(&pool).await.unwrap_err();
    assert!(matches!(start, buzz_store::StoreError::OldChain), "{start}");
    pool.close().await;

    // A service refuses to start on it (the write-service's start-up, as its binary runs it).
    let settings = buzz_write::Settings {
        database_url: db.url.clone(),
        nats: buzz_bus::NatsConfig::new(
            std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned()),
        ),
        nats_prefix: format!("oldchain{}", Uuid::new_v4().simple()),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        max_db_connections: 2,
        concurrency: 4,
        relay_secret_key: buzz_core::Keys::generate().secret_hex(),
        ttl_sweep_every: std::time::Duration::from_secs(1),
        statement_timeout_ms: 3000,
        lock_timeout_ms: 2000,
        batch: buzz_write::BatchSettings::default(),
    };
    let Err(err) = buzz_write::Application::build(settings).await else {
        panic!("the write-service started")
    };
    assert!(err.to_string().contains("older than buzz-relay 0.1.0"), "{err}");
    db.drop_db().await;
}

#[tokio::test]
async fn a_database_below_the_oldest_schema_is_refused_and_a_newer_one_accepted() {
    let db = Scratch::new("versions").await;
    let pool = buzz_store::connect(&db.url, 2).await.unwrap();
    // Empty: no migration applied.
    assert!(matches!(
        buzz_store::check_schema(&pool).await,
        Err(buzz_store::StoreError::SchemaTooOld { found: 0, needed: buzz_store::MIN_SCHEMA_VERSION })
    ));
    buzz_store::migrate(&pool).await.unwrap();
    // A migration of the next release, unknown to this build, applied by that release's migrate
    // Job before its replicas roll out: this build's services keep running on it.
    let next = buzz_store::SCHEMA_VERSION + 1;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'next release', true, '\\x00', 1)",
    )
    .bind(next)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(buzz_store::check_schema(&pool).await.unwrap(), next);
    pool.close().await;
    db.drop_db().await;
}

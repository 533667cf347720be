//! Upgrading a database that already holds artifacts: the migrations up to 0010 applied as SQL
//! files (as an older release left them), rows written the old way, then `buzz_store::migrate`
//! (the real migrator, which records 0001–0010 as applied by checksum and runs 0011) must fill
//! each current-tag row with its artifact's current revision and leave the column mandatory.

#![allow(clippy::unwrap_used)]

use sqlx::Connection;
use uuid::Uuid;

fn base_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let root = &base[..base.rfind('/').unwrap()];
    query.map_or_else(|| format!("{root}/{name}"), |q| format!("{root}/{name}?{q}"))
}

#[tokio::test]
async fn migration_0011_backfills_the_current_revision_of_existing_current_tags() {
    let name = format!("buzz_test_mig_{}", Uuid::new_v4().simple());
    let url = with_database(&base_url(), &name);
    buzz_store::ensure_database(&url).await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();

    // Schema 10 exactly as an older release applied it (same files, same order), with the
    // migrator's own bookkeeping so that the real migrator resumes after it.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../store/migrations");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let before: Vec<_> = files.iter().filter(|p| !p.to_string_lossy().contains("0011_")).collect();
    assert_eq!(before.len(), 10, "{files:?}");
    for file in &before {
        sqlx::raw_sql(&std::fs::read_to_string(file).unwrap()).execute(&mut conn).await.unwrap();
    }
    let (community, d, home) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let revision = "b".repeat(64);
    sqlx::query("INSERT INTO communities (id, host, owner_pubkey) VALUES ($1, 'upgrade.test', $2)")
        .bind(community)
        .bind("a".repeat(64))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO artifacts (community_id, d, type, current_revision, home_channel) VALUES ($1, $2, 'buzz.task', $3, $4)",
    )
    .bind(community)
    .bind(d)
    .bind(&revision)
    .bind(home)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at) \
         VALUES ($1, $2, 'type', sha256('buzz.task'), $3, now()), ($1, $2, 'h', sha256(convert_to($3::text, 'UTF8')), $3, now())",
    )
    .bind(community)
    .bind(d)
    .bind(home)
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();

    // Let the real migrator see 0001–0010 as applied: run it on a copy of the bookkeeping it
    // would have written, i.e. apply everything through it on a second, empty database first and
    // copy its rows for versions 1–10.
    let reference = format!("{name}_ref");
    let ref_url = with_database(&base_url(), &reference);
    buzz_store::ensure_database(&ref_url).await.unwrap();
    let ref_pool = buzz_store::connect(&ref_url, 1).await.unwrap();
    buzz_store::migrate(&ref_pool).await.unwrap();
    let rows: Vec<(i64, String, bool, Vec<u8>, i64)> = sqlx::query_as(
        "SELECT version, description, success, checksum, execution_time FROM _sqlx_migrations WHERE version <= 10",
    )
    .fetch_all(&ref_pool)
    .await
    .unwrap();
    ref_pool.close().await;
    let pool = buzz_store::connect(&url, 2).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL, \
         checksum BYTEA NOT NULL, execution_time BIGINT NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 10);
    for (version, description, success, checksum, time) in rows {
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(version)
        .bind(description)
        .bind(success)
        .bind(checksum)
        .bind(time)
        .execute(&pool)
        .await
        .unwrap();
    }
    assert!(matches!(
        buzz_store::check_schema(&pool).await,
        Err(buzz_store::StoreError::SchemaTooOld { found: 10, .. })
    ));

    buzz_store::migrate(&pool).await.unwrap();
    buzz_store::check_schema(&pool).await.unwrap();
    let revisions: Vec<(String, String)> =
        sqlx::query_as("SELECT name, revision FROM artifact_current_tags WHERE d = $1 ORDER BY name")
            .bind(d)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(revisions, vec![("h".to_owned(), revision.clone()), ("type".to_owned(), revision)]);
    // Mandatory from now on: a writer that leaves it out (an older write-service) is refused.
    let old_writer = sqlx::query(
        "INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at) \
         VALUES ($1, $2, 'type', sha256('buzz.task'), $3, now()) \
         ON CONFLICT (community_id, d, name, value_hash) DO UPDATE SET updated_at = EXCLUDED.updated_at",
    )
    .bind(community)
    .bind(d)
    .bind(home)
    .execute(&pool)
    .await
    .unwrap_err();
    assert!(old_writer.to_string().contains("not-null"), "{old_writer}");
    pool.close().await;

    let admin = buzz_store::connect(&base_url(), 1).await.unwrap();
    for db in [name, reference] {
        sqlx::query(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)")).execute(&admin).await.unwrap();
    }
}

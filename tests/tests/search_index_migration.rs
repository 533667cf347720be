//! Migrations 0005 (`btree_gin`) and 0006 (`events_search_community`, built CONCURRENTLY) under
//! `buzz migrate` (docs/operations.md "Changing the schema"):
//! - a fresh install by the database's owner needs no superuser (`btree_gin` is trusted);
//! - a role that may not create the extension stops before 0005 with what to do, the schema stays
//!   at 4 (services start on it and search on the old index), and once a superuser has created
//!   the extension the same role finishes;
//! - an INVALID index an interrupted build left is dropped and built again;
//! - the concurrent build waits out a transaction older than it instead of giving up on
//!   `lock_timeout` (its lock lets writes through; giving up meant building again from scratch).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use buzz_store::fragments::SEARCH_INDEX;
use buzz_tests::cluster::{base_database_url, with_database};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use uuid::Uuid;

/// A fresh database (owned by `owner`, or by the test's superuser), and the roles made for it.
struct Scratch {
    name: String,
    url: String,
    roles: Vec<String>,
}

impl Scratch {
    async fn new(owner: Option<&str>) -> Self {
        let name = format!("buzz_test_search_index_{}", Uuid::new_v4().simple());
        let admin = admin().await;
        let mut roles = Vec::new();
        let owned = match owner {
            Some(role) => {
                sqlx::query(&format!("CREATE ROLE {role} LOGIN")).execute(&admin).await.unwrap();
                roles.push(role.to_owned());
                format!(" OWNER {role}")
            }
            None => String::new(),
        };
        sqlx::query(&format!("CREATE DATABASE {name}{owned}")).execute(&admin).await.unwrap();
        Self { url: with_database(&base_database_url(), &name), name, roles }
    }

    /// A pool on this database as the test's superuser, or as `role`.
    async fn pool(&self, role: Option<&str>) -> PgPool {
        let mut options: PgConnectOptions = self.url.parse().unwrap();
        if let Some(role) = role {
            options = options.username(role);
        }
        PgPoolOptions::new().max_connections(2).connect_with(options).await.unwrap()
    }

    async fn drop_all(self) {
        let admin = admin().await;
        sqlx::query(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name))
            .execute(&admin)
            .await
            .unwrap();
        for role in self.roles {
            sqlx::query(&format!("DROP ROLE IF EXISTS {role}")).execute(&admin).await.unwrap();
        }
    }
}

async fn admin() -> PgPool {
    buzz_store::connect(&base_database_url(), 1).await.unwrap()
}

fn role_name(tag: &str) -> String {
    format!("buzz_test_{tag}_{}", Uuid::new_v4().simple())
}

/// Whether the search index exists and is valid, and its definition.
async fn search_index(pool: &PgPool) -> Option<(bool, String)> {
    sqlx::query_as(
        "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1",
    )
    .bind(SEARCH_INDEX)
    .fetch_optional(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_fresh_install_by_the_databases_owner_needs_no_superuser() {
    let owner = role_name("owner");
    let db = Scratch::new(Some(&owner)).await;
    let pool = db.pool(Some(&owner)).await;
    buzz_store::migrate(&pool).await.unwrap();
    assert_eq!(buzz_store::check_schema(&pool).await.unwrap(), buzz_store::SCHEMA_VERSION);
    let (valid, def) = search_index(&pool).await.unwrap();
    assert!(valid && def.contains("USING gin (community_id, to_tsvector("), "{def}");
    pool.close().await;
    db.drop_all().await;
}

#[tokio::test]
async fn a_role_that_may_not_create_btree_gin_stops_at_schema_4_with_what_to_do() {
    let db = Scratch::new(None).await;
    let role = role_name("app");
    let su = db.pool(None).await;
    for sql in [
        format!("CREATE ROLE {role} LOGIN"),
        format!("GRANT CONNECT ON DATABASE {} TO {role}", db.name),
        format!("GRANT USAGE, CREATE ON SCHEMA public TO {role}"),
    ] {
        sqlx::query(&sql).execute(&su).await.unwrap();
    }
    let mut db = db;
    db.roles.push(role.clone());
    let pool = db.pool(Some(&role)).await;
    let err = buzz_store::migrate(&pool).await.unwrap_err();
    assert!(matches!(err, buzz_store::StoreError::Extension { version: 5, applied: 4, .. }), "{err:?}");
    let text = err.to_string();
    for says in ["btree_gin", "CREATE EXTENSION btree_gin;", "permission denied", "stays at version 4"] {
        assert!(text.contains(says), "{says:?} missing from: {text}");
    }
    // The relay runs on what was applied: the previous schema, searching on `events_search`.
    assert_eq!(buzz_store::check_schema(&pool).await.unwrap(), 4);
    assert!(search_index(&pool).await.is_none());
    // A superuser creates the extension; the same role then finishes (0005 does nothing more).
    sqlx::query("CREATE EXTENSION btree_gin").execute(&su).await.unwrap();
    buzz_store::migrate(&pool).await.unwrap();
    assert_eq!(buzz_store::check_schema(&pool).await.unwrap(), buzz_store::SCHEMA_VERSION);
    assert!(search_index(&pool).await.unwrap().0);
    pool.close().await;
    su.close().await;
    db.drop_all().await;
}

#[tokio::test]
async fn an_invalid_search_index_an_interrupted_build_left_is_dropped_and_built_again() {
    let db = Scratch::new(None).await;
    let pool = db.pool(None).await;
    buzz_store::migrate_to(&pool, 5).await.unwrap();
    // What a build cancelled half way leaves: the index, INVALID, and 0006 not recorded.
    sqlx::query(&format!("CREATE INDEX {SEARCH_INDEX} ON events USING gin (community_id)"))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(&format!(
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{SEARCH_INDEX}'::regclass"
    ))
    .execute(&pool)
    .await
    .unwrap();
    buzz_store::migrate(&pool).await.unwrap();
    let (valid, def) = search_index(&pool).await.unwrap();
    assert!(valid && def.contains("to_tsvector("), "{def}");
    pool.close().await;
    db.drop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrent_build_waits_out_an_older_transaction_instead_of_giving_up_on_lock_timeout() {
    let db = Scratch::new(None).await;
    let pool = db.pool(None).await;
    buzz_store::migrate_to(&pool, 5).await.unwrap();
    // A transaction holding a snapshot (a long read, say): the build must wait for it to end.
    let mut reader = pool.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").execute(&mut *reader).await.unwrap();
    sqlx::query("SELECT count(*) FROM events").execute(&mut *reader).await.unwrap();
    let migrating = buzz_store::migrate(&pool);
    // Past `buzz migrate`'s 1 s lock limit, the build is still waiting for that transaction (the
    // same statement: `query_start` is its start); then the transaction ends.
    let admin = admin().await;
    let watch = async {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let waiting: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = $1 \
                 AND wait_event_type = 'Lock' AND wait_event = 'virtualxid' \
                 AND now() - query_start > interval '1500 ms')",
            )
            .bind(&db.name)
            .fetch_one(&admin)
            .await
            .unwrap();
            if waiting {
                break;
            }
            assert!(Instant::now() < deadline, "the build never waited past the lock limit");
            tokio::task::yield_now().await;
        }
        reader.commit().await.unwrap();
    };
    let (migrated, ()) =
        tokio::time::timeout(Duration::from_secs(60), async { tokio::join!(migrating, watch) })
            .await
            .unwrap();
    migrated.unwrap();
    assert!(search_index(&pool).await.unwrap().0);
    pool.close().await;
    db.drop_all().await;
}

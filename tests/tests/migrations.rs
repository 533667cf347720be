//! Upgrading a database that already holds artifacts: the migrations up to 0010 applied and
//! recorded as an older release left them, rows written the old way, then `buzz_store::migrate`
//! (the real migrator, which runs 0011 and later) must fill each current-tag row with its
//! artifact's current revision and leave the column mandatory; 0013 removes the current-tag rows
//! of the derived envelope tags (`ar`, `d`, `prev`), which queries answer from the artifact's
//! columns; 0014 removes the current-tag rows of `op` (answered from revision records), every
//! `event_tags` row of a multi-character name (generic filters cannot name one) and those of
//! revisions' `d` and `h` (answered from revision records and event rows); 0015 moves `type` from
//! rows of its own to a column of every current-tag row (the artifact's type, immutable).

#![allow(clippy::unwrap_used)]

use buzz_tests::cluster::{base_database_url, with_database};
use sqlx::migrate::Migrate;
use sqlx::Connection;
use uuid::Uuid;

#[tokio::test]
async fn migration_0011_backfills_the_current_revision_of_existing_current_tags() {
    let name = format!("buzz_test_mig_{}", Uuid::new_v4().simple());
    let url = with_database(&base_database_url(), &name);
    buzz_store::ensure_database(&url).await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();

    // Schema 10 exactly as an older release applied it: the same migrations, recorded by the
    // migrator's own bookkeeping so that the real migrator resumes after them.
    conn.ensure_migrations_table().await.unwrap();
    let before: Vec<_> = buzz_store::migrator().iter().filter(|m| m.version <= 10).collect();
    assert_eq!(before.len(), 10);
    for migration in before {
        conn.apply(migration).await.unwrap();
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
         VALUES ($1, $2, 'type', sha256('buzz.task'), $3, now()), ($1, $2, 'h', sha256(convert_to($3::text, 'UTF8')), $3, now()), \
                ($1, $2, 'd', sha256(convert_to($2::text, 'UTF8')), $3, now()), ($1, $2, 'ar', sha256('1'), $3, now()), \
                ($1, $2, 'op', sha256('create'), $3, now())",
    )
    .bind(community)
    .bind(d)
    .bind(home)
    .execute(&mut conn)
    .await
    .unwrap();
    // The revision's event and a kind-9 message, each with a row for every tag.
    let message = "c".repeat(64);
    for (id, kind) in [(&revision, 45010_i64), (&message, 9)] {
        sqlx::query(
            "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
             VALUES ($1, $2, $3, $4, 1700000000, $5, '{}')",
        )
        .bind(community)
        .bind(id)
        .bind("a".repeat(64))
        .bind(kind)
        .bind(home)
        .execute(&mut conn)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
             SELECT $1, $2, n, sha256(convert_to(n, 'UTF8')), 1700000000 \
             FROM unnest(ARRAY['ar', 'd', 'h', 'op', 'prev', 'type', 'title', 'e', 'p']) n",
        )
        .bind(community)
        .bind(id)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    conn.close().await.unwrap();

    let pool = buzz_store::connect(&url, 2).await.unwrap();
    assert!(matches!(
        buzz_store::check_schema(&pool).await,
        Err(buzz_store::StoreError::SchemaTooOld { found: 10, .. })
    ));
    buzz_store::migrate(&pool).await.unwrap();
    buzz_store::check_schema(&pool).await.unwrap();
    let revisions: Vec<(String, String, String)> =
        sqlx::query_as("SELECT name, revision, type FROM artifact_current_tags WHERE d = $1 ORDER BY name")
            .bind(d)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(revisions, vec![("h".to_owned(), revision.clone(), "buzz.task".to_owned())]);
    // Only single-character names keep rows, and a revision's `d` and `h` none.
    for (id, names) in [(&revision, vec!["e", "p"]), (&message, vec!["d", "e", "h", "p"])] {
        let stored: Vec<String> =
            sqlx::query_scalar("SELECT name FROM event_tags WHERE event_id = $1 ORDER BY name")
                .bind(id)
                .fetch_all(&pool)
                .await
                .unwrap();
        assert_eq!(stored, names, "event_tags of {id}");
    }
    // Mandatory from now on: writers that leave them out (older write-services: the revision id
    // before 0011, the type before 0015) are refused.
    let old_writers = [
        "INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at) \
         VALUES ($1, $2, 'type', sha256('buzz.task'), $3, now()) \
         ON CONFLICT (community_id, d, name, value_hash) DO UPDATE SET updated_at = EXCLUDED.updated_at",
        "INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, revision) \
         VALUES ($1, $2, 'h', sha256(convert_to($3::text, 'UTF8')), $3, now(), repeat('b', 64)) \
         ON CONFLICT (community_id, d, name, value_hash) DO UPDATE SET updated_at = EXCLUDED.updated_at",
    ];
    for sql in old_writers {
        let old_writer =
            sqlx::query(sql).bind(community).bind(d).bind(home).execute(&pool).await.unwrap_err();
        assert!(old_writer.to_string().contains("not-null"), "{old_writer}");
    }
    pool.close().await;

    let admin = buzz_store::connect(&base_database_url(), 1).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).execute(&admin).await.unwrap();
}

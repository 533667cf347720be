//! Corpora seeded by SQL for plan checks and benchmarks (bypassing the write path, then indexed
//! as the write path would have).

use buzz_core::CommunityId;
use sqlx::PgConnection;

use crate::Cluster;

/// Corpora at least this large are loaded with [`defer_indexes`].
pub const BULK: i64 = 100_000;

/// Drops the secondary indexes of `tables` (those that back no constraint), so that a bulk load
/// writes heap pages only; returns their definitions for [`restore_indexes`], which builds each
/// one by a sort, many times faster than a million random B-tree inserts. The schema after
/// `restore_indexes` is the migrated one: the definitions are `pg_get_indexdef`'s own.
pub async fn defer_indexes(conn: &mut PgConnection, tables: &[&str]) -> Vec<String> {
    let tables: Vec<String> = tables.iter().map(|t| (*t).to_owned()).collect();
    let found: Vec<(String, String)> = sqlx::query_as(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i \
         WHERE i.indrelid = ANY(SELECT t::regclass FROM unnest($1::text[]) t) \
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
    )
    .bind(&tables)
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    for (name, _) in &found {
        sqlx::query(&format!("DROP INDEX {name}")).execute(&mut *conn).await.unwrap();
    }
    found.into_iter().map(|(_, def)| def).collect()
}

/// Rebuilds the indexes [`defer_indexes`] dropped.
pub async fn restore_indexes(conn: &mut PgConnection, definitions: &[String]) {
    sqlx::query("SET maintenance_work_mem = '256MB'").execute(&mut *conn).await.unwrap();
    for def in definitions {
        sqlx::query(def).execute(&mut *conn).await.unwrap();
    }
    sqlx::query("RESET maintenance_work_mem").execute(&mut *conn).await.unwrap();
}

/// `channels` stream channels `md5('ch' || i)::uuid` created by `author`: channel i is open
/// (readable by every member) when i % 4 = 0, else private with no members.
pub async fn quarter_open_channels(cluster: &Cluster, community: CommunityId, author: &str, channels: i64) {
    sqlx::query(
        "INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by) \
         SELECT $1, md5('ch' || i)::uuid, 'c' || i, CASE WHEN i % 4 = 0 THEN 'open' ELSE 'private' END, \
                'stream', $2 FROM generate_series(0, $3 - 1) i",
    )
    .bind(community)
    .bind(author)
    .bind(channels)
    .execute(&cluster.pool)
    .await
    .unwrap();
}

/// Projects in [`artifact_corpus`].
pub const PROJECTS: i64 = 100;

/// `artifacts` artifacts (one current revision each, tags `type` and `project`) in `channels`
/// channels: channel i is open when i % 4 = 0 (readable by every member), else private with no
/// members. Artifact g lives in channel g % channels, is a `buzz.task` when (g / 3) is even (else
/// a `buzz.note`), and belongs to project (g / 7) % 100: independent. Every artifact's
/// `artifact_current_tags` rows are built, and the database is vacuumed and analysed (a settled
/// table, as autovacuum leaves it). From [`BULK`] artifacts on, the tables' secondary indexes are
/// built after the load ([`defer_indexes`]). Returns the 100 project values, in order.
pub async fn artifact_corpus(
    cluster: &Cluster,
    community: CommunityId,
    author: &str,
    artifacts: i64,
    channels: i64,
) -> Vec<String> {
    quarter_open_channels(cluster, community, author, channels).await;
    let bulk = artifacts >= BULK;
    let mut conn = cluster.pool.acquire().await.unwrap();
    let deferred = if bulk {
        defer_indexes(&mut conn, &["events", "event_tags", "artifacts", "artifact_current_tags"]).await
    } else {
        Vec::new()
    };
    // A bulk load is one transaction (one `now()`), each table filled in its primary key's order.
    let sorted = if bulk { " ORDER BY 2" } else { "" };
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    if bulk {
        sqlx::query("SET LOCAL work_mem = '256MB'").execute(&mut *tx).await.unwrap();
    }
    // Artifact g: channel g % channels, type by (g / 3) parity, project (g / 7) % 100: independent.
    let mut seed = vec![
        format!(
            "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
             SELECT $1, encode(sha256(('a' || g)::bytea), 'hex'), $2, 45010, 1700000000 + g, \
                    md5('ch' || (g % $4))::uuid, \
                    json_build_object('id', encode(sha256(('a' || g)::bytea), 'hex'), 'pubkey', $2, \
                      'created_at', 1700000000 + g, 'kind', 45010, 'tags', '[]'::json, 'content', '', \
                      'sig', repeat('0', 128))::text \
             FROM generate_series(1, $3) g{sorted}"
        ),
        format!(
            "INSERT INTO artifacts (community_id, d, type, current_revision, home_channel, updated_at) \
             SELECT $1, md5('d' || g)::uuid, CASE WHEN (g / 3) % 2 = 0 AND $4 > 0 THEN 'buzz.task' ELSE 'buzz.note' END, \
                    encode(sha256(('a' || g)::bytea), 'hex'), md5('ch' || (g % $4))::uuid, \
                    now() - make_interval(secs => g) \
             FROM generate_series(1, $3) g WHERE $2 <> ''{sorted}"
        ),
        "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT $1, encode(sha256(('a' || g)::bytea), 'hex'), 'type', \
                sha256((CASE WHEN (g / 3) % 2 = 0 AND $4 > 0 THEN 'buzz.task' ELSE 'buzz.note' END)::bytea), \
                1700000000 + g \
         FROM generate_series(1, $3) g WHERE $2 <> ''"
            .to_owned(),
        "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT $1, encode(sha256(('a' || g)::bytea), 'hex'), 'project', \
                sha256(md5('p' || ((g / 7) % 100))::uuid::text::bytea), 1700000000 + g \
         FROM generate_series(1, $3) g WHERE $2 <> '' AND $4 > 0"
            .to_owned(),
    ];
    if bulk {
        // The rows `Cluster::index_seeded_artifacts` derives by joining the tables above (each
        // artifact's `h` row and project tag, with its type, home channel and change time, no
        // expiry), built from the same expressions instead of joins over a million wide rows, in
        // key order.
        seed.push(
            "INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, revision, type) \
             SELECT $1, md5('d' || g)::uuid, t.name, t.value_hash, md5('ch' || (g % $4))::uuid, \
                    now() - make_interval(secs => g), encode(sha256(('a' || g)::bytea), 'hex'), \
                    CASE WHEN (g / 3) % 2 = 0 THEN 'buzz.task' ELSE 'buzz.note' END \
             FROM generate_series(1, $3) g, LATERAL (VALUES \
                    ('h', sha256(convert_to(md5('ch' || (g % $4))::uuid::text, 'UTF8'))), \
                    ('project', sha256(md5('p' || ((g / 7) % 100))::uuid::text::bytea))) AS t(name, value_hash) \
             WHERE $2 <> '' AND $4 > 0 ORDER BY 2, 3, 4"
                .to_owned(),
        );
    }
    for sql in seed {
        sqlx::query(&sql)
            .bind(community)
            .bind(author)
            .bind(artifacts)
            .bind(channels)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    if bulk {
        sqlx::query("ANALYZE artifact_current_tags").execute(&mut *conn).await.unwrap();
    } else {
        cluster.index_seeded_artifacts(community).await;
    }
    restore_indexes(&mut conn, &deferred).await;
    drop(conn);
    sqlx::query("VACUUM ANALYZE").execute(&cluster.pool).await.unwrap();
    if artifacts >= BULK {
        // A settled store: the load's dirty pages written out, so that the first queries do not
        // pay for evicting them.
        sqlx::query("CHECKPOINT").execute(&cluster.pool).await.unwrap();
    }
    sqlx::query_scalar("SELECT md5('p' || i)::uuid::text FROM generate_series(0, $1 - 1) i ORDER BY i")
        .bind(PROJECTS)
        .fetch_all(&cluster.pool)
        .await
        .unwrap()
}

/// `messages` kind-9 messages by `author` in the open channel `channel` of `community` (created
/// here), `created_at` one second apart, content `"message <g> of the corpus"`.
pub async fn open_channel_messages(
    cluster: &Cluster,
    community: CommunityId,
    author: &str,
    channel: uuid::Uuid,
    messages: i64,
) {
    sqlx::query(
        "INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by) \
         VALUES ($1, $2, 'corpus', 'open', 'stream', $3)",
    )
    .bind(community)
    .bind(channel)
    .bind(author)
    .execute(&cluster.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         SELECT $1, id, $2, 9, 1700000000 + g, $3, \
                json_build_object('id', id, 'pubkey', $2, 'created_at', 1700000000 + g, 'kind', 9, \
                  'tags', json_build_array(json_build_array('h', $3)), \
                  'content', 'message ' || g || ' of the corpus', 'sig', repeat('0', 128))::text \
         FROM generate_series(1, $4) g, LATERAL (SELECT encode(sha256(('c' || $3 || g)::bytea), 'hex') AS id) i",
    )
    .bind(community)
    .bind(author)
    .bind(channel)
    .bind(messages)
    .execute(&cluster.pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE events").execute(&cluster.pool).await.unwrap();
}

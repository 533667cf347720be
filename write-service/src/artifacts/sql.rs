//! SQL of the artifact write path. Every statement is keyed by community first.

use buzz_core::nipar::Envelope;
use buzz_core::{ChannelId, CommunityId, EventId, Pubkey};
use sqlx::PgConnection;
use uuid::Uuid;

/// An artifact's stored identity and current state, as locked for a revision. `mentioned`: the
/// `p` keys the current revision carries.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Artifact {
    /// The artifact type (`type` tag).
    #[sqlx(rename = "type")]
    pub type_name: String,
    /// Id of the current revision.
    pub current_revision: EventId,
    /// The channel the artifact lives in.
    pub home_channel: ChannelId,
    /// The root anchor, when the artifact has one.
    pub root: Option<EventId>,
    /// Whether the current revision is a delete.
    pub deleted: bool,
    /// The `p` keys the current revision carries.
    pub mentioned: Vec<Pubkey>,
}

impl Artifact {
    /// The row as the rules read it (`rules::revision::Current`).
    #[must_use]
    pub fn current(&self) -> crate::rules::revision::Current<'_> {
        crate::rules::revision::Current {
            type_name: &self.type_name,
            revision: &self.current_revision,
            home: self.home_channel,
            root: self.root.as_ref(),
            deleted: self.deleted,
        }
    }
}

/// Claims `(community, d)` for a create whose revision becomes current. False when the d is
/// taken (ever: deleted artifacts keep their row); a concurrent claim waits for the other
/// transaction and then loses.
pub async fn claim(
    conn: &mut PgConnection,
    community: CommunityId,
    env: &Envelope,
    revision: &EventId,
    mentioned: &[Pubkey],
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query(
        "INSERT INTO artifacts (community_id, d, type, current_revision, home_channel, root, mentioned) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (community_id, d) DO NOTHING",
    )
    .bind(community)
    .bind(env.d)
    .bind(&env.type_name)
    .bind(revision)
    .bind(env.h)
    .bind(env.root.as_deref())
    .bind(mentioned)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Locks the artifact row for the rest of the transaction.
pub async fn lock(
    conn: &mut PgConnection,
    community: CommunityId,
    d: Uuid,
) -> Result<Option<Artifact>, sqlx::Error> {
    sqlx::query_as(
        "SELECT type, current_revision, home_channel, root, deleted, mentioned FROM artifacts \
         WHERE community_id = $1 AND d = $2 FOR UPDATE",
    )
    .bind(community)
    .bind(d)
    .fetch_optional(conn)
    .await
}

/// Was this revision id ever accepted in the community (whether or not its event is still kept)?
pub async fn accepted(
    conn: &mut PgConnection,
    community: CommunityId,
    revision: &EventId,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM artifact_revisions WHERE community_id = $1 AND revision_id = $2)",
    )
    .bind(community)
    .bind(revision)
    .fetch_one(conn)
    .await
}

/// Makes `revision` current (the row is locked by the caller).
pub async fn advance(
    conn: &mut PgConnection,
    community: CommunityId,
    env: &Envelope,
    revision: &EventId,
    mentioned: &[Pubkey],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE artifacts SET current_revision = $3, home_channel = $4, root = $5, deleted = $6, \
                mentioned = $7, updated_at = now() \
         WHERE community_id = $1 AND d = $2",
    )
    .bind(community)
    .bind(env.d)
    .bind(revision)
    .bind(env.h)
    .bind(env.root.as_deref())
    .bind(env.op == buzz_core::nipar::Op::Delete)
    .bind(mentioned)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records an accepted revision, kept forever (retention removes events, never these rows).
pub async fn record(
    conn: &mut PgConnection,
    community: CommunityId,
    env: &Envelope,
    revision: &EventId,
    seq: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO artifact_revisions (community_id, revision_id, d, prev, op, channel_id, accepted_seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(community)
    .bind(revision)
    .bind(env.d)
    .bind(env.prev.as_deref())
    .bind(env.op.as_str())
    .bind(env.h)
    .bind(seq)
    .execute(conn)
    .await?;
    Ok(())
}

/// Makes `artifact_current_tags` hold exactly the tags of the artifact's current revision (none
/// while it is deleted) that have rows, `tags` (its `(name, sha256(first value))` pairs but
/// `buzz_store::current_tags::DERIVED`, distinct), with its home channel, change time, expiry,
/// id and the artifact's type. Runs once the revision's event is stored and the artifact advanced, in the same
/// transaction. Returns the rows as they were before (the replaced revision's tags, if it was
/// served), as `(name, sha256(first value))`, and the `op` and `prev` rows of `replaced` (the
/// revision that was current, if any).
pub async fn index_current_tags(
    conn: &mut PgConnection,
    community: CommunityId,
    d: Uuid,
    tags: &[(&str, Vec<u8>)],
    replaced: Option<&EventId>,
) -> Result<Vec<(String, Vec<u8>)>, sqlx::Error> {
    let (names, hashes): (Vec<&str>, Vec<&[u8]>) = tags.iter().map(|(n, h)| (*n, h.as_slice())).unzip();
    // Every part of one statement sees the same snapshot: `before` reads the rows as they were.
    sqlx::query_as(
        "WITH before AS (SELECT name, value_hash FROM artifact_current_tags WHERE community_id = $1 AND d = $2), \
              cur AS (SELECT a.community_id, a.d, a.current_revision, a.home_channel, a.updated_at, a.type, \
                             e.expires_at, NOT a.deleted AND e.redacted_at IS NULL AND e.deleted_at IS NULL AS served \
                      FROM artifacts a JOIN events e ON e.community_id = a.community_id AND e.id = a.current_revision \
                      WHERE a.community_id = $1 AND a.d = $2), \
              tags AS (SELECT t.name, t.value_hash FROM cur, UNNEST($3::text[], $4::bytea[]) AS t(name, value_hash) \
                       WHERE cur.served), \
              gone AS (DELETE FROM artifact_current_tags x WHERE x.community_id = $1 AND x.d = $2 \
                       AND (x.name, x.value_hash) NOT IN (SELECT name, value_hash FROM tags)), \
              upsert AS (INSERT INTO artifact_current_tags \
                             (community_id, d, name, value_hash, home_channel, updated_at, expires_at, revision, type) \
                         SELECT cur.community_id, cur.d, tags.name, tags.value_hash, cur.home_channel, \
                                cur.updated_at, cur.expires_at, cur.current_revision, cur.type \
                         FROM cur CROSS JOIN tags \
                         ON CONFLICT (community_id, d, name, value_hash) DO UPDATE \
                         SET home_channel = EXCLUDED.home_channel, updated_at = EXCLUDED.updated_at, \
                             expires_at = EXCLUDED.expires_at, revision = EXCLUDED.revision) \
         SELECT name, value_hash FROM before \
         UNION ALL \
         SELECT x.name, sha256(convert_to(x.value, 'UTF8')) FROM artifact_revisions r \
         CROSS JOIN LATERAL (VALUES ('prev', r.prev), ('op', r.op)) AS x(name, value) \
         WHERE r.community_id = $1 AND r.revision_id = $5 AND x.value IS NOT NULL",
    )
    .bind(community)
    .bind(d)
    .bind(names)
    .bind(hashes)
    .bind(replaced)
    .fetch_all(conn)
    .await
}

/// An accepted NIP-AR revision's channel, and its author while its event is kept (retention may
/// have removed it); `None` when the id was never accepted as a revision.
pub async fn revision_origin(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
) -> Result<Option<(ChannelId, Option<Pubkey>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT r.channel_id, e.pubkey FROM artifact_revisions r \
         LEFT JOIN events e ON e.community_id = r.community_id AND e.id = r.revision_id \
         WHERE r.community_id = $1 AND r.revision_id = $2",
    )
    .bind(community)
    .bind(id)
    .fetch_optional(conn)
    .await
}

//! Every SQL statement of the snapshot-service. Reads only, each operation in one REPEATABLE
//! READ read-only transaction under the per-statement limit. Access is the one read rule of
//! `buzz_store::access` (the reader's readable channel ids); artifact matching reads the
//! current-state index `artifact_current_tags` the write path keeps exact.

use buzz_bus::snapshot::{SnapshotCode, LIMITS};
use buzz_core::{ChannelId, CommunityId, EventId, Filter, Pubkey};
use buzz_store::current_tags::{push_type_match, Columns, Predicates, ANCHOR};
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Transaction};
use uuid::Uuid;

use crate::manifest::Entry;

/// Maps a statement error: its time limit, or storage trouble, is `snapshot_unavailable`.
pub fn sql_error(e: &sqlx::Error) -> SnapshotCode {
    if !matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("57014")) {
        tracing::error!(error = %e, "snapshot statement failed");
    }
    SnapshotCode::SnapshotUnavailable
}

/// One read-only snapshot of the store for the whole operation, with the statement limit.
pub async fn begin(
    pool: &PgPool,
    statement_timeout_ms: u64,
) -> Result<Transaction<'static, Postgres>, SnapshotCode> {
    let mut tx = pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .map_err(|e| sql_error(&e))?;
    sqlx::query(
        "SELECT set_config('statement_timeout', $1, true), set_config('plan_cache_mode', 'force_custom_plan', true), \
         set_config('random_page_cost', '1.1', true)",
    )
    .bind(format!("{statement_timeout_ms}ms"))
    .execute(&mut *tx)
    .await
    .map_err(|e| sql_error(&e))?;
    Ok(tx)
}

/// The reader as the database sees them now.
#[derive(Debug, Clone)]
pub struct ReaderState {
    /// The reader's role in the community, `None` when not a member.
    pub role: Option<String>,
    /// `active`, `archived`, `deleting`, or `None` when the community is gone.
    pub lifecycle: Option<String>,
    /// Active channel memberships (counted up to the inspection limit + 1).
    pub memberships: i64,
    /// Readable channel ids (up to the inspection limit + 1).
    pub readable: Vec<ChannelId>,
    /// sha256 over the rows of the readable channels that existed at `as_of`: any change of
    /// access, metadata, archive or TTL changes it.
    pub fingerprint: String,
    /// The transaction's timestamp (text), the capture time of a start.
    pub as_of: String,
}

/// The reader's membership, inspection counts, readable channels and their fingerprint, in one
/// statement. `as_of` is the capture time (channels created later are not part of the scope);
/// `None` means now.
pub async fn reader_state(
    conn: &mut PgConnection,
    community: CommunityId,
    member_key: &Pubkey,
    restriction: Option<&[ChannelId]>,
    as_of: Option<&str>,
) -> Result<ReaderState, SnapshotCode> {
    // The read rule's channel list, bounded by the inspection limit.
    let ids = buzz_store::fragments::readable_channel_ids(buzz_store::fragments::ReaderBinds::FIRST);
    let bounded = format!("{} LIMIT {})", ids.strip_suffix(')').unwrap_or(&ids), LIMITS.max_inspected + 1);
    let sql = format!(
        "SELECT (SELECT role FROM community_members WHERE community_id = $1 AND pubkey = $2), \
                (SELECT lifecycle FROM communities WHERE id = $1), \
                (SELECT count(*) FROM (SELECT 1 FROM channel_members WHERE community_id = $1 AND pubkey = $2 \
                   AND removed_at IS NULL LIMIT {limit}) m), \
                r.ids, \
                (SELECT encode(sha256(convert_to(coalesce(string_agg(c.id::text || '/' || c.visibility || '/' || \
                   c.channel_type || '/' || coalesce(c.ttl_seconds::text, '-') || '/' || c.archived::text || '/' || \
                   md5(c.name), ',' ORDER BY c.id), ''), 'UTF8')), 'hex') \
                 FROM channels c WHERE c.community_id = $1 AND c.id = ANY(r.ids) \
                   AND c.created_at <= coalesce($4::timestamptz, transaction_timestamp())), \
                coalesce($4::timestamptz, transaction_timestamp())::text \
         FROM (SELECT {bounded} AS ids) r",
        limit = LIMITS.max_inspected + 1
    );
    let row: (Option<String>, Option<String>, i64, Vec<ChannelId>, String, String) = sqlx::query_as(&sql)
        .bind(community)
        .bind(member_key)
        .bind(restriction.map(<[ChannelId]>::to_vec))
        .bind(as_of)
        .fetch_one(conn)
        .await
        .map_err(|e| sql_error(&e))?;
    Ok(ReaderState {
        role: row.0,
        lifecycle: row.1,
        memberships: row.2,
        readable: row.3,
        fingerprint: row.4,
        as_of: row.5,
    })
}

/// The lead of every capture statement: current artifacts in readable channels by their anchor
/// row (`buzz_store::current_tags::ANCHOR`, the `h` row every served artifact has exactly one
/// of), restricted to the query's types when it names any (the `type` column of the row: the
/// type is immutable).
fn push_lead(
    qb: &mut QueryBuilder<'_, Postgres>,
    community: CommunityId,
    query: &Filter,
    readable: &[ChannelId],
) {
    // The anchor name is a literal, so that every plan may use the partial
    // `artifact_current_tags_by_type`.
    qb.push(" FROM artifact_current_tags t WHERE t.community_id = ")
        .push_bind(community)
        .push(format!(" AND t.name = '{ANCHOR}' AND t.home_channel = ANY("))
        .push_bind(readable.to_vec())
        .push(")");
    if let Some(types) = Predicates::split(&query.tags).types {
        push_type_match(qb, "t.type", &types);
    }
}

/// Current candidates after the immutable type predicate and before the other predicates,
/// counted up to the inspection limit + 1.
pub async fn candidates(
    conn: &mut PgConnection,
    community: CommunityId,
    query: &Filter,
    readable: &[ChannelId],
) -> Result<usize, SnapshotCode> {
    let mut qb = QueryBuilder::new("SELECT count(*) FROM (SELECT 1");
    push_lead(&mut qb, community, query, readable);
    qb.push(" LIMIT ").push_bind(i64::try_from(LIMITS.max_inspected + 1).unwrap_or(i64::MAX)).push(") c");
    let n: i64 = qb.build_query_scalar().fetch_one(conn).await.map_err(|e| sql_error(&e))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// A matching current identity and whether its channel has a TTL (not permanent).
pub struct Match {
    /// The captured identity.
    pub entry: Entry,
    /// Whether its channel has a TTL (not permanent).
    pub ttl: bool,
}

/// Every matching current identity the reader can read (up to `maxRows` + 1), ordered by d.
pub async fn matches(
    conn: &mut PgConnection,
    community: CommunityId,
    query: &Filter,
    readable: &[ChannelId],
) -> Result<Vec<Match>, SnapshotCode> {
    let mut qb = QueryBuilder::new(
        "SELECT a.d, a.current_revision, a.home_channel, c.ttl_seconds IS NOT NULL FROM (SELECT t.d",
    );
    push_lead(&mut qb, community, query, readable);
    // `#ar`, `#d`, `#op` and `#prev` have no current-tag rows: conditions on the lead row's `d`
    // and current revision (`buzz_store::current_tags`); `#type` is the lead's.
    let predicates = Predicates::split(&query.tags);
    for &(name, values) in &predicates.rows {
        let hashes: Vec<Vec<u8>> = values.iter().map(|v| buzz_store::tag_value_hash(v)).collect();
        qb.push(
            " AND EXISTS (SELECT 1 FROM artifact_current_tags u WHERE u.community_id = t.community_id \
              AND u.d = t.d AND u.name = ",
        )
        .push_bind(name.to_owned())
        .push(" AND u.value_hash = ANY(")
        .push_bind(hashes)
        .push("))");
    }
    predicates.push_conditions(
        &mut qb,
        community,
        Columns { d: "t.d", revision: "t.revision", type_name: None },
    );
    qb.push(") m JOIN artifacts a ON a.community_id = ")
        .push_bind(community)
        .push(
            " AND a.d = m.d JOIN events e ON e.community_id = a.community_id AND e.id = a.current_revision \
               JOIN channels c ON c.community_id = a.community_id AND c.id = a.home_channel \
               WHERE NOT a.deleted AND a.home_channel = ANY(",
        )
        .push_bind(readable.to_vec())
        .push(
            ") AND e.redacted_at IS NULL AND e.deleted_at IS NULL \
               AND (e.expires_at IS NULL OR e.expires_at > now()) ORDER BY a.d LIMIT ",
        )
        .push_bind(i64::try_from(LIMITS.max_rows + 1).unwrap_or(i64::MAX));
    let rows: Vec<(Uuid, EventId, ChannelId, bool)> =
        qb.build_query_as().fetch_all(conn).await.map_err(|e| sql_error(&e))?;
    Ok(rows.into_iter().map(|(d, rev, ch, ttl)| Match { entry: Entry::new(d, &rev, ch), ttl }).collect())
}

/// True when every captured entry still stands: the artifact exists, is not deleted and still
/// lives in the captured channel, which the reader can read; an unchanged entry's revision is
/// still served (its anchor row in the current-state index, which a redaction or event deletion
/// removes, unexpired); a changed entry's captured revision is stored, not redacted or expired, in
/// that channel, and no delete, move or restore was accepted after it (a delete followed by a
/// restore, or a move and a move back, still count).
///
/// One set-based statement: the captured arrays are unnested and hash-joined to the community's
/// artifacts and current anchor rows (a custom plan sees the array sizes), so 50 000 entries cost
/// two scans, not 100 000 index probes; the history is read only for entries whose artifact
/// changed since the capture.
pub async fn entries_intact(
    conn: &mut PgConnection,
    community: CommunityId,
    entries: &[Entry],
    readable: &[ChannelId],
) -> Result<bool, SnapshotCode> {
    let ds: Vec<Uuid> = entries.iter().map(|e| e.d).collect();
    let revs: Vec<String> = entries.iter().map(Entry::revision_hex).collect();
    let chs: Vec<ChannelId> = entries.iter().map(|e| e.channel).collect();
    let broken: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM unnest($2::uuid[], $3::text[], $4::uuid[]) AS m(d, rev, ch) \
         LEFT JOIN artifacts a ON a.community_id = $1 AND a.d = m.d \
         LEFT JOIN artifact_current_tags t ON t.community_id = $1 AND t.d = m.d AND t.name = 'h' \
         WHERE a.d IS NULL OR a.deleted OR a.home_channel <> m.ch OR NOT (m.ch = ANY($5::uuid[])) \
            OR (a.current_revision = m.rev AND (t.d IS NULL OR t.expires_at <= now())) \
            OR (a.current_revision <> m.rev AND ( \
                NOT EXISTS (SELECT 1 FROM events e WHERE e.community_id = $1 AND e.id = m.rev \
                  AND e.redacted_at IS NULL AND e.deleted_at IS NULL AND e.channel_id = m.ch \
                  AND (e.expires_at IS NULL OR e.expires_at > now())) \
             OR EXISTS (SELECT 1 FROM artifact_revisions r0 JOIN artifact_revisions r \
                  ON r.community_id = $1 AND r.d = m.d AND r.accepted_seq > r0.accepted_seq \
                 AND r.op IN ('delete', 'move', 'restore') \
                WHERE r0.community_id = $1 AND r0.revision_id = m.rev)))",
    )
    .bind(community)
    .bind(ds)
    .bind(revs)
    .bind(chs)
    .bind(readable.to_vec())
    .fetch_one(conn)
    .await
    .map_err(|e| sql_error(&e))?;
    Ok(broken == 0)
}

/// The stored JSON of exactly these revisions, by id.
pub async fn bodies(
    conn: &mut PgConnection,
    community: CommunityId,
    revisions: &[EventId],
) -> Result<Vec<(EventId, String)>, SnapshotCode> {
    sqlx::query_as("SELECT id, raw FROM events WHERE community_id = $1 AND id = ANY($2)")
        .bind(community)
        .bind(revisions.to_vec())
        .fetch_all(conn)
        .await
        .map_err(|e| sql_error(&e))
}

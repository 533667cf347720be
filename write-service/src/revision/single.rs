//! One NIP-AR revision in the one-event transaction: the [`Family`] steps of kind 45010, in the
//! order the family's module documents (steps 2 to 5; the engine made step 1), with the
//! statements only this path makes beside them.

use buzz_bus::{Actor, Audience, LiveEvent, WriteOk};
use buzz_core::nipar::{self, Envelope, Op};
use buzz_core::{ChannelId, CommunityId, Event, EventId, Pubkey};
use buzz_store::access::{self, Channel};
use buzz_store::Role;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::engine::single::{Family, One, Written};
use crate::engine::{live_event, Accepted, Relay};
use crate::error::WriteResult;
use crate::revision::sql::{current_tag_rows, p_keys, replaced_tags, Artifact};
use crate::revision::Revisions;
use crate::rules::admission::{self, ChannelView};
use crate::rules::revision::{self, ArtifactView, Identity};
use crate::store;

impl Family for Revisions {
    fn write<'a>(&'a self, tx: &'a mut PgConnection, w: One<'a>, role: Role) -> Written<'a> {
        Box::pin(write_revision(tx, w, role))
    }
}

/// A channel the sender may post in (the kind-9 rule), share-locked, with its banned keys.
struct Writable {
    channel: Channel,
    banned: Vec<Pubkey>,
}

/// Gathers the channel's view and applies the kind-9 write rule (`rules::admission::writable`).
async fn writable(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    community_role: Role,
    channel_id: ChannelId,
) -> WriteResult<Writable> {
    let (channel, standing, banned) =
        access::channel_for_post(tx, community, channel_id, actor.member_key(), Some(community_role)).await?;
    let channel = admission::writable(Ok(channel_id), ChannelView { channel, standing }, actor)?;
    Ok(Writable { channel, banned })
}

fn announce(community: CommunityId, at: &Writable, event: Event) -> LiveEvent {
    let mut live = live_event(community, &at.channel, event);
    if live.audience == Audience::Community {
        live.banned.clone_from(&at.banned);
    }
    live
}

/// Kind 45010. `community_role` is the sender's (member key's) community role. Gathers each
/// view in the order the rules (`rules::revision`) need it and applies them.
async fn write_revision(tx: &mut PgConnection, w: One<'_>, community_role: Role) -> WriteResult<Accepted> {
    let One { community, actor, event, relay } = w;
    let env = revision::envelope(&event)?;
    // 2. The kind-9 write check on the channel the revision names, where a kind 9 has it: before
    //    anything about the artifact is looked at.
    let named = writable(tx, community, actor, community_role, env.h).await?;
    // 3. Identity and CAS, under the artifact row lock.
    let (claimed, row, accepted) = lock_artifact(tx, community, &env, &event).await?;
    let view = ArtifactView { claimed, current: row.as_ref().map(Artifact::current), accepted };
    let current = match revision::identity(&env, &view)? {
        Identity::Duplicate => return Ok(Accepted::duplicate()),
        Identity::Created => None,
        Identity::Existing(_) => row.as_ref(),
    };
    let seen = current.map(Artifact::current);
    // The artifact lives in another channel (a move's source, or an update naming the wrong h):
    // the sender must be able to write there too before its state is answered.
    let source = match seen.as_ref().and_then(|row| revision::source(&env, row)) {
        Some(home) => Some(writable(tx, community, actor, community_role, home).await?),
        None => None,
    };
    // 4. The rules that describe the stored artifact, and the root rule.
    let anchor = match revision::anchor_needed(&env, seen.as_ref()) {
        Some(root) => store::is_anchor(tx, community, env.h, root).await?,
        None => false,
    };
    revision::advance(&env, seen.as_ref(), anchor)?;
    let revision = Revision { env: &env, event };
    store(tx, community, revision, current, &named, source.as_ref(), relay).await
}

/// What the artifact row says under its lock (`rules::revision::ArtifactView`): a create claims
/// its d; a taken d (a lost race included) waits for and locks the winner; then whether this
/// revision id was accepted meanwhile (a concurrent resubmission). Returns (claimed, locked row,
/// accepted).
async fn lock_artifact(
    tx: &mut PgConnection,
    community: CommunityId,
    env: &Envelope,
    event: &Event,
) -> Result<(bool, Option<Artifact>, bool), sqlx::Error> {
    if env.op == Op::Create && claim(tx, community, env, &event.id, &p_keys(event)).await? {
        return Ok((true, None, false));
    }
    let row = lock(tx, community, env.d).await?;
    let accepted = accepted(tx, community, &event.id).await?;
    Ok((false, row, accepted))
}

/// An admitted revision and its parsed envelope.
struct Revision<'a> {
    env: &'a Envelope,
    event: Event,
}

/// Step 5: stores the revision in `at` (its h), advances the artifact and its current-tag index,
/// records the revision id, its new mentions, and for a move the removal left in `source`.
async fn store(
    tx: &mut PgConnection,
    community: CommunityId,
    revision: Revision<'_>,
    current: Option<&Artifact>,
    at: &Writable,
    source: Option<&Writable>,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    let Revision { env, event } = revision;
    // Every `p` key the revision carries (its author's too: carried over, it must not mention
    // them when someone else writes the next revision), and the ones it may mention.
    let carried = p_keys(&event);
    let mentioned = store::mentioned(&event);
    // The id is not in artifact_revisions (checked under the lock), so it cannot be stored yet;
    // if it were, the store is inconsistent and the whole transaction rolls back.
    let seq = store::insert_event(tx, community, &event, Some(at.channel.id), at.channel.ttl_seconds, None)
        .await?
        .ok_or_else(buzz_bus::BusError::internal)?;
    if current.is_some() {
        advance(tx, community, env, &event.id, &carried).await?;
    }
    let tags = current_tag_rows(&event);
    let before = index_current_tags(tx, community, env.d, &tags, current.map(|row| &row.current_revision));
    let replaced = replaced_tags(env.d, &env.type_name, before.await?);
    record(tx, community, env, &event.id, seq).await?;
    let added: Vec<Pubkey> = match current {
        Some(row) => mentioned.iter().filter(|k| !row.mentioned.contains(k)).cloned().collect(),
        None => mentioned,
    };
    store::record_mentions(tx, community, at.channel.id, &event, seq, &added).await?;
    let mut also = Vec::new();
    if let (Some(row), Some(home)) = (current, source) {
        let mut live = leave_removal(tx, community, relay, env, &row.current_revision, home).await?;
        live.replaced_tags.clone_from(&replaced);
        also.push(live);
    }
    let mut live = announce(community, at, event);
    live.replaced_tags = replaced;
    Ok(Accepted {
        ok: WriteOk::applied(),
        live: Some(live),
        also,
        access_changed: None,
        seq: Some(seq),
        bans_resolved: true,
    })
}

/// A move's relay-signed kind-45011 removal (`nipar::removal_tags`) of `replaced`, stored in the
/// source `home`; returns its live event.
async fn leave_removal(
    tx: &mut PgConnection,
    community: CommunityId,
    relay: &Relay<'_>,
    env: &Envelope,
    replaced: &EventId,
    home: &Writable,
) -> WriteResult<LiveEvent> {
    let removal =
        relay.keys.sign_new(nipar::KIND_REMOVAL, nipar::removal_tags(env.d, home.channel.id, replaced), "");
    store::insert_event(tx, community, &removal, Some(home.channel.id), home.channel.ttl_seconds, None)
        .await?
        .ok_or_else(buzz_bus::BusError::internal)?;
    Ok(announce(community, home, removal))
}

// The statements of one revision. The artifact row is keyed by (community, d).

/// Claims `(community, d)` for a create whose revision becomes current. False when the d is
/// taken (ever: deleted artifacts keep their row); a concurrent claim waits for the other
/// transaction and then loses.
async fn claim(
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
async fn lock(
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
async fn accepted(
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
async fn advance(
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
    .bind(env.op == Op::Delete)
    .bind(mentioned)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records an accepted revision, kept forever (retention removes events, never these rows).
async fn record(
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
async fn index_current_tags(
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

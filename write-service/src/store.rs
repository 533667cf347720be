//! The statements event families share: what a batch reads first (the view of every write),
//! storing events with their tag rows (one, or a batch's), a post's or revision's mentions, and
//! whether an id is a conversation anchor. A family's own statements sit in its folder (`sql.rs`);
//! the one-event transaction's (admission, bans) in `engine/single.rs`. Nothing here imports a
//! family or the engine.

use buzz_core::{kinds, ChannelId, CommunityId, Event, EventId, Pubkey};
use buzz_store::access::Channel;
use buzz_store::fragments::served_event;
use buzz_store::tag_rows::event_tag_rows;
use buzz_store::{ChannelType, Role, Visibility};
use sqlx::PgConnection;

/// What the batch's first statement says about a write: everything the one-event path reads
/// before the event family's own checks.
pub(crate) struct View {
    pub(crate) active: bool,
    pub(crate) access_version: Option<i64>,
    pub(crate) duplicate: bool,
    /// Accepted before and deleted by its author since (kind 5).
    pub(crate) deleted: bool,
    pub(crate) role: Option<Role>,
    /// The writer's key or the member key it acts with is banned from the community.
    pub(crate) community_banned: bool,
    /// The live channel the write names.
    pub(crate) channel: Option<Channel>,
    pub(crate) channel_role: Option<Role>,
    pub(crate) channel_banned: bool,
    /// The channel's banned keys.
    pub(crate) banned: Vec<Pubkey>,
    /// The named root is a served conversation anchor (a top-level kind 9) in the channel.
    pub(crate) anchor: bool,
}

/// One row of the batch's first statement, as [`load`] reads it.
#[derive(sqlx::FromRow)]
struct ViewRow {
    active: bool,
    access_version: Option<i64>,
    duplicate: bool,
    deleted: bool,
    role: Option<Role>,
    community_banned: bool,
    channel_id: Option<ChannelId>,
    channel_name: Option<String>,
    visibility: Option<Visibility>,
    channel_type: Option<ChannelType>,
    ttl_seconds: Option<i32>,
    archived: Option<bool>,
    channel_role: Option<Role>,
    channel_banned: bool,
    banned: Vec<Pubkey>,
    anchor: bool,
}

impl From<ViewRow> for View {
    fn from(r: ViewRow) -> Self {
        let channel = (|| {
            Some(Channel {
                id: r.channel_id?,
                name: r.channel_name?,
                visibility: r.visibility?,
                channel_type: r.channel_type?,
                ttl_seconds: r.ttl_seconds,
                archived: r.archived?,
            })
        })();
        Self {
            active: r.active,
            access_version: r.access_version,
            duplicate: r.duplicate,
            deleted: r.deleted,
            role: r.role,
            community_banned: r.community_banned,
            channel,
            channel_role: r.channel_role,
            channel_banned: r.channel_banned,
            banned: r.banned,
            anchor: r.anchor,
        }
    }
}

/// What the batch's view reads for one write: its community, its event id, the key it acts with
/// (an agent's owner) and the signing key, and the channel and thread root it names (`None`: none,
/// or a malformed one).
pub(crate) struct ViewKey<'a> {
    pub(crate) community: CommunityId,
    pub(crate) event_id: &'a EventId,
    pub(crate) member: &'a Pubkey,
    pub(crate) writer: &'a Pubkey,
    pub(crate) channel: Option<ChannelId>,
    pub(crate) root: Option<&'a EventId>,
}

/// The statement of [`load`]; `bans`: migration 0004 has run, so community bans are read.
fn view_sql(bans: bool) -> String {
    format!(
        "WITH i AS ( \
             SELECT * FROM UNNEST($1::int4[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[], \
                                  $7::text[]) \
                 AS i(ord, community_id, event_id, member, channel_id, root, writer)), \
         ch AS MATERIALIZED ( \
             SELECT c.community_id, c.id, c.name, c.visibility, c.channel_type, c.ttl_seconds, c.archived \
             FROM channels c \
             WHERE (c.community_id, c.id) IN (SELECT community_id, channel_id FROM i) AND c.deleted_at IS NULL \
             ORDER BY c.community_id, c.id \
             FOR SHARE) \
         SELECT (co.id IS NOT NULL) AS active, co.access_version, \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = i.community_id AND e.id = i.event_id) \
                OR EXISTS (SELECT 1 FROM artifact_revisions r \
                           WHERE r.community_id = i.community_id AND r.revision_id = i.event_id) AS duplicate, \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = i.community_id AND e.id = i.event_id \
                        AND e.deleted_at IS NOT NULL) AS deleted, \
                m.role, {banned} AS community_banned, \
                ch.id AS channel_id, ch.name AS channel_name, ch.visibility, ch.channel_type, ch.ttl_seconds, \
                ch.archived, \
                CASE WHEN chm.removed_at IS NULL THEN chm.role END AS channel_role, \
                coalesce(chm.banned, false) AS channel_banned, \
                CASE WHEN ch.id IS NULL THEN ARRAY[]::text[] ELSE ARRAY(SELECT b.pubkey FROM channel_members b \
                      WHERE b.community_id = i.community_id AND b.channel_id = ch.id AND b.banned) END AS banned, \
                (i.root IS NOT NULL AND ch.id IS NOT NULL AND EXISTS (SELECT 1 FROM events e \
                     WHERE e.community_id = i.community_id AND e.id = i.root AND e.channel_id = ch.id \
                       AND e.kind = {message} AND e.thread_root IS NULL AND {served})) AS anchor \
         FROM i \
         LEFT JOIN communities co ON co.id = i.community_id AND co.lifecycle = 'active' \
         LEFT JOIN community_members m ON m.community_id = i.community_id AND m.pubkey = i.member \
         LEFT JOIN ch ON ch.community_id = i.community_id AND ch.id = i.channel_id \
         LEFT JOIN channel_members chm ON chm.community_id = i.community_id AND chm.channel_id = ch.id \
              AND chm.pubkey = i.member \
         ORDER BY i.ord",
        message = kinds::MESSAGE,
        served = served_event("e"),
        banned = if bans {
            "EXISTS (SELECT 1 FROM community_bans b \
                     WHERE b.community_id = i.community_id AND b.pubkey IN (i.member, i.writer))"
        } else {
            "false"
        },
    )
}

/// Admission, channel view and thread-root check of every write of a batch in one statement, the channel rows
/// share-locked (in id order) so that they cannot change under the batch. `bans`: migration 0004
/// has run (`buzz_store::bans::table_exists`), so community bans are read too.
pub(crate) async fn load(
    tx: &mut PgConnection,
    writes: &[ViewKey<'_>],
    bans: bool,
) -> Result<Vec<View>, sqlx::Error> {
    let n = writes.len();
    let mut ord = Vec::with_capacity(n);
    let mut community = Vec::with_capacity(n);
    let mut event_id = Vec::with_capacity(n);
    let mut member = Vec::with_capacity(n);
    let mut writer = Vec::with_capacity(n);
    let mut channel = Vec::with_capacity(n);
    let mut root = Vec::with_capacity(n);
    for (i, w) in writes.iter().enumerate() {
        ord.push(i32::try_from(i).unwrap_or(i32::MAX));
        community.push(w.community);
        event_id.push(w.event_id.as_str());
        member.push(w.member);
        writer.push(w.writer.as_str());
        channel.push(w.channel);
        root.push(w.root.map(EventId::as_str));
    }
    let sql = view_sql(bans);
    let views: Vec<ViewRow> = sqlx::query_as(&sql)
        .bind(&ord)
        .bind(&community)
        .bind(&event_id)
        .bind(&member)
        .bind(&channel)
        .bind(&root)
        .bind(&writer)
        .fetch_all(&mut *tx)
        .await?;
    if views.len() != n {
        return Err(sqlx::Error::Protocol(format!("batch view returned {} rows for {n} posts", views.len())));
    }
    Ok(views.into_iter().map(View::from).collect())
}

/// Stores the event and its tag index rows in one statement; returns its acceptance `seq`, or
/// `None` when it was already there (a concurrent duplicate), in which case nothing was written.
pub async fn insert_event(
    conn: &mut PgConnection,
    community: CommunityId,
    event: &Event,
    channel: Option<ChannelId>,
    ttl_seconds: Option<i32>,
    thread_root: Option<&EventId>,
) -> Result<Option<i64>, sqlx::Error> {
    let (names, hashes): (Vec<&str>, Vec<Vec<u8>>) = event_tag_rows(event).unzip();
    sqlx::query_scalar(
        "WITH e AS ( \
             INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw, expires_at, thread_root) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $8::int IS NULL THEN NULL \
                     ELSE now() + make_interval(secs => $8::int) END, $9) \
             ON CONFLICT (community_id, id) DO NOTHING \
             RETURNING seq), \
         t AS ( \
             INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
             SELECT $1, $2, n, h, $5 FROM e, UNNEST($10::text[], $11::bytea[]) AS u(n, h)) \
         SELECT seq FROM e",
    )
    .bind(community)
    .bind(&event.id)
    .bind(&event.pubkey)
    .bind(i64::from(event.kind))
    .bind(event.created_at)
    .bind(channel)
    .bind(event.to_json())
    .bind(ttl_seconds)
    .bind(thread_root)
    .bind(&names)
    .bind(&hashes)
    .fetch_optional(conn)
    .await
}

/// An event to store in a batch.
pub(crate) struct NewEvent<'a> {
    pub(crate) community: CommunityId,
    pub(crate) event: &'a Event,
    /// The channel it is stored in.
    pub(crate) channel: &'a Channel,
    /// The thread it replies in (kind 9).
    pub(crate) thread_root: Option<&'a EventId>,
}

/// The statement of [`insert_events`].
const INSERT_EVENTS: &str =
    "WITH e AS ( \
         INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw, expires_at, thread_root) \
         SELECT u.community_id, u.id, u.pubkey, u.kind, u.created_at, u.channel_id, u.raw, \
                CASE WHEN u.ttl IS NULL THEN NULL ELSE now() + make_interval(secs => u.ttl) END, u.root \
         FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::uuid[], $7::text[], \
                     $8::int4[], $9::text[]) WITH ORDINALITY \
              AS u(community_id, id, pubkey, kind, created_at, channel_id, raw, ttl, root, ord) \
         ORDER BY u.ord \
         ON CONFLICT (community_id, id) DO NOTHING \
         RETURNING community_id, id, seq, created_at), \
     t AS ( \
         INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT e.community_id, e.id, u.n, u.h, e.created_at \
         FROM UNNEST($10::uuid[], $11::text[], $12::text[], $13::bytea[]) AS u(c, eid, n, h) \
         JOIN e ON e.community_id = u.c AND e.id = u.eid) \
     SELECT community_id, id, seq FROM e";

/// Stores `events` with their tag index rows in one statement; returns the `seq` of each one
/// stored (one stored meanwhile by a concurrent write is absent).
pub(crate) async fn insert_events(
    tx: &mut PgConnection,
    events: &[NewEvent<'_>],
) -> Result<std::collections::HashMap<(CommunityId, EventId), i64>, sqlx::Error> {
    let n = events.len();
    let (mut community, mut id, mut pubkey, mut kind, mut created_at) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut channel, mut raw, mut ttl, mut root) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut tag_community, mut tag_event, mut tag_name, mut tag_hash) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for new in events {
        let e = new.event;
        community.push(new.community);
        id.push(e.id.as_str());
        pubkey.push(e.pubkey.as_str());
        kind.push(i64::from(e.kind));
        created_at.push(e.created_at);
        channel.push(new.channel.id);
        raw.push(e.to_json());
        ttl.push(new.channel.ttl_seconds);
        root.push(new.thread_root);
        for (name, hash) in event_tag_rows(e) {
            tag_community.push(new.community);
            tag_event.push(e.id.as_str());
            tag_name.push(name);
            tag_hash.push(hash);
        }
    }
    let rows: Vec<(CommunityId, EventId, i64)> = sqlx::query_as(INSERT_EVENTS)
        .bind(&community)
        .bind(&id)
        .bind(&pubkey)
        .bind(&kind)
        .bind(&created_at)
        .bind(&channel)
        .bind(&raw)
        .bind(&ttl)
        .bind(&root)
        .bind(&tag_community)
        .bind(&tag_event)
        .bind(&tag_name)
        .bind(&tag_hash)
        .fetch_all(&mut *tx)
        .await?;
    Ok(rows.into_iter().map(|(c, id, seq)| ((c, id), seq)).collect())
}

/// The distinct, well-formed pubkeys of `event`'s `p` tags, the author excluded.
#[must_use]
pub fn mentioned(event: &Event) -> Vec<Pubkey> {
    let mut keys: Vec<Pubkey> = event
        .tags_named("p")
        .filter_map(|t| Pubkey::parse(t.get(1)?).ok())
        .filter(|k| *k != event.pubkey)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// One mention per listed pubkey that is a community member; an event mentions a member at most
/// once however often it is stored or tagged. NIP-AR revisions can reuse this with only the
/// pubkeys their revision adds.
pub async fn record_mentions(
    tx: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    event: &Event,
    seq: i64,
    pubkeys: &[Pubkey],
) -> Result<(), sqlx::Error> {
    if pubkeys.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO mentions (community_id, pubkey, event_id, channel_id, seq, created_at) \
         SELECT $1, m.pubkey, $3, $4, $5, $6 FROM community_members m \
         WHERE m.community_id = $1 AND m.pubkey = ANY($2::text[]) \
         ON CONFLICT (community_id, pubkey, event_id) DO NOTHING",
    )
    .bind(community)
    .bind(pubkeys)
    .bind(&event.id)
    .bind(channel)
    .bind(seq)
    .bind(event.created_at)
    .execute(tx)
    .await?;
    Ok(())
}

/// Is `id` a conversation anchor in `channel`: an undeleted, unredacted, unexpired kind-9
/// message that is not itself a reply?
pub async fn is_anchor(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    id: &EventId,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(&format!(
        "SELECT EXISTS (SELECT 1 FROM events e WHERE e.community_id = $1 AND e.id = $2 \
         AND e.channel_id = $3 AND e.kind = $4 AND e.thread_root IS NULL AND {})",
        served_event("e")
    ))
    .bind(community)
    .bind(id)
    .bind(channel)
    .bind(i64::from(kinds::MESSAGE))
    .fetch_one(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_distinct_well_formed_and_never_the_author() {
        let author = "a".repeat(64);
        let b = "b".repeat(64);
        let c = "c".repeat(64);
        let event = Event {
            id: buzz_core::EventId::parse(&"0".repeat(64)).unwrap(),
            pubkey: Pubkey::parse(&author).unwrap(),
            created_at: 1,
            kind: 9,
            tags: vec![
                vec!["p".into(), b.clone()],
                vec!["p".into(), author],
                vec!["p".into(), b.clone(), "wss://x".into()],
                vec!["p".into(), "B".repeat(64)],
                vec!["p".into()],
                vec!["p".into(), c.clone()],
                vec!["e".into(), "d".repeat(64)],
            ],
            content: String::new(),
            sig: "0".repeat(128),
        };
        assert_eq!(mentioned(&event), vec![Pubkey::parse(&b).unwrap(), Pubkey::parse(&c).unwrap()]);
    }
}

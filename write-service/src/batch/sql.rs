//! The statements both families of group commit share: the admission and channel view of every
//! write, and storing their events.

use buzz_core::{kinds, ChannelId, CommunityId, Event, EventId, Pubkey};
use buzz_store::access::Channel;
use buzz_store::fragments::served_event;
use buzz_store::{ChannelType, Role, Visibility};
use sqlx::PgConnection;

use super::{Post, Stored};

/// One row of the batch's first statement: everything the single-write path reads before the
/// event family's own checks.
#[derive(sqlx::FromRow)]
pub(crate) struct View {
    pub(crate) active: bool,
    pub(crate) access_version: Option<i64>,
    pub(crate) duplicate: bool,
    /// Accepted before and deleted by its author since (kind 5).
    pub(crate) deleted: bool,
    pub(crate) role: Option<Role>,
    /// The writer's key or the member key it acts with is banned from the community.
    pub(crate) community_banned: bool,
    channel_id: Option<ChannelId>,
    channel_name: Option<String>,
    visibility: Option<Visibility>,
    channel_type: Option<ChannelType>,
    ttl_seconds: Option<i32>,
    archived: Option<bool>,
    pub(crate) channel_role: Option<Role>,
    pub(crate) channel_banned: bool,
    /// The channel's banned keys.
    pub(crate) banned: Vec<Pubkey>,
    /// The named root is a served conversation anchor (a top-level kind 9) in the channel.
    pub(crate) anchor: bool,
}

impl View {
    /// What a write stored with `seq` answers with, from its view (`replaced`: a revision's).
    pub(crate) fn stored(self, seq: i64, replaced: Vec<[String; 2]>) -> Stored {
        Stored { seq, banned: self.banned, access_version: self.access_version.unwrap_or_default(), replaced }
    }

    pub(crate) fn channel(&self) -> Option<Channel> {
        Some(Channel {
            id: self.channel_id?,
            name: self.channel_name.clone()?,
            visibility: self.visibility?,
            channel_type: self.channel_type?,
            ttl_seconds: self.ttl_seconds,
            archived: self.archived?,
        })
    }
}

/// Admission, channel view and thread-root check of every post in one statement, the channel rows
/// share-locked (in id order) so that they cannot change under the batch. `bans`: migration 0004
/// has run (`buzz_store::bans::table_exists`), so community bans are read too.
pub(crate) async fn load(
    tx: &mut PgConnection,
    posts: &[Post<'_>],
    bans: bool,
) -> Result<Vec<View>, sqlx::Error> {
    let n = posts.len();
    let mut ord = Vec::with_capacity(n);
    let mut community = Vec::with_capacity(n);
    let mut event_id = Vec::with_capacity(n);
    let mut member = Vec::with_capacity(n);
    let mut writer = Vec::with_capacity(n);
    let mut channel = Vec::with_capacity(n);
    let mut root = Vec::with_capacity(n);
    for (i, p) in posts.iter().enumerate() {
        ord.push(i32::try_from(i).unwrap_or(i32::MAX));
        community.push(p.community);
        event_id.push(p.event.id.as_str());
        member.push(p.actor.member_key());
        writer.push(p.actor.pubkey.as_str());
        channel.push(p.named.channel.as_ref().ok().copied());
        root.push(p.named.root.as_ref().ok().and_then(Option::as_ref).map(EventId::as_str));
    }
    let sql = format!(
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
    );
    let views: Vec<View> = sqlx::query_as(&sql)
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
    Ok(views)
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
        for (name, hash) in crate::store::event_tag_rows(e) {
            tag_community.push(new.community);
            tag_event.push(e.id.as_str());
            tag_name.push(name);
            tag_hash.push(hash);
        }
    }
    let rows: Vec<(CommunityId, EventId, i64)> = sqlx::query_as(
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
         SELECT community_id, id, seq FROM e",
    )
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

//! SQL of the write-service that is not access: events, tags, channels, members.

use buzz_core::{kinds, ChannelId, CommunityId, Event, EventId, Pubkey};
use buzz_store::fragments::served_event;
use buzz_store::{access, Role};
use sqlx::PgConnection;

use crate::rules::admission::AdmissionView;
use crate::rules::channel::Spec;

pub use buzz_store::tag_rows::{event_tag_rows, indexed_tags};

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

/// Whether event `id` was accepted in the last `secs` seconds and is still served (neither
/// deleted nor redacted).
pub async fn accepted_within(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
    secs: f64,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM events WHERE community_id = $1 AND id = $2 \
         AND deleted_at IS NULL AND redacted_at IS NULL AND accepted_at > now() - make_interval(secs => $3))",
    )
    .bind(community)
    .bind(id)
    .bind(secs)
    .fetch_one(conn)
    .await
}

/// What every event write needs to know first, in one round trip (`rules::admission::admit`):
/// whether the community is active, whether this exact event was already accepted (stored, or a
/// NIP-AR revision whose event retention has since removed) and whether its author has deleted
/// it since (kind 5), the writer's (`member`'s) community role, and, when `bans` (migration 0004
/// has run: `buzz_store::bans::table_exists`), whether `member` or the signing key `writer` is
/// banned; with the community's access version, which live events carry (0 for an inactive
/// community).
pub async fn admission(
    conn: &mut PgConnection,
    community: CommunityId,
    event_id: &EventId,
    (member, writer): (&Pubkey, &Pubkey),
    bans: bool,
) -> Result<(AdmissionView, i64), sqlx::Error> {
    let banned = if bans {
        "EXISTS (SELECT 1 FROM community_bans b WHERE b.community_id = c.id AND b.pubkey IN ($3, $4))"
    } else {
        // Nobody is banned before 0004; `$4` is still named, as every bound value must be.
        "$4::text IS NULL"
    };
    let row: Option<(i64, bool, bool, Option<Role>, bool)> = sqlx::query_as(&format!(
        "SELECT c.access_version, \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = c.id AND e.id = $2) \
                OR EXISTS (SELECT 1 FROM artifact_revisions r WHERE r.community_id = c.id AND r.revision_id = $2), \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = c.id AND e.id = $2 AND e.deleted_at IS NOT NULL), \
                (SELECT m.role FROM community_members m WHERE m.community_id = c.id AND m.pubkey = $3), \
                {banned} \
         FROM communities c WHERE c.id = $1 AND c.lifecycle = 'active'"
    ))
    .bind(community)
    .bind(event_id)
    .bind(member)
    .bind(writer)
    .fetch_optional(conn)
    .await?;
    Ok(row.map_or((AdmissionView::default(), 0), |(access_version, duplicate, deleted, role, banned)| {
        (AdmissionView { active: true, duplicate, deleted, role, banned }, access_version)
    }))
}

/// Creates the channel `c` asks for, by `created_by`; false when the id is taken in this
/// community.
pub async fn create_channel(
    conn: &mut PgConnection,
    community: CommunityId,
    c: &Spec<'_>,
    created_by: &Pubkey,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query(
        "INSERT INTO channels (community_id, id, name, visibility, channel_type, ttl_seconds, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
    )
    .bind(community)
    .bind(c.id)
    .bind(c.name)
    .bind(c.visibility)
    .bind(c.channel_type)
    .bind(c.ttl_seconds)
    .bind(created_by)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Makes each of `pubkeys` an active channel member with `role` (lifting a removal or ban).
pub async fn add_channel_members(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    pubkeys: &[&Pubkey],
    role: Role,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO channel_members (community_id, channel_id, pubkey, role) \
         SELECT $1, $2, p, $4 FROM UNNEST($3::text[]) AS p \
         ON CONFLICT (community_id, channel_id, pubkey) DO UPDATE SET role = EXCLUDED.role, removed_at = NULL, banned = false",
    )
    .bind(community)
    .bind(channel)
    .bind(pubkeys)
    .bind(role)
    .execute(conn)
    .await?;
    Ok(())
}

/// Inserts or changes a community member's role; returns the previous role.
pub async fn put_member(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
    role: Role,
) -> Result<Option<Role>, sqlx::Error> {
    let previous: Option<Role> = sqlx::query_scalar(
        "SELECT role FROM community_members WHERE community_id = $1 AND pubkey = $2 FOR UPDATE",
    )
    .bind(community)
    .bind(pubkey)
    .fetch_optional(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO community_members (community_id, pubkey, role) VALUES ($1, $2, $3) \
         ON CONFLICT (community_id, pubkey) DO UPDATE SET role = EXCLUDED.role",
    )
    .bind(community)
    .bind(pubkey)
    .bind(role)
    .execute(conn)
    .await?;
    Ok(previous)
}

/// Removes a community member and their channel memberships; false when not a member.
pub async fn remove_member(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query("DELETE FROM community_members WHERE community_id = $1 AND pubkey = $2")
        .bind(community)
        .bind(pubkey)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    sqlx::query(
        "UPDATE channel_members SET removed_at = now() WHERE community_id = $1 AND pubkey = $2 AND removed_at IS NULL",
    )
    .bind(community)
    .bind(pubkey)
    .execute(conn)
    .await?;
    Ok(n == 1)
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

/// Locks a live channel row for a change to it.
pub async fn lock_channel(
    conn: &mut PgConnection,
    community: CommunityId,
    id: ChannelId,
) -> Result<Option<access::Channel>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, name, visibility, channel_type, ttl_seconds, archived FROM channels \
         WHERE community_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE",
    )
    .bind(community)
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Stores a changed channel's name, visibility and archive flag.
pub async fn update_channel(
    conn: &mut PgConnection,
    community: CommunityId,
    c: &access::Channel,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE channels SET name = $3, visibility = $4, archived = $5 WHERE community_id = $1 AND id = $2",
    )
    .bind(community)
    .bind(c.id)
    .bind(&c.name)
    .bind(c.visibility)
    .bind(c.archived)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks a channel deleted (its row stays, so the id is never reused).
pub async fn delete_channel(
    conn: &mut PgConnection,
    community: CommunityId,
    id: ChannelId,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE channels SET deleted_at = now() WHERE community_id = $1 AND id = $2")
        .bind(community)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Marks an active channel membership removed (`ban`: by a moderator); false when there was none.
pub async fn remove_channel_member(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    pubkey: &Pubkey,
    ban: bool,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query(
        "UPDATE channel_members SET removed_at = now(), banned = $4 \
         WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3 AND removed_at IS NULL",
    )
    .bind(community)
    .bind(channel)
    .bind(pubkey)
    .bind(ban)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// The active channel role of `pubkey`.
pub async fn channel_role(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    pubkey: &Pubkey,
) -> Result<Option<Role>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT role FROM channel_members WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3 AND removed_at IS NULL",
    )
    .bind(community)
    .bind(channel)
    .bind(pubkey)
    .fetch_optional(conn)
    .await
}

/// A stored event's author and channel, if it is live (not deleted or redacted).
pub async fn event_owner(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
) -> Result<Option<(Pubkey, Option<ChannelId>, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT pubkey, channel_id, kind FROM events WHERE community_id = $1 AND id = $2 \
         AND deleted_at IS NULL AND redacted_at IS NULL",
    )
    .bind(community)
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Redacts a stored event. A redacted current artifact revision retires its artifact: it leaves
/// the current-state index (`artifact_current_tags`) in the same statement.
pub async fn redact_event(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH r AS (UPDATE events SET redacted_at = now() \
                    WHERE community_id = $1 AND id = $2 AND redacted_at IS NULL RETURNING id) \
         DELETE FROM artifact_current_tags x USING artifacts a, r \
         WHERE a.community_id = $1 AND a.current_revision = r.id AND x.community_id = $1 AND x.d = a.d",
    )
    .bind(community)
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks the events `ids` deleted (NIP-09).
pub async fn delete_events(
    conn: &mut PgConnection,
    community: CommunityId,
    ids: &[EventId],
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = ANY($2) AND deleted_at IS NULL")
        .bind(community)
        .bind(ids)
        .execute(conn)
        .await?;
    Ok(())
}

/// Drops the stored relay event of `kind` for a channel (addressable: only the newest is kept).
pub async fn drop_relay_event(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    kind: u32,
    relay: &Pubkey,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DELETE FROM events WHERE community_id = $1 AND channel_id = $2 AND kind = $3 AND pubkey = $4",
    )
    .bind(community)
    .bind(channel)
    .bind(i64::from(kind))
    .bind(relay)
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes up to `batch` expired events (TTL channels); replicas may run this concurrently.
pub async fn sweep_expired(pool: &sqlx::PgPool, batch: i64) -> Result<u64, sqlx::Error> {
    let n = sqlx::query(
        "DELETE FROM events WHERE (community_id, id) IN ( \
             SELECT community_id, id FROM events WHERE expires_at IS NOT NULL AND expires_at <= now() \
             LIMIT $1 FOR UPDATE SKIP LOCKED)",
    )
    .bind(batch)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}

/// Keys banned from a channel (removed by a moderator), who must not get its live events.
pub async fn banned_members(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
) -> Result<Vec<Pubkey>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT pubkey FROM channel_members WHERE community_id = $1 AND channel_id = $2 AND banned",
    )
    .bind(community)
    .bind(channel)
    .fetch_all(conn)
    .await
}

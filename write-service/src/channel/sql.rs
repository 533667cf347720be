//! The statements of channels and their membership (kinds 9007, 9000–9008, the relay's
//! 39000/39002), and of redactions, which kind 9005 and NIP-86 `banevent`/`unbanevent` share.
//! Each redaction stands on its own (docs/design.md "NIP-86 community management"): a redaction
//! may name an event another one already redacted, and lifting a NIP-86 ban clears
//! `events.redacted_at` only when no kind-9005 redaction of the event was accepted.

use buzz_core::kinds::REDACT;
use buzz_core::{ChannelId, CommunityId, EventId, Pubkey};
use buzz_store::{access, Role};
use sqlx::PgConnection;

use crate::rules::channel::Spec;

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

/// The target of a redaction: a stored event not deleted by its author (redacted or not), with
/// its author, channel and kind.
pub async fn redaction_target(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
) -> Result<Option<(Pubkey, Option<ChannelId>, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT pubkey, channel_id, kind FROM events WHERE community_id = $1 AND id = $2 AND deleted_at IS NULL",
    )
    .bind(community)
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Lifts the redaction a NIP-86 `banevent` made, unless an accepted kind-9005 redaction names
/// the event too (its first `e` tag, found through the tag index, checked on the stored event):
/// that one stands. Whether the 9005 was deleted since (kind 5) does not matter: deleting a
/// redaction never brought the event back either.
pub async fn lift_ban(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
) -> Result<(), sqlx::Error> {
    sqlx::query(&format!(
        "UPDATE events SET redacted_at = NULL WHERE community_id = $1 AND id = $2 \
         AND NOT EXISTS (SELECT 1 FROM event_tags t \
             JOIN events r ON r.community_id = t.community_id AND r.id = t.event_id \
             WHERE t.community_id = $1 AND t.name = 'e' AND t.value_hash = $3 AND r.kind = {REDACT} \
               AND (SELECT x ->> 1 FROM jsonb_array_elements(r.raw::jsonb -> 'tags') WITH ORDINALITY AS a(x, n) \
                    WHERE x ->> 0 = 'e' ORDER BY n LIMIT 1) = $2)"
    ))
    .bind(community)
    .bind(id)
    .bind(buzz_store::tag_value_hash(id.as_str()))
    .execute(conn)
    .await?;
    Ok(())
}

//! The statements of a read marker; moving one is also what a stored post does to its author's.

use buzz_core::{kinds, ChannelId, CommunityId, EventId, Pubkey};
use buzz_store::fragments::served_event;
use sqlx::PgConnection;

/// The acceptance order of `up_to` when it is a served kind-9 message of `channel`.
pub async fn message_seq(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    up_to: &EventId,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(&format!(
        "SELECT e.seq FROM events e WHERE e.community_id = $1 AND e.id = $2 AND e.channel_id = $3 \
           AND e.kind = $4 AND {}",
        served_event("e")
    ))
    .bind(community)
    .bind(up_to)
    .bind(channel)
    .bind(i64::from(kinds::MESSAGE))
    .fetch_optional(conn)
    .await
}

/// The event `pubkey`'s marker in `channel` is at (it exists once moved).
pub async fn marker(
    conn: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    pubkey: &Pubkey,
) -> Result<EventId, sqlx::Error> {
    let (marker,): (EventId,) = sqlx::query_as(
        "SELECT event_id FROM read_markers WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3",
    )
    .bind(community)
    .bind(channel)
    .bind(pubkey)
    .fetch_one(conn)
    .await?;
    Ok(marker)
}

/// Moves `pubkey`'s marker in `channel` to (`seq`, `event_id`) unless it is already there or
/// further. True when it moved. The row lock of the upsert serialises concurrent moves, and the
/// condition keeps the later one.
pub async fn advance_marker(
    tx: &mut PgConnection,
    community: CommunityId,
    channel: ChannelId,
    pubkey: &Pubkey,
    seq: i64,
    event_id: &EventId,
) -> Result<bool, sqlx::Error> {
    let moved = sqlx::query(
        "INSERT INTO read_markers (community_id, channel_id, pubkey, seq, event_id) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (community_id, channel_id, pubkey) DO UPDATE \
           SET seq = EXCLUDED.seq, event_id = EXCLUDED.event_id, updated_at = now() \
           WHERE read_markers.seq < EXCLUDED.seq",
    )
    .bind(community)
    .bind(channel)
    .bind(pubkey)
    .bind(seq)
    .bind(event_id)
    .execute(tx)
    .await?
    .rows_affected();
    Ok(moved == 1)
}

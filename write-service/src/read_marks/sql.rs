//! The statements of a read marker (moving it is `store::advance_marker`, shared with the post).

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

//! The statements of kind 5 (NIP-09): what a deletion's named events are, and deleting them.

use buzz_core::{ChannelId, CommunityId, EventId, Pubkey};
use sqlx::PgConnection;

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

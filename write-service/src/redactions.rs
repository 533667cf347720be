//! The SQL of redactions shared by kind 9005 (`channels::moderate`) and NIP-86 `banevent` /
//! `unbanevent` (`manage_events`). Each redaction stands on its own (docs/design.md "NIP-86
//! community management"): a redaction may name an event another one already redacted, and
//! lifting a NIP-86 ban clears `events.redacted_at` only when no kind-9005 redaction of the event
//! was accepted.

use buzz_core::kinds::REDACT;
use buzz_core::{ChannelId, CommunityId, EventId, Pubkey};
use sqlx::PgConnection;

/// The target of a redaction: a stored event not deleted by its author (redacted or not), with
/// its author, channel and kind.
pub async fn target(
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

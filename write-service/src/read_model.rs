//! The chat read model's writes: read markers and mentions.
//!
//! Counts (messages, replies, unread) are not maintained here: the query-service computes them
//! from `events` at read time. What the write side keeps is what cannot be derived: where each
//! member has read up to (`read_markers`) and who was mentioned by which message (`mentions`).
//!
//! - Every accepted kind-9 message records one mention per distinct `p` tag naming a community
//!   member other than the author, and advances the author's marker to the message (posting marks
//!   the channel read). Both happen inside the message's transaction, so a message is never
//!   visible without its mentions.
//! - `mark_read` moves a marker forward only; a marker is an acceptance order (`events.seq`), so
//!   "read up to X" means every message accepted no later than X.

use buzz_bus::{Actor, ReadMarker, WriteData, WriteOk};
use buzz_core::{kinds, ChannelId, CommunityId, Event, EventId, Pubkey};
use buzz_store::access;
use buzz_store::fragments::served_event;
use sqlx::{PgConnection, PgPool};

use crate::error::{WriteError, WriteResult};
use crate::rules::read_marker;
use crate::shared::Accepted;

/// The read-model side of an accepted kind-9 post, called inside its transaction once the event is
/// stored. Does nothing for duplicates or other kinds.
pub async fn on_message(
    tx: &mut PgConnection,
    community: CommunityId,
    accepted: &Accepted,
) -> WriteResult<()> {
    let Some(live) = accepted.live.as_ref().filter(|_| !accepted.ok.duplicate) else { return Ok(()) };
    let event = &live.event;
    let Some(channel) = live.channel_id.filter(|_| event.kind == kinds::MESSAGE) else { return Ok(()) };
    let Some(seq) = accepted.seq else { return Ok(()) };
    record_mentions(tx, community, channel, event, seq, &mentioned(event)).await?;
    advance_marker(tx, community, channel, &event.pubkey, seq, &event.id).await?;
    Ok(())
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

/// Moves `pubkey`'s marker in `channel` to (`seq`, `event_id`) unless it is already there or
/// further. True when it moved. The row lock of the upsert serialises concurrent moves, and the
/// condition keeps the later one.
async fn advance_marker(
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

/// `POST /api/channels/{id}/read`: the caller must be able to read the channel (a read-model
/// write needs `messages:read`, not `messages:write`: it changes only the caller's own state);
/// `up_to` must be a stored, visible kind-9 message of that channel. The marker never moves back;
/// `duplicate` is true when it was already at or past `up_to`.
#[tracing::instrument(
    name = "db.transaction",
    skip_all,
    fields(db.system = "postgresql", db.operation = "mark_read", otel.kind = "client")
)]
pub async fn mark_read(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    channel_id: ChannelId,
    up_to: &EventId,
) -> WriteResult<WriteOk> {
    read_marker::scope(actor)?;
    let mut tx = pool.begin().await?;
    let channel = access::load_channel(&mut tx, community, channel_id, false).await?;
    let standing = access::standing(&mut tx, community, channel_id, actor.member_key()).await?;
    read_marker::readable(channel.as_ref(), standing, actor)?;
    let seq: Option<i64> = sqlx::query_scalar(&format!(
        "SELECT e.seq FROM events e WHERE e.community_id = $1 AND e.id = $2 AND e.channel_id = $3 \
           AND e.kind = $4 AND {}",
        served_event("e")
    ))
    .bind(community)
    .bind(up_to)
    .bind(channel_id)
    .bind(i64::from(kinds::MESSAGE))
    .fetch_optional(&mut *tx)
    .await?;
    let seq = read_marker::up_to(seq)?;
    let moved = advance_marker(&mut tx, community, channel_id, &actor.pubkey, seq, up_to).await?;
    let (marker,): (EventId,) = sqlx::query_as(
        "SELECT event_id FROM read_markers WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3",
    )
    .bind(community)
    .bind(channel_id)
    .bind(&actor.pubkey)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(WriteOk {
        duplicate: !moved,
        message: String::new(),
        data: Some(WriteData::ReadMarker(ReadMarker { channel_id, read_up_to: marker })),
    })
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

//! Read markers (`POST /api/channels/{id}/read`), the chat read model's one request. Counts
//! (messages, replies, unread) are not maintained here: the query-service computes them from
//! `events` at read time. What the write side keeps is what cannot be derived: where each member
//! has read up to (`read_markers`) and who was mentioned by which message (`mentions`, written
//! with the message by the kind-9 family).
//!
//! A marker moves forward only; it is an acceptance order (`events.seq`), so "read up to X" means
//! every message accepted no later than X. A post moves its author's marker too (posting marks the
//! channel read: `post/` moves it with `sql.rs` `advance_marker`). The rules are
//! `rules::read_marker`'s; the statements, `sql.rs`.

pub mod sql;

use buzz_bus::{Actor, ReadMarker, WriteData, WriteOk};
use buzz_core::{ChannelId, CommunityId, EventId};
use buzz_store::access;
use sqlx::PgPool;

use crate::error::{WriteError, WriteResult};
use crate::rules::read_marker;

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
    let seq = read_marker::up_to(sql::message_seq(&mut tx, community, channel_id, up_to).await?)?;
    let moved = sql::advance_marker(&mut tx, community, channel_id, &actor.pubkey, seq, up_to).await?;
    let marker = sql::marker(&mut tx, community, channel_id, &actor.pubkey).await?;
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(WriteOk {
        duplicate: !moved,
        message: String::new(),
        data: Some(WriteData::ReadMarker(ReadMarker { channel_id, read_up_to: marker })),
    })
}

//! The chat read model's reads: channel summaries and mentions.
//!
//! Counts are computed in SQL at read time, in one repeatable-read, read-only transaction, rather
//! than kept as counters: they are exact under any interleaving of concurrent posts (a counter would
//! need a hot row per channel and per anchor locked by every post), and deletion, redaction and
//! expiry (which happens by the clock, with no write to hang a decrement on) are simply filtered
//! out. The cost is a scan of the channel's visible messages through `events_by_channel_seq` (kind-9
//! messages only, in the baseline schema).
//!
//! A message is *visible* when it is a kind-9 event of the channel that is not deleted, redacted or
//! expired. Then, for the caller:
//! - `message_count`: visible messages, replies included;
//! - `unread`: visible messages after the caller's marker (acceptance order) not authored by them;
//! - `mentions`: the caller's mentions in this channel whose message is visible and after the marker;
//! - `replies`: `{anchor id: n}` for visible anchors with at least one visible reply.

use buzz_core::{kinds, ChannelId, CommunityId, EventId};
use std::collections::BTreeMap;

use buzz_bus::{
    Actor, BusError, ChannelSummary, ChatAnswer, ChatReply, ChatRequest, ErrorCode, Mention, MentionsPage,
    Scope,
};
use buzz_store::access::{self, Credential};
use buzz_store::fragments::{readable_channel_of, served_event, ReaderBinds};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};

/// Execution budget of one read-model statement.
const STATEMENT_TIMEOUT_MS: u32 = 5000;
/// Largest page of `GET /api/mentions`.
pub const MAX_MENTIONS: u32 = 100;

use crate::error::sql_error;

fn not_found() -> BusError {
    BusError::new(ErrorCode::NotFound, buzz_core::refusal::CHANNEL_NOT_FOUND)
}

fn credential(reader: &Actor) -> Credential<'_> {
    Credential {
        can_read_messages: reader.has_scope(Scope::MessagesRead),
        can_write_messages: reader.has_scope(Scope::MessagesWrite),
        channel_ids: reader.channel_ids.as_deref(),
    }
}

/// Answers a chat read-model request (channel summary or mentions) for its reader.
pub async fn handle(pool: &PgPool, req: ChatRequest) -> ChatReply {
    let reader = match &req {
        ChatRequest::Summary { reader, .. } | ChatRequest::Mentions { reader, .. } => reader,
    };
    if !reader.has_scope(Scope::MessagesRead) {
        return Err(BusError::restricted(buzz_core::refusal::READ_SCOPE));
    }
    let mut tx = pool.begin().await.map_err(sql_error)?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(sql_error)?;
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(format!("{STATEMENT_TIMEOUT_MS}ms"))
        .execute(&mut *tx)
        .await
        .map_err(sql_error)?;
    let answer = match req {
        ChatRequest::Summary { community_id, reader, channel_id } => {
            ChatAnswer::Summary(summary(&mut tx, community_id, &reader, channel_id).await?)
        }
        ChatRequest::Mentions { community_id, reader, limit } => {
            ChatAnswer::Mentions(mentions(&mut tx, community_id, &reader, limit).await?)
        }
    };
    tx.commit().await.map_err(sql_error)?;
    Ok(answer)
}

async fn summary(
    tx: &mut PgConnection,
    community: CommunityId,
    reader: &Actor,
    channel_id: ChannelId,
) -> Result<ChannelSummary, BusError> {
    let channel = access::load_channel(tx, community, channel_id, false).await.map_err(sql_error)?;
    let standing =
        access::standing(tx, community, channel_id, reader.member_key()).await.map_err(sql_error)?;
    if !channel.as_ref().is_some_and(|c| access::can_read(c, standing, credential(reader))) {
        return Err(not_found());
    }
    let (message_count, unread, mentions, read_up_to): (i64, i64, i64, Option<EventId>) =
        sqlx::query_as(&format!(
            "WITH marker AS ( \
             SELECT coalesce(max(seq), 0) AS seq, max(event_id) AS event_id FROM read_markers \
             WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3), \
         msgs AS ( \
             SELECT e.seq, e.pubkey FROM events e \
             WHERE e.community_id = $1 AND e.channel_id = $2 AND e.kind = {message} AND {vis_e}) \
         SELECT \
             (SELECT count(*) FROM msgs), \
             (SELECT count(*) FROM msgs, marker WHERE msgs.seq > marker.seq AND msgs.pubkey <> $3), \
             (SELECT count(*) FROM mentions mn \
                JOIN events m ON m.community_id = mn.community_id AND m.id = mn.event_id, marker \
              WHERE mn.community_id = $1 AND mn.pubkey = $3 AND mn.channel_id = $2 \
                AND mn.seq > marker.seq AND m.channel_id = $2 AND {vis_m}), \
             (SELECT event_id FROM marker)",
            vis_e = served_event("e"),
            vis_m = served_event("m"),
            // A literal, not a bind: it is what lets the planner use the partial index
            // `events_by_channel_seq` (`WHERE kind = 9`, in the baseline schema) in every plan.
            message = kinds::MESSAGE,
        ))
        .bind(community)
        .bind(channel_id)
        .bind(&reader.pubkey)
        .fetch_one(&mut *tx)
        .await
        .map_err(sql_error)?;
    let rows: Vec<(EventId, i64)> = sqlx::query_as(&format!(
        "SELECT r.thread_root, count(*) FROM events r \
         JOIN events a ON a.community_id = r.community_id AND a.id = r.thread_root \
         WHERE r.community_id = $1 AND r.channel_id = $2 AND r.kind = $3 AND r.thread_root IS NOT NULL \
           AND {vis_r} AND a.channel_id = $2 AND a.kind = $3 AND {vis_a} \
         GROUP BY r.thread_root",
        vis_r = served_event("r"),
        vis_a = served_event("a"),
    ))
    .bind(community)
    .bind(channel_id)
    .bind(i64::from(kinds::MESSAGE))
    .fetch_all(&mut *tx)
    .await
    .map_err(sql_error)?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let replies: BTreeMap<EventId, u64> = rows.into_iter().map(|(id, n)| (id, count(n))).collect();
    Ok(ChannelSummary {
        channel_id,
        message_count: count(message_count),
        unread: count(unread),
        mentions: count(mentions),
        replies,
        read_up_to,
    })
}

/// The caller's mentions, newest (latest accepted) first, only in channels the caller can read
/// now and only for visible messages; `read` tells whether the caller's marker has passed it.
/// Markers and mentions belong to the caller's own pubkey; access follows its member key (an
/// agent reads with its owner's membership).
async fn mentions(
    tx: &mut PgConnection,
    community: CommunityId,
    reader: &Actor,
    limit: u32,
) -> Result<MentionsPage, BusError> {
    if limit == 0 || limit > MAX_MENTIONS {
        return Err(BusError::invalid(format!("limit must be 1 to {MAX_MENTIONS}")));
    }
    let rows: Vec<(EventId, ChannelId, String, bool)> = sqlx::query_as(&format!(
        "SELECT mn.event_id, mn.channel_id, e.raw, coalesce(rm.seq >= mn.seq, false) \
         FROM mentions mn \
         JOIN events e ON e.community_id = mn.community_id AND e.id = mn.event_id \
         LEFT JOIN read_markers rm ON rm.community_id = mn.community_id AND rm.channel_id = mn.channel_id \
              AND rm.pubkey = mn.pubkey \
         WHERE mn.community_id = $1 AND mn.pubkey = $5 AND e.channel_id = mn.channel_id AND {vis} \
           AND {readable} \
         ORDER BY mn.seq DESC LIMIT $4",
        vis = served_event("e"),
        readable =
            readable_channel_of("mn", ReaderBinds { community: "$1", pubkey: "$2", restriction: "$3" }),
    ))
    .bind(community)
    .bind(reader.member_key())
    .bind(reader.channel_ids.as_deref())
    .bind(i64::from(limit))
    .bind(&reader.pubkey)
    .fetch_all(&mut *tx)
    .await
    .map_err(sql_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for (event_id, channel_id, raw, read) in rows {
        let event: Value = serde_json::from_str(&raw).map_err(|e| {
            tracing::error!(error = %e, %event_id, "stored event is not JSON");
            BusError::internal()
        })?;
        out.push(Mention { event_id, channel_id, read, event });
    }
    Ok(MentionsPage { mentions: out })
}

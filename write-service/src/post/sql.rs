//! The statements only kind-9 posts make: whether a resent post was accepted moments ago, and a
//! batch's mentions and read markers (a single post's are `store`'s).

use std::collections::BTreeMap;

use buzz_core::{ChannelId, CommunityId, Event, EventId};
use sqlx::PgConnection;

use crate::store;

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

/// A post a batch stored: its community, event, channel and acceptance order.
pub(crate) struct StoredPost<'a> {
    pub(crate) community: CommunityId,
    pub(crate) event: &'a Event,
    pub(crate) channel: ChannelId,
    pub(crate) seq: i64,
}

/// One mention per distinct `p` tag naming a community member other than the author, for every
/// stored post of a batch (what `store::record_mentions` does for one).
pub(crate) async fn record_mentions(
    tx: &mut PgConnection,
    posts: &[StoredPost<'_>],
) -> Result<(), sqlx::Error> {
    let (mut community, mut pubkey, mut event, mut channel, mut seq, mut created_at) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for p in posts {
        for key in store::mentioned(p.event) {
            community.push(p.community);
            pubkey.push(key);
            event.push(p.event.id.as_str());
            channel.push(p.channel);
            seq.push(p.seq);
            created_at.push(p.event.created_at);
        }
    }
    if community.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO mentions (community_id, pubkey, event_id, channel_id, seq, created_at) \
         SELECT u.c, m.pubkey, u.eid, u.ch, u.seq, u.created_at \
         FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::int8[], $6::int8[]) \
              AS u(c, pk, eid, ch, seq, created_at) \
         JOIN community_members m ON m.community_id = u.c AND m.pubkey = u.pk \
         ON CONFLICT (community_id, pubkey, event_id) DO NOTHING",
    )
    .bind(&community)
    .bind(&pubkey)
    .bind(&event)
    .bind(&channel)
    .bind(&seq)
    .bind(&created_at)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Moves each author's read marker in each channel to their last stored post of the batch (posting
/// marks the channel read). Keys sorted, one row each, so concurrent batches lock in one order.
pub(crate) async fn advance_markers(
    tx: &mut PgConnection,
    posts: &[StoredPost<'_>],
) -> Result<(), sqlx::Error> {
    let mut last: BTreeMap<(CommunityId, ChannelId, &str), (i64, &str)> = BTreeMap::new();
    for p in posts {
        let entry =
            last.entry((p.community, p.channel, p.event.pubkey.as_str())).or_insert((p.seq, &p.event.id));
        if p.seq > entry.0 {
            *entry = (p.seq, &p.event.id);
        }
    }
    let (mut community, mut channel, mut pubkey, mut seq, mut event) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((c, ch, pk), (s, id)) in last {
        community.push(c);
        channel.push(ch);
        pubkey.push(pk);
        seq.push(s);
        event.push(id);
    }
    sqlx::query(
        "INSERT INTO read_markers (community_id, channel_id, pubkey, seq, event_id) \
         SELECT u.c, u.ch, u.pk, u.seq, u.eid \
         FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::int8[], $5::text[]) \
              WITH ORDINALITY AS u(c, ch, pk, seq, eid, ord) \
         ORDER BY ord \
         ON CONFLICT (community_id, channel_id, pubkey) DO UPDATE \
           SET seq = EXCLUDED.seq, event_id = EXCLUDED.event_id, updated_at = now() \
           WHERE read_markers.seq < EXCLUDED.seq",
    )
    .bind(&community)
    .bind(&channel)
    .bind(&pubkey)
    .bind(&seq)
    .bind(&event)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

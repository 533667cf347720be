//! Group commit of kind-9 posts: concurrent posts share one transaction, a fixed number of
//! statements whatever their number, and one durable commit.
//!
//! - Every post is still acknowledged only after the commit that stored it.
//! - The decision of each post is the single-post path's: the same rules (`rules::admission`,
//!   `rules::post`) applied to the batch's view of it. A refused post is answered on its own and
//!   its batch-mates go on.
//! - When a statement of the batch fails, the batch is rolled back and each of its posts is
//!   written again on its own (`batch::answer`).
//!
//! Statements per batch: the admission and channel view of every post (with the channel rows
//! share-locked in id order), the events with their tag rows, the mentions (only when a post has
//! `p` tags), the authors' read markers (last, sorted, so concurrent batches lock them in the same
//! order and hold them only until their commit).

use std::collections::{BTreeMap, HashSet};

use buzz_bus::Actor;
use buzz_core::{ChannelId, CommunityId, Event, EventId};
use buzz_store::access::Channel;
use futures::future::BoxFuture;
use sqlx::{PgConnection, PgPool};

use super::sql::{insert_events, load, NewEvent, View};
use super::{admit, answer, BatchError, Outcome, Pools, Post};
use crate::error::WriteResult;
use crate::rules::post::Named;
use crate::rules::Refusal;
use crate::shared::Accepted;

/// [`WriteBatch`] of kind-9 posts.
pub fn posts<'a>(
    pools: &'a Pools,
    relay: &'a buzz_core::Keys,
    posts: Vec<(CommunityId, Actor, Event)>,
) -> BoxFuture<'a, Vec<WriteResult<Accepted>>> {
    Box::pin(write_posts_on(&pools.batch, &pools.single, relay, posts))
}

/// Writes `posts` (community, writer, kind-9 event) as one group commit and returns each one's
/// outcome, in order: what the single-post path would have answered for it. Storage failures of
/// the batch fall back to writing each post alone.
pub async fn write_posts(
    pool: &PgPool,
    relay: &buzz_core::Keys,
    posts: Vec<(CommunityId, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    write_posts_on(pool, pool, relay, posts).await
}

async fn write_posts_on(
    batch_pool: &PgPool,
    pool: &PgPool,
    relay: &buzz_core::Keys,
    posts: Vec<(CommunityId, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    let result = write_batch(batch_pool, &posts).await;
    answer(pool, relay, posts, result, "posts").await
}

/// One post of a batch: the post, what the batch read about it, and what became of it.
struct Write<'a> {
    post: Post<'a>,
    view: View,
    decision: Decision,
}

/// What the rules decided for a post of the batch.
enum Decision {
    Refused(Refusal),
    Duplicate,
    /// Accepted, to store in `channel` with `root`; `seq` once stored (`None` after the insert:
    /// stored meanwhile by a concurrent write, a duplicate as on the single path).
    Store {
        channel: Channel,
        root: Option<EventId>,
        seq: Option<i64>,
    },
}

impl Write<'_> {
    fn outcome(self) -> Outcome {
        match self.decision {
            Decision::Refused(r) => Outcome::Refused(r),
            Decision::Duplicate | Decision::Store { seq: None, .. } => Outcome::Duplicate,
            Decision::Store { channel, seq: Some(seq), .. } => {
                Outcome::Stored { channel, stored: self.view.stored(seq, Vec::new()) }
            }
        }
    }
}

/// The kind-9 decision (`rules::post`) from the batch's view; a post submitted twice in one batch
/// (`seen` holds the (community, id) of those stored before it) is stored once, and its copy is a
/// duplicate as an already stored event is on the single path: after admission's earlier checks,
/// before the write rule (a copy through a token that may not write there is still `duplicate:`).
fn decide<'a>(post: &Post<'a>, view: &View, seen: &mut HashSet<(CommunityId, &'a str)>) -> Decision {
    let at = match admit(post, view) {
        Err(r) => return Decision::Refused(r),
        Ok(None) => return Decision::Duplicate,
        Ok(Some(at)) => at,
    };
    if seen.contains(&(post.community, post.event.id.as_str())) {
        return Decision::Duplicate;
    }
    match crate::rules::post::decide(&post.named, at, view.anchor, post.actor) {
        Err(r) => Decision::Refused(r),
        Ok((channel, root)) => {
            seen.insert((post.community, post.event.id.as_str()));
            Decision::Store { channel, root, seq: None }
        }
    }
}

async fn write_batch(
    pool: &PgPool,
    batch: &[(CommunityId, Actor, Event)],
) -> Result<Vec<Outcome>, BatchError> {
    let posts: Vec<Post<'_>> = batch
        .iter()
        .map(|(community, actor, event)| Post {
            community: *community,
            actor,
            event,
            named: Named::parse(event),
        })
        .collect();
    let mut tx = pool.begin().await?;
    let bans = buzz_store::bans::table_exists(pool, &mut tx).await?;
    let views = load(&mut tx, &posts, bans).await?;
    let mut seen = HashSet::new();
    let mut writes: Vec<Write<'_>> = posts
        .into_iter()
        .zip(views)
        .map(|(post, view)| {
            let decision = decide(&post, &view, &mut seen);
            Write { post, view, decision }
        })
        .collect();
    let events: Vec<NewEvent<'_>> = writes
        .iter()
        .filter_map(|w| match &w.decision {
            Decision::Store { channel, root, .. } => Some(NewEvent {
                community: w.post.community,
                event: w.post.event,
                channel,
                thread_root: root.as_ref(),
            }),
            _ => None,
        })
        .collect();
    if !events.is_empty() {
        let seqs = insert_events(&mut tx, &events).await?;
        drop(events);
        for w in &mut writes {
            if let Decision::Store { seq, .. } = &mut w.decision {
                *seq = seqs.get(&(w.post.community, w.post.event.id.clone())).copied();
            }
        }
        record_mentions(&mut tx, &writes).await?;
        advance_markers(&mut tx, &writes).await?;
    }
    tx.commit().await.map_err(BatchError::Commit)?;
    Ok(writes.into_iter().map(Write::outcome).collect())
}

/// One mention per distinct `p` tag naming a community member other than the author, for every
/// stored post (`read_model::on_message`, for a batch).
async fn record_mentions(tx: &mut PgConnection, writes: &[Write<'_>]) -> Result<(), sqlx::Error> {
    let (mut community, mut pubkey, mut event, mut channel, mut seq, mut created_at) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for w in writes {
        let Decision::Store { channel: ch, seq: Some(s), .. } = &w.decision else { continue };
        let p = &w.post;
        for key in crate::read_model::mentioned(p.event) {
            community.push(p.community);
            pubkey.push(key);
            event.push(p.event.id.as_str());
            channel.push(ch.id);
            seq.push(*s);
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
async fn advance_markers(tx: &mut PgConnection, writes: &[Write<'_>]) -> Result<(), sqlx::Error> {
    let mut last: BTreeMap<(CommunityId, ChannelId, &str), (i64, &str)> = BTreeMap::new();
    for w in writes {
        let Decision::Store { channel, seq: Some(seq), .. } = &w.decision else { continue };
        let p = &w.post;
        let entry =
            last.entry((p.community, channel.id, p.event.pubkey.as_str())).or_insert((*seq, &p.event.id));
        if *seq > entry.0 {
            *entry = (*seq, &p.event.id);
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

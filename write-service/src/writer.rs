//! The write-service's bus handler and its registry of event families. [`family`] is the one
//! place an event kind is registered; [`write_event`] is the one-event path by kind that every
//! event which is not batched takes, and that a batch hands back to; [`Writer`] decides and
//! commits every write request (an event, a membership change, a token, a read marker, a NIP-86
//! call), then publishes, then answers.

use std::sync::Arc;

use buzz_bus::{AccessChanged, Actor, Subjects, WriteReply, WriteRequest};
use buzz_core::{kinds, CommunityId, Event};
use sqlx::PgPool;

use crate::engine::single::{self, Family};
use crate::engine::{self, Accepted, Alone, BatchSettings, Batcher, Pools, Relay};
use crate::error::WriteResult;
use crate::{channel, deletion, manage, members, post, read_marks, revision, tokens};

/// The event families, by kind: the one place a kind is registered. Kinds 9 and 45010 are also
/// written by group commit (`Writer::posts`, `Writer::revisions`), which hands what it does not
/// write itself back to their family here.
#[must_use]
pub fn family(kind: u32) -> &'static dyn Family {
    match kind {
        kinds::MESSAGE => &post::Posts,
        kinds::ARTIFACT_REVISION => &revision::Revisions,
        kinds::DELETION => &deletion::Deletion,
        // 9007 and 9000–9008; any other kind is refused by admission or by the rules.
        _ => &channel::Channels,
    }
}

/// Writes one client event alone, in its own transaction, by its kind's family (the one-event
/// path every event that is not batched takes, and what a batch hands back).
pub async fn write_event(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    let family = family(event.kind);
    single::write_event(pool, community, actor, event, relay, family).await
}

/// Where a batch hands a write back: [`write_event`] on `pool`.
#[must_use]
pub fn alone(pool: PgPool, relay: Arc<buzz_core::Keys>) -> Alone {
    Arc::new(move |community, actor, event| {
        let (pool, relay) = (pool.clone(), relay.clone());
        Box::pin(async move { write_event(&pool, community, &actor, event, &Relay { keys: &relay }).await })
    })
}

/// Writes `posts` (community, writer, kind-9 event) as one group commit on `pool` and returns
/// each one's outcome, in order: what the one-event path would have answered for it.
pub async fn write_posts(
    pool: &PgPool,
    relay: &buzz_core::Keys,
    posts: Vec<(CommunityId, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    let alone = alone(pool.clone(), Arc::new(relay.clone()));
    engine::write_batch::<post::Posts>(pool, &alone, posts).await
}

/// Writes `writes` (community, writer, kind-45010 event) as one group commit on `pools.batch`
/// and returns each one's outcome, in order: what the one-event path would have answered for it.
pub async fn write_revisions(
    pools: &Pools,
    relay: &buzz_core::Keys,
    writes: Vec<(CommunityId, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    let alone = alone(pools.single.clone(), Arc::new(relay.clone()));
    engine::write_batch::<revision::Revisions>(&pools.batch, &alone, writes).await
}

/// What a handler needs; cheap to clone.
#[derive(Clone)]
pub struct Writer {
    /// Pool on the relay's database.
    pub pool: PgPool,
    /// NATS, for replies and post-commit publishes.
    pub nats: async_nats::Client,
    /// Subjects under the cluster's prefix.
    pub subjects: Subjects,
    /// The relay's key, signing 39000/39002 and the 45011 removals of NIP-AR moves.
    pub relay: Arc<buzz_core::Keys>,
    /// Kind-9 posts, written by group commit.
    pub posts: Batcher,
    /// NIP-AR revisions, written by group commit.
    pub revisions: Batcher,
}

impl Writer {
    /// A writer on `pool`, its batched families' lanes started on `batch_pool` (one set of lanes
    /// per batched family; what they hand back is written on `pool`).
    #[must_use]
    pub fn new(
        pool: PgPool,
        batch_pool: &PgPool,
        batch: BatchSettings,
        nats: async_nats::Client,
        subjects: Subjects,
        relay: Arc<buzz_core::Keys>,
    ) -> Self {
        let alone = alone(pool.clone(), relay.clone());
        let posts = Batcher::start::<post::Posts>(batch_pool.clone(), batch, alone.clone());
        let revisions = Batcher::start::<revision::Revisions>(batch_pool.clone(), batch, alone);
        Self { pool, nats, subjects, relay, posts, revisions }
    }

    /// Handles one write request: decide and commit, then publish, then answer. Every answer,
    /// refusals included, is timed and counted (`buzz_write_seconds`, `buzz_writes_total`).
    pub async fn handle(&self, req: WriteRequest) -> WriteReply {
        let started = std::time::Instant::now();
        let reply = self.apply(req).await;
        let outcome = match &reply {
            Ok(_) => "ok",
            Err(e) => e.code.as_str(),
        };
        metrics::histogram!("buzz_write_seconds").record(started.elapsed().as_secs_f64());
        metrics::counter!("buzz_writes_total", "outcome" => outcome).increment(1);
        reply
    }

    async fn apply(&self, req: WriteRequest) -> WriteReply {
        match req {
            WriteRequest::Event { community_id, actor, event } => {
                let accepted = match event.kind {
                    kinds::MESSAGE => self.posts.write(community_id, actor, event).await?,
                    kinds::ARTIFACT_REVISION => self.revisions.write(community_id, actor, event).await?,
                    _ => {
                        let relay = Relay { keys: &self.relay };
                        write_event(&self.pool, community_id, &actor, event, &relay).await?
                    }
                };
                // Access changes go out before the events that follow them, so a gateway drops
                // its cached answers first (live events also carry the access version).
                if let Some(channel_id) = accepted.access_changed {
                    let changed = AccessChanged::Channel { channel_id };
                    self.publish(self.subjects.access_changed(community_id), &changed).await;
                }
                for live in accepted.live.iter().chain(accepted.also.iter()) {
                    self.publish(self.subjects.live(community_id), live).await;
                }
                Ok(accepted.ok)
            }
            WriteRequest::PutMember { community_id, actor, pubkey, role } => {
                Ok(members::put_member(&self.pool, community_id, &actor, &pubkey, role).await?)
            }
            WriteRequest::RemoveMember { community_id, actor, pubkey } => {
                let removed = members::remove_member(&self.pool, community_id, &actor, &pubkey).await?;
                if removed {
                    let changed = AccessChanged::MemberRemoved { pubkey };
                    self.publish(self.subjects.access_changed(community_id), &changed).await;
                }
                Ok(buzz_bus::WriteOk { duplicate: !removed, message: String::new(), data: None })
            }
            WriteRequest::IssueToken { community_id, actor, token_hash, scopes, channel_ids, expires_in } => {
                let issued = tokens::issue(
                    &self.pool,
                    community_id,
                    &actor,
                    &token_hash,
                    &scopes,
                    channel_ids.as_deref(),
                    expires_in,
                );
                Ok(issued.await?)
            }
            WriteRequest::MarkRead { community_id, actor, channel_id, up_to } => {
                Ok(read_marks::mark_read(&self.pool, community_id, &actor, channel_id, &up_to).await?)
            }
        }
    }

    /// Handles one NIP-86 call: decide and commit, then publish its access changes, then answer.
    pub async fn manage(&self, req: buzz_bus::manage::ManageRequest) -> buzz_bus::manage::ManageReply {
        let managed = manage::handle(&self.pool, req.community_id, &req.actor, &req.call).await?;
        metrics::counter!("buzz_manage_calls_total", "method" => req.call.method()).increment(1);
        for changed in &managed.access {
            self.publish(self.subjects.access_changed(req.community_id), changed).await;
        }
        Ok(managed.result)
    }

    async fn publish<T: serde::Serialize>(&self, subject: String, body: &T) {
        match serde_json::to_vec(body) {
            Ok(bytes) => {
                if let Err(e) = self
                    .nats
                    .publish_with_headers(subject, buzz_bus::trace::current_headers(), bytes.into())
                    .await
                {
                    // Live delivery is at-most-once; the event is stored and replayable.
                    tracing::warn!(error = %e, "live publish failed");
                }
            }
            Err(e) => tracing::error!(error = %e, "unserialisable live event"),
        }
    }
}

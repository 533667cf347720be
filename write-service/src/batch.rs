//! Group commit: concurrent writes of one event family share one transaction, a fixed number of
//! statements whatever their number, and one durable commit. The queue and its lanes
//! ([`Batcher`]) serve kind-9 posts ([`posts`]) and NIP-AR revisions (`revisions`), with the
//! batch's view of each write ([`sql::load`]), its admission ([`admit`]) and the answers
//! ([`answer`]) shared.
//!
//! - Every write is still acknowledged only after the commit that stored it.
//! - When a statement of the batch fails (a lock or statement timeout, a constraint), the batch is
//!   rolled back and each of its writes is written again on its own, in its own transaction, so a
//!   failing write never takes its batch-mates down. A failed commit is answered `error:` for all
//!   (outcome unknown; resubmitting is safe, a duplicate is `OK true`).
//! - Batches form by themselves: a lane takes whatever is queued when it is free, up to the
//!   maximum. Under light load a batch is one write; under heavy load the fsync is shared.

mod posts;
pub(crate) mod sql;

pub use posts::{posts, write_posts};
pub(crate) use sql::{insert_events, load, NewEvent, View};

use std::sync::Arc;

use buzz_bus::{Actor, Audience, BusError};
use buzz_core::{CommunityId, Event, Pubkey};
use buzz_store::access::{Channel, Standing};
use buzz_store::Role;
use futures::future::BoxFuture;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::error::{WriteError, WriteResult};
use crate::rules::admission::{self, AdmissionView, Admitted, ChannelView};
use crate::rules::post::Named;
use crate::rules::Refusal;
use crate::shared::{live_event, Accepted, Relay};

/// How writes of one family are grouped: at most `max` per transaction, `lanes` transactions at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// Most writes in one transaction (1: every write in a transaction of its own).
    pub max: usize,
    /// Batches of one family in flight at once (each holds one lane connection while it runs).
    pub lanes: usize,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self { max: 64, lanes: 1 }
    }
}

/// A write waiting for its batch.
struct Job {
    community: CommunityId,
    actor: Actor,
    event: Event,
    reply: oneshot::Sender<WriteResult<Accepted>>,
}

/// Writes one batch of (community, writer, event) and returns each write's outcome, in order:
/// [`posts`] for kind 9, `revisions::write` for NIP-AR revisions.
pub type WriteBatch = for<'a> fn(
    &'a Pools,
    &'a buzz_core::Keys,
    Vec<(CommunityId, Actor, Event)>,
) -> BoxFuture<'a, Vec<WriteResult<Accepted>>>;

/// A queue of writes of one event family and its lanes. Cheap to clone; the lanes stop when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Batcher {
    queue: mpsc::Sender<Job>,
}

impl Batcher {
    /// Starts `settings.lanes` lanes writing batches with `write` on `pools.batch` (one connection
    /// each); the one-by-one fallback writes on `pools.single`. `relay` signs what the family's
    /// writes sign (a move's removal).
    #[must_use]
    pub fn start(
        pools: Pools,
        relay: Arc<buzz_core::Keys>,
        settings: BatchSettings,
        write: WriteBatch,
    ) -> Self {
        let max = settings.max.max(1);
        let (queue, rx) = mpsc::channel(max * settings.lanes.max(1) * 4);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..settings.lanes.max(1) {
            tokio::spawn(lane(pools.clone(), relay.clone(), rx.clone(), max, write));
        }
        Self { queue }
    }

    /// Writes one event in the next batch and returns its outcome once that batch has committed
    /// (or the event was refused).
    #[tracing::instrument(
        name = "db.transaction",
        skip_all,
        fields(db.system = "postgresql", db.operation = "write_event", otel.kind = "client")
    )]
    pub async fn write(&self, community: CommunityId, actor: Actor, event: Event) -> WriteResult<Accepted> {
        let (reply, answer) = oneshot::channel();
        let job = Job { community, actor, event, reply };
        if self.queue.send(job).await.is_err() {
            return Err(stopping());
        }
        answer.await.unwrap_or_else(|_| Err(stopping()))
    }
}

/// The answer to a write queued while the service stops.
fn stopping() -> WriteError {
    WriteError::Refused(BusError::unavailable("write-service is stopping"))
}

/// Where a lane writes: its batches, and the writes of a batch that failed, one by one.
#[derive(Clone)]
pub struct Pools {
    /// The lanes' connections (generic plans, replaced every few seconds).
    pub batch: PgPool,
    /// The write pool, for the one-by-one fallback.
    pub single: PgPool,
}

async fn lane(
    pools: Pools,
    relay: Arc<buzz_core::Keys>,
    queue: Arc<Mutex<mpsc::Receiver<Job>>>,
    max: usize,
    write: WriteBatch,
) {
    let mut jobs = Vec::with_capacity(max);
    loop {
        {
            let mut rx = queue.lock().await;
            if rx.recv_many(&mut jobs, max).await == 0 {
                return;
            }
        }
        metrics::histogram!("buzz_write_batch_size").record(jobs.len() as f64);
        tracing::debug!(writes = jobs.len(), "group commit");
        let (batch, replies): (Vec<_>, Vec<_>) =
            jobs.drain(..).map(|j| ((j.community, j.actor, j.event), j.reply)).unzip();
        for (reply, outcome) in replies.into_iter().zip(write(&pools, &relay, batch).await) {
            let _ = reply.send(outcome);
        }
    }
}

/// What became of a write of a batch, once the batch committed.
pub(crate) enum Outcome {
    Refused(Refusal),
    Duplicate,
    Stored {
        channel: Channel,
        stored: Stored,
    },
    /// Left to the single-write path: written alone, in its own transaction, after the batch.
    Alone,
}

/// Answers each write of a batch of `family` from its outcome, in order. When a statement of the
/// batch failed (rolled back, nothing stored) every write is written alone on `pool` by the
/// single-write path, so a failing write never takes its batch-mates down; a failed commit is
/// answered `error:` for all (outcome unknown; resubmitting is safe, a duplicate is `OK true`).
pub(crate) async fn answer(
    pool: &PgPool,
    relay: &buzz_core::Keys,
    writes: Vec<(CommunityId, Actor, Event)>,
    result: Result<Vec<Outcome>, BatchError>,
    family: &'static str,
) -> Vec<WriteResult<Accepted>> {
    let outcomes = match result {
        Ok(outcomes) => outcomes,
        Err(BatchError::Commit(e)) => {
            tracing::error!(error = %e, family, writes = writes.len(), "batch commit failed");
            return writes
                .iter()
                .map(|_| Err(WriteError::Commit(sqlx::Error::Protocol(e.to_string()))))
                .collect();
        }
        Err(BatchError::Statement(e)) => {
            tracing::warn!(error = %e, family, writes = writes.len(), "batch rolled back; writing its writes one by one");
            metrics::counter!("buzz_write_batch_fallbacks_total").increment(1);
            writes.iter().map(|_| Outcome::Alone).collect()
        }
    };
    let relay = Relay { keys: relay };
    let mut answers = Vec::with_capacity(writes.len());
    for ((community, actor, event), outcome) in writes.into_iter().zip(outcomes) {
        answers.push(match outcome {
            Outcome::Refused(r) => Err(r.into()),
            // A post resent moments after it was accepted may need announcing again
            // (`events::write_event`): rare, so written alone.
            Outcome::Duplicate if event.kind == buzz_core::kinds::MESSAGE => {
                crate::events::write_event(pool, community, &actor, event, &relay).await
            }
            Outcome::Duplicate => Ok(Accepted::duplicate()),
            Outcome::Stored { channel, stored } => Ok(stored.accepted(community, &channel, event)),
            Outcome::Alone => crate::events::write_event(pool, community, &actor, event, &relay).await,
        });
    }
    answers
}

/// A write as the batch reads it; what can be parsed without the database is parsed once.
pub(crate) struct Post<'a> {
    pub(crate) community: CommunityId,
    pub(crate) actor: &'a Actor,
    pub(crate) event: &'a Event,
    /// The channel it is written in and the thread root it names (a revision's: its envelope's).
    pub(crate) named: Named,
}

/// What a write stored by a batch answers and publishes, beyond its event and channel.
pub(crate) struct Stored {
    pub(crate) seq: i64,
    /// The channel's banned keys (an open channel's live event skips them).
    pub(crate) banned: Vec<Pubkey>,
    pub(crate) access_version: i64,
    /// The current-tag rows a NIP-AR revision replaced, as `[name, hex(sha256(first value))]`.
    pub(crate) replaced: Vec<[String; 2]>,
}

impl Stored {
    /// The answer and live event of `event`, stored by a batch in `channel`.
    fn accepted(self, community: CommunityId, channel: &Channel, event: Event) -> Accepted {
        let mut live = live_event(community, channel, event);
        live.access_version = self.access_version;
        if live.audience == Audience::Community {
            live.banned = self.banned;
        }
        live.replaced_tags = self.replaced;
        Accepted {
            ok: buzz_bus::WriteOk::applied(),
            live: Some(live),
            also: Vec::new(),
            access_changed: None,
            seq: Some(self.seq),
            bans_resolved: true,
        }
    }
}

pub(crate) enum BatchError {
    /// A statement failed: rolled back, nothing stored.
    Statement(sqlx::Error),
    /// The commit failed: outcome unknown.
    Commit(sqlx::Error),
}

impl From<sqlx::Error> for BatchError {
    fn from(e: sqlx::Error) -> Self {
        Self::Statement(e)
    }
}

/// Admission (`rules::admission::admit`) from the batch's view of a write: `None` for an event
/// already accepted, else the channel it names and the writer's standing there, for the kind-9
/// write rule.
pub(crate) fn admit(post: &Post<'_>, view: &View) -> Result<Option<ChannelView>, Refusal> {
    let seen = AdmissionView {
        active: view.active,
        duplicate: view.duplicate,
        deleted: view.deleted,
        role: view.role,
        banned: view.community_banned,
    };
    let role = match admission::admit(post.event, post.actor, &seen)? {
        Admitted::Duplicate => return Ok(None),
        Admitted::Member(role) => role,
    };
    let standing = Standing {
        community_member: true,
        community_admin: role.is_admin(),
        channel_member: view.channel_role.is_some(),
        channel_admin: view.channel_role.is_some_and(Role::is_admin),
        banned: view.channel_banned,
    };
    Ok(Some(ChannelView { channel: view.channel(), standing }))
}

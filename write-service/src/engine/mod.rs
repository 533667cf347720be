//! The commit engine: what an event write comes to ([`Accepted`]) and group commit, the queue and
//! lanes of a batched family ([`Batcher`]) and the one transaction each batch is. The one-event
//! transaction every other write takes is `single.rs`.
//!
//! A batch of a family `F: Batch` (kind-9 posts, NIP-AR revisions):
//! 1. `F::parse` reads each event once, without the database: the channel and root it names;
//! 2. one statement reads every write's view (`store::load`: admission, the channel row
//!    share-locked in id order, standing, bans, root anchor) and each write is admitted from it
//!    (`rules::admission`);
//! 3. `F::write` decides and stores the batch (load → decide → store, a fixed number of
//!    statements whatever its size) and says what became of each write ([`Outcome`]);
//! 4. one commit; then each write is answered, or handed back to be written alone.
//!
//! - Every write is acknowledged only after the commit that stored it.
//! - When a statement of the batch fails (a lock or statement timeout, a deadlock, a constraint),
//!   the batch is rolled back and each of its writes is handed back to be written alone, in its
//!   own transaction, in batch order, so a failing write never takes its batch-mates down. What
//!   its family leaves to the one-event path ([`Outcome::Alone`]) is handed back the same way
//!   after the commit, so it sees the batch. The engine hands back through the [`Alone`] its
//!   owner gave the [`Batcher`]: it never calls a family's one-event path itself.
//! - A failed commit is answered `error:` for all (outcome unknown; resubmitting is safe, a
//!   duplicate is `OK true`).
//! - Batches form by themselves: a lane takes whatever is queued when it is free, up to the
//!   maximum. Under light load a batch is one write; under heavy load the fsync is shared.

pub mod single;

use std::future::Future;
use std::sync::Arc;

use buzz_bus::{Actor, Audience, BusError, LiveEvent, WriteOk};
use buzz_core::{ChannelId, CommunityId, Event};
use buzz_store::access::{Channel, Standing};
use buzz_store::Role;
use futures::future::BoxFuture;
use sqlx::{PgConnection, PgPool};
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::error::{WriteError, WriteResult};
use crate::rules::admission::{self, AdmissionView, Admitted, ChannelView};
use crate::rules::post::Named;
use crate::rules::Refusal;
use crate::store::{self, View, ViewKey};

/// The result of an accepted write: the reply, and what to publish once committed.
pub struct Accepted {
    /// The reply to the writer.
    pub ok: WriteOk,
    /// The accepted event, for live fan-out.
    pub live: Option<LiveEvent>,
    /// Relay-signed events stored with it (39000/39002, a move's 45011), also fanned out.
    pub also: Vec<LiveEvent>,
    /// The community's access changed (the channel concerned): gateways drop cached answers.
    pub access_changed: Option<ChannelId>,
    /// The stored event's acceptance order.
    pub seq: Option<i64>,
    /// `live.banned` is already filled in (the family read it with the channel).
    pub bans_resolved: bool,
}

impl Accepted {
    /// The answer to an event that is already stored: nothing to publish.
    #[must_use]
    pub fn duplicate() -> Self {
        Self {
            ok: WriteOk { duplicate: true, message: "duplicate: already have this event".into(), data: None },
            live: None,
            also: Vec::new(),
            access_changed: None,
            seq: None,
            bans_resolved: true,
        }
    }

    /// The answer to an event stored with `seq` in `channel`, with its live event.
    #[must_use]
    pub fn stored(community: CommunityId, channel: &Channel, event: Event, seq: i64) -> Self {
        Self {
            ok: WriteOk::applied(),
            live: Some(live_event(community, channel, event)),
            also: Vec::new(),
            access_changed: None,
            seq: Some(seq),
            bans_resolved: false,
        }
    }
}

/// The relay's own key and signing, for the events the relay writes itself.
pub struct Relay<'a> {
    /// The relay's key pair.
    pub keys: &'a buzz_core::Keys,
}

/// A stored event of `channel` as it is fanned out (audience decided from the stored channel).
#[must_use]
pub fn live_event(community: CommunityId, channel: &Channel, event: Event) -> LiveEvent {
    let audience = if channel.is_open() { Audience::Community } else { Audience::ChannelMembers };
    LiveEvent {
        community_id: community,
        channel_id: Some(channel.id),
        audience,
        event,
        access_version: 0,
        banned: Vec::new(),
        replaced_tags: Vec::new(),
    }
}

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

/// Where a batched family writes: its batches, and what they hand back, one by one.
#[derive(Clone)]
pub struct Pools {
    /// The lanes' connections (generic plans, replaced every few seconds).
    pub batch: PgPool,
    /// The write pool, for the writes handed back.
    pub single: PgPool,
}

/// Where a [`Batcher`] hands a write back to be written alone, in its own transaction: its
/// owner's one-event path.
pub type Alone =
    Arc<dyn Fn(CommunityId, Actor, Event) -> BoxFuture<'static, WriteResult<Accepted>> + Send + Sync>;

/// An event family written by group commit: what the engine calls for each batch.
pub(crate) trait Batch: Send + Sync + 'static {
    /// Names the family in logs.
    const NAME: &'static str;
    /// What the family parses of an event without the database, besides what it names.
    type Parsed: Send + Sync + 'static;
    /// Parses `event` once: the channel and thread root the batch's view reads, and the family's
    /// own part.
    fn parse(event: &Event) -> (Named, Self::Parsed);
    /// Decides and stores the writes of one batch in `tx` (load → decide → store), each admitted
    /// from the batch's view; returns what became of each, in order. An error rolls the batch
    /// back.
    fn write<'a>(
        tx: &'a mut PgConnection,
        writes: Vec<Write<'a, Self::Parsed>>,
    ) -> impl Future<Output = Result<Vec<Outcome>, sqlx::Error>> + Send + 'a;
}

/// A write of a batch, as its family gets it.
pub(crate) struct Write<'a, P> {
    pub(crate) community: CommunityId,
    pub(crate) actor: &'a Actor,
    pub(crate) event: &'a Event,
    /// The channel and thread root it names (a revision's: its envelope's).
    pub(crate) named: &'a Named,
    /// The family's own parse of it.
    pub(crate) parsed: &'a P,
    /// What the batch's first statement read about it.
    pub(crate) view: View,
    /// Admission from the view: `Ok(None)` for an event already accepted, else the channel it
    /// names and the writer's standing there (for the kind-9 write rule).
    pub(crate) admitted: Result<Option<ChannelView>, Refusal>,
}

/// What became of a write of a batch, once the batch committed.
pub(crate) enum Outcome {
    Refused(Refusal),
    Duplicate,
    /// Stored with `seq` in `channel`; `replaced`: the current-tag rows a NIP-AR revision replaced,
    /// as `[name, hex(sha256(first value))]`.
    Stored {
        channel: Channel,
        seq: i64,
        view: View,
        replaced: Vec<[String; 2]>,
    },
    /// Handed back, to be written alone in its own transaction after the batch.
    Alone,
}

enum BatchError {
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

/// A write waiting for its batch.
struct Job {
    community: CommunityId,
    actor: Actor,
    event: Event,
    reply: oneshot::Sender<WriteResult<Accepted>>,
}

/// A queue of writes of one event family and its lanes. Cheap to clone; the lanes stop when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Batcher {
    queue: mpsc::Sender<Job>,
}

impl Batcher {
    /// Starts `settings.lanes` lanes writing batches of `F` on `pool` (one connection each); what
    /// a batch hands back goes to `alone`.
    #[must_use]
    pub(crate) fn start<F: Batch>(pool: PgPool, settings: BatchSettings, alone: Alone) -> Self {
        let max = settings.max.max(1);
        let (queue, rx) = mpsc::channel(max * settings.lanes.max(1) * 4);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..settings.lanes.max(1) {
            tokio::spawn(lane::<F>(pool.clone(), rx.clone(), max, alone.clone()));
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

async fn lane<F: Batch>(pool: PgPool, queue: Arc<Mutex<mpsc::Receiver<Job>>>, max: usize, alone: Alone) {
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
        for (reply, outcome) in replies.into_iter().zip(write_batch::<F>(&pool, &alone, batch).await) {
            let _ = reply.send(outcome);
        }
    }
}

/// Writes `writes` (community, writer, event) as one batch of `F` on `pool` and returns each
/// one's answer, in order: what the one-event path would have answered for it. What the batch
/// hands back is written by `alone`, in order, before anything is answered.
pub(crate) async fn write_batch<F: Batch>(
    pool: &PgPool,
    alone: &Alone,
    writes: Vec<(CommunityId, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    let result = run::<F>(pool, &writes).await;
    answer(writes, result, alone, F::NAME).await
}

/// The one transaction of a batch: its view, admission, the family's steps, the commit.
async fn run<F: Batch>(
    pool: &PgPool,
    writes: &[(CommunityId, Actor, Event)],
) -> Result<Vec<Outcome>, BatchError> {
    let parsed: Vec<(Named, F::Parsed)> = writes.iter().map(|(_, _, event)| F::parse(event)).collect();
    let keys: Vec<ViewKey<'_>> = writes
        .iter()
        .zip(&parsed)
        .map(|((community, actor, event), (named, _))| ViewKey {
            community: *community,
            event_id: &event.id,
            member: actor.member_key(),
            writer: &actor.pubkey,
            channel: named.channel.as_ref().ok().copied(),
            root: named.root.as_ref().ok().and_then(Option::as_ref),
        })
        .collect();
    let mut tx = pool.begin().await?;
    let bans = buzz_store::bans::table_exists(pool, &mut tx).await?;
    let views = store::load(&mut tx, &keys, bans).await?;
    drop(keys);
    let batch: Vec<Write<'_, F::Parsed>> = writes
        .iter()
        .zip(&parsed)
        .zip(views)
        .map(|(((community, actor, event), (named, parsed)), view)| Write {
            community: *community,
            actor,
            event,
            named,
            parsed,
            admitted: admit(event, actor, &view),
            view,
        })
        .collect();
    let outcomes = F::write(&mut tx, batch).await?;
    tx.commit().await.map_err(BatchError::Commit)?;
    Ok(outcomes)
}

/// Answers each write of a batch of `family` from its outcome, in order; a write handed back is
/// written by `alone` first. When a statement of the batch failed, every write is handed back; a
/// failed commit is answered `error:` for all.
async fn answer(
    writes: Vec<(CommunityId, Actor, Event)>,
    result: Result<Vec<Outcome>, BatchError>,
    alone: &Alone,
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
    let mut answers = Vec::with_capacity(writes.len());
    for ((community, actor, event), outcome) in writes.into_iter().zip(outcomes) {
        answers.push(match outcome {
            Outcome::Refused(r) => Err(r.into()),
            Outcome::Duplicate => Ok(Accepted::duplicate()),
            Outcome::Stored { channel, seq, view, replaced } => {
                let mut accepted = Accepted::stored(community, &channel, event, seq);
                if let Some(live) = accepted.live.as_mut() {
                    live.access_version = view.access_version.unwrap_or_default();
                    if live.audience == Audience::Community {
                        live.banned = view.banned;
                    }
                    live.replaced_tags = replaced;
                }
                accepted.bans_resolved = true;
                Ok(accepted)
            }
            Outcome::Alone => alone(community, actor, event).await,
        });
    }
    answers
}

/// Admission (`rules::admission::admit`) from the batch's view of a write: `None` for an event
/// already accepted, else the channel it names and the writer's standing there, for the kind-9
/// write rule.
fn admit(event: &Event, actor: &Actor, view: &View) -> Result<Option<ChannelView>, Refusal> {
    let seen = AdmissionView {
        active: view.active,
        duplicate: view.duplicate,
        deleted: view.deleted,
        role: view.role,
        banned: view.community_banned,
    };
    let role = match admission::admit(event, actor, &seen)? {
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
    Ok(Some(ChannelView { channel: view.channel.clone(), standing }))
}

//! Group commit of kind-9 posts: concurrent posts share one transaction, a fixed number of
//! statements whatever their number, and one durable commit. The queue and its lanes
//! ([`Batcher`]) serve NIP-AR revisions too (`revisions`), with [`load`] and [`admit`] shared.
//!
//! - Every post is still acknowledged only after the commit that stored it.
//! - The decision of each post is the single-post path's: the same rules (`rules::admission`,
//!   `rules::post`) applied to the batch's view of it. A refused post is answered on its own and
//!   its batch-mates go on.
//! - When a statement of the batch fails (a lock or statement timeout, a constraint), the batch is
//!   rolled back and each of its posts is written again on its own, in its own transaction, so a
//!   failing post never takes its batch-mates down. A failed commit is answered `error:` for all
//!   (outcome unknown; resubmitting is safe, a duplicate is `OK true`).
//! - Batches form by themselves: a lane takes whatever is queued when it is free, up to the
//!   maximum. Under light load a batch is one post; under heavy load the fsync is shared.
//!
//! Statements per batch: the admission and channel view of every post (with the channel rows
//! share-locked in id order), the events with their tag rows, the mentions (only when a post has
//! `p` tags), the authors' read markers (last, sorted, so concurrent batches lock them in the same
//! order and hold them only until their commit).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use buzz_bus::{Actor, Audience, BusError};
use buzz_core::{kinds, Event};
use buzz_store::access::{Channel, Standing};
use buzz_store::fragments::served_event;
use buzz_store::{ChannelType, Role, Visibility};
use futures::future::BoxFuture;
use sqlx::{PgConnection, PgPool};
use tokio::sync::{mpsc, oneshot, Mutex};
use uuid::Uuid;

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
    community: Uuid,
    actor: Actor,
    event: Event,
    reply: oneshot::Sender<WriteResult<Accepted>>,
}

/// Writes one batch of (community, writer, event) and returns each write's outcome, in order:
/// [`posts`] for kind 9, `revisions::write` for NIP-AR revisions.
pub type WriteBatch = for<'a> fn(
    &'a Pools,
    &'a buzz_core::Keys,
    Vec<(Uuid, Actor, Event)>,
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
    pub async fn write(&self, community: Uuid, actor: Actor, event: Event) -> WriteResult<Accepted> {
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

/// [`WriteBatch`] of kind-9 posts.
pub fn posts<'a>(
    pools: &'a Pools,
    relay: &'a buzz_core::Keys,
    posts: Vec<(Uuid, Actor, Event)>,
) -> BoxFuture<'a, Vec<WriteResult<Accepted>>> {
    Box::pin(write_posts_on(&pools.batch, &pools.single, relay, posts))
}

/// Writes `posts` (community, writer, kind-9 event) as one group commit and returns each one's
/// outcome, in order: what the single-post path would have answered for it. Storage failures of
/// the batch fall back to writing each post alone.
pub async fn write_posts(
    pool: &PgPool,
    relay: &buzz_core::Keys,
    posts: Vec<(Uuid, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    write_posts_on(pool, pool, relay, posts).await
}

async fn write_posts_on(
    batch_pool: &PgPool,
    pool: &PgPool,
    relay: &buzz_core::Keys,
    posts: Vec<(Uuid, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    let result = write_batch(batch_pool, &posts).await;
    answer(pool, relay, posts, result, "posts").await
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
    writes: Vec<(Uuid, Actor, Event)>,
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
            Outcome::Duplicate => Ok(Accepted::duplicate()),
            Outcome::Stored { channel, stored } => Ok(stored.accepted(community, &channel, event)),
            Outcome::Alone => crate::events::write_event(pool, community, &actor, event, &relay).await,
        });
    }
    answers
}

/// A write as the batch reads it; what can be parsed without the database is parsed once.
pub(crate) struct Post<'a> {
    pub(crate) community: Uuid,
    pub(crate) actor: &'a Actor,
    pub(crate) event: &'a Event,
    /// The channel it is written in and the thread root it names (a revision's: its envelope's).
    pub(crate) named: Named<'a>,
}

/// One post of a batch: the post, what the batch read about it, and what became of it.
struct Write<'a> {
    post: Post<'a>,
    view: View,
    decision: Decision<'a>,
}

/// What the rules decided for a post of the batch.
enum Decision<'a> {
    Refused(Refusal),
    Duplicate,
    /// Accepted, to store in `channel` with `root`; `seq` once stored (`None` after the insert:
    /// stored meanwhile by a concurrent write, a duplicate as on the single path).
    Store {
        channel: Channel,
        root: Option<&'a str>,
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

/// What a write stored by a batch answers and publishes, beyond its event and channel.
pub(crate) struct Stored {
    pub(crate) seq: i64,
    /// The channel's banned keys (an open channel's live event skips them).
    pub(crate) banned: Vec<String>,
    pub(crate) access_version: i64,
    /// The current-tag rows a NIP-AR revision replaced, as `[name, hex(sha256(first value))]`.
    pub(crate) replaced: Vec<[String; 2]>,
}

impl Stored {
    /// The answer and live event of `event`, stored by a batch in `channel`.
    fn accepted(self, community: Uuid, channel: &Channel, event: Event) -> Accepted {
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

/// One row of the batch's first statement: everything the single-write path reads before the
/// event family's own checks.
#[derive(sqlx::FromRow)]
pub(crate) struct View {
    active: bool,
    pub(crate) access_version: Option<i64>,
    duplicate: bool,
    /// Accepted before and deleted by its author since (kind 5).
    deleted: bool,
    role: Option<Role>,
    channel_id: Option<Uuid>,
    channel_name: Option<String>,
    visibility: Option<Visibility>,
    channel_type: Option<ChannelType>,
    ttl_seconds: Option<i32>,
    archived: Option<bool>,
    channel_role: Option<Role>,
    channel_banned: bool,
    /// The channel's banned keys.
    pub(crate) banned: Vec<String>,
    /// The named root is a served conversation anchor (a top-level kind 9) in the channel.
    pub(crate) anchor: bool,
}

impl View {
    /// What a write stored with `seq` answers with, from its view (`replaced`: a revision's).
    pub(crate) fn stored(self, seq: i64, replaced: Vec<[String; 2]>) -> Stored {
        Stored { seq, banned: self.banned, access_version: self.access_version.unwrap_or_default(), replaced }
    }

    fn channel(&self) -> Option<Channel> {
        Some(Channel {
            id: self.channel_id?,
            name: self.channel_name.clone()?,
            visibility: self.visibility?,
            channel_type: self.channel_type?,
            ttl_seconds: self.ttl_seconds,
            archived: self.archived?,
        })
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

/// The kind-9 decision (`rules::post`) from the batch's view; a post submitted twice in one batch
/// (`seen` holds the (community, id) of those stored before it) is stored once.
fn decide<'a>(post: &Post<'a>, view: &View, seen: &mut HashSet<(Uuid, &'a str)>) -> Decision<'a> {
    let at = match admit(post, view) {
        Err(r) => return Decision::Refused(r),
        Ok(None) => return Decision::Duplicate,
        Ok(Some(at)) => at,
    };
    match crate::rules::post::decide(&post.named, at, view.anchor, post.actor) {
        Err(r) => Decision::Refused(r),
        Ok(_) if !seen.insert((post.community, post.event.id.as_str())) => Decision::Duplicate,
        Ok((channel, root)) => Decision::Store { channel, root, seq: None },
    }
}

async fn write_batch(pool: &PgPool, batch: &[(Uuid, Actor, Event)]) -> Result<Vec<Outcome>, BatchError> {
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
    let views = load(&mut tx, &posts).await?;
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
                thread_root: *root,
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

/// Admission, channel view and thread-root check of every post in one statement, the channel rows
/// share-locked (in id order) so that they cannot change under the batch.
pub(crate) async fn load(tx: &mut PgConnection, posts: &[Post<'_>]) -> Result<Vec<View>, sqlx::Error> {
    let n = posts.len();
    let mut ord = Vec::with_capacity(n);
    let mut community = Vec::with_capacity(n);
    let mut event_id = Vec::with_capacity(n);
    let mut member = Vec::with_capacity(n);
    let mut channel = Vec::with_capacity(n);
    let mut root = Vec::with_capacity(n);
    for (i, p) in posts.iter().enumerate() {
        ord.push(i32::try_from(i).unwrap_or(i32::MAX));
        community.push(p.community);
        event_id.push(p.event.id.as_str());
        member.push(p.actor.member_key());
        channel.push(p.named.channel.as_ref().ok().copied());
        root.push(p.named.root.as_ref().ok().copied().flatten());
    }
    let sql = format!(
        "WITH i AS ( \
             SELECT * FROM UNNEST($1::int4[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[]) \
                 AS i(ord, community_id, event_id, member, channel_id, root)), \
         ch AS MATERIALIZED ( \
             SELECT c.community_id, c.id, c.name, c.visibility, c.channel_type, c.ttl_seconds, c.archived \
             FROM channels c \
             WHERE (c.community_id, c.id) IN (SELECT community_id, channel_id FROM i) AND c.deleted_at IS NULL \
             ORDER BY c.community_id, c.id \
             FOR SHARE) \
         SELECT (co.id IS NOT NULL) AS active, co.access_version, \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = i.community_id AND e.id = i.event_id) \
                OR EXISTS (SELECT 1 FROM artifact_revisions r \
                           WHERE r.community_id = i.community_id AND r.revision_id = i.event_id) AS duplicate, \
                EXISTS (SELECT 1 FROM events e WHERE e.community_id = i.community_id AND e.id = i.event_id \
                        AND e.deleted_at IS NOT NULL) AS deleted, \
                m.role, \
                ch.id AS channel_id, ch.name AS channel_name, ch.visibility, ch.channel_type, ch.ttl_seconds, \
                ch.archived, \
                CASE WHEN chm.removed_at IS NULL THEN chm.role END AS channel_role, \
                coalesce(chm.banned, false) AS channel_banned, \
                CASE WHEN ch.id IS NULL THEN ARRAY[]::text[] ELSE ARRAY(SELECT b.pubkey FROM channel_members b \
                      WHERE b.community_id = i.community_id AND b.channel_id = ch.id AND b.banned) END AS banned, \
                (i.root IS NOT NULL AND ch.id IS NOT NULL AND EXISTS (SELECT 1 FROM events e \
                     WHERE e.community_id = i.community_id AND e.id = i.root AND e.channel_id = ch.id \
                       AND e.kind = {message} AND e.thread_root IS NULL AND {served})) AS anchor \
         FROM i \
         LEFT JOIN communities co ON co.id = i.community_id AND co.lifecycle = 'active' \
         LEFT JOIN community_members m ON m.community_id = i.community_id AND m.pubkey = i.member \
         LEFT JOIN ch ON ch.community_id = i.community_id AND ch.id = i.channel_id \
         LEFT JOIN channel_members chm ON chm.community_id = i.community_id AND chm.channel_id = ch.id \
              AND chm.pubkey = i.member \
         ORDER BY i.ord",
        message = kinds::MESSAGE,
        served = served_event("e"),
    );
    let views: Vec<View> = sqlx::query_as(&sql)
        .bind(&ord)
        .bind(&community)
        .bind(&event_id)
        .bind(&member)
        .bind(&channel)
        .bind(&root)
        .fetch_all(&mut *tx)
        .await?;
    if views.len() != n {
        return Err(sqlx::Error::Protocol(format!("batch view returned {} rows for {n} posts", views.len())));
    }
    Ok(views)
}

/// An event to store in a batch.
pub(crate) struct NewEvent<'a> {
    pub(crate) community: Uuid,
    pub(crate) event: &'a Event,
    /// The channel it is stored in.
    pub(crate) channel: &'a Channel,
    /// The thread it replies in (kind 9).
    pub(crate) thread_root: Option<&'a str>,
}

/// Stores `events` with their tag index rows in one statement; returns the `seq` of each one
/// stored (one stored meanwhile by a concurrent write is absent).
pub(crate) async fn insert_events(
    tx: &mut PgConnection,
    events: &[NewEvent<'_>],
) -> Result<std::collections::HashMap<(Uuid, String), i64>, sqlx::Error> {
    let n = events.len();
    let (mut community, mut id, mut pubkey, mut kind, mut created_at) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut channel, mut raw, mut ttl, mut root) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut tag_community, mut tag_event, mut tag_name, mut tag_hash) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for new in events {
        let e = new.event;
        community.push(new.community);
        id.push(e.id.as_str());
        pubkey.push(e.pubkey.as_str());
        kind.push(i64::from(e.kind));
        created_at.push(e.created_at);
        channel.push(new.channel.id);
        raw.push(e.to_json());
        ttl.push(new.channel.ttl_seconds);
        root.push(new.thread_root);
        for (name, hash) in crate::store::event_tag_rows(e) {
            tag_community.push(new.community);
            tag_event.push(e.id.as_str());
            tag_name.push(name);
            tag_hash.push(hash);
        }
    }
    let rows: Vec<(Uuid, String, i64)> = sqlx::query_as(
        "WITH e AS ( \
             INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw, expires_at, thread_root) \
             SELECT u.community_id, u.id, u.pubkey, u.kind, u.created_at, u.channel_id, u.raw, \
                    CASE WHEN u.ttl IS NULL THEN NULL ELSE now() + make_interval(secs => u.ttl) END, u.root \
             FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::uuid[], $7::text[], \
                         $8::int4[], $9::text[]) WITH ORDINALITY \
                  AS u(community_id, id, pubkey, kind, created_at, channel_id, raw, ttl, root, ord) \
             ORDER BY u.ord \
             ON CONFLICT (community_id, id) DO NOTHING \
             RETURNING community_id, id, seq, created_at), \
         t AS ( \
             INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
             SELECT e.community_id, e.id, u.n, u.h, e.created_at \
             FROM UNNEST($10::uuid[], $11::text[], $12::text[], $13::bytea[]) AS u(c, eid, n, h) \
             JOIN e ON e.community_id = u.c AND e.id = u.eid) \
         SELECT community_id, id, seq FROM e",
    )
    .bind(&community)
    .bind(&id)
    .bind(&pubkey)
    .bind(&kind)
    .bind(&created_at)
    .bind(&channel)
    .bind(&raw)
    .bind(&ttl)
    .bind(&root)
    .bind(&tag_community)
    .bind(&tag_event)
    .bind(&tag_name)
    .bind(&tag_hash)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(|(c, id, seq)| ((c, id), seq)).collect())
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
    let mut last: BTreeMap<(Uuid, Uuid, &str), (i64, &str)> = BTreeMap::new();
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

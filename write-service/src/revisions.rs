//! Group commit of NIP-AR revisions (kind 45010): concurrent creates and updates share one
//! transaction, a fixed number of statements whatever their number, and one durable commit.
//!
//! - Every revision is still acknowledged only after the commit that stored it.
//! - The decision of each revision is the single-revision path's: the same rules
//!   (`rules::admission`, `rules::revision`) applied to the batch's view of it, in the same order:
//!   admission, the kind-9 write check in `h`, then identity and compare-and-swap under the
//!   artifact row lock (claimed for a create, `FOR UPDATE` for an update), the resubmission check
//!   after the lock, the transition and root rules. A refused revision is answered on its own and
//!   its batch-mates go on.
//! - What the batch does not decide itself is written alone, in its own transaction, after the
//!   batch commits, by the single-revision path: moves, deletes and restores; an update naming
//!   another channel than the artifact's home (the home's write check comes first there); a create
//!   that lost its claim (a taken identity or a concurrent resubmission); a create whose root is not
//!   an anchor (the claim's answer comes first there); a second revision of one artifact, or the same
//!   event twice, in one batch. Those wait for the batch's commit, so they see it.
//! - When a statement of the batch fails (a lock or statement timeout, a deadlock, a constraint),
//!   the batch is rolled back and each revision is written alone (`batch::answer`).
//!
//! Statements per batch: the admission and channel view of every revision (`batch::load`, channel
//! rows share-locked in id order); the updated artifacts locked in key order; the creates claimed in
//! key order with the resubmission check of the updates; the events with their tag rows; the
//! artifacts advanced, their current-tag rows replaced and the revisions recorded in one statement;
//! mentions only for revisions that add some.

mod sql;

use std::collections::{HashMap, HashSet};

use buzz_bus::Actor;
use buzz_core::nipar::{self, Envelope, Op};
use buzz_core::{CommunityId, Event, Pubkey};
use buzz_store::access::Channel;
use futures::future::BoxFuture;
use sqlx::PgPool;
use uuid::Uuid;

use crate::artifacts::Artifact;
use crate::batch::{self, BatchError, NewEvent, Outcome, Pools, Post, View};
use crate::error::WriteResult;
use crate::rules::admission;
use crate::rules::post::Named;
use crate::rules::revision::{self, ArtifactView, Identity};
use crate::rules::Refusal;
use crate::shared::Accepted;

/// [`batch::WriteBatch`] of NIP-AR revisions.
pub fn write<'a>(
    pools: &'a Pools,
    relay: &'a buzz_core::Keys,
    writes: Vec<(CommunityId, Actor, Event)>,
) -> BoxFuture<'a, Vec<WriteResult<Accepted>>> {
    Box::pin(write_revisions(pools, relay, writes))
}

/// Writes `writes` (community, writer, kind-45010 event) as one group commit and returns each one's
/// outcome, in order: what the single-revision path would have answered for it.
pub async fn write_revisions(
    pools: &Pools,
    relay: &buzz_core::Keys,
    writes: Vec<(CommunityId, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    let result = write_batch(&pools.batch, &writes).await;
    batch::answer(&pools.single, relay, writes, result, "revisions").await
}

/// One revision of a batch: the write, its envelope, what the batch read about it, and where it
/// stands.
struct Write<'a> {
    post: Post<'a>,
    /// Its envelope (`None`: malformed, refused at admission).
    env: Option<&'a Envelope>,
    view: View,
    stage: Stage,
}

/// Where a revision of the batch stands.
enum Stage {
    Refused(Refusal),
    Duplicate,
    Alone,
    /// Admitted and writable in `channel` (its h); the row locks may still refuse it or leave it
    /// to the single path. `seq` once its event is stored.
    Store {
        channel: Channel,
        seq: Option<i64>,
    },
}

impl Write<'_> {
    fn key(&self) -> Option<(CommunityId, Uuid)> {
        Some((self.post.community, self.env?.d))
    }

    /// The envelope of a revision still to store.
    fn storing(&self) -> Option<&Envelope> {
        matches!(self.stage, Stage::Store { .. }).then_some(self.env).flatten()
    }

    fn outcome(self, replaced: &mut HashMap<(CommunityId, Uuid), Vec<[String; 2]>>) -> Outcome {
        let key = self.key();
        match self.stage {
            Stage::Refused(r) => Outcome::Refused(r),
            Stage::Duplicate => Outcome::Duplicate,
            Stage::Store { channel, seq: Some(seq) } => {
                let replaced = key.and_then(|k| replaced.remove(&k)).unwrap_or_default();
                Outcome::Stored { channel, stored: self.view.stored(seq, replaced) }
            }
            Stage::Alone | Stage::Store { seq: None, .. } => Outcome::Alone,
        }
    }
}

/// Admission and the kind-9 write check in h (`rules::admission`) from the batch's view; then
/// what the batch leaves to the single path: moves, deletes and restores; the same event, or a
/// second revision of one artifact, again in the batch; a create whose root is not an anchor
/// (the claim's answer comes first there).
fn admit<'a>(
    post: &Post<'a>,
    view: &View,
    env: Option<&Envelope>,
    ids: &mut HashSet<(CommunityId, &'a str)>,
    keys: &mut HashSet<(CommunityId, Uuid)>,
) -> Stage {
    let at = match batch::admit(post, view) {
        Err(r) => return Stage::Refused(r),
        Ok(None) => return Stage::Duplicate,
        Ok(Some(at)) => at,
    };
    // A copy of a revision already in this batch is answered after the commit, as the single
    // path answers it then: a duplicate of what the batch stored comes before the write rule.
    if ids.contains(&(post.community, post.event.id.as_str())) {
        return Stage::Alone;
    }
    // A malformed envelope names no channel: refused here.
    let channel = match admission::writable(post.named.channel.as_ref().copied(), at, post.actor) {
        Err(r) => return Stage::Refused(r),
        Ok(channel) => channel,
    };
    let Some(env) = env else { return Stage::Alone };
    // Every revision counts as its event's and its artifact's first in the batch, a move, delete or
    // restore too: what follows it on the same artifact or event is then written alone after it.
    let first_event = ids.insert((post.community, post.event.id.as_str()));
    let first_of_artifact = keys.insert((post.community, env.d));
    let alone = !matches!(env.op, Op::Create | Op::Update)
        || !first_event
        || !first_of_artifact
        || (env.op == Op::Create && revision::root(env, None, view.anchor).is_err());
    if alone {
        Stage::Alone
    } else {
        Stage::Store { channel, seq: None }
    }
}

/// Identity and compare-and-swap of an update under its row lock (`rules::revision`): `None`
/// when it is to be stored. An artifact living in another channel than h goes to the single
/// path, which checks the home's write rule first.
fn decide_update(env: &Envelope, row: Option<&Artifact>, accepted: bool, anchor: bool) -> Option<Stage> {
    let view = ArtifactView { claimed: false, current: row.map(Artifact::current), accepted };
    match revision::identity(env, &view) {
        Err(r) => Some(Stage::Refused(r)),
        Ok(Identity::Duplicate) => Some(Stage::Duplicate),
        Ok(Identity::Created) => Some(Stage::Alone),
        Ok(Identity::Existing(current)) if revision::source(env, &current).is_some() => Some(Stage::Alone),
        Ok(Identity::Existing(current)) => {
            revision::advance(env, Some(&current), anchor).err().map(Stage::Refused)
        }
    }
}

async fn write_batch(
    pool: &PgPool,
    batch: &[(CommunityId, Actor, Event)],
) -> Result<Vec<Outcome>, BatchError> {
    let envelopes: Vec<Result<Envelope, Refusal>> =
        batch.iter().map(|(_, _, e)| nipar::parse(e).map_err(Refusal::Envelope)).collect();
    let posts: Vec<Post<'_>> = batch
        .iter()
        .zip(&envelopes)
        .map(|((community, actor, event), env)| Post {
            community: *community,
            actor,
            event,
            named: Named {
                channel: env.as_ref().map(|e| e.h).map_err(Clone::clone),
                root: Ok(env.as_ref().ok().and_then(|e| e.root.clone())),
            },
        })
        .collect();
    let mut tx = pool.begin().await?;
    let bans = buzz_store::bans::table_exists(pool, &mut tx).await?;
    let views = batch::load(&mut tx, &posts, bans).await?;
    let (mut ids, mut keys) = (HashSet::new(), HashSet::new());
    let mut writes: Vec<Write<'_>> = posts
        .into_iter()
        .zip(views)
        .zip(&envelopes)
        .map(|((post, view), env)| {
            let env = env.as_ref().ok();
            let stage = admit(&post, &view, env, &mut ids, &mut keys);
            Write { post, env, view, stage }
        })
        .collect();
    if writes.iter().all(|w| w.storing().is_none()) {
        tx.commit().await.map_err(BatchError::Commit)?;
        return Ok(writes.into_iter().map(|w| w.outcome(&mut HashMap::new())).collect());
    }
    // Identity and compare-and-swap under the artifact row locks: updates first (existing rows,
    // in key order), then creates (claimed in key order) with the resubmission check of the
    // updates, which must see what committed while the locks were awaited.
    let locked = sql::lock(&mut tx, &writes).await?;
    let (claimed, resubmitted) = sql::claim(&mut tx, &writes).await?;
    for w in &mut writes {
        let (Some(env), Some(key)) = (w.storing(), w.key()) else { continue };
        let next = if env.op == Op::Create {
            (!claimed.contains(&key)).then_some(Stage::Alone)
        } else {
            let accepted = resubmitted.contains(&(w.post.community, w.post.event.id.as_str()));
            decide_update(env, locked.get(&key), accepted, w.view.anchor)
        };
        if let Some(stage) = next {
            w.stage = stage;
        }
    }
    drop(resubmitted);
    let events: Vec<NewEvent<'_>> = writes
        .iter()
        .filter_map(|w| match &w.stage {
            Stage::Store { channel, .. } => Some(NewEvent {
                community: w.post.community,
                event: w.post.event,
                channel,
                thread_root: None,
            }),
            _ => None,
        })
        .collect();
    if events.is_empty() {
        tx.commit().await.map_err(BatchError::Commit)?;
        return Ok(writes.into_iter().map(|w| w.outcome(&mut HashMap::new())).collect());
    }
    let seqs = batch::insert_events(&mut tx, &events).await?;
    drop(events);
    for w in &mut writes {
        let Stage::Store { seq, .. } = &mut w.stage else { continue };
        *seq = seqs.get(&(w.post.community, w.post.event.id.clone())).copied();
        if seq.is_none() {
            // Not a known revision (checked under the lock), yet its event is stored: the store
            // is inconsistent; the whole batch rolls back and each revision is written alone.
            return Err(BatchError::Statement(sqlx::Error::Protocol(format!(
                "revision {} is stored but was never accepted",
                w.post.event.id
            ))));
        }
    }
    let mut replaced = sql::advance(&mut tx, &writes, &locked).await?;
    for w in &writes {
        let (Stage::Store { channel, seq: Some(seq) }, Some(key)) = (&w.stage, w.key()) else { continue };
        let mentioned = crate::read_model::mentioned(w.post.event);
        let added: Vec<Pubkey> = match locked.get(&key) {
            Some(row) => mentioned.into_iter().filter(|k| !row.mentioned.contains(k)).collect(),
            None => mentioned,
        };
        crate::read_model::record_mentions(&mut tx, w.post.community, channel.id, w.post.event, *seq, &added)
            .await?;
    }
    tx.commit().await.map_err(BatchError::Commit)?;
    Ok(writes.into_iter().map(|w| w.outcome(&mut replaced)).collect())
}

//! Group commit of NIP-AR revisions: the [`Batch`] steps of the engine's one transaction, in the
//! order the family's module documents, for creates and updates. A refused revision is answered
//! on its own and its batch-mates go on; what the batch does not decide itself is handed back
//! ([`Outcome::Alone`]) and written alone after the commit.

use std::collections::{BTreeSet, HashMap, HashSet};

use buzz_core::nipar::{Envelope, Op};
use buzz_core::{CommunityId, Event, Pubkey};
use buzz_store::access::Channel;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::engine::{Batch, Outcome, Write};
use crate::revision::sql::{self, Artifact, Pending, StoredRevision};
use crate::revision::Revisions;
use crate::rules::admission;
use crate::rules::post::Named;
use crate::rules::revision::{self, ArtifactView, Identity};
use crate::rules::Refusal;
use crate::store::{self, NewEvent, View};

impl Batch for Revisions {
    const NAME: &'static str = "revisions";
    /// The envelope (`buzz_core::nipar::parse`), or why it is malformed.
    type Parsed = Result<Envelope, Refusal>;

    fn parse(event: &Event) -> (Named, Self::Parsed) {
        let env = revision::envelope(event);
        let named = Named {
            channel: env.as_ref().map(|e| e.h).map_err(Clone::clone),
            root: Ok(env.as_ref().ok().and_then(|e| e.root.clone())),
        };
        (named, env)
    }

    async fn write<'a>(
        tx: &'a mut PgConnection,
        writes: Vec<Write<'a, Self::Parsed>>,
    ) -> Result<Vec<Outcome>, sqlx::Error> {
        let (mut ids, mut keys) = (HashSet::new(), HashSet::new());
        let mut revisions: Vec<Rev<'a>> = writes.into_iter().map(|w| admit(w, &mut ids, &mut keys)).collect();
        if revisions.iter().all(|r| r.storing().is_none()) {
            return Ok(revisions.into_iter().map(|r| r.outcome(&mut HashMap::new())).collect());
        }
        let locked = lock_and_decide(tx, &mut revisions).await?;
        if !store_events(tx, &mut revisions).await? {
            return Ok(revisions.into_iter().map(|r| r.outcome(&mut HashMap::new())).collect());
        }
        let mut replaced = advance(tx, &revisions, &locked).await?;
        Ok(revisions.into_iter().map(|r| r.outcome(&mut replaced)).collect())
    }
}

/// One revision of a batch: the write, its envelope, what the batch read about it, and where it
/// stands.
struct Rev<'a> {
    community: CommunityId,
    event: &'a Event,
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
    /// to the one-revision path. `seq` once its event is stored.
    Store {
        channel: Channel,
        seq: Option<i64>,
    },
}

impl<'a> Rev<'a> {
    fn key(&self) -> Option<(CommunityId, Uuid)> {
        Some((self.community, self.env?.d))
    }

    /// The envelope of a revision still to store.
    fn storing(&self) -> Option<&'a Envelope> {
        matches!(self.stage, Stage::Store { .. }).then_some(self.env).flatten()
    }

    fn outcome(self, replaced: &mut HashMap<(CommunityId, Uuid), Vec<[String; 2]>>) -> Outcome {
        let key = self.key();
        match self.stage {
            Stage::Refused(r) => Outcome::Refused(r),
            Stage::Duplicate => Outcome::Duplicate,
            Stage::Store { channel, seq: Some(seq) } => {
                let replaced = key.and_then(|k| replaced.remove(&k)).unwrap_or_default();
                Outcome::Stored { channel, seq, view: self.view, replaced }
            }
            Stage::Alone | Stage::Store { seq: None, .. } => Outcome::Alone,
        }
    }
}

/// Steps 1 and 2 from the batch's view (admission, made by the engine, and the kind-9 write
/// check in h); then what the batch leaves to the one-revision path: moves, deletes and restores;
/// the same event, or a second revision of one artifact, again in the batch; a create whose root
/// is not an anchor (the claim's answer comes first there).
fn admit<'a>(
    w: Write<'a, Result<Envelope, Refusal>>,
    ids: &mut HashSet<(CommunityId, &'a str)>,
    keys: &mut HashSet<(CommunityId, Uuid)>,
) -> Rev<'a> {
    let Write { community, actor, event, named, parsed, view, admitted } = w;
    let env = parsed.as_ref().ok();
    let anchor = view.anchor;
    let rev = |stage| Rev { community, event, env, view, stage };
    let at = match admitted {
        Err(r) => return rev(Stage::Refused(r)),
        Ok(None) => return rev(Stage::Duplicate),
        Ok(Some(at)) => at,
    };
    // A copy of a revision already in this batch is answered after the commit, as the one-revision
    // path answers it then: a duplicate of what the batch stored comes before the write rule.
    if ids.contains(&(community, event.id.as_str())) {
        return rev(Stage::Alone);
    }
    // A malformed envelope names no channel: refused here.
    let channel = match admission::writable(named.channel.as_ref().copied(), at, actor) {
        Err(r) => return rev(Stage::Refused(r)),
        Ok(channel) => channel,
    };
    let Some(env) = env else { return rev(Stage::Alone) };
    // Every revision counts as its event's and its artifact's first in the batch, a move, delete or
    // restore too: what follows it on the same artifact or event is then written alone after it.
    let first_event = ids.insert((community, event.id.as_str()));
    let first_of_artifact = keys.insert((community, env.d));
    let alone = !matches!(env.op, Op::Create | Op::Update)
        || !first_event
        || !first_of_artifact
        || (env.op == Op::Create && revision::root(env, None, anchor).is_err());
    rev(if alone { Stage::Alone } else { Stage::Store { channel, seq: None } })
}

/// Step 3 under the artifact row locks: updates first (existing rows, in key order), then creates
/// (claimed in key order) with the resubmission check of the updates, which must see what
/// committed while the locks were awaited; then identity, compare-and-swap and step 4 of each
/// update. Returns the locked rows.
async fn lock_and_decide<'a>(
    tx: &mut PgConnection,
    revisions: &mut [Rev<'a>],
) -> Result<HashMap<(CommunityId, Uuid), Artifact>, sqlx::Error> {
    let updates: BTreeSet<(CommunityId, Uuid)> = revisions
        .iter()
        .filter(|r| r.storing().is_some_and(|env| env.op == Op::Update))
        .filter_map(Rev::key)
        .collect();
    let locked = sql::lock(tx, updates).await?;
    let pending: Vec<Pending<'a>> = revisions
        .iter()
        .filter_map(|r| Some(Pending { community: r.community, env: r.storing()?, event: r.event }))
        .collect();
    let (claimed, resubmitted) = sql::claim(tx, &pending).await?;
    drop(pending);
    for r in revisions.iter_mut() {
        let (Some(env), Some(key)) = (r.storing(), r.key()) else { continue };
        let next = if env.op == Op::Create {
            (!claimed.contains(&key)).then_some(Stage::Alone)
        } else {
            let accepted = resubmitted.contains(&(r.community, r.event.id.as_str()));
            decide_update(env, locked.get(&key), accepted, r.view.anchor)
        };
        if let Some(stage) = next {
            r.stage = stage;
        }
    }
    Ok(locked)
}

/// Identity and compare-and-swap of an update under its row lock (`rules::revision`): `None`
/// when it is to be stored. An artifact living in another channel than h goes to the
/// one-revision path, which checks the home's write rule first.
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

/// Step 5, first part: stores the events of the revisions still to store, with their tag rows.
/// False when there were none.
async fn store_events(tx: &mut PgConnection, revisions: &mut [Rev<'_>]) -> Result<bool, sqlx::Error> {
    let events: Vec<NewEvent<'_>> = revisions
        .iter()
        .filter_map(|r| match &r.stage {
            Stage::Store { channel, .. } => {
                Some(NewEvent { community: r.community, event: r.event, channel, thread_root: None })
            }
            _ => None,
        })
        .collect();
    if events.is_empty() {
        return Ok(false);
    }
    let seqs = store::insert_events(tx, &events).await?;
    drop(events);
    for r in revisions.iter_mut() {
        let Stage::Store { seq, .. } = &mut r.stage else { continue };
        *seq = seqs.get(&(r.community, r.event.id.clone())).copied();
        if seq.is_none() {
            // Not a known revision (checked under the lock), yet its event is stored: the store
            // is inconsistent; the whole batch rolls back and each revision is written alone.
            return Err(sqlx::Error::Protocol(format!(
                "revision {} is stored but was never accepted",
                r.event.id
            )));
        }
    }
    Ok(true)
}

/// Step 5, the rest: the artifacts advanced, their current-tag rows replaced and the revisions
/// recorded in one statement, then the mentions each revision adds. Returns the current-tag rows
/// each updated artifact had before.
async fn advance(
    tx: &mut PgConnection,
    revisions: &[Rev<'_>],
    locked: &HashMap<(CommunityId, Uuid), Artifact>,
) -> Result<HashMap<(CommunityId, Uuid), Vec<[String; 2]>>, sqlx::Error> {
    let (mut rows, mut channels) = (Vec::new(), Vec::new());
    for r in revisions {
        let (Stage::Store { channel, seq: Some(seq) }, Some(env)) = (&r.stage, r.env) else { continue };
        let ttl = channel.ttl_seconds;
        rows.push(StoredRevision { community: r.community, env, event: r.event, seq: *seq, ttl });
        channels.push(channel.id);
    }
    let replaced = sql::advance(tx, &rows, locked).await?;
    for (r, channel) in rows.iter().zip(channels) {
        let mentioned = store::mentioned(r.event);
        let added: Vec<Pubkey> = match locked.get(&(r.community, r.env.d)) {
            Some(row) => mentioned.into_iter().filter(|k| !row.mentioned.contains(k)).collect(),
            None => mentioned,
        };
        store::record_mentions(tx, r.community, channel, r.event, r.seq, &added).await?;
    }
    Ok(replaced)
}

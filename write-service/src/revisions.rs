//! Group commit of NIP-AR revisions (kind 45010): concurrent creates and updates share one
//! transaction, a fixed number of statements whatever their number, and one durable commit.
//!
//! - Every revision is still acknowledged only after the commit that stored it.
//! - The decision of each revision is the single-revision path's (`events::write_event`, then
//!   `artifacts::write_revision`), in the same order: author, community active, duplicate,
//!   membership, envelope, the kind-9 write check in `h`, then identity and compare-and-swap under
//!   the artifact row lock (claimed for a create, `FOR UPDATE` for an update), the resubmission
//!   check after the lock, the transition and root rules. A refused revision is answered on its
//!   own and its batch-mates go on.
//! - What the batch does not decide itself is written alone, in its own transaction, after the
//!   batch commits, by the single-revision path: moves, deletes and restores; an update naming
//!   another channel than the artifact's home (the home's write check comes first there); a create
//!   that lost its claim (a taken identity or a concurrent resubmission); a create whose root is not
//!   an anchor (the claim's answer comes first there); a second revision of one artifact, or the same
//!   event twice, in one batch. Those wait for the batch's commit, so they see it.
//! - When a statement of the batch fails (a lock or statement timeout, a deadlock, a constraint),
//!   the batch is rolled back and each revision is written alone, so a failing revision never takes
//!   its batch-mates down. A failed commit is answered `error:` for all (outcome unknown;
//!   resubmitting is safe, an accepted revision is `OK true` `duplicate:`).
//!
//! Statements per batch: the admission and channel view of every revision (`batch::load`, channel
//! rows share-locked in id order); the updated artifacts locked in key order; the creates claimed in
//! key order with the resubmission check of the updates; the events with their tag rows; the
//! artifacts advanced, their current-tag rows replaced and the revisions recorded in one statement;
//! mentions only for revisions that add some.

use std::collections::{BTreeSet, HashMap, HashSet};

use buzz_bus::{Actor, Audience, BusError, WriteOk};
use buzz_core::nipar::{self, Envelope, Op};
use buzz_core::Event;
use buzz_core::Pubkey;
use buzz_store::access::Channel;
use futures::future::BoxFuture;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::artifacts::{self, Artifact};
use crate::batch::{self, BatchError, NewEvent, Pools, Post, View};
use crate::error::{WriteError, WriteResult};
use crate::shared::{live_event, Accepted, Relay};

/// [`batch::WriteBatch`] of NIP-AR revisions.
pub fn write<'a>(
    pools: &'a Pools,
    relay: &'a buzz_core::Keys,
    writes: Vec<(Uuid, Actor, Event)>,
) -> BoxFuture<'a, Vec<WriteResult<Accepted>>> {
    Box::pin(write_revisions(pools, relay, writes))
}

/// Writes `writes` (community, writer, kind-45010 event) as one group commit and returns each one's
/// outcome, in order: what the single-revision path would have answered for it.
pub async fn write_revisions(
    pools: &Pools,
    relay: &buzz_core::Keys,
    writes: Vec<(Uuid, Actor, Event)>,
) -> Vec<WriteResult<Accepted>> {
    let envelopes: Vec<Result<Envelope, BusError>> =
        writes.iter().map(|(_, _, e)| nipar::parse(e).map_err(BusError::invalid)).collect();
    let posts: Vec<Post<'_>> = writes
        .iter()
        .zip(&envelopes)
        .map(|((community, actor, event), env)| Post {
            community: *community,
            actor,
            event,
            channel: env.as_ref().map(|e| e.h).map_err(Clone::clone),
            root: Ok(env.as_ref().ok().and_then(|e| e.root.clone())),
        })
        .collect();
    let result = write_batch(&pools.batch, &posts, &envelopes).await;
    drop(posts);
    let relay = Relay { keys: relay };
    let decisions = match result {
        Ok(decisions) => decisions,
        Err(BatchError::Commit(e)) => {
            tracing::error!(error = %e, revisions = writes.len(), "revision batch commit failed");
            return writes
                .iter()
                .map(|_| Err(WriteError::Commit(sqlx::Error::Protocol(e.to_string()))))
                .collect();
        }
        Err(BatchError::Statement(e)) => {
            tracing::warn!(error = %e, revisions = writes.len(), "revision batch rolled back; writing its revisions one by one");
            metrics::counter!("buzz_write_batch_fallbacks_total").increment(1);
            writes.iter().map(|_| Decision::Alone).collect()
        }
    };
    let mut outcomes = Vec::with_capacity(writes.len());
    for ((community, actor, event), decision) in writes.into_iter().zip(decisions) {
        outcomes.push(match decision {
            Decision::Done(outcome) => outcome.map(|o| o.into_accepted(community, event)),
            Decision::Alone => {
                crate::events::write_event(&pools.single, community, &actor, event, &relay).await
            }
        });
    }
    outcomes
}

/// What became of one revision of the batch.
enum Decision {
    /// Decided by the batch (stored, a duplicate, or refused).
    Done(WriteResult<Outcome>),
    /// Written alone by the single-revision path once the batch has committed.
    Alone,
}

/// What an accepted revision leaves to do once committed.
enum Outcome {
    Duplicate,
    Stored(Box<Stored>),
}

struct Stored {
    seq: i64,
    channel: Channel,
    banned: Vec<Pubkey>,
    access_version: i64,
    /// The current-tag rows it replaced, as `[name, hex(sha256(first value))]`.
    replaced: Vec<[String; 2]>,
}

impl Outcome {
    fn into_accepted(self, community: Uuid, event: Event) -> Accepted {
        let Self::Stored(stored) = self else { return Accepted::duplicate() };
        let Stored { seq, channel, banned, access_version, replaced } = *stored;
        let mut live = live_event(community, &channel, event);
        live.access_version = access_version;
        if live.audience == Audience::Community {
            live.banned = banned;
        }
        live.replaced_tags = replaced;
        Accepted {
            ok: WriteOk::applied(),
            live: Some(live),
            also: Vec::new(),
            access_changed: None,
            seq: Some(seq),
            bans_resolved: true,
        }
    }
}

/// A revision the batch goes on with after admission: where it is written.
struct Pending<'a> {
    env: &'a Envelope,
    channel: Channel,
}

async fn write_batch(
    pool: &PgPool,
    posts: &[Post<'_>],
    envelopes: &[Result<Envelope, BusError>],
) -> Result<Vec<Decision>, BatchError> {
    let mut tx = pool.begin().await?;
    let views = batch::load(&mut tx, posts).await?;
    let mut decisions: Vec<Decision> = Vec::with_capacity(posts.len());
    let mut pending: Vec<Option<Pending<'_>>> = Vec::with_capacity(posts.len());
    let (mut ids, mut keys) = (HashSet::new(), HashSet::new());
    for ((post, view), env) in posts.iter().zip(&views).zip(envelopes) {
        let (decision, next) = match batch::admit(post, view) {
            Err(e) => (Decision::Done(Err(e)), None),
            Ok(None) => (Decision::Done(Ok(Outcome::Duplicate)), None),
            Ok(Some(channel)) => match env {
                // `admit` answers a bad envelope (the post's channel) before this.
                Err(e) => (Decision::Done(Err(e.clone().into())), None),
                Ok(env) if !matches!(env.op, Op::Create | Op::Update) => (Decision::Alone, None),
                Ok(env) if !ids.insert((post.community, post.event.id.as_str())) => (Decision::Alone, None),
                Ok(env) if !keys.insert((post.community, env.d)) => (Decision::Alone, None),
                Ok(env) if env.op == Op::Create && env.root.is_some() && !view.anchor => {
                    (Decision::Alone, None)
                }
                // Decided below; written alone should anything leave it undecided.
                Ok(env) => (Decision::Alone, Some(Pending { env, channel })),
            },
        };
        decisions.push(decision);
        pending.push(next);
    }
    if pending.iter().all(Option::is_none) {
        tx.commit().await.map_err(BatchError::Commit)?;
        return Ok(decisions);
    }
    // Identity and compare-and-swap under the artifact row locks: updates first (existing rows,
    // in key order), then creates (claimed in key order) with the resubmission check of the
    // updates, which must see what committed while the locks were awaited.
    let locked = lock(&mut tx, posts, &pending).await?;
    let (claimed, resubmitted) = claim(&mut tx, posts, &pending).await?;
    let mut store = Vec::new();
    for (i, slot) in pending.iter_mut().enumerate() {
        let Some(p) = slot else { continue };
        let (post, view) = (&posts[i], &views[i]);
        let key = (post.community, p.env.d);
        let decision = if p.env.op == Op::Create {
            if claimed.contains(&key) {
                None
            } else {
                Some(Decision::Alone)
            }
        } else {
            match locked.get(&key) {
                None => {
                    Some(Decision::Done(Err(artifacts::conflict(artifacts::STALE_PREV, "unknown_artifact"))))
                }
                Some(_) if resubmitted.contains(&(post.community, post.event.id.as_str())) => {
                    Some(Decision::Done(Ok(Outcome::Duplicate)))
                }
                // The home's write check comes first: the single path has it.
                Some(row) if row.home_channel != p.env.h => Some(Decision::Alone),
                Some(row) => check_update(p.env, row, view).err().map(|e| Decision::Done(Err(e))),
            }
        };
        match decision {
            Some(d) => {
                decisions[i] = d;
                *slot = None;
            }
            None => store.push(i),
        }
    }
    if !store.is_empty() {
        let events: Vec<NewEvent<'_>> = store
            .iter()
            .filter_map(|&i| {
                let p = pending[i].as_ref()?;
                Some(NewEvent {
                    community: posts[i].community,
                    event: posts[i].event,
                    channel: &p.channel,
                    thread_root: None,
                })
            })
            .collect();
        let seqs = batch::insert_events(&mut tx, &events).await?;
        drop(events);
        let mut stored = Vec::with_capacity(store.len());
        for &i in &store {
            let Some(&seq) = seqs.get(&(posts[i].community, posts[i].event.id.clone())) else {
                // Not a known revision (checked under the lock), yet its event is stored: the store
                // is inconsistent; the whole batch rolls back and each revision is written alone.
                return Err(BatchError::Statement(sqlx::Error::Protocol(format!(
                    "revision {} is stored but was never accepted",
                    posts[i].event.id
                ))));
            };
            stored.push((i, seq));
        }
        let mut replaced = advance(&mut tx, posts, &pending, &stored, &locked).await?;
        for &(i, seq) in &stored {
            let (post, view) = (&posts[i], &views[i]);
            let Some(p) = pending[i].take() else { continue };
            let added: Vec<Pubkey> = match locked.get(&(post.community, p.env.d)) {
                Some(row) => crate::read_model::mentioned(post.event)
                    .into_iter()
                    .filter(|k| !row.mentioned.contains(k))
                    .collect(),
                None => crate::read_model::mentioned(post.event),
            };
            crate::read_model::record_mentions(
                &mut tx,
                post.community,
                p.channel.id,
                post.event,
                seq,
                &added,
            )
            .await?;
            decisions[i] = Decision::Done(Ok(Outcome::Stored(Box::new(Stored {
                seq,
                channel: p.channel,
                banned: view.banned.clone(),
                access_version: view.access_version.unwrap_or_default(),
                replaced: replaced.remove(&(post.community, p.env.d)).unwrap_or_default(),
            }))));
        }
    }
    tx.commit().await.map_err(BatchError::Commit)?;
    Ok(decisions)
}

/// The rules an update must pass against its locked artifact once the sender may write in its home
/// (`artifacts::write_revision`, in its order): `prev` names the current revision, the transition
/// rules, and a created or changed root is an anchor in h.
fn check_update(env: &Envelope, row: &Artifact, view: &View) -> WriteResult<()> {
    if env.prev.as_deref() != Some(row.current_revision.as_str()) {
        return Err(artifacts::conflict(artifacts::STALE_PREV, "stale_prev"));
    }
    artifacts::check_transition(env, row)?;
    if let Some(root) = &env.root {
        if row.root.as_deref() != Some(root.as_str()) && !view.anchor {
            return Err(WriteError::invalid(artifacts::ROOT_NOT_ANCHOR));
        }
    }
    Ok(())
}

/// A locked artifact row, keyed by (community, d).
#[derive(sqlx::FromRow)]
struct LockedRow {
    community_id: Uuid,
    d: Uuid,
    #[sqlx(flatten)]
    artifact: Artifact,
}

/// Locks the artifacts the pending updates name, in key order, for the rest of the transaction.
async fn lock(
    tx: &mut PgConnection,
    posts: &[Post<'_>],
    pending: &[Option<Pending<'_>>],
) -> Result<HashMap<(Uuid, Uuid), Artifact>, sqlx::Error> {
    let keys: BTreeSet<(Uuid, Uuid)> = pending
        .iter()
        .zip(posts)
        .filter_map(|(p, post)| {
            p.as_ref().filter(|p| p.env.op == Op::Update).map(|p| (post.community, p.env.d))
        })
        .collect();
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let (community, d): (Vec<Uuid>, Vec<Uuid>) = keys.into_iter().unzip();
    let rows: Vec<LockedRow> = sqlx::query_as(
        "SELECT a.community_id, a.d, a.type, a.current_revision, a.home_channel, a.root, a.deleted, a.mentioned \
         FROM artifacts a \
         WHERE (a.community_id, a.d) IN (SELECT * FROM UNNEST($1::uuid[], $2::uuid[])) \
         ORDER BY a.community_id, a.d \
         FOR UPDATE OF a",
    )
    .bind(&community)
    .bind(&d)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(|r| ((r.community_id, r.d), r.artifact)).collect())
}

/// Claims the identities of the pending creates (in key order) and, in the same statement, finds
/// which pending updates were accepted meanwhile (a concurrent resubmission). Returns the claimed
/// (community, d) and the resubmitted (community, revision id).
async fn claim<'p>(
    tx: &mut PgConnection,
    posts: &'p [Post<'_>],
    pending: &[Option<Pending<'_>>],
) -> Result<(HashSet<(Uuid, Uuid)>, HashSet<(Uuid, &'p str)>), sqlx::Error> {
    let mut creates: Vec<(Uuid, Uuid, usize)> = Vec::new();
    let (mut upd_community, mut upd_id) = (Vec::new(), Vec::new());
    for (i, (p, post)) in pending.iter().zip(posts).enumerate() {
        let Some(p) = p else { continue };
        if p.env.op == Op::Create {
            creates.push((post.community, p.env.d, i));
        } else {
            upd_community.push(post.community);
            upd_id.push(post.event.id.as_str());
        }
    }
    if creates.is_empty() && upd_id.is_empty() {
        return Ok((HashSet::new(), HashSet::new()));
    }
    creates.sort_unstable();
    let n = creates.len();
    let (mut community, mut d, mut type_name, mut revision, mut home, mut root, mut mentioned) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for &(c, key, i) in &creates {
        let Some(p) = &pending[i] else { continue };
        community.push(c);
        d.push(key);
        type_name.push(p.env.type_name.as_str());
        revision.push(posts[i].event.id.as_str());
        home.push(p.env.h);
        root.push(p.env.root.as_deref());
        mentioned.push(artifacts::p_keys(posts[i].event).join(","));
    }
    let rows: Vec<(Uuid, Uuid, Option<String>)> = sqlx::query_as(
        "WITH c AS ( \
             INSERT INTO artifacts (community_id, d, type, current_revision, home_channel, root, mentioned) \
             SELECT u.c, u.d, u.t, u.rev, u.h, u.root, \
                    CASE WHEN u.m = '' THEN ARRAY[]::text[] ELSE string_to_array(u.m, ',') END \
             FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[], $7::text[]) \
                  WITH ORDINALITY AS u(c, d, t, rev, h, root, m, ord) \
             ORDER BY u.ord \
             ON CONFLICT (community_id, d) DO NOTHING \
             RETURNING community_id, d) \
         SELECT community_id, d, NULL::text FROM c \
         UNION ALL \
         SELECT r.community_id, r.d, r.revision_id FROM artifact_revisions r \
         WHERE (r.community_id, r.revision_id) IN (SELECT * FROM UNNEST($8::uuid[], $9::text[]))",
    )
    .bind(&community)
    .bind(&d)
    .bind(&type_name)
    .bind(&revision)
    .bind(&home)
    .bind(&root)
    .bind(&mentioned)
    .bind(&upd_community)
    .bind(&upd_id)
    .fetch_all(&mut *tx)
    .await?;
    let mut claimed = HashSet::new();
    let mut resubmitted = HashSet::new();
    for (c, key, revision) in rows {
        match revision {
            None => {
                claimed.insert((c, key));
            }
            Some(id) => {
                if let Some(&known) = upd_id.iter().find(|&&u| u == id) {
                    resubmitted.insert((c, known));
                }
            }
        }
    }
    Ok((claimed, resubmitted))
}

/// Makes each stored revision current: the updated artifacts advanced, every stored revision's
/// artifact's current-tag rows replaced by its tags (with its home, change time, expiry, id and type),
/// and every revision recorded forever, in one statement. Returns the current-tag rows each updated
/// artifact had before, with its derived rows, as `[name, hex(hash)]` sorted ([`replaced_tags`]).
async fn advance(
    tx: &mut PgConnection,
    posts: &[Post<'_>],
    pending: &[Option<Pending<'_>>],
    stored: &[(usize, i64)],
    locked: &HashMap<(Uuid, Uuid), Artifact>,
) -> Result<HashMap<(Uuid, Uuid), Vec<[String; 2]>>, sqlx::Error> {
    let n = stored.len();
    let mut a = Columns::with_capacity(n);
    let (mut t_community, mut t_d, mut t_name, mut t_hash) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &(i, seq) in stored {
        let (Some(p), post) = (&pending[i], &posts[i]) else { continue };
        let env = p.env;
        a.community.push(post.community);
        a.d.push(env.d);
        a.revision.push(post.event.id.as_str());
        a.created.push(env.op == Op::Create);
        a.home.push(env.h);
        a.root.push(env.root.as_deref());
        a.prev.push(env.prev.as_deref());
        a.op.push(env.op.as_str());
        a.type_name.push(env.type_name.as_str());
        a.seq.push(seq);
        a.ttl.push(p.channel.ttl_seconds);
        a.mentioned.push(if locked.contains_key(&(post.community, env.d)) {
            artifacts::p_keys(post.event).join(",")
        } else {
            String::new()
        });
        for (name, hash) in artifacts::current_tag_rows(post.event) {
            t_community.push(post.community);
            t_d.push(env.d);
            t_name.push(name);
            t_hash.push(hash);
        }
    }
    // The replaced revision's `prev` and `op` (its record, by key) are read per updated artifact: `LIMIT 1`
    // keeps the lookup a lateral probe; as a join, the planner chose a scan of every revision
    // against the batch (1 133 against 1 700 revisions/s at 20 000 artifacts).
    // `gone` keeps a row unless the batch's tag rows `t` have it: `NOT IN` over `t` (never NULL)
    // is one hashed subplan. (`NOT EXISTS` was planned as a nested loop over the CTE, quadratic in
    // the batch: 15 ms of a 26 ms statement at 41 revisions, docs/benchmarks.md.)
    let rows: Vec<(Uuid, Uuid, String, Vec<u8>)> = sqlx::query_as(
        "WITH u AS MATERIALIZED ( \
             SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::bool[], $5::uuid[], $6::text[], \
                                  $7::text[], $8::text[], $9::int8[], $10::int4[], $11::text[], $16::text[]) \
                 AS u(c, d, rev, created, h, root, prev, op, seq, ttl, m, ty)), \
         t AS MATERIALIZED ( \
             SELECT * FROM UNNEST($12::uuid[], $13::uuid[], $14::text[], $15::bytea[]) AS t(c, d, n, h)), \
         before AS ( \
             SELECT x.community_id, x.d, x.name, x.value_hash FROM artifact_current_tags x \
             JOIN u ON x.community_id = u.c AND x.d = u.d WHERE NOT u.created), \
         adv AS ( \
             UPDATE artifacts a SET current_revision = u.rev, home_channel = u.h, root = u.root, deleted = false, \
                    mentioned = CASE WHEN u.m = '' THEN ARRAY[]::text[] ELSE string_to_array(u.m, ',') END, \
                    updated_at = now() \
             FROM u WHERE a.community_id = u.c AND a.d = u.d AND NOT u.created), \
         gone AS ( \
             DELETE FROM artifact_current_tags x USING u \
             WHERE x.community_id = u.c AND x.d = u.d AND NOT u.created \
               AND (x.community_id, x.d, x.name, x.value_hash) NOT IN (SELECT t.c, t.d, t.n, t.h FROM t)), \
         up AS ( \
             INSERT INTO artifact_current_tags \
                 (community_id, d, name, value_hash, home_channel, updated_at, expires_at, revision, type) \
             SELECT t.c, t.d, t.n, t.h, u.h, now(), \
                    CASE WHEN u.ttl IS NULL THEN NULL ELSE now() + make_interval(secs => u.ttl) END, u.rev, u.ty \
             FROM t JOIN u ON u.c = t.c AND u.d = t.d \
             ORDER BY t.c, t.d, t.n, t.h \
             ON CONFLICT (community_id, d, name, value_hash) DO UPDATE \
             SET home_channel = EXCLUDED.home_channel, updated_at = EXCLUDED.updated_at, \
                 expires_at = EXCLUDED.expires_at, revision = EXCLUDED.revision), \
         rec AS ( \
             INSERT INTO artifact_revisions (community_id, revision_id, d, prev, op, channel_id, accepted_seq) \
             SELECT u.c, u.rev, u.d, u.prev, u.op, u.h, u.seq FROM u) \
         SELECT community_id, d, name, value_hash FROM before \
         UNION ALL \
         SELECT u.c, u.d, x.name, sha256(convert_to(x.value, 'UTF8')) FROM u \
         CROSS JOIN LATERAL (SELECT r.prev, r.op FROM artifact_revisions r \
                             WHERE r.community_id = u.c AND r.revision_id = u.prev LIMIT 1) r \
         CROSS JOIN LATERAL (VALUES ('prev', r.prev), ('op', r.op)) AS x(name, value) \
         WHERE NOT u.created AND x.value IS NOT NULL",
    )
    .bind(&a.community)
    .bind(&a.d)
    .bind(&a.revision)
    .bind(&a.created)
    .bind(&a.home)
    .bind(&a.root)
    .bind(&a.prev)
    .bind(&a.op)
    .bind(&a.seq)
    .bind(&a.ttl)
    .bind(&a.mentioned)
    .bind(&t_community)
    .bind(&t_d)
    .bind(&t_name)
    .bind(&t_hash)
    .bind(&a.type_name)
    .fetch_all(&mut *tx)
    .await?;
    Ok(replaced_tags(rows, locked))
}

/// The replaced current-tag rows of [`advance`] (and the `op` and `prev` rows of the revision they
/// belonged to) as each updated artifact's `replaced_tags` ([`artifacts::replaced_tags`]), with
/// its (immutable) type from its locked row: only updated artifacts had rows before.
fn replaced_tags(
    rows: Vec<(Uuid, Uuid, String, Vec<u8>)>,
    locked: &HashMap<(Uuid, Uuid), Artifact>,
) -> HashMap<(Uuid, Uuid), Vec<[String; 2]>> {
    type Rows = Vec<(String, Vec<u8>)>;
    let mut by_artifact: HashMap<(Uuid, Uuid), Rows> = HashMap::new();
    for (c, d, name, hash) in rows {
        by_artifact.entry((c, d)).or_default().push((name, hash));
    }
    by_artifact
        .into_iter()
        .filter_map(|(key, rows)| {
            let row = locked.get(&key)?;
            let replaced = artifacts::replaced_tags(key.1, &row.type_name, rows);
            (!replaced.is_empty()).then_some((key, replaced))
        })
        .collect()
}

/// The per-revision columns of [`advance`].
struct Columns<'a> {
    community: Vec<Uuid>,
    d: Vec<Uuid>,
    revision: Vec<&'a str>,
    created: Vec<bool>,
    home: Vec<Uuid>,
    root: Vec<Option<&'a str>>,
    prev: Vec<Option<&'a str>>,
    op: Vec<&'static str>,
    type_name: Vec<&'a str>,
    seq: Vec<i64>,
    ttl: Vec<Option<i32>>,
    mentioned: Vec<String>,
}

impl Columns<'_> {
    fn with_capacity(n: usize) -> Self {
        Self {
            community: Vec::with_capacity(n),
            d: Vec::with_capacity(n),
            revision: Vec::with_capacity(n),
            created: Vec::with_capacity(n),
            home: Vec::with_capacity(n),
            root: Vec::with_capacity(n),
            prev: Vec::with_capacity(n),
            op: Vec::with_capacity(n),
            type_name: Vec::with_capacity(n),
            seq: Vec::with_capacity(n),
            ttl: Vec::with_capacity(n),
            mentioned: Vec::with_capacity(n),
        }
    }
}

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

use std::collections::{BTreeSet, HashMap, HashSet};

use buzz_bus::Actor;
use buzz_core::nipar::{self, Envelope, Op};
use buzz_core::Event;
use buzz_store::access::Channel;
use futures::future::BoxFuture;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::artifacts::{self, Artifact};
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
    fn key(&self) -> Option<(Uuid, Uuid)> {
        Some((self.post.community, self.env?.d))
    }

    /// The envelope of a revision still to store.
    fn storing(&self) -> Option<&Envelope> {
        matches!(self.stage, Stage::Store { .. }).then_some(self.env).flatten()
    }

    fn outcome(self, replaced: &mut HashMap<(Uuid, Uuid), Vec<[String; 2]>>) -> Outcome {
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
    ids: &mut HashSet<(Uuid, &'a str)>,
    keys: &mut HashSet<(Uuid, Uuid)>,
) -> Stage {
    let at = match batch::admit(post, view) {
        Err(r) => return Stage::Refused(r),
        Ok(None) => return Stage::Duplicate,
        Ok(Some(at)) => at,
    };
    // A malformed envelope names no channel: refused here.
    let channel = match admission::writable(post.named.channel.as_ref().copied(), at, post.actor) {
        Err(r) => return Stage::Refused(r),
        Ok(channel) => channel,
    };
    let Some(env) = env else { return Stage::Alone };
    let alone = !matches!(env.op, Op::Create | Op::Update)
        || !ids.insert((post.community, post.event.id.as_str()))
        || !keys.insert((post.community, env.d))
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

async fn write_batch(pool: &PgPool, batch: &[(Uuid, Actor, Event)]) -> Result<Vec<Outcome>, BatchError> {
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
                root: Ok(env.as_ref().ok().and_then(|e| e.root.as_deref())),
            },
        })
        .collect();
    let mut tx = pool.begin().await?;
    let views = batch::load(&mut tx, &posts).await?;
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
    let locked = lock(&mut tx, &writes).await?;
    let (claimed, resubmitted) = claim(&mut tx, &writes).await?;
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
    let mut replaced = advance(&mut tx, &writes, &locked).await?;
    for w in &writes {
        let (Stage::Store { channel, seq: Some(seq) }, Some(key)) = (&w.stage, w.key()) else { continue };
        let mentioned = crate::read_model::mentioned(w.post.event);
        let added: Vec<String> = match locked.get(&key) {
            Some(row) => mentioned.into_iter().filter(|k| !row.mentioned.contains(k)).collect(),
            None => mentioned,
        };
        crate::read_model::record_mentions(&mut tx, w.post.community, channel.id, w.post.event, *seq, &added)
            .await?;
    }
    tx.commit().await.map_err(BatchError::Commit)?;
    Ok(writes.into_iter().map(|w| w.outcome(&mut replaced)).collect())
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
    writes: &[Write<'_>],
) -> Result<HashMap<(Uuid, Uuid), Artifact>, sqlx::Error> {
    let keys: BTreeSet<(Uuid, Uuid)> = writes
        .iter()
        .filter(|w| w.storing().is_some_and(|env| env.op == Op::Update))
        .filter_map(Write::key)
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
    writes: &[Write<'p>],
) -> Result<(HashSet<(Uuid, Uuid)>, HashSet<(Uuid, &'p str)>), sqlx::Error> {
    let mut creates: Vec<(Uuid, Uuid, usize)> = Vec::new();
    let (mut upd_community, mut upd_id) = (Vec::new(), Vec::new());
    for (i, w) in writes.iter().enumerate() {
        let Some(env) = w.storing() else { continue };
        if env.op == Op::Create {
            creates.push((w.post.community, env.d, i));
        } else {
            upd_community.push(w.post.community);
            upd_id.push(w.post.event.id.as_str());
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
        let (w, Some(env)) = (&writes[i], writes[i].env) else { continue };
        community.push(c);
        d.push(key);
        type_name.push(env.type_name.as_str());
        revision.push(w.post.event.id.as_str());
        home.push(env.h);
        root.push(env.root.as_deref());
        mentioned.push(artifacts::p_keys(w.post.event).join(","));
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
    writes: &[Write<'_>],
    locked: &HashMap<(Uuid, Uuid), Artifact>,
) -> Result<HashMap<(Uuid, Uuid), Vec<[String; 2]>>, sqlx::Error> {
    let mut a = Columns::with_capacity(writes.len());
    let (mut t_community, mut t_d, mut t_name, mut t_hash) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for w in writes {
        let (Stage::Store { channel, seq: Some(seq) }, Some(env)) = (&w.stage, w.env) else { continue };
        let post = &w.post;
        a.community.push(post.community);
        a.d.push(env.d);
        a.revision.push(post.event.id.as_str());
        a.created.push(env.op == Op::Create);
        a.home.push(env.h);
        a.root.push(env.root.as_deref());
        a.prev.push(env.prev.as_deref());
        a.op.push(env.op.as_str());
        a.type_name.push(env.type_name.as_str());
        a.seq.push(*seq);
        a.ttl.push(channel.ttl_seconds);
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

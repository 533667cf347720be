//! The statements of a revision batch: the updated artifacts locked, the creates claimed with the
//! resubmission check of the updates, and the stored revisions made current.

use std::collections::{BTreeSet, HashMap, HashSet};

use buzz_core::nipar::Op;
use buzz_core::{ChannelId, CommunityId};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Stage, Write};
use crate::artifacts::{self, Artifact};

/// A locked artifact row, keyed by (community, d).
#[derive(sqlx::FromRow)]
struct LockedRow {
    community_id: CommunityId,
    d: Uuid,
    #[sqlx(flatten)]
    artifact: Artifact,
}

/// Locks the artifacts the pending updates name, in key order, for the rest of the transaction.
pub(super) async fn lock(
    tx: &mut PgConnection,
    writes: &[Write<'_>],
) -> Result<HashMap<(CommunityId, Uuid), Artifact>, sqlx::Error> {
    let keys: BTreeSet<(CommunityId, Uuid)> = writes
        .iter()
        .filter(|w| w.storing().is_some_and(|env| env.op == Op::Update))
        .filter_map(Write::key)
        .collect();
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let (community, d): (Vec<CommunityId>, Vec<Uuid>) = keys.into_iter().unzip();
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
pub(super) async fn claim<'p>(
    tx: &mut PgConnection,
    writes: &[Write<'p>],
) -> Result<(HashSet<(CommunityId, Uuid)>, HashSet<(CommunityId, &'p str)>), sqlx::Error> {
    let mut creates: Vec<(CommunityId, Uuid, usize)> = Vec::new();
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
    let rows: Vec<(CommunityId, Uuid, Option<String>)> = sqlx::query_as(
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
pub(super) async fn advance(
    tx: &mut PgConnection,
    writes: &[Write<'_>],
    locked: &HashMap<(CommunityId, Uuid), Artifact>,
) -> Result<HashMap<(CommunityId, Uuid), Vec<[String; 2]>>, sqlx::Error> {
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
    let rows: Vec<(CommunityId, Uuid, String, Vec<u8>)> = sqlx::query_as(
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
    rows: Vec<(CommunityId, Uuid, String, Vec<u8>)>,
    locked: &HashMap<(CommunityId, Uuid), Artifact>,
) -> HashMap<(CommunityId, Uuid), Vec<[String; 2]>> {
    type Rows = Vec<(String, Vec<u8>)>;
    let mut by_artifact: HashMap<(CommunityId, Uuid), Rows> = HashMap::new();
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
    community: Vec<CommunityId>,
    d: Vec<Uuid>,
    revision: Vec<&'a str>,
    created: Vec<bool>,
    home: Vec<ChannelId>,
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

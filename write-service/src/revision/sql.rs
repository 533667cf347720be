//! The revision family's statements that a batch makes, and what both paths share: the locked
//! artifact row ([`Artifact`]) and the rows a revision's tags become. The one-revision path's own
//! statements sit beside its steps (`single.rs`). Every statement is keyed by community first.

use std::collections::{BTreeSet, HashMap, HashSet};

use buzz_core::nipar::{Envelope, Op};
use buzz_core::{ChannelId, CommunityId, Event, EventId, Pubkey};
use sqlx::PgConnection;
use uuid::Uuid;

/// An artifact's stored identity and current state, as locked for a revision. `mentioned`: the
/// `p` keys the current revision carries.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Artifact {
    /// The artifact type (`type` tag).
    #[sqlx(rename = "type")]
    pub type_name: String,
    /// Id of the current revision.
    pub current_revision: EventId,
    /// The channel the artifact lives in.
    pub home_channel: ChannelId,
    /// The root anchor, when the artifact has one.
    pub root: Option<EventId>,
    /// Whether the current revision is a delete.
    pub deleted: bool,
    /// The `p` keys the current revision carries.
    pub mentioned: Vec<Pubkey>,
}

impl Artifact {
    /// The row as the rules read it (`rules::revision::Current`).
    #[must_use]
    pub fn current(&self) -> crate::rules::revision::Current<'_> {
        crate::rules::revision::Current {
            type_name: &self.type_name,
            revision: &self.current_revision,
            home: self.home_channel,
            root: self.root.as_ref(),
            deleted: self.deleted,
        }
    }
}

/// The distinct well-formed `p` pubkeys of a revision, sorted.
pub(crate) fn p_keys(event: &Event) -> Vec<Pubkey> {
    let mut keys: Vec<Pubkey> = event.tags_named("p").filter_map(|t| Pubkey::parse(t.get(1)?).ok()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The current-tag rows of revision `event` were it current and served: its distinct
/// `(name, sha256(first value))` pairs but `buzz_store::current_tags::DERIVED`.
pub(crate) fn current_tag_rows(event: &Event) -> Vec<(&str, Vec<u8>)> {
    let rows: std::collections::BTreeSet<(&str, Vec<u8>)> =
        buzz_store::tag_rows::indexed_tags(event, |name| !buzz_store::current_tags::is_derived(name))
            .collect();
    rows.into_iter().collect()
}

/// An artifact's `replaced_tags` (the live payload) from the current-tag rows it had before a
/// revision and the `op` and `prev` rows of the revision they belonged to: when it was served (it had a row
/// that is not derived, as its `h` row always is), those rows with the derived `ar`, `d` and
/// `type` rows added (`buzz_store::current_tags`; `type_name` is the artifact's, immutable), as
/// `[name, hex(sha256(value))]` sorted; else none.
pub(crate) fn replaced_tags(d: Uuid, type_name: &str, mut rows: Vec<(String, Vec<u8>)>) -> Vec<[String; 2]> {
    if !rows.iter().any(|(name, _)| !buzz_store::current_tags::is_derived(name)) {
        return Vec::new();
    }
    rows.extend(buzz_store::current_tags::derived_rows(d, type_name));
    rows.sort_unstable();
    rows.into_iter().map(|(name, hash)| [name, hex::encode(hash)]).collect()
}

/// A revision of a batch still to claim (a create) or to check for a concurrent resubmission (an
/// update), once admitted and writable.
pub(crate) struct Pending<'a> {
    pub(crate) community: CommunityId,
    pub(crate) env: &'a Envelope,
    pub(crate) event: &'a Event,
}

/// A revision a batch stored with `seq` in a channel whose TTL is `ttl`, to make current.
pub(crate) struct StoredRevision<'a> {
    pub(crate) community: CommunityId,
    pub(crate) env: &'a Envelope,
    pub(crate) event: &'a Event,
    pub(crate) seq: i64,
    pub(crate) ttl: Option<i32>,
}

/// A locked artifact row, keyed by (community, d).
#[derive(sqlx::FromRow)]
struct LockedRow {
    community_id: CommunityId,
    d: Uuid,
    #[sqlx(flatten)]
    artifact: Artifact,
}

/// Locks the artifacts `keys` name (the pending updates'), in key order, for the rest of the transaction.
pub(crate) async fn lock(
    tx: &mut PgConnection,
    keys: BTreeSet<(CommunityId, Uuid)>,
) -> Result<HashMap<(CommunityId, Uuid), Artifact>, sqlx::Error> {
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

/// What [`claim`] found: the claimed (community, d), and the (community, revision id) of the
/// updates accepted meanwhile.
type Claimed<'p> = (HashSet<(CommunityId, Uuid)>, HashSet<(CommunityId, &'p str)>);

/// The statement of [`claim`].
const CLAIM: &str = "WITH c AS ( \
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
     WHERE (r.community_id, r.revision_id) IN (SELECT * FROM UNNEST($8::uuid[], $9::text[]))";

/// Claims the identities of the pending creates (in key order) and, in the same statement, finds
/// which pending updates were accepted meanwhile (a concurrent resubmission). Returns the claimed
/// (community, d) and the resubmitted (community, revision id).
pub(crate) async fn claim<'p>(
    tx: &mut PgConnection,
    pending: &[Pending<'p>],
) -> Result<Claimed<'p>, sqlx::Error> {
    let mut creates: Vec<(CommunityId, Uuid, usize)> = Vec::new();
    let (mut upd_community, mut upd_id) = (Vec::new(), Vec::new());
    for (i, p) in pending.iter().enumerate() {
        if p.env.op == Op::Create {
            creates.push((p.community, p.env.d, i));
        } else {
            upd_community.push(p.community);
            upd_id.push(p.event.id.as_str());
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
        let (env, event) = (pending[i].env, pending[i].event);
        community.push(c);
        d.push(key);
        type_name.push(env.type_name.as_str());
        revision.push(event.id.as_str());
        home.push(env.h);
        root.push(env.root.as_deref());
        mentioned.push(p_keys(event).join(","));
    }
    let rows: Vec<(CommunityId, Uuid, Option<String>)> = sqlx::query_as(CLAIM)
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
    Ok(claimed(rows, &upd_id))
}

/// The rows of [`claim`]: the claimed (community, d) (no revision), and the updates' revision
/// ids that were accepted meanwhile.
fn claimed<'p>(rows: Vec<(CommunityId, Uuid, Option<String>)>, updates: &[&'p str]) -> Claimed<'p> {
    let mut claimed = HashSet::new();
    let mut resubmitted = HashSet::new();
    for (c, key, revision) in rows {
        match revision {
            None => {
                claimed.insert((c, key));
            }
            Some(id) => {
                if let Some(&known) = updates.iter().find(|&&u| u == id) {
                    resubmitted.insert((c, known));
                }
            }
        }
    }
    (claimed, resubmitted)
}

/// The statement of [`advance`]. The replaced revision's `prev` and `op` (its record, by key)
/// are read per updated artifact: `LIMIT 1` keeps the lookup a lateral probe; as a join, the
/// planner chose a scan of every revision against the batch (1 133 against 1 700 revisions/s at
/// 20 000 artifacts). `gone` keeps a row unless the batch's tag rows `t` have it: `NOT IN` over
/// `t` (never NULL) is one hashed subplan. (`NOT EXISTS` was planned as a nested loop over the
/// CTE, quadratic in the batch: 15 ms of a 26 ms statement at 41 revisions, docs/benchmarks.md.)
const ADVANCE: &str =
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
     WHERE NOT u.created AND x.value IS NOT NULL";

/// Makes each stored revision current: the updated artifacts advanced, every stored revision's
/// artifact's current-tag rows replaced by its tags (with its home, change time, expiry, id and type),
/// and every revision recorded forever, in one statement. Returns the current-tag rows each updated
/// artifact had before, with its derived rows, as `[name, hex(hash)]` sorted ([`replaced_by_artifact`]).
pub(crate) async fn advance(
    tx: &mut PgConnection,
    stored: &[StoredRevision<'_>],
    locked: &HashMap<(CommunityId, Uuid), Artifact>,
) -> Result<HashMap<(CommunityId, Uuid), Vec<[String; 2]>>, sqlx::Error> {
    let (a, t) = Columns::of(stored, locked);
    let rows: Vec<(CommunityId, Uuid, String, Vec<u8>)> = sqlx::query_as(ADVANCE)
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
        .bind(&t.community)
        .bind(&t.d)
        .bind(&t.name)
        .bind(&t.hash)
        .bind(&a.type_name)
        .fetch_all(&mut *tx)
        .await?;
    Ok(replaced_by_artifact(rows, locked))
}

/// The replaced current-tag rows of [`advance`] (and the `op` and `prev` rows of the revision they
/// belonged to) as each updated artifact's `replaced_tags` ([`replaced_tags`]), with
/// its (immutable) type from its locked row: only updated artifacts had rows before.
fn replaced_by_artifact(
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
            let replaced = replaced_tags(key.1, &row.type_name, rows);
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

/// The tag-row columns of [`advance`]: each stored revision's current-tag rows.
#[derive(Default)]
struct TagColumns<'a> {
    community: Vec<CommunityId>,
    d: Vec<Uuid>,
    name: Vec<&'a str>,
    hash: Vec<Vec<u8>>,
}

impl<'a> Columns<'a> {
    /// The columns of `stored`: an updated artifact (one in `locked`) carries its new `p` keys.
    fn of(
        stored: &[StoredRevision<'a>],
        locked: &HashMap<(CommunityId, Uuid), Artifact>,
    ) -> (Self, TagColumns<'a>) {
        let mut a = Self::with_capacity(stored.len());
        let mut t = TagColumns::default();
        for r in stored {
            let (env, event) = (r.env, r.event);
            a.community.push(r.community);
            a.d.push(env.d);
            a.revision.push(event.id.as_str());
            a.created.push(env.op == Op::Create);
            a.home.push(env.h);
            a.root.push(env.root.as_deref());
            a.prev.push(env.prev.as_deref());
            a.op.push(env.op.as_str());
            a.type_name.push(env.type_name.as_str());
            a.seq.push(r.seq);
            a.ttl.push(r.ttl);
            a.mentioned.push(if locked.contains_key(&(r.community, env.d)) {
                p_keys(event).join(",")
            } else {
                String::new()
            });
            for (name, hash) in current_tag_rows(event) {
                t.community.push(r.community);
                t.d.push(env.d);
                t.name.push(name);
                t.hash.push(hash);
            }
        }
        (a, t)
    }

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

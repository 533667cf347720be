//! NIP-AR artifact queries (`../shared/spec/NIP-AR.md`, "Current state and queries"): SQL for the
//! `current` and `history` forms. Access (the one read rule: `fragments::readable_channel`, or the
//! reader's readable channel ids it yields, bound as an array) and tag matching are conditions of
//! the statement itself, so they apply before `LIMIT`/`OFFSET` and
//! counts. Values are always bound.
//!
//! - `current`: each artifact's current revision (`artifacts.current_revision`), omitted when the
//!   artifact is deleted, retired (its current revision redacted) or expired, or when the reader
//!   cannot read the current revision's channel. `#<name>` matches the name and FIRST value of a
//!   tag of the current revision only (`artifact_current_tags`, maintained by the write path;
//!   `#ar`, `#d`, `#op`, `#prev` and `#type` from the artifact's `d`, type and current revision,
//!   `buzz_store::current_tags`): AND across names, OR within a name. Every current query walks
//!   current-tag rows, which hold only served artifacts: without a row predicate, the anchor (`h`)
//!   rows, one per artifact. Order: most recently changed first (the artifact's change time,
//!   `updated_at` of each of its rows), then `d`, a total order.
//! - `history`: the revisions of the `#d` artifacts, each under its own channel's access (a move
//!   never lets the destination read the source's earlier revisions), redacted, deleted and
//!   expired revisions withheld, in acceptance order (`artifact_revisions.accepted_seq`).

use buzz_core::{ChannelId, CommunityId, Filter};
use buzz_store::current_tags::{push_type_match, Columns, Predicates, ANCHOR};
use buzz_store::fragments::{not_expired, readable_channel_of, served_event, ReaderBinds};
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

use crate::sql::{prefixed_with_reader, with_reader, Reader};

/// The artifact query forms this relay answers (parsed in `buzz_core`).
pub use buzz_core::ArtifactForm as Form;

/// Conditions every served revision meets: stored, not redacted/deleted/expired, readable.
fn visible(qb: &mut QueryBuilder<'_, Postgres>) {
    qb.push(" AND ").push(served_event("e")).push(" AND ").push(readable_channel_of("e", ReaderBinds::FIRST));
}

/// The current-tag rows a current-state query walks: those of one row predicate, or every served
/// artifact's [`ANCHOR`] row (one per artifact), of the `#type` types when it leads.
#[derive(Clone, Copy)]
enum Lead<'f> {
    /// `#name` with these values.
    Row(&'f str, &'f [String]),
    /// The anchor rows: of these types (`#type`, `artifact_current_tags_by_type`), or all of them
    /// newest first when `None` (no row predicate and no `#type`,
    /// `artifact_current_tags_live_by_time`).
    Anchor(Option<&'f [String]>),
}

impl<'f> Lead<'f> {
    /// A predicate with a single value when there is one (one ordered walk that stops at the
    /// page): a row predicate first, else `#type` (so that `#type` of a rare type with a
    /// several-valued row predicate walks that type's artifacts only); else the first row
    /// predicate, else `#type`, else every anchor row.
    fn of(p: &'f Predicates<'f>) -> Self {
        let types = p.types.as_deref();
        if let Some(&(name, values)) = p.rows.iter().find(|(_, v)| v.len() == 1) {
            return Self::Row(name, values);
        }
        match (p.rows.first(), types) {
            (Some(&(name, values)), Some(t)) if t.len() != 1 => Self::Row(name, values),
            (Some(&(name, values)), None) => Self::Row(name, values),
            _ => Self::Anchor(types),
        }
    }

    /// The values walked one by one (one walk when 1).
    fn values(self) -> usize {
        match self {
            Self::Row(_, values) | Self::Anchor(Some(values)) => values.len(),
            Self::Anchor(None) => 1,
        }
    }
}

/// `= value` for one value (so that an index on `(…, value_hash, updated_at DESC)` yields rows in
/// page order and the walk stops at the page), `= ANY(values)` for several.
fn push_hash_match(qb: &mut QueryBuilder<'_, Postgres>, column: &str, values: &[String]) {
    let mut hashes: Vec<Vec<u8>> = values.iter().map(|v| buzz_store::tag_value_hash(v)).collect();
    if hashes.len() == 1 {
        qb.push(format!(" AND {column} = ")).push_bind(hashes.remove(0));
    } else {
        qb.push(format!(" AND {column} = ANY(")).push_bind(hashes).push(")");
    }
}

/// `current`: the matching artifacts (the derived predicates are conditions on the lead row's
/// `d`, `revision` and `type`) as `t.d, t.updated_at, t.revision`
/// (the current revision's id), entirely from
/// `artifact_current_tags`, which holds exactly the current revision's tags of each served
/// artifact beside its home channel and expiry (older revisions cannot match). One predicate
/// leads, filtered by readable channel and expiry inside the index; the others are index-only
/// probes on the same artifact (the planner may start from any of them). The lead is a
/// predicate with a single value when there is one (one row per artifact); otherwise rows are
/// de-duplicated. `#type` leads over the anchor rows (one per artifact) when it is the only
/// predicate with a single value, or without a row predicate; without either, every anchor row
/// leads ([`Lead::of`]).
///
/// `first` (a page's `limit + offset`): with several lead values, each value's matches are
/// walked newest first and cut at `first` in a lateral subquery (one ordered index walk per
/// value, instead of every match of every value sorted), then merged and de-duplicated. The
/// union's first `first` distinct artifacts are among them: an artifact ahead of one of them
/// in its value's walk is ahead of it in the union too, and one value's rows are distinct
/// artifacts. `None` (counts): every match.
fn push_candidates(
    qb: &mut QueryBuilder<'_, Postgres>,
    community: CommunityId,
    readable: &[ChannelId],
    p: &Predicates<'_>,
    first: Option<i64>,
) {
    let lead = Lead::of(p);
    let lateral = first.filter(|_| lead.values() > 1);
    if lateral.is_some() {
        qb.push("SELECT t.d, t.updated_at, t.revision FROM unnest(");
        match lead {
            Lead::Row(_, values) => {
                let hashes: Vec<Vec<u8>> = values.iter().map(|v| buzz_store::tag_value_hash(v)).collect();
                qb.push_bind(hashes).push("::bytea[])");
            }
            Lead::Anchor(types) => {
                qb.push_bind(types.unwrap_or_default().to_vec()).push("::text[])");
            }
        }
        qb.push(" v(value) CROSS JOIN LATERAL (");
    }
    qb.push("SELECT t.d, t.updated_at, t.revision FROM artifact_current_tags t WHERE t.community_id = $1");
    let lead_name = match lead {
        Lead::Row(name, values) => {
            qb.push(" AND t.name = ").push_bind(name.to_owned());
            if lateral.is_some() {
                qb.push(" AND t.value_hash = v.value");
            } else {
                push_hash_match(qb, "t.value_hash", values);
            }
            Some(name)
        }
        Lead::Anchor(types) => {
            // A literal, so that every plan may use the partial indexes on the anchor rows.
            qb.push(format!(" AND t.name = '{ANCHOR}'"));
            match types {
                Some(_) if lateral.is_some() => {
                    qb.push(" AND t.type = v.value");
                }
                Some(types) => push_type_match(qb, "t.type", types),
                None => {}
            }
            None
        }
    };
    qb.push(" AND t.home_channel = ANY(").push_bind(readable.to_vec()).push(") AND ").push(not_expired("t"));
    for &(name, values) in p.rows.iter().filter(|(n, _)| Some(*n) != lead_name) {
        qb.push(
            " AND EXISTS (SELECT 1 FROM artifact_current_tags u WHERE u.community_id = $1 \
              AND u.d = t.d AND u.name = ",
        )
        .push_bind(name.to_owned());
        push_hash_match(qb, "u.value_hash", values);
        qb.push(")");
    }
    // `#type` is a condition on the lead row's own column (included in every index it walks),
    // unless it is the lead.
    let type_name = (!matches!(lead, Lead::Anchor(Some(_)))).then_some("t.type");
    p.push_conditions(qb, community, Columns { d: "t.d", revision: "t.revision", type_name });
    if let Some(first) = lateral {
        qb.push(" ORDER BY t.updated_at DESC, t.d LIMIT ").push_bind(first).push(") t");
    }
    // One row predicate's several values can match one artifact twice; an artifact has one type.
    if matches!(lead, Lead::Row(_, values) if values.len() > 1) {
        qb.push(" GROUP BY t.d, t.updated_at, t.revision");
    }
}

fn from_history<'a>(
    prefix: &str,
    select: &str,
    reader: &Reader<'a>,
    f: &Filter,
) -> QueryBuilder<'a, Postgres> {
    let ds: Vec<Uuid> = f
        .tags
        .get("d")
        .map(|v| v.iter().filter_map(|d| buzz_core::ids::parse_uuid(d)).collect())
        .unwrap_or_default();
    let mut qb = prefixed_with_reader(prefix, reader);
    qb.push(select)
        .push(
            " FROM artifact_revisions r JOIN events e ON e.community_id = r.community_id AND e.id = r.revision_id \
              WHERE r.community_id = $1 AND r.d = ANY(",
        )
        .push_bind(ds)
        .push("::uuid[])");
    visible(&mut qb);
    qb
}

/// One page of `(id, raw)` rows.
pub fn select<'a>(
    form: Form,
    reader: &Reader<'a>,
    readable: &[ChannelId],
    f: &Filter,
    limit: u32,
    offset: u32,
) -> QueryBuilder<'a, Postgres> {
    select_after("", form, reader, readable, f, limit, offset)
}

/// [`select`] under `EXPLAIN (ANALYZE, BUFFERS)`: one text row per plan line (benchmarks and
/// index checks).
pub fn explain_select<'a>(
    form: Form,
    reader: &Reader<'a>,
    readable: &[ChannelId],
    f: &Filter,
    limit: u32,
    offset: u32,
) -> QueryBuilder<'a, Postgres> {
    select_after("EXPLAIN (ANALYZE, BUFFERS) ", form, reader, readable, f, limit, offset)
}

fn select_after<'a>(
    prefix: &str,
    form: Form,
    reader: &Reader<'a>,
    readable: &[ChannelId],
    f: &Filter,
    limit: u32,
    offset: u32,
) -> QueryBuilder<'a, Postgres> {
    let page = |qb: &mut QueryBuilder<'a, Postgres>| {
        qb.push(" LIMIT ").push_bind(i64::from(limit)).push(" OFFSET ").push_bind(i64::from(offset));
    };
    let p = Predicates::split(&f.tags);
    match form {
        Form::Current => {
            // The page is chosen in the index; events are read for its rows only.
            let mut qb = prefixed_with_reader(prefix, reader);
            qb.push("SELECT e.id, e.raw FROM (");
            push_candidates(
                &mut qb,
                reader.community,
                readable,
                &p,
                Some(i64::from(limit) + i64::from(offset)),
            );
            qb.push(" ORDER BY t.updated_at DESC, t.d");
            page(&mut qb);
            // Each candidate carries its current revision's id: events are read by id, and
            // checked again (served, in a readable channel), so that a row the index got wrong
            // is withheld rather than served.
            qb.push(
                ") m JOIN events e ON e.community_id = $1 AND e.id = m.revision WHERE e.channel_id = ANY(",
            )
            .push_bind(readable.to_vec())
            .push(") AND ")
            .push(served_event("e"));
            qb.push(" ORDER BY m.updated_at DESC, m.d");
            qb
        }
        Form::History => {
            let mut qb = from_history(prefix, "SELECT e.id, e.raw", reader, f);
            qb.push(" ORDER BY r.accepted_seq, r.revision_id");
            page(&mut qb);
            qb
        }
    }
}

/// Every match, with the same access and matching as [`select`] (page fields do not apply).
pub fn count<'a>(
    form: Form,
    reader: &Reader<'a>,
    readable: &[ChannelId],
    f: &Filter,
) -> QueryBuilder<'a, Postgres> {
    let p = Predicates::split(&f.tags);
    match form {
        Form::Current => {
            let mut qb = with_reader(reader);
            qb.push("SELECT count(*) FROM (");
            push_candidates(&mut qb, reader.community, readable, &p, None);
            qb.push(") m");
            qb
        }
        Form::History => from_history("", "SELECT count(*)", reader, f),
    }
}

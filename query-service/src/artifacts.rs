//! NIP-AR artifact queries (`../shared/spec/NIP-AR.md`, "Current state and queries"): SQL for the
//! `current` and `history` forms. Access (the one read rule, `readable_channel_condition`) and tag
//! matching are conditions of the statement itself, so they apply before `LIMIT`/`OFFSET` and
//! counts. Values are always bound.
//!
//! - `current`: each artifact's current revision (`artifacts.current_revision`), omitted when the
//!   artifact is deleted, retired (its current revision redacted) or expired, or when the reader
//!   cannot read the current revision's channel. `#<name>` matches the name and FIRST value of a
//!   tag of the current revision only (`artifact_current_tags`, maintained by the write path):
//!   AND across names, OR within a name. Order:
//!   most recently changed first (`artifacts.updated_at DESC`), then `d`, a total order.
//! - `history`: the revisions of the `#d` artifacts, each under its own channel's access (a move
//!   never lets the destination read the source's earlier revisions), redacted, deleted and
//!   expired revisions withheld, in acceptance order (`artifact_revisions.accepted_seq`).

use buzz_core::Filter;
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

use crate::sql::{with_reader, Reader};

/// The artifact query forms this relay answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Current,
    History,
}

impl Form {
    /// `None` for any other value (refused by `Filter::validate_artifact` before reaching here).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "current" => Some(Self::Current),
            "history" => Some(Self::History),
            _ => None,
        }
    }
}

/// Conditions every served revision meets: stored, not redacted/deleted/expired, readable.
fn visible(qb: &mut QueryBuilder<'_, Postgres>) {
    qb.push(
        " AND e.redacted_at IS NULL AND e.deleted_at IS NULL \
          AND (e.expires_at IS NULL OR e.expires_at > now()) AND ",
    )
    .push(buzz_store::access::readable_channel_condition("e"));
}

/// `readable`: the reader's readable channel ids, computed once per statement, so that every
/// channel condition below is an index condition (`= ANY(...)`) rather than a join.
const READABLE: &str = "(SELECT ids FROM readable)::uuid[]";

fn from_current<'a>(select: &str, reader: &Reader<'a>, f: &Filter) -> QueryBuilder<'a, Postgres> {
    let mut qb = with_reader(reader);
    qb.push(", readable AS MATERIALIZED (SELECT ")
        .push(buzz_store::access::readable_channel_ids())
        .push(" AS ids) ")
        .push(select)
        .push(
            " FROM artifacts a JOIN events e ON e.community_id = a.community_id AND e.id = a.current_revision \
              WHERE a.community_id = $1 AND NOT a.deleted AND a.home_channel = ANY(",
        )
        .push(READABLE)
        .push(
            ") AND e.channel_id = a.home_channel AND e.redacted_at IS NULL AND e.deleted_at IS NULL \
              AND (e.expires_at IS NULL OR e.expires_at > now())",
        );
    // `artifact_current_tags` holds exactly the current revision's tags of each live artifact,
    // beside its home channel: older revisions cannot match, and the channel condition filters
    // inside the index whichever predicate the plan starts from.
    for (name, values) in &f.tags {
        let hashes: Vec<Vec<u8>> = values.iter().map(|v| buzz_store::tag_value_hash(v)).collect();
        qb.push(
            " AND EXISTS (SELECT 1 FROM artifact_current_tags t WHERE t.community_id = $1 \
              AND t.d = a.d AND t.home_channel = ANY(",
        )
        .push(READABLE)
        .push(") AND t.name = ")
        .push_bind(name.clone())
        .push(" AND t.value_hash = ANY(")
        .push_bind(hashes)
        .push("))");
    }
    qb
}

fn from_history<'a>(select: &str, reader: &Reader<'a>, f: &Filter) -> QueryBuilder<'a, Postgres> {
    let ds: Vec<Uuid> = f
        .tags
        .get("d")
        .map(|v| v.iter().filter_map(|d| Uuid::try_parse(d).ok()).collect())
        .unwrap_or_default();
    let mut qb = with_reader(reader);
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
    f: &Filter,
    limit: u32,
    offset: u32,
) -> QueryBuilder<'a, Postgres> {
    let mut qb = match form {
        Form::Current => {
            let mut qb = from_current("SELECT e.id, e.raw", reader, f);
            qb.push(" ORDER BY a.updated_at DESC, a.d");
            qb
        }
        Form::History => {
            let mut qb = from_history("SELECT e.id, e.raw", reader, f);
            qb.push(" ORDER BY r.accepted_seq, r.revision_id");
            qb
        }
    };
    qb.push(" LIMIT ").push_bind(i64::from(limit)).push(" OFFSET ").push_bind(i64::from(offset));
    qb
}

/// Every match, with the same access and matching as [`select`] (page fields do not apply).
pub fn count<'a>(form: Form, reader: &Reader<'a>, f: &Filter) -> QueryBuilder<'a, Postgres> {
    match form {
        Form::Current => from_current("SELECT count(*)", reader, f),
        Form::History => from_history("SELECT count(*)", reader, f),
    }
}

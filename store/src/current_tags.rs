//! Which tags of a current NIP-AR revision are rows of `artifact_current_tags`, and how a
//! current-state predicate on the others is answered (docs/design.md
//! "Envelope tags without current-tag rows").
//!
//! Five envelope tags are answered from what every current-tag row and every revision record
//! already holds, so the write path stores no row for them:
//! - `ar`: every served revision carries `["ar", "1"]` (any other version is refused), so a
//!   predicate matches every served artifact when its values include `1`, and none otherwise;
//! - `d`: the artifact's identity, the `d` column of each of its rows (and of `artifacts`); only
//!   the canonical lowercase form is a `d` value, as the write path accepts no other;
//! - `op`: `artifact_revisions.op` of the current revision (`revision` of each row,
//!   `current_revision` of `artifacts`), found by its primary key;
//! - `prev`: the current revision's `prev` is `artifact_revisions.prev` of the current revision,
//!   found by its successor index;
//! - `type`: immutable and carried once by every revision, it is the `type` column of each of the
//!   artifact's rows (and of `artifacts`); without another row predicate, a query walks the
//!   artifacts' `h` rows by type (`artifact_current_tags_by_type`).
//!
//! Every other tag (the other envelope tags `h`, `title`, `root` among them) keeps its rows. A
//! served artifact always has exactly one `h` row (every revision carries `h` once).

use std::collections::BTreeMap;

use buzz_core::ids::parse_uuid;
use buzz_core::nipar::ENVELOPE_VERSION;
use buzz_core::CommunityId;
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

/// The tag names that have no rows in `artifact_current_tags`.
pub const DERIVED: [&str; 5] = ["ar", "d", "op", "prev", "type"];

/// Whether a tag of a current revision has no current-tag row (see [`DERIVED`]).
#[must_use]
pub fn is_derived(name: &str) -> bool {
    DERIVED.contains(&name)
}

/// The current-tag row every served artifact has exactly one of: its home channel's `h` row.
pub const ANCHOR: &str = "h";

/// A current-state query's tag predicates, split into those matched against current-tag rows and
/// the [`DERIVED`] ones, which become conditions on an artifact's `d`, type and current revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Predicates<'f> {
    /// Predicates matched against `artifact_current_tags` rows: (name, values).
    pub rows: Vec<(&'f str, &'f [String])>,
    /// `#d`: the artifacts named (canonical values only).
    d: Option<Vec<Uuid>>,
    /// `#op`: the current revision's `op` values.
    op: Option<Vec<String>>,
    /// `#prev`: the revisions the current revision must name in `prev`.
    prev: Option<Vec<String>>,
    /// `#type`: the artifact types (a column: the type is immutable), sorted and distinct, so
    /// that one walk per value never meets an artifact twice.
    pub types: Option<Vec<String>>,
    /// A derived predicate that no served artifact can meet (`#ar` without `1`, `#d` with no
    /// canonical value).
    never: bool,
}

impl<'f> Predicates<'f> {
    /// Splits a filter's tag predicates (AND across names, OR within one).
    #[must_use]
    pub fn split(tags: &'f BTreeMap<String, Vec<String>>) -> Self {
        let mut p = Self::default();
        for (name, values) in tags {
            match name.as_str() {
                "ar" => p.never |= !values.iter().any(|v| v == ENVELOPE_VERSION),
                "d" => {
                    let ds: Vec<Uuid> = values.iter().filter_map(|v| parse_uuid(v)).collect();
                    p.never |= ds.is_empty();
                    p.d = Some(ds);
                }
                "op" => p.op = Some(values.clone()),
                "prev" => p.prev = Some(values.clone()),
                "type" => {
                    let mut types = values.clone();
                    types.sort_unstable();
                    types.dedup();
                    p.types = Some(types);
                }
                _ => p.rows.push((name.as_str(), values.as_slice())),
            }
        }
        p
    }

    /// Conditions for the derived predicates (each starting with ` AND `, none when there are
    /// none) on an artifact whose `d`, current revision id and type are the SQL expressions of
    /// `at`, in `community`. With `at.type_name` `None` the caller matches `#type` itself.
    pub fn push_conditions(
        &self,
        qb: &mut QueryBuilder<'_, Postgres>,
        community: CommunityId,
        at: Columns<'_>,
    ) {
        let Columns { d, revision, type_name } = at;
        if self.never {
            qb.push(" AND FALSE");
            return;
        }
        if let (Some(types), Some(column)) = (&self.types, type_name) {
            push_type_match(qb, column, types);
        }
        if let Some(ds) = &self.d {
            qb.push(format!(" AND {d} = ANY(")).push_bind(ds.clone()).push("::uuid[])");
        }
        if let Some(ops) = &self.op {
            qb.push(" AND EXISTS (SELECT 1 FROM artifact_revisions o WHERE o.community_id = ")
                .push_bind(community)
                .push(format!(" AND o.revision_id = {revision} AND o.op = ANY("))
                .push_bind(ops.clone())
                .push("::text[]))");
        }
        if let Some(prevs) = &self.prev {
            // The successor index (`artifact_revisions_one_successor`) yields at most one
            // revision per value; the row of the artifact it belongs to is then found by `d`.
            qb.push(format!(" AND ({d}, {revision}) IN (SELECT r.d, r.revision_id FROM artifact_revisions r WHERE r.community_id = "))
                .push_bind(community)
                .push(" AND r.prev = ANY(")
                .push_bind(prevs.clone())
                .push("::text[]))");
        }
    }
}

/// The SQL expressions of an artifact's `d`, current revision id and type that
/// [`Predicates::push_conditions`] puts conditions on.
#[derive(Debug, Clone, Copy)]
pub struct Columns<'a> {
    /// The artifact's `d`.
    pub d: &'a str,
    /// Its current revision's id.
    pub revision: &'a str,
    /// Its type; `None` when the caller matches `#type` itself.
    pub type_name: Option<&'a str>,
}

/// `AND column = type` for one type (so that an index on `(…, type, updated_at DESC)` yields rows
/// in page order), `= ANY(types)` for several.
pub fn push_type_match(qb: &mut QueryBuilder<'_, Postgres>, column: &str, types: &[String]) {
    if let [one] = types {
        qb.push(format!(" AND {column} = ")).push_bind(one.clone());
    } else {
        qb.push(format!(" AND {column} = ANY(")).push_bind(types.to_vec()).push("::text[])");
    }
}

/// The `ar`, `d` and `type` rows every served revision of artifact `d` of type `type_name` would
/// have had, as `(name, sha256(value))`, for the live `replaced_tags` (its `op` and `prev` rows
/// are read from its revision record).
#[must_use]
pub fn derived_rows(d: Uuid, type_name: &str) -> [(String, Vec<u8>); 3] {
    [
        ("ar".to_owned(), crate::tag_value_hash(ENVELOPE_VERSION)),
        ("d".to_owned(), crate::tag_value_hash(&d.to_string())),
        ("type".to_owned(), crate::tag_value_hash(type_name)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs.iter().map(|(n, v)| ((*n).to_owned(), v.iter().map(|s| (*s).to_owned()).collect())).collect()
    }

    #[test]
    fn derived_predicates_leave_the_rows_and_never_match_what_no_revision_carries() {
        let t = tags(&[("ar", &["1"]), ("type", &["buzz.task"]), ("status", &["open", "done"])]);
        let p = Predicates::split(&t);
        assert_eq!(p.rows.iter().map(|(n, _)| *n).collect::<Vec<_>>(), ["status"]);
        assert_eq!(p.types, Some(vec!["buzz.task".to_owned()]));
        // Repeated values are one value: a walk per value must not meet an artifact twice.
        let t = tags(&[("type", &["buzz.task", "buzz.note", "buzz.task"])]);
        assert_eq!(Predicates::split(&t).types, Some(vec!["buzz.note".to_owned(), "buzz.task".to_owned()]));
        assert!(!p.never);
        assert!(Predicates::split(&tags(&[("ar", &["2"])])).never);
        // Only the canonical form of a d is a d value.
        let upper = "6F1C2A4E-8A51-4B0E-9D3F-0C1B2A3D4E5F";
        assert!(Predicates::split(&tags(&[("d", &[upper])])).never);
        let lower = upper.to_lowercase();
        let t = tags(&[("d", &[upper, lower.as_str()])]);
        let p = Predicates::split(&t);
        assert!(!p.never && p.rows.is_empty());
        assert_eq!(p.d, Some(vec![Uuid::parse_str(&lower).unwrap()]));
    }
}

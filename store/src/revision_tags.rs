//! Which tags of a stored NIP-AR revision (kind 45010) have no `event_tags` rows, and how a generic
//! filter's predicate on them is answered (migration 0014, docs/design.md "Envelope tags of
//! revisions without tag rows").
//!
//! Five envelope tags of every accepted revision are exactly what its revision record and its
//! event row already hold, so the write path stores no tag row for them:
//! - `ar`: every accepted revision carries `["ar", "1"]` (any other version is refused), so a
//!   predicate matches every revision when its values include `1`, and none otherwise;
//! - `d`: `artifact_revisions.d` (only the canonical lowercase form is ever accepted);
//! - `h`: the revision's channel, `events.channel_id` (a revision is stored in its own `h`; only
//!   the canonical lowercase form is ever accepted);
//! - `op`: `artifact_revisions.op`;
//! - `prev`: `artifact_revisions.prev`.
//!
//! The envelope admits each of them at most once, as a tag of exactly two elements, so the
//! record holds the revision's only value of each. Every other tag of a revision (`type`,
//! `title`, `root`, client tags) keeps its rows, and every tag of every other kind does.

use buzz_core::ids::parse_uuid;
use buzz_core::kinds::ARTIFACT_REVISION;
use buzz_core::nipar::ENVELOPE_VERSION;
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

/// The tag names a stored revision has no `event_tags` rows for.
pub const DERIVED: [&str; 5] = ["ar", "d", "h", "op", "prev"];

/// Whether tag `name` of an event of `kind` has an `event_tags` row (a tag of 1 to 64 bytes with
/// a value, and not [`DERIVED`] on a revision).
#[must_use]
pub fn has_row(kind: u32, name: &str) -> bool {
    kind != ARTIFACT_REVISION || !DERIVED.contains(&name)
}

/// Whether a tag predicate on `name` is answered from revision records rather than tag rows when
/// it is applied to revisions.
#[must_use]
pub fn is_derived(name: &str) -> bool {
    DERIVED.contains(&name)
}

/// Pushes the condition (starting with ` AND `) that revision `{e}` (an `events` row of kind
/// 45010) carries tag `name` with its first value among `values`, for a [`DERIVED`] name.
///
/// # Panics
/// When `name` is not [`DERIVED`] (a caller's mistake).
pub fn push_condition(qb: &mut QueryBuilder<'_, Postgres>, e: &str, name: &str, values: &[String]) {
    let record = |column: &str| {
        format!(
            " AND EXISTS (SELECT 1 FROM artifact_revisions r WHERE r.community_id = {e}.community_id \
              AND r.revision_id = {e}.id AND r.{column} = ANY("
        )
    };
    match name {
        "ar" => {
            if !values.iter().any(|v| v == ENVELOPE_VERSION) {
                qb.push(" AND FALSE");
            }
        }
        "h" | "d" => {
            let ids: Vec<Uuid> = values.iter().filter_map(|v| parse_uuid(v)).collect();
            if ids.is_empty() {
                qb.push(" AND FALSE");
            } else if name == "h" {
                qb.push(format!(" AND {e}.channel_id = ANY(")).push_bind(ids).push("::uuid[])");
            } else {
                qb.push(record("d")).push_bind(ids).push("::uuid[]))");
            }
        }
        "op" | "prev" => {
            qb.push(record(name)).push_bind(values.to_vec()).push("::text[]))");
        }
        _ => panic!("{name} is not a derived revision tag"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_envelope_tags_of_revisions_lose_their_rows() {
        for name in DERIVED {
            assert!(!has_row(ARTIFACT_REVISION, name));
            assert!(has_row(9, name));
            assert!(has_row(buzz_core::kinds::ARTIFACT_REMOVAL, name));
        }
        for name in ["type", "title", "root", "status", "e", "p", "auth"] {
            assert!(has_row(ARTIFACT_REVISION, name));
        }
    }

    fn sql(name: &str, values: &[&str]) -> String {
        let mut qb = QueryBuilder::<Postgres>::new("SELECT 1 WHERE TRUE");
        let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
        push_condition(&mut qb, "e", name, &values);
        qb.sql().to_owned()
    }

    #[test]
    fn a_value_no_revision_can_carry_matches_nothing() {
        assert!(sql("ar", &["2"]).ends_with("AND FALSE"));
        assert!(!sql("ar", &["2", "1"]).contains("FALSE"));
        // Only the canonical form of a uuid is a `d` or `h` value.
        let upper = "6F1C2A4E-8A51-4B0E-9D3F-0C1B2A3D4E5F";
        assert!(sql("d", &[upper]).ends_with("AND FALSE"));
        assert!(sql("h", &[upper, "x"]).ends_with("AND FALSE"));
        assert!(sql("h", &[&upper.to_lowercase()]).contains("e.channel_id = ANY("));
        assert!(sql("d", &[&upper.to_lowercase()]).contains("r.d = ANY("));
        assert!(sql("op", &["update"]).contains("r.op = ANY("));
        assert!(sql("prev", &["x"]).contains("r.prev = ANY("));
    }
}

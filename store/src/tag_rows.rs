//! Which tags of a stored event have `event_tags` rows, and how a generic filter's predicate on a
//! NIP-AR revision's `d` or `h` is answered without them (docs/design.md "Tag rows
//! for generic filters only").
//!
//! `event_tags` serves generic NIP-01 filters and nothing else (current-state queries read
//! `artifact_current_tags`, history reads `artifact_revisions`), so it holds only what they can
//! ask for:
//! - tags with a single-character name: a generic filter with a multi-character tag name is
//!   refused (`unsupported:`; it needs the artifact query form), so such a tag would never be read;
//! - but not a revision's (kind 45010) `d` and `h`: the envelope admits each once, as a tag of
//!   exactly two elements, in the canonical lowercase uuid form only, and they are what its record
//!   and event row already hold: `artifact_revisions.d`, and `events.channel_id` (a revision is
//!   stored in its own `h`).

use buzz_core::ids::parse_uuid;
use buzz_core::kinds::ARTIFACT_REVISION;
use buzz_core::Event;
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

/// The tags of a revision a generic filter can name that have no `event_tags` rows.
pub const DERIVED: [&str; 2] = ["d", "h"];

/// Whether tag `name` of an event of `kind` has an `event_tags` row (given a first value).
#[must_use]
pub fn has_row(kind: u32, name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some() && chars.next().is_none() && (kind != ARTIFACT_REVISION || !is_derived(name))
}

/// The tag index rows of `event` whose name `keep` accepts: each such tag's name (1 to 64 bytes)
/// with the hash of its first value (hashed only when kept).
pub fn indexed_tags<'e>(
    event: &'e Event,
    keep: impl Fn(&str) -> bool + 'e,
) -> impl Iterator<Item = (&'e str, Vec<u8>)> {
    event.tags.iter().filter_map(move |t| match t.as_slice() {
        [name, value, ..] if !name.is_empty() && name.len() <= 64 && keep(name) => {
            Some((name.as_str(), crate::tag_value_hash(value)))
        }
        _ => None,
    })
}

/// The `event_tags` rows of `event`: its [`indexed_tags`] that a generic filter can name and no
/// other row answers for (single-character names, but a NIP-AR revision's `d` and `h`). The
/// write-service stores them with every event; a community import with the relay events it
/// derives.
pub fn event_tag_rows(event: &Event) -> impl Iterator<Item = (&str, Vec<u8>)> {
    let kind = event.kind;
    indexed_tags(event, move |name| has_row(kind, name))
}

/// Whether a generic filter's predicate on `name` is answered, on revisions, from their records
/// rather than from tag rows.
#[must_use]
pub fn is_derived(name: &str) -> bool {
    DERIVED.contains(&name)
}

/// Pushes the condition (starting with ` AND `) that revision `{e}` (an `events` row of kind
/// 45010) carries tag `name` ([`DERIVED`]) with its first value among `values`. A value that is not
/// a canonical uuid matches nothing, as no revision carries one.
///
/// # Panics
/// When `name` is not [`DERIVED`] (a caller's mistake).
pub fn push_condition(qb: &mut QueryBuilder<'_, Postgres>, e: &str, name: &str, values: &[String]) {
    assert!(is_derived(name), "{name} is not a derived revision tag");
    let ids: Vec<Uuid> = values.iter().filter_map(|v| parse_uuid(v)).collect();
    if ids.is_empty() {
        qb.push(" AND FALSE");
    } else if name == "h" {
        qb.push(format!(" AND {e}.channel_id = ANY(")).push_bind(ids).push("::uuid[])");
    } else {
        qb.push(format!(
            " AND EXISTS (SELECT 1 FROM artifact_revisions r WHERE r.community_id = {e}.community_id \
              AND r.revision_id = {e}.id AND r.d = ANY("
        ))
        .push_bind(ids)
        .push("::uuid[]))");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_single_character_names_have_rows_and_a_revisions_d_and_h_none() {
        for name in ["d", "h", "e", "p", "t", "é"] {
            assert!(has_row(9, name), "{name}");
            assert!(has_row(buzz_core::kinds::ARTIFACT_REMOVAL, name), "{name}");
        }
        for name in ["", "ar", "op", "prev", "type", "title", "status", "auth", "root"] {
            assert!(!has_row(9, name), "{name}");
            assert!(!has_row(ARTIFACT_REVISION, name), "{name}");
        }
        assert!(!has_row(ARTIFACT_REVISION, "d") && !has_row(ARTIFACT_REVISION, "h"));
        assert!(has_row(ARTIFACT_REVISION, "e") && has_row(ARTIFACT_REVISION, "p"));
    }

    fn sql(name: &str, values: &[&str]) -> String {
        let mut qb = QueryBuilder::<Postgres>::new("SELECT 1 WHERE TRUE");
        let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
        push_condition(&mut qb, "e", name, &values);
        qb.sql().to_owned()
    }

    #[test]
    fn only_a_canonical_uuid_matches() {
        let upper = "6F1C2A4E-8A51-4B0E-9D3F-0C1B2A3D4E5F";
        assert!(sql("d", &[upper]).ends_with("AND FALSE"));
        assert!(sql("h", &[upper, "x"]).ends_with("AND FALSE"));
        assert!(sql("h", &[&upper.to_lowercase()]).contains("e.channel_id = ANY("));
        assert!(sql("d", &[&upper.to_lowercase(), "x"]).contains("r.d = ANY("));
    }
}

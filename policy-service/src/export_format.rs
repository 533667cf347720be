//! The community export format (NDJSON, version 1), shared by export and import
//! (docs/design.md "Community export and import").
//!
//! One JSON object a line, each with a `type`:
//! 1. `header`: `format` ([`FORMAT`]), `version` ([`VERSION`]), `relay_pubkey` (the key the
//!    source relay signed its own events with), `community_id`, `host`, `exported_at` (unix
//!    seconds) and `counts` (rows per section, read in the export's snapshot: a progress total);
//! 2. `community`: the community row ([`COMMUNITY_COLUMNS`]) in `row`;
//! 3. the [`SECTIONS`], in their order, one line per row, the row's columns (without
//!    `community_id`) in `row` (beside `type`, never merged: `artifacts` has a `type` column);
//! 4. `end`: `counts` again. A file without it was cut short and is refused.
//!
//! Rows are the tables' own columns as PostgreSQL's `to_jsonb` writes them (timestamps with
//! their offset, `bytea` as `"\\x…"`), so import reads them back with
//! `jsonb_populate_recordset` and nothing is re-encoded by hand.

/// The `format` of the header line.
pub const FORMAT: &str = "buzz-community-export";
/// The version of the format this relay writes and reads.
pub const VERSION: u64 = 1;

/// The columns of the `community` line. `access_version` is left out: it is the target's own
/// cache epoch and starts again at 0.
pub const COMMUNITY_COLUMNS: &str = "id, host, owner_pubkey, lifecycle, requires_nip_fi, \
     policy_generation, retention_days, created_at, name, description, icon";

/// One table keyed by `community_id`, exported row by row.
pub struct Section {
    /// The line's `type`.
    pub kind: &'static str,
    /// The table.
    pub table: &'static str,
    /// Its columns other than `community_id`, as exported and imported.
    pub columns: &'static str,
    /// The export's order (acceptance order for events and revisions).
    pub order: &'static str,
}

const fn section(
    kind: &'static str,
    table: &'static str,
    columns: &'static str,
    order: &'static str,
) -> Section {
    Section { kind, table, columns, order }
}

/// Every table that holds a community's state, in an order that satisfies the foreign keys
/// (channels before their members and markers, events before mentions). Not exported: `tokens`
/// (bearer grants of this deployment; the target issues its own) and `community_auth_upgrades`
/// (the operator's NIP-FI receipts, history rather than tenant state). The search column of
/// migration 0003 is generated from `raw` and is rebuilt by the target.
pub const SECTIONS: [Section; 11] = [
    section("member", "community_members", "pubkey, role, added_at", "pubkey"),
    section(
        "channel",
        "channels",
        "id, name, visibility, channel_type, ttl_seconds, archived, deleted_at, created_by, created_at",
        "id",
    ),
    section(
        "channel_member",
        "channel_members",
        "channel_id, pubkey, role, added_at, removed_at, banned",
        "channel_id, pubkey",
    ),
    section(
        "event",
        "events",
        "id, seq, pubkey, kind, created_at, channel_id, raw, accepted_at, expires_at, deleted_at, \
         redacted_at, thread_root",
        "seq",
    ),
    section(
        "event_tag",
        "event_tags",
        "event_id, name, value_hash, created_at",
        "event_id, name, value_hash",
    ),
    section(
        "artifact",
        "artifacts",
        "d, type, current_revision, home_channel, root, deleted, mentioned, created_at, updated_at",
        "d",
    ),
    section(
        "revision",
        "artifact_revisions",
        "revision_id, d, prev, op, channel_id, accepted_seq, accepted_at",
        "accepted_seq",
    ),
    section(
        "current_tag",
        "artifact_current_tags",
        "d, name, value_hash, home_channel, updated_at, expires_at, revision, type",
        "d, name, value_hash",
    ),
    section(
        "read_marker",
        "read_markers",
        "channel_id, pubkey, seq, event_id, updated_at",
        "channel_id, pubkey",
    ),
    section("mention", "mentions", "pubkey, event_id, channel_id, seq, created_at", "pubkey, event_id"),
    section("fi_binding", "community_fi_bindings", "issuer, created_at", "issuer"),
];

/// The section of line type `kind`, with its position in [`SECTIONS`].
#[must_use]
pub fn section_of(kind: &str) -> Option<(usize, &'static Section)> {
    SECTIONS.iter().enumerate().find(|(_, s)| s.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_unique_and_found_by_type() {
        for (i, s) in SECTIONS.iter().enumerate() {
            assert_eq!(section_of(s.kind).map(|(j, _)| j), Some(i));
            assert!(!s.columns.contains("community_id"), "{}", s.table);
        }
        assert!(section_of("header").is_none() && section_of("end").is_none());
    }
}

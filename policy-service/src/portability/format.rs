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

/// The columns of the `community` line import restores. `access_version` is left out: it is the
/// target's own cache epoch and starts again at 0. Export writes the row as it is (`to_jsonb` of
/// the row without `access_version`), so a source before migration 0004 exports without the
/// NIP-86 columns and they import as NULL (no rule).
pub const COMMUNITY_COLUMNS: &str = "id, host, owner_pubkey, lifecycle, requires_nip_fi, \
     policy_generation, retention_days, created_at, name, description, icon, allowed_kinds, \
     disallowed_kinds, blocked_ips";

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
///
/// The NIP-86 sections (migration 0004) come last; a section whose table the source lacks is
/// left out of the file and of its counts, and an export without them (an older one) imports
/// with none of their rows. Audit rows keep their `seq`, actor and time: they are history.
pub const SECTIONS: [Section; 14] = [
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
    section("ban", "community_bans", "pubkey, reason, banned_by, banned_at", "pubkey"),
    section("event_ban", "community_event_bans", "event_id, reason, banned_by, banned_at", "event_id"),
    section("audit", "community_audit", "seq, actor, method, params, at", "seq"),
];

/// The section of line type `kind`, with its position in [`SECTIONS`].
#[must_use]
pub fn section_of(kind: &str) -> Option<(usize, &'static Section)> {
    SECTIONS.iter().enumerate().find(|(_, s)| s.kind == kind)
}

/// The end line's `counts` (per section, `None` where it names none) against the rows read: every
/// section it names must match, and a section it does not name (an export from before that section
/// existed, or from a source without its table) must have had no rows.
#[must_use]
pub fn counts_agree(end: &[Option<u64>; SECTIONS.len()], read: &[u64; SECTIONS.len()]) -> bool {
    end.iter().zip(read).all(|(e, n)| e.unwrap_or(0) == *n)
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

    #[test]
    fn end_counts_may_leave_out_only_sections_without_rows() {
        let (event, ban) = (section_of("event").unwrap().0, section_of("ban").unwrap().0);
        let read = |ban_rows: u64| {
            let mut r = [0; SECTIONS.len()];
            (r[event], r[ban]) = (3, ban_rows);
            r
        };
        let mut old = [None; SECTIONS.len()];
        old.iter_mut().enumerate().filter(|(i, _)| *i != ban).for_each(|(_, c)| *c = Some(0));
        old[event] = Some(3);
        assert!(counts_agree(&old, &read(0)), "an older export without the ban section");
        assert!(!counts_agree(&old, &read(1)), "rows of a section the end line does not count");
        let mut all = old;
        all[ban] = Some(1);
        assert!(counts_agree(&all, &read(1)));
        all[event] = Some(2);
        assert!(!counts_agree(&all, &read(1)));
    }
}

//! SQL fragments every service builds its statements from, so that one rule is written once:
//! which channels a reader may read, and which stored events are still served. A fragment never
//! contains a value; where it needs one it takes the SQL expression that holds it (a bind such as
//! `$2`, or a column), named by the caller, so no fragment depends on the position of a bind.

/// Where a statement holds the reader's values, as SQL expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderBinds<'a> {
    /// The community (`uuid`).
    pub community: &'a str,
    /// The reader's member key (`text`): an agent reads with its owner's membership.
    pub pubkey: &'a str,
    /// The credential's channel restriction (`uuid[]`, NULL = unrestricted).
    pub restriction: &'a str,
}

impl ReaderBinds<'static> {
    /// The reader bound first: `$1` community, `$2` member key, `$3` channel restriction.
    pub const FIRST: Self = Self { community: "$1", pubkey: "$2", restriction: "$3" };
}

/// Condition: event `{e}` has not expired (TTL channels). Reads check it themselves rather than
/// wait for the sweeper.
#[must_use]
pub fn not_expired(e: &str) -> String {
    format!("({e}.expires_at IS NULL OR {e}.expires_at > now())")
}

/// Condition: event `{e}` is served: not deleted (NIP-09), not redacted, not expired.
#[must_use]
pub fn served_event(e: &str) -> String {
    format!("{e}.deleted_at IS NULL AND {e}.redacted_at IS NULL AND {}", not_expired(e))
}

/// The index a NIP-50 search runs on: `(community_id, document)`, partial on kinds 9 and 45010
/// (migration 0006, through `btree_gin`), so that the community is part of the index condition
/// and a search fetches only its own community's rows. 0003's `events_search` (the document
/// alone) serves the same statement until a later release drops it.
pub const SEARCH_INDEX: &str = "events_search_community";

/// Expression: the NIP-50 full-text document of event row `{e}` (its `title` tag's value, then its
/// content) as a `simple` tsvector. Exactly the document of [`SEARCH_INDEX`] (migration 0006) and
/// of `events_search` (0003); a query states it together with `{e}.community_id = <community>` and
/// `{e}.kind IN (9, 45010)` so that the partial index applies with the community in its condition.
#[must_use]
pub fn search_document(e: &str) -> String {
    format!(
        "to_tsvector('simple'::regconfig, \
         coalesce(jsonb_path_query_first({e}.raw::jsonb, 'strict $.tags[*] ? (@[0] == \"title\")[1]', '{{}}', true) #>> '{{}}', '') \
         || ' ' || coalesce({e}.raw::jsonb ->> 'content', ''))"
    )
}

/// The read rule (contract "Channels", and `access::can_read`) as a condition on a
/// channel row `{c}`: a live channel of the community, within the credential's channel
/// restriction, the reader a community member not banned from it, and the channel open (not a DM)
/// or the reader an active member of it. The credential's read scope is checked before querying.
#[must_use]
pub fn readable_channel(c: &str, r: ReaderBinds<'_>) -> String {
    let ReaderBinds { community, pubkey, restriction } = r;
    format!(
        "{c}.community_id = {community} AND {c}.deleted_at IS NULL \
         AND ({restriction}::uuid[] IS NULL OR {c}.id = ANY({restriction}::uuid[])) \
         AND EXISTS (SELECT 1 FROM community_members m WHERE m.community_id = {community} \
                     AND m.pubkey = {pubkey}) \
         AND NOT EXISTS (SELECT 1 FROM channel_members b WHERE b.community_id = {community} \
                         AND b.channel_id = {c}.id AND b.pubkey = {pubkey} AND b.banned) \
         AND (({c}.visibility = 'open' AND {c}.channel_type <> 'dm') \
              OR EXISTS (SELECT 1 FROM channel_members cm WHERE cm.community_id = {community} \
                         AND cm.channel_id = {c}.id AND cm.pubkey = {pubkey} AND cm.removed_at IS NULL))"
    )
}

/// Condition: `{alias}.channel_id` is a channel the reader may read.
#[must_use]
pub fn readable_channel_of(alias: &str, r: ReaderBinds<'_>) -> String {
    format!("{alias}.channel_id IN (SELECT c.id FROM channels c WHERE {})", readable_channel("c", r))
}

/// Expression: the ids of every channel the reader may read, as one `uuid[]`, for statements that
/// filter by channel inside an index (`channel = ANY(...)`) instead of joining the channel list.
#[must_use]
pub fn readable_channel_ids(r: ReaderBinds<'_>) -> String {
    format!("ARRAY(SELECT c.id FROM channels c WHERE {})", readable_channel("c", r))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `$n` placeholders a fragment uses.
    fn placeholders(sql: &str) -> Vec<&str> {
        let mut found: Vec<&str> = sql
            .match_indices('$')
            .map(|(i, _)| {
                let digits = sql[i + 1..].bytes().take_while(u8::is_ascii_digit).count();
                &sql[i..=i + digits]
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    #[test]
    fn the_read_rule_uses_exactly_the_binds_it_is_given() {
        let binds = ReaderBinds { community: "$7", pubkey: "$8", restriction: "$9" };
        for sql in
            [readable_channel("c", binds), readable_channel_of("e", binds), readable_channel_ids(binds)]
        {
            assert_eq!(placeholders(&sql), ["$7", "$8", "$9"], "{sql}");
        }
        assert_eq!(placeholders(&readable_channel("c", ReaderBinds::FIRST)), ["$1", "$2", "$3"]);
    }

    #[test]
    fn the_read_rule_names_every_part_of_the_contract() {
        let sql = readable_channel("ch", ReaderBinds::FIRST);
        for part in [
            "ch.community_id = $1",
            "ch.deleted_at IS NULL",
            "ch.id = ANY($3::uuid[])",
            "m.pubkey = $2",
            "AND b.banned",
            "ch.visibility = 'open' AND ch.channel_type <> 'dm'",
            "cm.removed_at IS NULL",
        ] {
            assert!(sql.contains(part), "{part} missing from {sql}");
        }
        assert!(readable_channel_of("mn", ReaderBinds::FIRST).starts_with("mn.channel_id IN (SELECT c.id"));
    }

    #[test]
    fn a_served_event_is_undeleted_unredacted_and_unexpired_under_its_own_alias() {
        assert_eq!(not_expired("r"), "(r.expires_at IS NULL OR r.expires_at > now())");
        let sql = served_event("r");
        assert_eq!(
            sql,
            "r.deleted_at IS NULL AND r.redacted_at IS NULL AND (r.expires_at IS NULL OR r.expires_at > now())"
        );
        assert!(!sql.contains("e."), "{sql}");
    }
}

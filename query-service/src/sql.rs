//! SQL built from NIP-01 filters. Values are always bound, never formatted into the text.

use buzz_bus::QueryKind;
use buzz_core::{kinds, ChannelId, CommunityId, Filter};
use buzz_store::fragments::{readable_channel_of, search_document, served_event, ReaderBinds};
use buzz_store::tag_rows;
use sqlx::{Postgres, QueryBuilder};

/// The reader a query runs for; bound as `$1` (community), `$2` (pubkey), `$3` (channel restriction).
pub struct Reader<'a> {
    /// The community queried.
    pub community: CommunityId,
    /// The reader's public key.
    pub pubkey: &'a str,
    /// Channels a bearer token is restricted to; `None` for all the reader may see.
    pub channel_ids: Option<&'a [ChannelId]>,
}

/// Does the filter need the database at all for a query of `kind`? (An empty value list matches
/// nothing; `limit: 0` asks for an empty page, but a COUNT counts every match whatever the limit.)
#[must_use]
pub fn can_match(filter: &Filter, kind: QueryKind) -> bool {
    !(filter.ids.as_ref().is_some_and(Vec::is_empty)
        || filter.authors.as_ref().is_some_and(Vec::is_empty)
        || filter.kinds.as_ref().is_some_and(Vec::is_empty)
        || filter.tags.values().any(Vec::is_empty)
        || (kind == QueryKind::Page && filter.limit == Some(0)))
}

/// A statement that starts by binding the reader as `$1`, `$2`, `$3`, the binds
/// [`ReaderBinds::FIRST`] names.
pub(crate) fn with_reader<'a>(reader: &Reader<'a>) -> QueryBuilder<'a, Postgres> {
    prefixed_with_reader("", reader)
}

/// [`with_reader`] after `prefix` (e.g. `EXPLAIN ...`).
pub(crate) fn prefixed_with_reader<'a>(prefix: &str, reader: &Reader<'a>) -> QueryBuilder<'a, Postgres> {
    let mut qb = QueryBuilder::new(format!("{prefix}WITH reader AS (SELECT "));
    qb.push_bind(reader.community)
        .push("::uuid AS community, ")
        .push_bind(reader.pubkey.to_owned())
        .push("::text AS pubkey, ")
        .push_bind(reader.channel_ids.map(<[ChannelId]>::to_vec))
        .push("::uuid[] AS restriction) ");
    qb
}

/// Which stored events a filter's conditions are written for. A predicate on an envelope tag of
/// NIP-AR revisions (`buzz_store::tag_rows::DERIVED`) is answered from revision records on
/// revisions and from tag rows on every other event, so a filter with one that can match both is
/// run as two parts whose results are merged; every other filter is one part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Every event; tag predicates from `event_tags` (the filter names no derived tag, or cannot
    /// match a revision).
    All,
    /// Revisions only (kind 45010): derived predicates from their records.
    Revisions,
    /// Every other kind.
    Others,
}

/// The parts `f` runs as (see [`Part`]).
fn parts(f: &Filter) -> &'static [Part] {
    let derived = f.tags.keys().any(|name| tag_rows::is_derived(name));
    let revisions = f.kinds.as_ref().is_none_or(|k| k.contains(&kinds::ARTIFACT_REVISION));
    let others = f.kinds.as_ref().is_none_or(|k| k.iter().any(|&k| k != kinds::ARTIFACT_REVISION));
    match (derived && revisions, others) {
        (false, _) => &[Part::All],
        (true, false) => &[Part::Revisions],
        (true, true) => &[Part::Others, Part::Revisions],
    }
}

/// `FROM events e WHERE` the community, served and readable (the reader's binds, `$1`..`$3`).
fn push_from(qb: &mut QueryBuilder<'_, Postgres>) {
    qb.push(" FROM events e WHERE e.community_id = $1 AND ")
        .push(served_event("e"))
        .push(" AND ")
        .push(readable_channel_of("e", ReaderBinds::FIRST));
}

fn push_conditions(qb: &mut QueryBuilder<'_, Postgres>, f: &Filter, part: Part) {
    let revision = i64::from(kinds::ARTIFACT_REVISION);
    match part {
        Part::All => {}
        Part::Revisions => {
            // A literal, so that every plan may use the partial indexes on revisions
            // (`events_revisions_by_channel` for `#h`, in the baseline schema).
            qb.push(format!(" AND e.kind = {}", kinds::ARTIFACT_REVISION));
        }
        Part::Others => {
            qb.push(" AND e.kind <> ").push_bind(revision);
        }
    }
    if let Some(ids) = &f.ids {
        qb.push(" AND e.id = ANY(").push_bind(ids.clone()).push(")");
    }
    if let Some(authors) = &f.authors {
        qb.push(" AND e.pubkey = ANY(").push_bind(authors.clone()).push(")");
    }
    if let Some(kinds) = &f.kinds {
        let kinds: Vec<i64> = kinds.iter().map(|k| i64::from(*k)).collect();
        qb.push(" AND e.kind = ANY(").push_bind(kinds).push(")");
    }
    if let Some(since) = f.since {
        qb.push(" AND e.created_at >= ").push_bind(since);
    }
    if let Some(until) = f.until {
        qb.push(" AND e.created_at <= ").push_bind(until);
    }
    if let Some(q) = search_text(f) {
        // Literal kinds, so that every plan may use the partial search index; with the
        // community (`push_from`, `e.community_id = $1`) in its condition (`SEARCH_INDEX`).
        qb.push(" AND e.kind IN (9, 45010) AND ")
            .push(search_document("e"))
            .push(" @@ websearch_to_tsquery('simple'::regconfig, ")
            .push_bind(q)
            .push(")");
    }
    if only_current_revisions(f) {
        // A search never matches a deleted artifact (its deletion carries no title or content).
        let current = if f.search.is_some() {
            "EXISTS (SELECT 1 FROM artifacts a WHERE a.community_id = e.community_id AND a.current_revision = e.id AND NOT a.deleted)"
        } else {
            "EXISTS (SELECT 1 FROM artifacts a WHERE a.community_id = e.community_id AND a.current_revision = e.id)"
        };
        match part {
            Part::All => {
                qb.push(" AND (e.kind <> ").push_bind(revision).push(format!(" OR {current})"));
            }
            Part::Revisions => {
                qb.push(format!(" AND {current}"));
            }
            Part::Others => {}
        }
    }
    for (name, values) in &f.tags {
        if part == Part::Revisions && tag_rows::is_derived(name) {
            tag_rows::push_condition(qb, "e", name, values);
            continue;
        }
        let hashes: Vec<Vec<u8>> = values.iter().map(|v| buzz_store::tag_value_hash(v)).collect();
        qb.push(" AND EXISTS (SELECT 1 FROM event_tags t WHERE t.community_id = e.community_id AND t.event_id = e.id AND t.name = ")
            .push_bind(name.clone())
            .push(" AND t.value_hash = ANY(")
            .push_bind(hashes)
            .push("))");
    }
}

/// NIP-AR on generic filters: one that names revisions (`ids`) or artifacts (`#d`) is a lookup and
/// returns every revision it matches, each under its own channel's access like any event (redacted
/// and expired ones are excluded for every event), so a lookup by d returns the deletion. Any other
/// filter that can match kind 45010 returns only each artifact's current revision (a deletion
/// included; a retired artifact's current revision is redacted), so that replaying a channel does
/// not replay its artifacts' history. A search matches current revisions only, lookup or not
/// (NIP-50 over artifacts: "title and content of the current revision; history never").
fn only_current_revisions(f: &Filter) -> bool {
    let can_match_revisions = f.kinds.as_ref().is_none_or(|k| k.contains(&kinds::ARTIFACT_REVISION));
    can_match_revisions && (f.search.is_some() || (f.ids.is_none() && !f.tags.contains_key("d")))
}

/// The filter's NIP-50 query for `websearch_to_tsquery` (validated before any statement is built;
/// a filter that fails validation never gets here).
fn search_text(f: &Filter) -> Option<String> {
    f.search_query().ok().flatten()
}

/// `ORDER BY` of a page over `{e}`, then ` LIMIT `: newest first, or with `ranked` (the outer
/// order of a search) by relevance (`ts_rank` of the document against the query), then newest
/// first.
///
/// A search's candidates (`ranked` false) are ordered by `created_at + 0`, which no index
/// provides: a newest-first walk of `events_by_time` would evaluate the search on each row it
/// passes, recomputing its document, and for a query whose matches are few or outside the
/// reader's channels walk the whole community (it ran into the budget); unordered, the planner
/// collects the matches from the search index's bitmap and sorts them.
fn push_order(qb: &mut QueryBuilder<'_, Postgres>, f: &Filter, e: &str, ranked: bool) {
    qb.push(" ORDER BY ");
    let search = search_text(f);
    match (&search, ranked) {
        (Some(q), true) => {
            qb.push("ts_rank(")
                .push(search_document(e))
                .push(", websearch_to_tsquery('simple'::regconfig, ")
                .push_bind(q.clone())
                .push(")) DESC, ");
            qb.push(format!("{e}.created_at DESC, {e}.id LIMIT "));
        }
        (Some(_), false) => {
            qb.push(format!("{e}.created_at + 0 DESC, {e}.id LIMIT "));
        }
        (None, _) => {
            qb.push(format!("{e}.created_at DESC, {e}.id LIMIT "));
        }
    }
}

/// How many of a search's newest matches (per part) are ranked by relevance. Ranking computes each
/// candidate's document from its JSON again (the index holds no positions to rank by), about 15 us
/// a row: a word in a fifth of a million messages took seconds and hit the execution budget. The
/// newest 1,000 matches are ranked in a few milliseconds, and a search with fewer matches than that
/// is ranked whole (docs/design.md "Search (NIP-50)").
pub const SEARCH_RANK_WINDOW: i64 = 1000;

/// Newest first, as NIP-01 asks for the initial query. A filter of two parts ([`Part`]) takes
/// each part's first `limit` and keeps the first `limit` of both.
pub fn select_events<'a>(reader: &Reader<'a>, f: &Filter, limit: u32) -> QueryBuilder<'a, Postgres> {
    select_events_after("", reader, f, limit)
}

/// [`select_events`] under `EXPLAIN (ANALYZE, BUFFERS)`: one text row per plan line (plan checks).
pub fn explain_select_events<'a>(reader: &Reader<'a>, f: &Filter, limit: u32) -> QueryBuilder<'a, Postgres> {
    select_events_after("EXPLAIN (ANALYZE, BUFFERS) ", reader, f, limit)
}

fn select_events_after<'a>(
    prefix: &str,
    reader: &Reader<'a>,
    f: &Filter,
    limit: u32,
) -> QueryBuilder<'a, Postgres> {
    let mut qb = prefixed_with_reader(prefix, reader);
    let limit = i64::from(limit);
    let search = f.search.is_some();
    match parts(f) {
        [part] if !search => {
            qb.push("SELECT e.id, e.raw");
            push_from(&mut qb);
            push_conditions(&mut qb, f, *part);
            push_order(&mut qb, f, "e", false);
            qb.push_bind(limit);
        }
        // Each part's newest `limit` (a search: its newest SEARCH_RANK_WINDOW), then the page of
        // all of them, newest first (a search: ranked).
        parts => {
            let per_part = if search { SEARCH_RANK_WINDOW.max(limit) } else { limit };
            qb.push("SELECT x.id, x.raw FROM (");
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    qb.push(" UNION ALL ");
                }
                qb.push("(SELECT e.id, e.raw, e.created_at");
                push_from(&mut qb);
                push_conditions(&mut qb, f, *part);
                push_order(&mut qb, f, "e", false);
                qb.push_bind(per_part).push(")");
            }
            qb.push(") x");
            push_order(&mut qb, f, "x", true);
            qb.push_bind(limit);
        }
    }
    qb
}

/// [`count_events`] under `EXPLAIN (ANALYZE, BUFFERS)`: one text row per plan line (plan checks).
pub fn explain_count_events<'a>(reader: &Reader<'a>, filters: &[&Filter]) -> QueryBuilder<'a, Postgres> {
    count_events_after("EXPLAIN (ANALYZE, BUFFERS) ", reader, filters)
}

/// COUNT over the union of the filters (an event matching two filters counts once). When a filter
/// has two parts ([`Part`]), revisions and other events are counted apart and added (no event is
/// both), each filter conditioned for each.
pub fn count_events<'a>(reader: &Reader<'a>, filters: &[&Filter]) -> QueryBuilder<'a, Postgres> {
    count_events_after("", reader, filters)
}

fn count_events_after<'a>(
    prefix: &str,
    reader: &Reader<'a>,
    filters: &[&Filter],
) -> QueryBuilder<'a, Postgres> {
    let mut qb = prefixed_with_reader(prefix, reader);
    // One count when every filter is one part (each written as its own part), else one per part
    // with every filter written for that part (each part's conditions restrict the kind).
    let split = filters.iter().any(|f| parts(f).len() > 1);
    let counted: &[Option<Part>] = if split { &[Some(Part::Others), Some(Part::Revisions)] } else { &[None] };
    qb.push("SELECT ");
    for (i, &part) in counted.iter().enumerate() {
        if i > 0 {
            qb.push(" + ");
        }
        qb.push("(SELECT count(*)");
        push_from(&mut qb);
        qb.push(" AND (");
        for (j, f) in filters.iter().enumerate() {
            if j > 0 {
                qb.push(" OR ");
            }
            qb.push("(TRUE");
            push_conditions(&mut qb, f, part.unwrap_or(parts(f)[0]));
            qb.push(")");
        }
        qb.push("))");
    }
    qb
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(v: serde_json::Value) -> Filter {
        Filter::from_value(&v).unwrap()
    }

    fn sql_of(f: &Filter) -> String {
        let reader = Reader { community: CommunityId::nil(), pubkey: "", channel_ids: None };
        select_events(&reader, f, 10).sql().to_owned()
    }

    #[test]
    fn a_count_ignores_limit_zero_as_it_ignores_every_limit() {
        let zero = filter(serde_json::json!({"kinds": [9], "limit": 0}));
        assert!(!can_match(&zero, QueryKind::Page), "a page of 0 events needs no statement");
        assert!(can_match(&zero, QueryKind::Count), "COUNT counts every match, whatever the limit");
        let empty = filter(serde_json::json!({"kinds": []}));
        assert!(!can_match(&empty, QueryKind::Count) && !can_match(&empty, QueryKind::Page));
    }

    #[test]
    fn a_search_is_ranked_and_matches_live_current_revisions_only_even_as_a_lookup() {
        for f in [
            serde_json::json!({"search": "deploy"}),
            serde_json::json!({"search": "deploy", "ids": ["a".repeat(64)]}),
            serde_json::json!({"search": "deploy", "#d": ["x"], "kinds": [9, 45010]}),
        ] {
            let sql = sql_of(&filter(f.clone()));
            assert!(sql.contains("AND NOT a.deleted"), "{f}: {sql}");
            assert!(sql.contains("e.kind IN (9, 45010)"), "{f}: {sql}");
            assert!(sql.contains("ORDER BY ts_rank("), "{f}: {sql}");
            assert!(sql.contains(&search_document("e")), "{f}: {sql}");
        }
        assert!(!sql_of(&filter(serde_json::json!({"kinds": [9]}))).contains("ts_rank"));
    }

    /// Every part of a search, page or COUNT, states what the search index holds: the community
    /// (so that another community's matches are never fetched), the kinds and the document.
    #[test]
    fn every_part_of_a_search_states_the_community_kinds_and_document_of_the_search_index() {
        let reader = Reader { community: CommunityId::nil(), pubkey: "", channel_ids: None };
        for f in [
            serde_json::json!({"search": "deploy"}),
            serde_json::json!({"search": "deploy", "#type": ["buzz.task"]}),
            serde_json::json!({"search": "deploy", "kinds": [9]}),
        ] {
            let f = filter(f);
            for sql in [
                select_events(&reader, &f, 10).sql().to_owned(),
                count_events(&reader, &[&f]).sql().to_owned(),
            ] {
                let searches =
                    sql.matches(&format!("{} @@ websearch_to_tsquery(", search_document("e"))).count();
                assert!(searches >= 1, "{sql}");
                let parts: Vec<&str> = sql.split(" FROM events e WHERE ").skip(1).collect();
                assert_eq!(parts.len(), searches, "one search per part: {sql}");
                for part in parts {
                    assert!(part.starts_with("e.community_id = $1 AND "), "{part}");
                    assert!(part.contains("e.kind IN (9, 45010) AND "), "{part}");
                }
            }
        }
    }

    #[test]
    fn only_broad_filters_that_can_match_revisions_are_limited_to_current_revisions() {
        let current = "a.current_revision = e.id";
        for broad in
            [serde_json::json!({}), serde_json::json!({"kinds": [45010]}), serde_json::json!({"#h": ["x"]})]
        {
            assert!(sql_of(&filter(broad.clone())).contains(current), "{broad}");
        }
        for lookup in [
            serde_json::json!({"ids": ["a".repeat(64)]}),
            serde_json::json!({"kinds": [45010], "#d": ["x"]}),
            serde_json::json!({"#d": ["x"], "#h": ["y"]}),
            serde_json::json!({"kinds": [9, 45011]}),
        ] {
            assert!(!sql_of(&filter(lookup.clone())).contains(current), "{lookup}");
        }
    }
}

-- no-transaction
-- Expand: NIP-50 search per community. 0003's `events_search` has no community column, so a
-- search read every matching row of every community from the heap and dropped the other
-- communities' rows afterwards (a phrase common in another tenant's private channel took
-- ~1,160 ms against ~2 ms for an absent word, `Rows Removed by Filter: 150000`, issue 37 item
-- 7). This index holds `community_id` (through `btree_gin`, 0005) beside the same document, so
-- the community is part of the index condition and a search fetches only its own community's
-- rows. The document is 0003's expression exactly (store/src/fragments.rs `search_document`;
-- keep the three identical, or the index goes unused), partial on the same kinds.
--
-- 0003's `events_search` stays until a later release drops it (expand, then contract): a search
-- runs with whichever index exists (the statement states the community and the document, which
-- both indexes serve), so a replica started before this migration, or on a database where it
-- could not run, keeps searching; the planner takes this index once it is valid. Built CONCURRENTLY, writes
-- going on; `buzz migrate` drops an INVALID leftover of an interrupted build and tries again.
CREATE INDEX CONCURRENTLY events_search_community ON events USING gin (community_id, (
    to_tsvector('simple'::regconfig,
        coalesce(jsonb_path_query_first(raw::jsonb, 'strict $.tags[*] ? (@[0] == "title")[1]', '{}', true) #>> '{}', '')
        || ' ' || coalesce(raw::jsonb ->> 'content', ''))
)) WHERE kind IN (9, 45010);

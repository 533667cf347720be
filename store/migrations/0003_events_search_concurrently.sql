-- no-transaction
-- 0.2.0, expand: NIP-50 search. The full-text document of every kind-9 message (its content)
-- and NIP-AR revision (its title tag, then its content), in PostgreSQL's `simple` configuration,
-- indexed with GIN. The document is computed from `raw` by the same expression the query states
-- (store/src/fragments.rs `search_document`; keep the two identical, or the index goes unused).
--
-- An expression index rather than a generated `tsvector` column: adding a stored generated
-- column rewrites `events` under an ACCESS EXCLUSIVE lock, which the schema rules forbid
-- (docs/operations.md "Changing the schema"); the index holds the same generated tsvector and is
-- built CONCURRENTLY, writes going on. The path is evaluated `silent` (its fourth argument): a
-- row whose JSON has no usable `tags` gets no title instead of failing its INSERT or the build. Partial: only kinds 9 and 45010 are searched, so no other
-- event pays for an entry. 0.1.0 replicas never use it and only pay its upkeep on insert.
CREATE INDEX CONCURRENTLY events_search ON events USING gin ((
    to_tsvector('simple'::regconfig,
        coalesce(jsonb_path_query_first(raw::jsonb, 'strict $.tags[*] ? (@[0] == "title")[1]', '{}', true) #>> '{}', '')
        || ' ' || coalesce(raw::jsonb ->> 'content', ''))
)) WHERE kind IN (9, 45010);

-- The rows every write adds beside an event or an artifact (an event's tag rows, an artifact's
-- current-tag rows and revision records) lose their foreign keys; their removal with the parent
-- stays, done by one statement-level trigger per parent table (issue 13, docs/benchmarks.md
-- "NIP-AR revisions", docs/design.md "Store").
--
-- A foreign key checks every inserted row with a query of its own that also locks the parent row
-- (FOR KEY SHARE, one WAL record each): about 12 checks per NIP-AR revision (its ~8 tag rows, its
-- new current-tag rows, its revision record) and one per tag of every kind-9 post. The write path
-- never inserts a child without its parent: tag rows are inserted by the statement that inserts
-- their event, joined to the rows it inserted; current-tag rows and revision records by the
-- transaction that holds its artifact's row (just claimed, or locked FOR UPDATE); and a parent is
-- never deleted while that transaction runs (events and artifacts go with their community, whose
-- deletion waits for the writer's key-share lock on the community row, or by the sweepers, which
-- never remove a row a writer is adding). What the foreign keys still gave, removal with the
-- parent (ON DELETE CASCADE), the triggers give: after each statement that deletes events or
-- artifacts (directly or by a cascade), the children of exactly the deleted rows go too.

ALTER TABLE event_tags DROP CONSTRAINT event_tags_community_id_event_id_fkey;
ALTER TABLE artifact_current_tags DROP CONSTRAINT artifact_current_tags_community_id_d_fkey;
ALTER TABLE artifact_revisions DROP CONSTRAINT artifact_revisions_community_id_d_fkey;

-- The deletes are planned on every run (EXECUTE), with the number of rows deleted in hand: a
-- statement without parameters would keep the plan of its first run in each session, and the
-- plan for a community's millions of events (a hash join over the whole child table) must never
-- serve a sweep's thousand or a relay event's one.
CREATE FUNCTION buzz_events_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'DELETE FROM event_tags t USING gone g WHERE t.community_id = g.community_id AND t.event_id = g.id';
    RETURN NULL;
END $$;
CREATE TRIGGER events_deleted AFTER DELETE ON events
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION buzz_events_deleted();

CREATE FUNCTION buzz_artifacts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'DELETE FROM artifact_current_tags t USING gone g WHERE t.community_id = g.community_id AND t.d = g.d';
    EXECUTE 'DELETE FROM artifact_revisions r USING gone g WHERE r.community_id = g.community_id AND r.d = g.d';
    RETURN NULL;
END $$;
CREATE TRIGGER artifacts_deleted AFTER DELETE ON artifacts
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION buzz_artifacts_deleted();

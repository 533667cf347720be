-- The artifact's type on every current-tag row (issue 13, docs/design.md "The type on every
-- current-tag row"; `buzz_store::current_tags`).
--
-- `type` is immutable (NIP-AR: "d and type are immutable") and occurs exactly once in every
-- revision, so it is a column of the artifact (`artifacts.type`) and, from now on, of each of its
-- current-tag rows, instead of rows of its own:
-- - a current-state `#type` is a condition on the lead row's `type` column, answered inside the
--   index walk (`type` is included in both secondary indexes), where it was an index probe into
--   the primary key for every candidate (262 of a cold `#type` + `#project` page's 577 buffer
--   reads at 1 000 000 artifacts);
-- - `#type` without another row predicate walks the artifacts' `h` rows (every served artifact
--   has exactly one) by type and change time (`artifact_current_tags_by_type`, partial on `h`);
-- - a current-state query without a row predicate nor `#type` walks the same anchor rows newest
--   first (`artifact_current_tags_live_by_time`, partial on `h`), filtering readable channel and
--   expiry inside the index like any tagged walk, instead of `artifacts_live_by_time` with a heap
--   probe of `artifacts` per candidate (three of four are in channels the reader cannot read in
--   the benchmark's corpus), which is dropped;
-- - a revision writes one current-tag row fewer (a heap tuple and 3 index entries; the `h` row's
--   entries in the two partial indexes replace them and `artifacts_live_by_time`'s).

DELETE FROM artifact_current_tags WHERE name = 'type';

ALTER TABLE artifact_current_tags ADD COLUMN type text;
UPDATE artifact_current_tags t SET type = a.type
FROM artifacts a WHERE a.community_id = t.community_id AND a.d = t.d;
-- A row whose artifact is gone cannot be served (the statement-level triggers of 0012 remove
-- them with their artifact; none is expected).
DELETE FROM artifact_current_tags WHERE type IS NULL;
ALTER TABLE artifact_current_tags ALTER COLUMN type SET NOT NULL;

DROP INDEX artifact_current_tags_by_channel;
CREATE INDEX artifact_current_tags_by_channel
    ON artifact_current_tags (community_id, name, value_hash, home_channel)
    INCLUDE (updated_at, d, expires_at, revision, type);
DROP INDEX artifact_current_tags_by_time;
CREATE INDEX artifact_current_tags_by_time
    ON artifact_current_tags (community_id, name, value_hash, updated_at DESC, d)
    INCLUDE (home_channel, expires_at, revision, type);
-- `#type` alone (and snapshot captures by type): one entry per served artifact, its `h` row.
CREATE INDEX artifact_current_tags_by_type
    ON artifact_current_tags (community_id, type, updated_at DESC, d)
    INCLUDE (home_channel, expires_at, revision) WHERE name = 'h';
-- Every current-state query without a row predicate nor `#type`: the anchor rows, newest first.
CREATE INDEX artifact_current_tags_live_by_time
    ON artifact_current_tags (community_id, updated_at DESC, d)
    INCLUDE (home_channel, expires_at, revision) WHERE name = 'h';
DROP INDEX artifacts_live_by_time;

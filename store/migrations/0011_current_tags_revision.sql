-- The current revision's id beside each current-tag row (issue 13, docs/benchmarks.md "NIP-AR
-- current-state queries"): a tagged current-state page reads its events by id straight from the
-- index walk, without probing `artifacts` for each row (a third of a cold page's buffer reads at
-- 1 000 000 artifacts). Maintained with the other columns by the write path, in the transaction
-- that changes what is current (every revision already rewrites its artifact's rows).

ALTER TABLE artifact_current_tags ADD COLUMN revision text;
UPDATE artifact_current_tags t SET revision = a.current_revision
FROM artifacts a WHERE a.community_id = t.community_id AND a.d = t.d;
ALTER TABLE artifact_current_tags ALTER COLUMN revision SET NOT NULL;

DROP INDEX artifact_current_tags_by_channel;
CREATE INDEX artifact_current_tags_by_channel
    ON artifact_current_tags (community_id, name, value_hash, home_channel) INCLUDE (updated_at, d, expires_at, revision);
DROP INDEX artifact_current_tags_by_time;
CREATE INDEX artifact_current_tags_by_time
    ON artifact_current_tags (community_id, name, value_hash, updated_at DESC, d) INCLUDE (home_channel, expires_at, revision);

-- NIP-AR current-state queries: the tags of each live artifact's CURRENT revision, with the
-- artifact's home channel and change time beside them, so that a current-state query on
-- `#<name>` filters by readable channel inside the index and never touches older revisions.
--
-- Maintained by the write path in the transaction that advances an artifact (create, update,
-- move, delete, restore): rows are the current revision's (name, first-value hash) pairs; a
-- deleted artifact has none. Whether the current revision is still served (not redacted, not
-- expired) is checked against `events` when a page is read, so those changes need no upkeep here.

CREATE TABLE artifact_current_tags (
    community_id uuid NOT NULL,
    d            uuid NOT NULL,
    name         text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 64),
    value_hash   bytea NOT NULL CHECK (octet_length(value_hash) = 32),
    home_channel uuid NOT NULL,
    updated_at   timestamptz NOT NULL,
    -- Probing one more predicate for an artifact is index-only, channel included.
    PRIMARY KEY (community_id, d, name, value_hash) INCLUDE (home_channel),
    FOREIGN KEY (community_id, d) REFERENCES artifacts (community_id, d) ON DELETE CASCADE
);
-- A selective predicate: its matches in the reader's channels, without visiting the heap.
CREATE INDEX artifact_current_tags_by_channel
    ON artifact_current_tags (community_id, name, value_hash, home_channel) INCLUDE (updated_at, d);
-- An unselective predicate: walk its matches newest first and stop at the page.
CREATE INDEX artifact_current_tags_by_time
    ON artifact_current_tags (community_id, name, value_hash, updated_at DESC, d) INCLUDE (home_channel);
-- Current-state queries without a tag predicate.
CREATE INDEX artifacts_live_by_time ON artifacts (community_id, updated_at DESC, d) WHERE NOT deleted;

INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at)
SELECT DISTINCT a.community_id, a.d, t.name, t.value_hash, a.home_channel, a.updated_at
FROM artifacts a
JOIN event_tags t ON t.community_id = a.community_id AND t.event_id = a.current_revision
WHERE NOT a.deleted;

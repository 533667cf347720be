-- NIP-AR current-state queries: the tags of each served artifact's CURRENT revision, with the
-- artifact's home channel, change time and expiry beside them, so that a current-state query on
-- `#<name>` filters by readable channel inside the index, orders and pages there, and never
-- touches older revisions; events are read only for the page itself.
--
-- Maintained by the write path in the transaction that changes what is current: a revision
-- (create, update, move, delete, restore) replaces the artifact's rows with its revision's
-- (name, first-value hash) pairs, a deleted artifact has none, and redacting (retiring) a current
-- revision removes them. Expiry needs no upkeep: `expires_at` is checked when reading.

CREATE TABLE artifact_current_tags (
    community_id uuid NOT NULL,
    d            uuid NOT NULL,
    name         text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 64),
    value_hash   bytea NOT NULL CHECK (octet_length(value_hash) = 32),
    home_channel uuid NOT NULL,
    updated_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    -- Probing one more predicate for an artifact (or starting from it) is index-only.
    PRIMARY KEY (community_id, d, name, value_hash) INCLUDE (home_channel, updated_at, expires_at),
    FOREIGN KEY (community_id, d) REFERENCES artifacts (community_id, d) ON DELETE CASCADE
);
-- A selective predicate: its matches in the reader's channels, without visiting the heap.
CREATE INDEX artifact_current_tags_by_channel
    ON artifact_current_tags (community_id, name, value_hash, home_channel) INCLUDE (updated_at, d, expires_at);
-- An unselective predicate: walk its matches newest first and stop at the page.
CREATE INDEX artifact_current_tags_by_time
    ON artifact_current_tags (community_id, name, value_hash, updated_at DESC, d) INCLUDE (home_channel, expires_at);
-- Current-state queries without a tag predicate.
CREATE INDEX artifacts_live_by_time ON artifacts (community_id, updated_at DESC, d) WHERE NOT deleted;

INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, expires_at)
SELECT DISTINCT a.community_id, a.d, t.name, t.value_hash, a.home_channel, a.updated_at, e.expires_at
FROM artifacts a
JOIN events e ON e.community_id = a.community_id AND e.id = a.current_revision
JOIN event_tags t ON t.community_id = a.community_id AND t.event_id = a.current_revision
WHERE NOT a.deleted AND e.redacted_at IS NULL AND e.deleted_at IS NULL;

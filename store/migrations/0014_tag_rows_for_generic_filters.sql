-- Tag rows for generic filters only (issue 13, docs/design.md "Tag rows for generic filters
-- only"; `buzz_store::tag_rows`, `buzz_store::current_tags`).
--
-- `event_tags` serves generic NIP-01 filters and nothing else (current-state queries read
-- `artifact_current_tags`, history reads `artifact_revisions`, and the write path builds
-- current-tag rows from the event itself). A generic filter can name single-character tags only
-- (a multi-character name is refused: it needs the artifact query form), so rows of longer names
-- were never read. A NIP-AR revision's `d` and `h` are what its record (`artifact_revisions.d`)
-- and its event row (`events.channel_id`, the revision's own `h`) already hold, so a generic
-- filter answers them from there. A current-state query answers `#op` from the current revision's
-- record, so `op` has no current-tag rows either. For a typical revision these were 9 of its 13
-- tag rows (all 8 `event_tags` rows and the `op` current-tag row), each a heap tuple and 2 or 3
-- index entries.

DELETE FROM event_tags WHERE char_length(name) > 1;

DELETE FROM event_tags t USING events e
WHERE e.community_id = t.community_id AND e.id = t.event_id AND e.kind = 45010
  AND t.name IN ('d', 'h');

DELETE FROM artifact_current_tags WHERE name = 'op';

-- The chat read model's index (channel summaries count a channel's kind-9 messages by acceptance
-- order) holds kind-9 messages only: no other event, revisions above all, pays for an entry in it.
-- The summary query states `kind = 9` literally, so every plan can use it.
DROP INDEX events_by_channel_seq;
CREATE INDEX events_by_channel_seq ON events (community_id, channel_id, seq) WHERE kind = 9;

-- A generic `#h` filter on revisions reads their channel from `events.channel_id`: their own index,
-- newest first, so that a channel's revisions are found without walking its messages.
CREATE INDEX events_revisions_by_channel ON events (community_id, channel_id, created_at DESC) WHERE kind = 45010;

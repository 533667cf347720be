-- Envelope tags of revisions without tag rows (issue 13, docs/design.md "Envelope tags of
-- revisions without tag rows"; `buzz_store::revision_tags`, `buzz_store::current_tags`).
--
-- A stored NIP-AR revision's `ar`, `d`, `h`, `op` and `prev` are what its revision record
-- (`artifact_revisions`: d, op, prev) and its event row (`events.channel_id`: h) already hold, and
-- every accepted revision carries `ar` = 1: a generic filter answers a predicate on them from
-- there, so the write path stores no `event_tags` rows for them. A current-state query answers
-- `#op` from the current revision's record, so `op` has no current-tag rows either. These were 6
-- of a typical revision's 13 tag rows, each a heap tuple and 2 or 3 index entries.

DELETE FROM event_tags t USING events e
WHERE e.community_id = t.community_id AND e.id = t.event_id AND e.kind = 45010
  AND t.name IN ('ar', 'd', 'h', 'op', 'prev');

DELETE FROM artifact_current_tags WHERE name = 'op';

-- The chat read model's index (channel summaries count a channel's kind-9 messages by acceptance
-- order) holds kind-9 messages only: no other event, revisions above all, pays for an entry in it.
-- The summary query states `kind = 9` literally, so every plan can use it.
DROP INDEX events_by_channel_seq;
CREATE INDEX events_by_channel_seq ON events (community_id, channel_id, seq) WHERE kind = 9;

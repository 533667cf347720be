-- Threads: a kind-9 reply names its conversation anchor (an e tag marked "root").
ALTER TABLE events ADD COLUMN thread_root text CHECK (thread_root IS NULL OR thread_root ~ '^[0-9a-f]{64}$');
CREATE INDEX events_by_thread ON events (community_id, thread_root) WHERE thread_root IS NOT NULL;
-- Acceptance order within a channel (read markers, unread counts).
CREATE INDEX events_by_channel_seq ON events (community_id, channel_id, seq);

-- Chat read model: read markers and mentions. Counts (messages, replies, unread) are computed from
-- `events` at read time, so they are exact under concurrent posting and follow deletion, redaction
-- and expiry without maintenance.

-- Where a member has read a channel up to: the acceptance order (`events.seq`) of the last read
-- event, and that event's id. Only ever moves forward.
CREATE TABLE read_markers (
    community_id uuid NOT NULL,
    channel_id   uuid NOT NULL,
    pubkey       text NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
    seq          bigint NOT NULL,
    event_id     text NOT NULL CHECK (event_id ~ '^[0-9a-f]{64}$'),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, channel_id, pubkey),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id) ON DELETE CASCADE
);

-- One mention per (member, event): a `p` tag of a kind-9 message naming a community member other
-- than the author. `seq` is the event's acceptance order (listing order, "after the marker").
CREATE TABLE mentions (
    community_id uuid NOT NULL,
    pubkey       text NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
    event_id     text NOT NULL,
    channel_id   uuid NOT NULL,
    seq          bigint NOT NULL,
    created_at   bigint NOT NULL,
    PRIMARY KEY (community_id, pubkey, event_id),
    FOREIGN KEY (community_id, event_id) REFERENCES events (community_id, id) ON DELETE CASCADE
);
CREATE INDEX mentions_by_member ON mentions (community_id, pubkey, seq DESC);
CREATE INDEX mentions_by_member_channel ON mentions (community_id, pubkey, channel_id, seq);
CREATE INDEX mentions_by_event ON mentions (community_id, event_id);

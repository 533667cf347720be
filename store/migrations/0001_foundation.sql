-- Foundation schema: communities, membership, channels, events and their tag index.
-- Every table is keyed by community_id first; nothing crosses communities.

CREATE TABLE communities (
    id                uuid PRIMARY KEY,
    host              text NOT NULL UNIQUE CHECK (host <> '' AND host = lower(host)),
    owner_pubkey      text NOT NULL CHECK (owner_pubkey ~ '^[0-9a-f]{64}$'),
    lifecycle         text NOT NULL DEFAULT 'active' CHECK (lifecycle IN ('active', 'archived', 'deleting')),
    requires_nip_fi   boolean NOT NULL DEFAULT false,
    policy_generation bigint NOT NULL DEFAULT 0 CHECK (policy_generation >= 0),
    retention_days    integer CHECK (retention_days IS NULL OR retention_days > 0),
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE community_members (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    pubkey       text NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
    role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    added_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, pubkey)
);

CREATE TABLE channels (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    id           uuid NOT NULL,
    name         text NOT NULL,
    visibility   text NOT NULL CHECK (visibility IN ('open', 'private')),
    channel_type text NOT NULL CHECK (channel_type IN ('stream', 'forum', 'dm')),
    ttl_seconds  integer CHECK (ttl_seconds IS NULL OR ttl_seconds > 0),
    archived     boolean NOT NULL DEFAULT false,
    deleted_at   timestamptz,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, id)
);

CREATE TABLE channel_members (
    community_id uuid NOT NULL,
    channel_id   uuid NOT NULL,
    pubkey       text NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
    role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    added_at     timestamptz NOT NULL DEFAULT now(),
    removed_at   timestamptz,
    PRIMARY KEY (community_id, channel_id, pubkey),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id) ON DELETE CASCADE
);
CREATE INDEX channel_members_by_pubkey ON channel_members (community_id, pubkey) WHERE removed_at IS NULL;

-- Stored events. `raw` is the event JSON exactly as served, so reads never re-serialise.
-- `seq` records acceptance order within the whole store.
CREATE TABLE events (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    id           text NOT NULL CHECK (id ~ '^[0-9a-f]{64}$'),
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    pubkey       text NOT NULL,
    kind         bigint NOT NULL,
    created_at   bigint NOT NULL,
    channel_id   uuid,
    raw          text NOT NULL,
    accepted_at  timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    deleted_at   timestamptz,
    redacted_at  timestamptz,
    PRIMARY KEY (community_id, id)
);
CREATE INDEX events_by_time ON events (community_id, created_at DESC, id);
CREATE INDEX events_by_channel ON events (community_id, channel_id, created_at DESC);
CREATE INDEX events_by_kind ON events (community_id, kind, created_at DESC);
CREATE INDEX events_by_author ON events (community_id, pubkey, created_at DESC);
CREATE INDEX events_expiring ON events (expires_at) WHERE expires_at IS NOT NULL;

-- Tag index: the tag name and its FIRST value, per NIP-01 and NIP-AR. Values are indexed by their
-- sha256, so a long value can never break an insert or an index; names are bounded.
CREATE TABLE event_tags (
    community_id uuid NOT NULL,
    event_id     text NOT NULL,
    name         text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 64),
    value_hash   bytea NOT NULL CHECK (octet_length(value_hash) = 32),
    created_at   bigint NOT NULL,
    FOREIGN KEY (community_id, event_id) REFERENCES events (community_id, id) ON DELETE CASCADE
);
CREATE INDEX event_tags_lookup ON event_tags (community_id, name, value_hash, created_at DESC);
CREATE INDEX event_tags_by_event ON event_tags (community_id, event_id);

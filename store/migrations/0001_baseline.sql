-- buzz-relay 0.1.0: the whole schema, created directly (the development chain 0001-0015 folded
-- into one; docs/operations.md "Changing the schema" says how it changes from here on).
--
-- Reading order: who a community is, who belongs to it, its channels, what it stores (events and
-- their tag index), the chat read model, NIP-AR artifacts, tokens, and the NIP-FI policy plane.
-- Every table is keyed by community_id first; nothing crosses communities. Each index stands next
-- to its table with the queries that use it. `store/schema.sql` is this file as PostgreSQL
-- dumps it (`scripts/schema-dump.sh`); a test fails when the two differ.
--
-- Writers: the policy-service owns communities and the NIP-FI tables; the write-service owns
-- everything a tenant's event changes (members, channels, events, artifacts, read markers,
-- mentions) and the sweepers (expiry, retention); the gateway and query-service only read.
--
-- Ids: event ids, pubkeys and hashes are lower-case hex text of 64 characters, checked as
-- `octet_length(x) = 64 AND x ~ '^[0-9a-f]*$'` (the same rule as `{64}`, which PostgreSQL's regex
-- engine runs ~14 times slower: 6.8 against 0.48 us a row).

-- ---------------------------------------------------------------------------------------------
-- Communities and membership
-- ---------------------------------------------------------------------------------------------

-- A community: one tenant, bound to one host (the Host header selects it). Written by the
-- policy-service (operator API: create, lifecycle, retention, NIP-FI policy); the write-service
-- bumps `access_version`.
CREATE TABLE communities (
    id                uuid PRIMARY KEY,
    host              text NOT NULL UNIQUE CHECK (host <> '' AND host = lower(host)),
    owner_pubkey      text NOT NULL CHECK (octet_length(owner_pubkey) = 64 AND owner_pubkey ~ '^[0-9a-f]*$'),
    lifecycle         text NOT NULL DEFAULT 'active' CHECK (lifecycle IN ('active', 'archived', 'deleting')),
    -- NIP-FI: whether sockets must present federated-identity evidence, and the generation that
    -- every policy change bumps (compare-and-set, policy-service/src/fi_store.rs).
    requires_nip_fi   boolean NOT NULL DEFAULT false,
    policy_generation bigint NOT NULL DEFAULT 0 CHECK (policy_generation >= 0),
    -- NIP-AR retention of non-current revisions (write-service/src/artifacts/retention.rs).
    retention_days    integer CHECK (retention_days IS NULL OR retention_days > 0),
    -- Bumped by every access change (member removal, channel membership, visibility, archive,
    -- deletion). Live events carry the value their write saw, so a gateway knows when its cached
    -- access answers predate a change and must be re-checked.
    access_version    bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE communities IS 'One tenant, bound to its host. Written by the policy-service; access_version by the write-service.';

-- Community membership and role. Written by the write-service (NIP-29 admin events, the members
-- API); read by every access check (store/src/access.rs).
CREATE TABLE community_members (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    pubkey       text NOT NULL CHECK (octet_length(pubkey) = 64 AND pubkey ~ '^[0-9a-f]*$'),
    role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    added_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, pubkey)
);
COMMENT ON TABLE community_members IS 'Community membership and role. Written by the write-service.';

-- A channel (NIP-29 group): visibility, type (stream, forum, dm), message TTL, archive and soft
-- deletion. Written by the write-service (kinds 9007-9008, 9002).
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
COMMENT ON TABLE channels IS 'NIP-29 channels. Written by the write-service.';

-- Channel membership. A member removed by a moderator (kind 9001 naming someone else) is
-- `banned`: no read, no write, even in an open channel, until put back (kind 9000); leaving a
-- channel oneself sets `removed_at` and is not a ban. Written by the write-service.
CREATE TABLE channel_members (
    community_id uuid NOT NULL,
    channel_id   uuid NOT NULL,
    pubkey       text NOT NULL CHECK (octet_length(pubkey) = 64 AND pubkey ~ '^[0-9a-f]*$'),
    role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    added_at     timestamptz NOT NULL DEFAULT now(),
    removed_at   timestamptz,
    banned       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (community_id, channel_id, pubkey),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id) ON DELETE CASCADE
);
COMMENT ON TABLE channel_members IS 'Channel membership and moderator bans. Written by the write-service.';
-- The channels a member belongs to (store/src/access.rs: readable channels of a reader).
CREATE INDEX channel_members_by_pubkey ON channel_members (community_id, pubkey) WHERE removed_at IS NULL;

-- ---------------------------------------------------------------------------------------------
-- Stored events and their tag index
-- ---------------------------------------------------------------------------------------------

-- Every stored event (kind-9 messages, NIP-29 admin events, NIP-AR revisions, relay-signed
-- events). `raw` is the event JSON exactly as served, so reads never re-serialise; `seq` is the
-- acceptance order within the whole store; `thread_root` is a kind-9 reply's conversation anchor
-- (its `e` tag marked "root"). Deletion (kind 5), redaction and expiry mark or remove rows.
-- Written by the write-service only; read by the query-service (REQ/COUNT) and the sweepers.
CREATE TABLE events (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    id           text NOT NULL CHECK (octet_length(id) = 64 AND id ~ '^[0-9a-f]*$'),
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
    thread_root  text CHECK (thread_root IS NULL OR (octet_length(thread_root) = 64 AND thread_root ~ '^[0-9a-f]*$')),
    PRIMARY KEY (community_id, id)
);
COMMENT ON TABLE events IS 'Every stored event, as served. Written by the write-service.';
-- Generic NIP-01 filters (query-service/src/sql.rs): newest first over a community, a channel,
-- a kind, an author.
CREATE INDEX events_by_time ON events (community_id, created_at DESC, id);
CREATE INDEX events_by_channel ON events (community_id, channel_id, created_at DESC);
CREATE INDEX events_by_kind ON events (community_id, kind, created_at DESC);
CREATE INDEX events_by_author ON events (community_id, pubkey, created_at DESC);
-- The expiry sweeper (write-service/src/store.rs: NIP-40 and channel TTL).
CREATE INDEX events_expiring ON events (expires_at) WHERE expires_at IS NOT NULL;
-- Reply counts of a channel's threads (query-service/src/chat.rs).
CREATE INDEX events_by_thread ON events (community_id, thread_root) WHERE thread_root IS NOT NULL;
-- Channel summaries count a channel's kind-9 messages by acceptance order (query-service/src/
-- chat.rs: unread counts after a read marker). Kind-9 only, so no other event pays for an entry;
-- the query states `kind = 9` literally so every plan may use it.
CREATE INDEX events_by_channel_seq ON events (community_id, channel_id, seq) WHERE kind = 9;
-- NIP-AR retention scans a community's old revision events (write-service/src/artifacts/
-- retention.rs).
CREATE INDEX events_revisions_by_age ON events (community_id, accepted_at) WHERE kind = 45010;
-- A generic `#h` filter on revisions reads their channel from `events.channel_id`, newest first,
-- without walking the channel's messages (query-service/src/sql.rs).
CREATE INDEX events_revisions_by_channel ON events (community_id, channel_id, created_at DESC) WHERE kind = 45010;

-- Tag index of generic NIP-01 filters (`#x`): the tag name and its FIRST value, for
-- single-character names only (a generic filter cannot name a longer one), and none for a
-- revision's `d` and `h` (answered from its revision record and its event row). Values are
-- indexed by sha256, so a long value can never break an insert or an index. Written by the
-- write-service in the statement that inserts the event (store/src/tag_rows.rs); no foreign key
-- (a check and a key-share lock per row): the events_deleted trigger removes them with their event.
CREATE TABLE event_tags (
    community_id uuid NOT NULL,
    event_id     text NOT NULL,
    name         text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 64),
    value_hash   bytea NOT NULL CHECK (octet_length(value_hash) = 32),
    created_at   bigint NOT NULL
);
COMMENT ON TABLE event_tags IS 'First-value tag index of generic filters. Written by the write-service with its event.';
-- `#x` filters, newest first (query-service/src/sql.rs).
CREATE INDEX event_tags_lookup ON event_tags (community_id, name, value_hash, created_at DESC);
-- Removal with the event (buzz_events_deleted below).
CREATE INDEX event_tags_by_event ON event_tags (community_id, event_id);

-- ---------------------------------------------------------------------------------------------
-- Chat read model
-- ---------------------------------------------------------------------------------------------
-- Counts (messages, replies, unread) are computed from `events` at read time, so they are exact
-- under concurrent posting and follow deletion, redaction and expiry without upkeep.

-- How far a member has read a channel: the acceptance order (`events.seq`) and id of the last
-- read event. Only ever moves forward. Written by the write-service (write-service/src/
-- read_model.rs); read by query-service/src/chat.rs.
CREATE TABLE read_markers (
    community_id uuid NOT NULL,
    channel_id   uuid NOT NULL,
    pubkey       text NOT NULL CHECK (octet_length(pubkey) = 64 AND pubkey ~ '^[0-9a-f]*$'),
    seq          bigint NOT NULL,
    event_id     text NOT NULL CHECK (octet_length(event_id) = 64 AND event_id ~ '^[0-9a-f]*$'),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, channel_id, pubkey),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id) ON DELETE CASCADE
);
COMMENT ON TABLE read_markers IS 'Read position of a member in a channel. Written by the write-service.';

-- One mention per (member, event): a `p` tag of a kind-9 message (or an artifact revision's
-- added `p`) naming a community member other than the author; `seq` is the event's acceptance
-- order. Written by the write-service with its event; read by query-service/src/chat.rs.
CREATE TABLE mentions (
    community_id uuid NOT NULL,
    pubkey       text NOT NULL CHECK (octet_length(pubkey) = 64 AND pubkey ~ '^[0-9a-f]*$'),
    event_id     text NOT NULL,
    channel_id   uuid NOT NULL,
    seq          bigint NOT NULL,
    created_at   bigint NOT NULL,
    PRIMARY KEY (community_id, pubkey, event_id),
    FOREIGN KEY (community_id, event_id) REFERENCES events (community_id, id) ON DELETE CASCADE
);
COMMENT ON TABLE mentions IS 'Mentions of members by events. Written by the write-service.';
-- A member's mentions, newest first, and per channel after a read marker (query-service/src/
-- chat.rs).
CREATE INDEX mentions_by_member ON mentions (community_id, pubkey, seq DESC);
CREATE INDEX mentions_by_member_channel ON mentions (community_id, pubkey, channel_id, seq);
-- The foreign key's cascade from events.
CREATE INDEX mentions_by_event ON mentions (community_id, event_id);

-- ---------------------------------------------------------------------------------------------
-- NIP-AR artifacts
-- ---------------------------------------------------------------------------------------------
-- Revision events themselves live in `events` (channel_id = the revision's home), so they are
-- delivered, replayed, redacted and expired like any event. The tables below are what identity,
-- compare-and-swap, idempotent resubmission and current-state queries are decided on; artifacts
-- and revision records are never trimmed by retention. All written by the write-service, in the
-- transaction that holds the artifact's row (write-service/src/artifacts/, revisions.rs).

-- One row per artifact: its immutable type, current revision, home channel, first revision
-- (`root`), soft deletion, and the distinct `p` pubkeys its current revision carries (a revision
-- mentions only the ones it adds).
CREATE TABLE artifacts (
    community_id     uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    d                uuid NOT NULL,
    type             text NOT NULL,
    current_revision text NOT NULL CHECK (octet_length(current_revision) = 64 AND current_revision ~ '^[0-9a-f]*$'),
    home_channel     uuid NOT NULL,
    root             text CHECK (root IS NULL OR (octet_length(root) = 64 AND root ~ '^[0-9a-f]*$')),
    deleted          boolean NOT NULL DEFAULT false,
    mentioned        text[] NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, d)
);
COMMENT ON TABLE artifacts IS 'NIP-AR artifact identity and current revision. Written by the write-service.';
-- "Is this event current?" by id: retention keeps current revisions, redaction retires them.
CREATE UNIQUE INDEX artifacts_by_current ON artifacts (community_id, current_revision);

-- Every revision the relay accepted: its artifact, `prev` (compare-and-swap), operation, the
-- channel it was written to and its acceptance order. No foreign key (see event_tags): the
-- artifacts_deleted trigger removes them with their artifact.
CREATE TABLE artifact_revisions (
    community_id uuid NOT NULL,
    revision_id  text NOT NULL CHECK (octet_length(revision_id) = 64 AND revision_id ~ '^[0-9a-f]*$'),
    d            uuid NOT NULL,
    prev         text CHECK (prev IS NULL OR (octet_length(prev) = 64 AND prev ~ '^[0-9a-f]*$')),
    op           text NOT NULL CHECK (op IN ('create', 'update', 'move', 'delete', 'restore')),
    channel_id   uuid NOT NULL,
    accepted_seq bigint NOT NULL,
    accepted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, revision_id)
);
COMMENT ON TABLE artifact_revisions IS 'Every accepted NIP-AR revision. Written by the write-service.';
-- The chain never forks: at most one accepted revision names any given prev (the artifact row
-- lock already serialises writers; this makes a fork impossible even for a buggy writer).
CREATE UNIQUE INDEX artifact_revisions_one_successor ON artifact_revisions (community_id, prev)
    WHERE prev IS NOT NULL;
-- History queries, in acceptance order (query-service/src/artifacts.rs), and removal with the
-- artifact.
CREATE INDEX artifact_revisions_by_artifact ON artifact_revisions (community_id, d, accepted_seq);

-- Current-state index: the (name, first-value hash) pairs of each served artifact's CURRENT
-- revision, with its home channel, change time, expiry, revision id and type beside them, so a
-- current-state query filters by readable channel inside the index walk, orders and pages there,
-- and reads events only for the page itself (query-service/src/artifacts.rs, snapshot-service/
-- src/store.rs; store/src/current_tags.rs builds and matches the rows). A revision replaces its
-- artifact's rows; a deleted artifact has none; redacting a current revision removes them;
-- expiry is checked when reading. No rows for `ar`, `d`, `prev`, `op` and `type` (answered from
-- the artifact's columns, its revision record and the `type` column; store/src/current_tags.rs
-- DERIVED). Every served artifact has exactly one `h` row, the anchor of untyped and type-only
-- walks. No foreign key (see event_tags): the artifacts_deleted trigger removes them.
CREATE TABLE artifact_current_tags (
    community_id uuid NOT NULL,
    d            uuid NOT NULL,
    name         text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 64),
    value_hash   bytea NOT NULL CHECK (octet_length(value_hash) = 32),
    home_channel uuid NOT NULL,
    updated_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    revision     text NOT NULL,
    type         text NOT NULL,
    -- Probing one more predicate for an artifact (or starting from it) is index-only.
    PRIMARY KEY (community_id, d, name, value_hash) INCLUDE (home_channel, updated_at, expires_at)
);
COMMENT ON TABLE artifact_current_tags IS 'NIP-AR current-state index: tags of each current revision. Written by the write-service.';
-- A selective predicate: its matches in the reader's channels, without visiting the heap.
CREATE INDEX artifact_current_tags_by_channel
    ON artifact_current_tags (community_id, name, value_hash, home_channel)
    INCLUDE (updated_at, d, expires_at, revision, type);
-- An unselective predicate: walk its matches newest first and stop at the page.
CREATE INDEX artifact_current_tags_by_time
    ON artifact_current_tags (community_id, name, value_hash, updated_at DESC, d)
    INCLUDE (home_channel, expires_at, revision, type);
-- `#type` without another row predicate, and snapshot captures by type: the `h` rows by type.
CREATE INDEX artifact_current_tags_by_type
    ON artifact_current_tags (community_id, type, updated_at DESC, d)
    INCLUDE (home_channel, expires_at, revision) WHERE name = 'h';
-- Current-state queries with neither a row predicate nor `#type`: the `h` rows, newest first.
CREATE INDEX artifact_current_tags_live_by_time
    ON artifact_current_tags (community_id, updated_at DESC, d)
    INCLUDE (home_channel, expires_at, revision) WHERE name = 'h';

-- ---------------------------------------------------------------------------------------------
-- Removal of child rows with their parent
-- ---------------------------------------------------------------------------------------------
-- event_tags, artifact_revisions and artifact_current_tags have no foreign keys: a foreign key
-- checks every inserted row with a query of its own that also locks the parent row (FOR KEY
-- SHARE, one WAL record each), about 12 per NIP-AR revision. The write path never inserts a
-- child without its parent, and a parent is never deleted while its writer's transaction runs.
-- What the foreign keys still gave, removal with the parent, these statement-level triggers give:
-- after each statement that deletes events or artifacts (directly or by a cascade), the children
-- of exactly the deleted rows go too. The deletes are planned on every run (EXECUTE), with the
-- number of rows deleted in hand: a cached plan for a community's millions of events must never
-- serve a sweep's thousand or one relay event.

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

-- ---------------------------------------------------------------------------------------------
-- Bearer tokens
-- ---------------------------------------------------------------------------------------------

-- A grant bound to the signer's pubkey with scopes, an optional channel restriction and an
-- expiry (docs/CONTRACT.md "Authentication"). Only sha256(token) is stored; the token itself
-- never reaches the database, the bus or the logs. Written by the write-service; looked up by
-- the query-service (query-service/src/tokens.rs).
CREATE TABLE tokens (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    token_hash   text NOT NULL CHECK (octet_length(token_hash) = 64 AND token_hash ~ '^[0-9a-f]*$'),
    pubkey       text NOT NULL CHECK (octet_length(pubkey) = 64 AND pubkey ~ '^[0-9a-f]*$'),
    scopes       text[] NOT NULL CHECK (cardinality(scopes) > 0
                     AND scopes <@ ARRAY['messages:read', 'messages:write', 'channels:write', 'members:write']),
    channel_ids  uuid[] CHECK (channel_ids IS NULL OR cardinality(channel_ids) > 0),
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, token_hash)
);
COMMENT ON TABLE tokens IS 'Bearer token grants (hashes only). Written by the write-service.';
-- A member's tokens (revocation on removal).
CREATE INDEX tokens_by_pubkey ON tokens (community_id, pubkey);
-- The sweeper of expired tokens.
CREATE INDEX tokens_expiring ON tokens (expires_at);

-- ---------------------------------------------------------------------------------------------
-- NIP-FI policy plane
-- ---------------------------------------------------------------------------------------------
-- Both written by the policy-service only (policy-service/src/fi_store.rs, fi_bindings.rs).

-- The federated-identity issuers a community is bound to (provision binding).
CREATE TABLE community_fi_bindings (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    issuer       text NOT NULL CHECK (octet_length(issuer) BETWEEN 1 AND 2048),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, issuer)
);
COMMENT ON TABLE community_fi_bindings IS 'NIP-FI issuer bindings. Written by the policy-service.';

-- Idempotent receipts of NIP-FI policy operations, one per operation UUID: the desired action
-- and the compare-and-set preconditions it was accepted under. Receipts are history, not tenant
-- serving data: no foreign key to `communities`, so they survive their target's deletion, and
-- nothing joins them into tenant reads. An INSERT that names none of desired_requires_nip_fi,
-- expected_policy_generation, expected_requires_nip_fi (the legacy enable-only form) still means
-- what it meant: enable, without preconditions (spec community-auth-upgrades.md, "Migration
-- 0084"). No trigger, function or foreign key touches this table.
CREATE TABLE community_auth_upgrades (
    operation_id               uuid PRIMARY KEY,
    community_id               uuid NOT NULL,
    expected_host              text NOT NULL,
    actor_pubkey               text NOT NULL CHECK (octet_length(actor_pubkey) = 64 AND actor_pubkey ~ '^[0-9a-f]*$'),
    expected_owner_pubkey      text NOT NULL CHECK (octet_length(expected_owner_pubkey) = 64 AND expected_owner_pubkey ~ '^[0-9a-f]*$'),
    expected_issuer            text,
    operator_pubkey            text NOT NULL CHECK (octet_length(operator_pubkey) = 64 AND operator_pubkey ~ '^[0-9a-f]*$'),
    accepted_policy_generation bigint NOT NULL CHECK (accepted_policy_generation >= 0),
    accepted_at                timestamptz NOT NULL DEFAULT now(),
    desired_requires_nip_fi    boolean NOT NULL DEFAULT true,
    expected_policy_generation bigint CHECK (expected_policy_generation >= 0),
    expected_requires_nip_fi   boolean,
    -- Both preconditions or neither (neither = the legacy form, which is enable-only with an issuer).
    CONSTRAINT community_auth_upgrades_preconditions CHECK (
        (expected_policy_generation IS NULL) = (expected_requires_nip_fi IS NULL)
        AND (expected_policy_generation IS NOT NULL
             OR (desired_requires_nip_fi AND expected_issuer IS NOT NULL))
    ),
    -- An enable names its issuer; a disable never does.
    CONSTRAINT community_auth_upgrades_issuer CHECK (desired_requires_nip_fi = (expected_issuer IS NOT NULL))
);
COMMENT ON TABLE community_auth_upgrades IS 'NIP-FI operation receipts (history; no foreign keys). Written by the policy-service.';
-- A community's receipts by generation (policy-service/src/fi_store.rs: status and replay).
CREATE INDEX community_auth_upgrades_by_community
    ON community_auth_upgrades (community_id, accepted_policy_generation);

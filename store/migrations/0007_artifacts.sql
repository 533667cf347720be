-- NIP-AR artifacts: the identity and current revision of each artifact, and every revision the
-- relay ever accepted. Revision events themselves live in `events` (channel_id = the revision's
-- home), so they are delivered, replayed, redacted and expired like any event; these two tables
-- are what identity, compare-and-swap and idempotent resubmission are decided on, and they are
-- never trimmed by retention.

CREATE TABLE artifacts (
    community_id     uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    d                uuid NOT NULL,
    type             text NOT NULL,
    current_revision text NOT NULL CHECK (current_revision ~ '^[0-9a-f]{64}$'),
    home_channel     uuid NOT NULL,
    root             text CHECK (root IS NULL OR root ~ '^[0-9a-f]{64}$'),
    deleted          boolean NOT NULL DEFAULT false,
    -- The distinct `p` pubkeys the current revision carries: a revision mentions only the ones it adds.
    mentioned        text[] NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, d)
);
-- Retention keeps current revisions: "is this event current?" by id.
CREATE UNIQUE INDEX artifacts_by_current ON artifacts (community_id, current_revision);

CREATE TABLE artifact_revisions (
    community_id uuid NOT NULL,
    revision_id  text NOT NULL CHECK (revision_id ~ '^[0-9a-f]{64}$'),
    d            uuid NOT NULL,
    prev         text CHECK (prev IS NULL OR prev ~ '^[0-9a-f]{64}$'),
    op           text NOT NULL CHECK (op IN ('create', 'update', 'move', 'delete', 'restore')),
    channel_id   uuid NOT NULL,
    accepted_seq bigint NOT NULL,
    accepted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, revision_id),
    FOREIGN KEY (community_id, d) REFERENCES artifacts (community_id, d) ON DELETE CASCADE
);
-- The chain never forks: at most one accepted revision names any given prev (the artifact row
-- lock already serialises writers; this makes a fork impossible even for a buggy writer).
CREATE UNIQUE INDEX artifact_revisions_one_successor ON artifact_revisions (community_id, prev)
    WHERE prev IS NOT NULL;
CREATE INDEX artifact_revisions_by_artifact ON artifact_revisions (community_id, d, accepted_seq);
-- Retention scans old revision events per community.
CREATE INDEX events_revisions_by_age ON events (community_id, accepted_at) WHERE kind = 45010;

-- 0.3.0, expand: NIP-86 community management (docs/design.md, "NIP-86 community management").
-- (0003 is the search migration of the same release.)
--
-- communities.allowed_kinds / disallowed_kinds: `allowkind`/`disallowkind`, served in the host
-- lease and checked by the gateway when it admits an event (NULL or empty: no rule); read through
-- to_jsonb of the row, so this release also runs before the migration.
-- communities.blocked_ips: `blockip`, `[{"ip", "reason"}]`, served in the host lease; the gateway
-- refuses the host's requests from those addresses (not NIP-86 itself).
-- community_event_bans: the events `banevent` redacted (events.redacted_at, as a kind-9005
-- redaction), with the reason, so `listbannedevents` lists them and `unbanevent` lifts only these.
-- community_bans: a community ban (`banpubkey`): the key's membership was removed and adding it
-- again is refused until `unbanpubkey`. community_audit: every NIP-86 change, who made it, when
-- and what, read by the operator API (GET /operator/communities/{id}/audit).
--
-- Expand only (docs/operations.md "Changing the schema"): three new tables and three nullable
-- columns without a default (their checks scan `communities`, one row per tenant, once); nothing
-- existing is rewritten. The previous release never names them; this release
-- reads a missing community_bans as "nobody is banned" and answers NIP-86 changes
-- `schema pending` until this migration has run. Nothing to contract later.
ALTER TABLE communities
    ADD COLUMN allowed_kinds bigint[] CHECK (cardinality(allowed_kinds) <= 1000),
    ADD COLUMN disallowed_kinds bigint[] CHECK (cardinality(disallowed_kinds) <= 1000),
    ADD COLUMN blocked_ips jsonb CHECK (jsonb_typeof(blocked_ips) = 'array' AND jsonb_array_length(blocked_ips) <= 1000);

CREATE TABLE community_bans (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    pubkey       text NOT NULL CHECK (octet_length(pubkey) = 64 AND pubkey ~ '^[0-9a-f]*$'),
    reason       text CHECK (char_length(reason) <= 1024),
    banned_by    text NOT NULL CHECK (octet_length(banned_by) = 64 AND banned_by ~ '^[0-9a-f]*$'),
    banned_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, pubkey)
);
COMMENT ON TABLE community_bans IS 'NIP-86 community bans: no membership while banned. Written by the write-service.';

CREATE TABLE community_event_bans (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    event_id     text NOT NULL CHECK (octet_length(event_id) = 64 AND event_id ~ '^[0-9a-f]*$'),
    reason       text CHECK (char_length(reason) <= 1024),
    banned_by    text NOT NULL CHECK (octet_length(banned_by) = 64 AND banned_by ~ '^[0-9a-f]*$'),
    banned_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, event_id)
);
COMMENT ON TABLE community_event_bans IS 'NIP-86 banevent: events redacted by a NIP-86 call (the redaction is events.redacted_at). Written by the write-service.';

CREATE TABLE community_audit (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    actor        text NOT NULL CHECK (octet_length(actor) = 64 AND actor ~ '^[0-9a-f]*$'),
    method       text NOT NULL CHECK (method ~ '^[a-z]{1,64}$'),
    params       jsonb NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, seq)
);
COMMENT ON TABLE community_audit IS 'NIP-86 changes: who, when, what. Written by the write-service, read by the operator API.';

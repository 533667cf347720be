-- Bearer tokens (contract "Authentication"): a grant bound to the signer's pubkey with scopes, an
-- optional channel restriction and an expiry. Only sha256(token) is stored; the token itself never
-- reaches the database, the bus or the logs.
CREATE TABLE tokens (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    token_hash   text NOT NULL CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    pubkey       text NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
    scopes       text[] NOT NULL CHECK (cardinality(scopes) > 0
                     AND scopes <@ ARRAY['messages:read', 'messages:write', 'channels:write', 'members:write']),
    channel_ids  uuid[] CHECK (channel_ids IS NULL OR cardinality(channel_ids) > 0),
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, token_hash)
);
CREATE INDEX tokens_by_pubkey ON tokens (community_id, pubkey);
CREATE INDEX tokens_expiring ON tokens (expires_at);

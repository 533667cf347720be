-- NIP-FI policy plane, first step (the legacy enable-only shape): issuer bindings and the
-- historical acceptance receipts of `/nip-fi-upgrade`.
--
-- Receipts are history, not tenant serving data: they have no foreign key to `communities`, so
-- they survive the deletion of their target, and nothing joins them into tenant reads.

CREATE TABLE community_fi_bindings (
    community_id uuid NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    issuer       text NOT NULL CHECK (octet_length(issuer) BETWEEN 1 AND 2048),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, issuer)
);

CREATE TABLE community_auth_upgrades (
    operation_id               uuid PRIMARY KEY,
    community_id               uuid NOT NULL,
    expected_host              text NOT NULL,
    actor_pubkey               text NOT NULL CHECK (actor_pubkey ~ '^[0-9a-f]{64}$'),
    expected_owner_pubkey      text NOT NULL CHECK (expected_owner_pubkey ~ '^[0-9a-f]{64}$'),
    expected_issuer            text NOT NULL,
    operator_pubkey            text NOT NULL CHECK (operator_pubkey ~ '^[0-9a-f]{64}$'),
    accepted_policy_generation bigint NOT NULL CHECK (accepted_policy_generation >= 0),
    accepted_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX community_auth_upgrades_by_community
    ON community_auth_upgrades (community_id, accepted_policy_generation);

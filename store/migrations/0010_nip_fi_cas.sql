-- NIP-FI policy plane, second step (the spec's "migration 0084"): receipts gain the desired
-- action and the nullable CAS preconditions of general enable/disable operations.
--
-- Compatibility: an old INSERT (which names none of these columns) still works and still means
-- what it meant: desired = true (enable) and null preconditions (the legacy request form). No
-- data backfill, trigger, function or foreign key is added. Disable receipts carry no issuer.

ALTER TABLE community_auth_upgrades
    ADD COLUMN desired_requires_nip_fi boolean NOT NULL DEFAULT true,
    ADD COLUMN expected_policy_generation bigint CHECK (expected_policy_generation >= 0),
    ADD COLUMN expected_requires_nip_fi boolean,
    ALTER COLUMN expected_issuer DROP NOT NULL,
    -- Both preconditions or neither (neither = legacy form, which is enable-only with an issuer).
    ADD CONSTRAINT community_auth_upgrades_preconditions CHECK (
        (expected_policy_generation IS NULL) = (expected_requires_nip_fi IS NULL)
        AND (expected_policy_generation IS NOT NULL
             OR (desired_requires_nip_fi AND expected_issuer IS NOT NULL))
    ),
    -- An enable names its issuer; a disable never does.
    ADD CONSTRAINT community_auth_upgrades_issuer CHECK (
        desired_requires_nip_fi = (expected_issuer IS NOT NULL)
    );

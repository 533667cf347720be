-- 0.2.0, expand: a community's own NIP-11 profile (name, description, icon) for its host, which
-- the operator API sets (PATCH /operator/communities) and NIP-86's changerelayname,
-- changerelaydescription and changerelayicon will set. Unset (NULL) serves the relay's defaults.
--
-- Expand only (docs/operations.md "Changing the schema"): three nullable columns without a
-- default change the catalog and rewrite nothing; the checks scan `communities` (one row per
-- tenant) once. 0.1.0 replicas never name the columns and keep working beside 0.2.0 ones;
-- 0.2.0 reads them through to_jsonb (NULL when absent), so it also runs on the 0.1.0 schema
-- until this migration has run. Nothing to contract later.
ALTER TABLE communities
    ADD COLUMN name text CHECK (char_length(name) BETWEEN 1 AND 64),
    ADD COLUMN description text CHECK (char_length(description) BETWEEN 1 AND 1024),
    ADD COLUMN icon text CHECK (char_length(icon) BETWEEN 1 AND 2048 AND icon ~ '^https?://');

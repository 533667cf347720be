-- A per-community counter bumped by every access change (member removal, channel membership,
-- visibility, archive, deletion). Live events carry the value their write saw, so a gateway knows
-- when its cached access answers predate a change and must be re-checked.
ALTER TABLE communities ADD COLUMN access_version bigint NOT NULL DEFAULT 0;

-- A member removed from a channel by a moderator (kind 9001 naming someone else) is banned from
-- it: no read, no write, even when the channel is open, until put back (kind 9000). Leaving a
-- channel oneself is not a ban.
ALTER TABLE channel_members ADD COLUMN banned boolean NOT NULL DEFAULT false;

-- pgbench script: one accepted kind-9 write, the statements the write-service runs for a plain
-- message (no reply, no p tags): admission (write-service/src/store.rs `admission`), channel and
-- standing (store/src/access.rs `channel_for_post`), event + tag rows in one statement
-- (store.rs `insert_event`), the author's read marker (write-service/src/read_model.rs
-- `advance_marker`), commit. Use with -M prepared (sqlx prepares its statements too).
-- The event id is generated inside the admission statement (no extra round trip).
-- Variables: community n in [0, :communities), channel k in [0,4), author = client_id % 20.
\set n random(0, :communities - 1)
\set k random(0, 3)
\set i :client_id % 20
BEGIN;
WITH x AS (SELECT md5(random()::text) || md5(random()::text) AS eid)
SELECT x.eid, c.access_version,
       EXISTS (SELECT 1 FROM events e WHERE e.community_id = c.id AND e.id = x.eid)
       OR EXISTS (SELECT 1 FROM artifact_revisions r WHERE r.community_id = c.id AND r.revision_id = x.eid) AS dup,
       (SELECT m.role FROM community_members m WHERE m.community_id = c.id
          AND m.pubkey = md5('m' || :n || '-' || :i) || md5('n' || :n || '-' || :i)) AS role
FROM communities c, x WHERE c.id = md5('c' || :n)::uuid AND c.lifecycle = 'active' \gset
SELECT ch.id, ch.name, ch.visibility, ch.channel_type, ch.ttl_seconds, ch.archived,
       CASE WHEN chm.removed_at IS NULL THEN chm.role END, coalesce(chm.banned, false),
       ARRAY(SELECT b.pubkey FROM channel_members b
             WHERE b.community_id = md5('c' || :n)::uuid AND b.channel_id = md5('ch' || :n || '-' || :k)::uuid AND b.banned)
FROM channels ch
LEFT JOIN channel_members chm ON chm.community_id = ch.community_id AND chm.channel_id = ch.id
     AND chm.pubkey = md5('m' || :n || '-' || :i) || md5('n' || :n || '-' || :i)
WHERE ch.community_id = md5('c' || :n)::uuid AND ch.id = md5('ch' || :n || '-' || :k)::uuid AND ch.deleted_at IS NULL
FOR SHARE OF ch;
WITH e AS (
    INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw, expires_at, thread_root)
    VALUES (md5('c' || :n)::uuid, :eid, md5('m' || :n || '-' || :i) || md5('n' || :n || '-' || :i), 9,
            extract(epoch FROM now())::bigint, md5('ch' || :n || '-' || :k)::uuid,
            rpad('{"id":"' || :eid || '","kind":9,"content":"', 600, 'x'), NULL, NULL)
    ON CONFLICT (community_id, id) DO NOTHING
    RETURNING seq, community_id, channel_id, created_at),
t AS (
    INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at)
    SELECT e.community_id, :eid, 'h', sha256(e.channel_id::text::bytea), e.created_at FROM e)
SELECT seq FROM e \gset
INSERT INTO read_markers (community_id, channel_id, pubkey, seq, event_id)
VALUES (md5('c' || :n)::uuid, md5('ch' || :n || '-' || :k)::uuid,
        md5('m' || :n || '-' || :i) || md5('n' || :n || '-' || :i), :seq, :eid)
ON CONFLICT (community_id, channel_id, pubkey) DO UPDATE
  SET seq = EXCLUDED.seq, event_id = EXCLUDED.event_id, updated_at = now()
  WHERE read_markers.seq < EXCLUDED.seq;
COMMIT;

-- pgbench script: 32 accepted kind-9 writes in ONE transaction with multi-row statements, the
-- shape group commit in the write-service would take (one transaction and one fsync per batch of
-- concurrent writes): admission for all 32 (one statement), their channels and standings (one
-- statement, FOR SHARE), 32 events + 32 tag rows (one statement), the authors' read markers (one
-- statement), commit. The 32 writes are spread over random communities, as concurrent writes from
-- many communities would be. One pgbench "transaction" = 32 events: multiply tps by 32.
-- Use with -M prepared.
BEGIN;
WITH b AS (
    SELECT md5(random()::text) || md5(random()::text) AS eid,
           floor(random() * :communities)::int AS n, floor(random() * 4)::int AS k, floor(random() * 20)::int AS i
    FROM generate_series(1, 32)),
a AS (
    SELECT b.*, c.access_version,
           EXISTS (SELECT 1 FROM events e WHERE e.community_id = c.id AND e.id = b.eid)
           OR EXISTS (SELECT 1 FROM artifact_revisions r WHERE r.community_id = c.id AND r.revision_id = b.eid) AS dup,
           (SELECT m.role FROM community_members m WHERE m.community_id = c.id
              AND m.pubkey = md5('m' || b.n || '-' || b.i) || md5('n' || b.n || '-' || b.i)) AS role
    FROM b JOIN communities c ON c.id = md5('c' || b.n)::uuid AND c.lifecycle = 'active')
SELECT array_agg(eid) AS eids, array_agg(n) AS ns, array_agg(k) AS ks, array_agg(i) AS is_,
       count(*) FILTER (WHERE dup OR role IS NULL) AS refused
FROM a \gset
SELECT ch.id, ch.name, ch.visibility, ch.channel_type, ch.ttl_seconds, ch.archived,
       CASE WHEN chm.removed_at IS NULL THEN chm.role END, coalesce(chm.banned, false),
       ARRAY(SELECT x.pubkey FROM channel_members x
             WHERE x.community_id = ch.community_id AND x.channel_id = ch.id AND x.banned)
FROM unnest(:ns::int[], :ks::int[], :is_::int[]) AS b(n, k, i)
JOIN channels ch ON ch.community_id = md5('c' || b.n)::uuid AND ch.id = md5('ch' || b.n || '-' || b.k)::uuid
LEFT JOIN channel_members chm ON chm.community_id = ch.community_id AND chm.channel_id = ch.id
     AND chm.pubkey = md5('m' || b.n || '-' || b.i) || md5('n' || b.n || '-' || b.i)
WHERE ch.deleted_at IS NULL
FOR SHARE OF ch;
WITH b AS (SELECT * FROM unnest(:eids::text[], :ns::int[], :ks::int[], :is_::int[]) AS b(eid, n, k, i)),
e AS (
    INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw, expires_at, thread_root)
    SELECT md5('c' || n)::uuid, eid, md5('m' || n || '-' || i) || md5('n' || n || '-' || i), 9,
           extract(epoch FROM now())::bigint, md5('ch' || n || '-' || k)::uuid,
           rpad('{"id":"' || eid || '","kind":9,"content":"', 600, 'x'), NULL, NULL
    FROM b
    ON CONFLICT (community_id, id) DO NOTHING
    RETURNING seq, id, community_id, channel_id, pubkey, created_at),
t AS (
    INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at)
    SELECT community_id, id, 'h', sha256(channel_id::text::bytea), created_at FROM e)
SELECT array_agg(seq ORDER BY seq) AS seqs, array_agg(id ORDER BY seq) AS ids,
       array_agg(community_id ORDER BY seq) AS cs, array_agg(channel_id ORDER BY seq) AS chs,
       array_agg(pubkey ORDER BY seq) AS pks FROM e \gset
INSERT INTO read_markers (community_id, channel_id, pubkey, seq, event_id)
SELECT DISTINCT ON (c, ch, pk) c, ch, pk, s, id
FROM unnest(:cs::uuid[], :chs::uuid[], :pks::text[], :seqs::bigint[], :ids::text[]) AS m(c, ch, pk, s, id)
ORDER BY c, ch, pk, s DESC
ON CONFLICT (community_id, channel_id, pubkey) DO UPDATE
  SET seq = EXCLUDED.seq, event_id = EXCLUDED.event_id, updated_at = now()
  WHERE read_markers.seq < EXCLUDED.seq;
COMMIT;

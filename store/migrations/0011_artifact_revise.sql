-- NIP-AR revisions in one round trip: the common revisions (a create without root; an update,
-- delete or restore in the artifact's home channel whose root is absent or unchanged) are checked
-- and stored by one server-side function, called once the sender's write access to h is known.
--
-- The function writes only when the revision would be accepted by the full path
-- (`write-service/src/artifacts.rs`) with the same effects: the artifact's d is free (create) or
-- its locked row has `prev` as current revision, h as home, the same type, a deletion state that
-- allows the op and the root the op needs; the revision id was never accepted. It then stores what
-- the full path stores, in the same order: the event and its tag rows, the artifact (claimed or
-- advanced), its current-tag index rows (the replaced ones are returned for live delivery), the
-- revision record and the mentions the revision adds. In every other case it writes nothing and
-- returns no row (the artifact row may stay locked, as the full path would lock it too), and the
-- caller runs the full path, which gives every refusal its answer.

CREATE FUNCTION artifact_revise(
    p_community  uuid,
    p_d          uuid,
    p_op         text,
    p_type       text,
    p_h          uuid,
    p_root       text,
    p_prev       text,
    p_id         text,
    p_pubkey     text,
    p_kind       bigint,
    p_created_at bigint,
    p_raw        text,
    p_ttl        integer,
    p_tag_names  text[],
    p_tag_hashes bytea[],
    p_carried    text[],
    p_mentioned  text[]
) RETURNS TABLE (revision_seq bigint, replaced_names text[], replaced_hashes bytea[])
LANGUAGE plpgsql AS $$
DECLARE
    cur      artifacts%ROWTYPE;
    new_seq  bigint;
    added    text[];
    expires  timestamptz := CASE WHEN p_ttl IS NULL THEN NULL ELSE now() + make_interval(secs => p_ttl) END;
    r_names  text[];
    r_hashes bytea[];
BEGIN
    IF p_op = 'create' THEN
        IF p_root IS NOT NULL THEN
            RETURN;
        END IF;
        INSERT INTO artifacts (community_id, d, type, current_revision, home_channel, root, mentioned)
        VALUES (p_community, p_d, p_type, p_id, p_h, NULL, p_carried)
        ON CONFLICT (community_id, d) DO NOTHING;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        added := p_mentioned;
    ELSIF p_op IN ('update', 'delete', 'restore') THEN
        SELECT * INTO cur FROM artifacts a WHERE a.community_id = p_community AND a.d = p_d FOR UPDATE;
        IF NOT FOUND
           OR cur.current_revision IS DISTINCT FROM p_prev
           OR cur.home_channel <> p_h
           OR cur.type <> p_type
           OR cur.deleted <> (p_op = 'restore')
           OR (p_op = 'delete' AND cur.root IS DISTINCT FROM p_root)
           OR (p_root IS NOT NULL AND cur.root IS DISTINCT FROM p_root) THEN
            RETURN;
        END IF;
        -- A fresh snapshot (this is a new statement): sees a resubmission committed while we waited.
        IF EXISTS (SELECT 1 FROM artifact_revisions r WHERE r.community_id = p_community AND r.revision_id = p_id) THEN
            RETURN;
        END IF;
        added := ARRAY(SELECT unnest(p_mentioned) EXCEPT SELECT unnest(cur.mentioned));
    ELSE
        RETURN;
    END IF;

    INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw, expires_at, thread_root)
    VALUES (p_community, p_id, p_pubkey, p_kind, p_created_at, p_h, p_raw, expires, NULL)
    ON CONFLICT (community_id, id) DO NOTHING
    RETURNING events.seq INTO new_seq;
    IF new_seq IS NULL THEN
        -- Not in artifact_revisions yet stored: an inconsistent store; the transaction rolls back.
        RAISE EXCEPTION 'revision % is stored but was never accepted', p_id;
    END IF;
    INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at)
    SELECT p_community, p_id, u.n, u.h, p_created_at FROM unnest(p_tag_names, p_tag_hashes) AS u(n, h);

    IF p_op <> 'create' THEN
        UPDATE artifacts SET current_revision = p_id, home_channel = p_h, root = p_root,
               deleted = (p_op = 'delete'), mentioned = p_carried, updated_at = now()
        WHERE community_id = p_community AND d = p_d;
    END IF;

    SELECT coalesce(array_agg(x.name ORDER BY x.name, x.value_hash), '{}'),
           coalesce(array_agg(x.value_hash ORDER BY x.name, x.value_hash), '{}')
    INTO r_names, r_hashes
    FROM artifact_current_tags x WHERE x.community_id = p_community AND x.d = p_d;
    IF p_op = 'delete' THEN
        DELETE FROM artifact_current_tags x WHERE x.community_id = p_community AND x.d = p_d;
    ELSE
        DELETE FROM artifact_current_tags x WHERE x.community_id = p_community AND x.d = p_d
           AND (x.name, x.value_hash) NOT IN (SELECT u.n, u.h FROM unnest(p_tag_names, p_tag_hashes) AS u(n, h));
        INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, expires_at)
        SELECT DISTINCT p_community, p_d, u.n, u.h, p_h, now(), expires
        FROM unnest(p_tag_names, p_tag_hashes) AS u(n, h)
        ON CONFLICT (community_id, d, name, value_hash) DO UPDATE
        SET home_channel = EXCLUDED.home_channel, updated_at = EXCLUDED.updated_at,
            expires_at = EXCLUDED.expires_at;
    END IF;

    INSERT INTO artifact_revisions (community_id, revision_id, d, prev, op, channel_id, accepted_seq)
    VALUES (p_community, p_id, p_d, p_prev, p_op, p_h, new_seq);

    IF cardinality(added) > 0 THEN
        INSERT INTO mentions (community_id, pubkey, event_id, channel_id, seq, created_at)
        SELECT p_community, m.pubkey, p_id, p_h, new_seq, p_created_at FROM community_members m
        WHERE m.community_id = p_community AND m.pubkey = ANY(added)
        ON CONFLICT (community_id, pubkey, event_id) DO NOTHING;
    END IF;

    RETURN QUERY SELECT new_seq, r_names, r_hashes;
END
$$;

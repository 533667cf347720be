-- buzz-relay's database schema as the migrations in store/migrations/ create it: the output of
-- `pg_dump --schema-only --no-owner --no-privileges` on a freshly migrated database, without
-- comments, SETs and blank-line runs. Generated: do not edit. A test (tests/tests/migrations.rs)
-- fails when the migrations and this file differ; scripts/schema-dump.sh rewrites it.

CREATE EXTENSION IF NOT EXISTS btree_gin WITH SCHEMA public;

COMMENT ON EXTENSION btree_gin IS 'support for indexing common datatypes in GIN';

CREATE FUNCTION public.buzz_artifacts_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    EXECUTE 'DELETE FROM artifact_current_tags t USING gone g WHERE t.community_id = g.community_id AND t.d = g.d';
    EXECUTE 'DELETE FROM artifact_revisions r USING gone g WHERE r.community_id = g.community_id AND r.d = g.d';
    RETURN NULL;
END $$;

CREATE FUNCTION public.buzz_events_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    EXECUTE 'DELETE FROM event_tags t USING gone g WHERE t.community_id = g.community_id AND t.event_id = g.id';
    RETURN NULL;
END $$;

CREATE TABLE public.artifact_current_tags (
    community_id uuid NOT NULL,
    d uuid NOT NULL,
    name text NOT NULL,
    value_hash bytea NOT NULL,
    home_channel uuid NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    revision text NOT NULL,
    type text NOT NULL,
    CONSTRAINT artifact_current_tags_name_check CHECK (((octet_length(name) >= 1) AND (octet_length(name) <= 64))),
    CONSTRAINT artifact_current_tags_value_hash_check CHECK ((octet_length(value_hash) = 32))
);

COMMENT ON TABLE public.artifact_current_tags IS 'NIP-AR current-state index: tags of each current revision. Written by the write-service.';

CREATE TABLE public.artifact_revisions (
    community_id uuid NOT NULL,
    revision_id text NOT NULL,
    d uuid NOT NULL,
    prev text,
    op text NOT NULL,
    channel_id uuid NOT NULL,
    accepted_seq bigint NOT NULL,
    accepted_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT artifact_revisions_op_check CHECK ((op = ANY (ARRAY['create'::text, 'update'::text, 'move'::text, 'delete'::text, 'restore'::text]))),
    CONSTRAINT artifact_revisions_prev_check CHECK (((prev IS NULL) OR ((octet_length(prev) = 64) AND (prev ~ '^[0-9a-f]*$'::text)))),
    CONSTRAINT artifact_revisions_revision_id_check CHECK (((octet_length(revision_id) = 64) AND (revision_id ~ '^[0-9a-f]*$'::text)))
);

COMMENT ON TABLE public.artifact_revisions IS 'Every accepted NIP-AR revision. Written by the write-service.';

CREATE TABLE public.artifacts (
    community_id uuid NOT NULL,
    d uuid NOT NULL,
    type text NOT NULL,
    current_revision text NOT NULL,
    home_channel uuid NOT NULL,
    root text,
    deleted boolean DEFAULT false NOT NULL,
    mentioned text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT artifacts_current_revision_check CHECK (((octet_length(current_revision) = 64) AND (current_revision ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT artifacts_root_check CHECK (((root IS NULL) OR ((octet_length(root) = 64) AND (root ~ '^[0-9a-f]*$'::text))))
);

COMMENT ON TABLE public.artifacts IS 'NIP-AR artifact identity and current revision. Written by the write-service.';

CREATE TABLE public.channel_members (
    community_id uuid NOT NULL,
    channel_id uuid NOT NULL,
    pubkey text NOT NULL,
    role text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    removed_at timestamp with time zone,
    banned boolean DEFAULT false NOT NULL,
    CONSTRAINT channel_members_pubkey_check CHECK (((octet_length(pubkey) = 64) AND (pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT channel_members_role_check CHECK ((role = ANY (ARRAY['owner'::text, 'admin'::text, 'member'::text])))
);

COMMENT ON TABLE public.channel_members IS 'Channel membership and moderator bans. Written by the write-service.';

CREATE TABLE public.channels (
    community_id uuid NOT NULL,
    id uuid NOT NULL,
    name text NOT NULL,
    visibility text NOT NULL,
    channel_type text NOT NULL,
    ttl_seconds integer,
    archived boolean DEFAULT false NOT NULL,
    deleted_at timestamp with time zone,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT channels_channel_type_check CHECK ((channel_type = ANY (ARRAY['stream'::text, 'forum'::text, 'dm'::text]))),
    CONSTRAINT channels_ttl_seconds_check CHECK (((ttl_seconds IS NULL) OR (ttl_seconds > 0))),
    CONSTRAINT channels_visibility_check CHECK ((visibility = ANY (ARRAY['open'::text, 'private'::text])))
);

COMMENT ON TABLE public.channels IS 'NIP-29 channels. Written by the write-service.';

CREATE TABLE public.communities (
    id uuid NOT NULL,
    host text NOT NULL,
    owner_pubkey text NOT NULL,
    lifecycle text DEFAULT 'active'::text NOT NULL,
    requires_nip_fi boolean DEFAULT false NOT NULL,
    policy_generation bigint DEFAULT 0 NOT NULL,
    retention_days integer,
    access_version bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    name text,
    description text,
    icon text,
    allowed_kinds bigint[],
    disallowed_kinds bigint[],
    blocked_ips jsonb,
    CONSTRAINT communities_allowed_kinds_check CHECK ((cardinality(allowed_kinds) <= 1000)),
    CONSTRAINT communities_blocked_ips_check CHECK (((jsonb_typeof(blocked_ips) = 'array'::text) AND (jsonb_array_length(blocked_ips) <= 1000))),
    CONSTRAINT communities_description_check CHECK (((char_length(description) >= 1) AND (char_length(description) <= 1024))),
    CONSTRAINT communities_disallowed_kinds_check CHECK ((cardinality(disallowed_kinds) <= 1000)),
    CONSTRAINT communities_host_check CHECK (((host <> ''::text) AND (host = lower(host)))),
    CONSTRAINT communities_icon_check CHECK ((((char_length(icon) >= 1) AND (char_length(icon) <= 2048)) AND (icon ~ '^https?://'::text))),
    CONSTRAINT communities_lifecycle_check CHECK ((lifecycle = ANY (ARRAY['active'::text, 'archived'::text, 'deleting'::text]))),
    CONSTRAINT communities_name_check CHECK (((char_length(name) >= 1) AND (char_length(name) <= 64))),
    CONSTRAINT communities_owner_pubkey_check CHECK (((octet_length(owner_pubkey) = 64) AND (owner_pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT communities_policy_generation_check CHECK ((policy_generation >= 0)),
    CONSTRAINT communities_retention_days_check CHECK (((retention_days IS NULL) OR (retention_days > 0)))
);

COMMENT ON TABLE public.communities IS 'One tenant, bound to its host. Written by the policy-service; access_version by the write-service.';

CREATE TABLE public.community_audit (
    community_id uuid NOT NULL,
    seq bigint NOT NULL,
    actor text NOT NULL,
    method text NOT NULL,
    params jsonb NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT community_audit_actor_check CHECK (((octet_length(actor) = 64) AND (actor ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_audit_method_check CHECK ((method ~ '^[a-z]{1,64}$'::text))
);

COMMENT ON TABLE public.community_audit IS 'NIP-86 changes: who, when, what. Written by the write-service, read by the operator API.';

ALTER TABLE public.community_audit ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.community_audit_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.community_auth_upgrades (
    operation_id uuid NOT NULL,
    community_id uuid NOT NULL,
    expected_host text NOT NULL,
    actor_pubkey text NOT NULL,
    expected_owner_pubkey text NOT NULL,
    expected_issuer text,
    operator_pubkey text NOT NULL,
    accepted_policy_generation bigint NOT NULL,
    accepted_at timestamp with time zone DEFAULT now() NOT NULL,
    desired_requires_nip_fi boolean DEFAULT true NOT NULL,
    expected_policy_generation bigint,
    expected_requires_nip_fi boolean,
    CONSTRAINT community_auth_upgrades_accepted_policy_generation_check CHECK ((accepted_policy_generation >= 0)),
    CONSTRAINT community_auth_upgrades_actor_pubkey_check CHECK (((octet_length(actor_pubkey) = 64) AND (actor_pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_auth_upgrades_expected_owner_pubkey_check CHECK (((octet_length(expected_owner_pubkey) = 64) AND (expected_owner_pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_auth_upgrades_expected_policy_generation_check CHECK ((expected_policy_generation >= 0)),
    CONSTRAINT community_auth_upgrades_issuer CHECK ((desired_requires_nip_fi = (expected_issuer IS NOT NULL))),
    CONSTRAINT community_auth_upgrades_operator_pubkey_check CHECK (((octet_length(operator_pubkey) = 64) AND (operator_pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_auth_upgrades_preconditions CHECK ((((expected_policy_generation IS NULL) = (expected_requires_nip_fi IS NULL)) AND ((expected_policy_generation IS NOT NULL) OR (desired_requires_nip_fi AND (expected_issuer IS NOT NULL)))))
);

COMMENT ON TABLE public.community_auth_upgrades IS 'NIP-FI operation receipts (history; no foreign keys). Written by the policy-service.';

CREATE TABLE public.community_bans (
    community_id uuid NOT NULL,
    pubkey text NOT NULL,
    reason text,
    banned_by text NOT NULL,
    banned_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT community_bans_banned_by_check CHECK (((octet_length(banned_by) = 64) AND (banned_by ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_bans_pubkey_check CHECK (((octet_length(pubkey) = 64) AND (pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_bans_reason_check CHECK ((char_length(reason) <= 1024))
);

COMMENT ON TABLE public.community_bans IS 'NIP-86 community bans: no membership while banned. Written by the write-service.';

CREATE TABLE public.community_event_bans (
    community_id uuid NOT NULL,
    event_id text NOT NULL,
    reason text,
    banned_by text NOT NULL,
    banned_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT community_event_bans_banned_by_check CHECK (((octet_length(banned_by) = 64) AND (banned_by ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_event_bans_event_id_check CHECK (((octet_length(event_id) = 64) AND (event_id ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_event_bans_reason_check CHECK ((char_length(reason) <= 1024))
);

COMMENT ON TABLE public.community_event_bans IS 'NIP-86 banevent: events redacted by a NIP-86 call (the redaction is events.redacted_at). Written by the write-service.';

CREATE TABLE public.community_fi_bindings (
    community_id uuid NOT NULL,
    issuer text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT community_fi_bindings_issuer_check CHECK (((octet_length(issuer) >= 1) AND (octet_length(issuer) <= 2048)))
);

COMMENT ON TABLE public.community_fi_bindings IS 'NIP-FI issuer bindings. Written by the policy-service.';

CREATE TABLE public.community_members (
    community_id uuid NOT NULL,
    pubkey text NOT NULL,
    role text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT community_members_pubkey_check CHECK (((octet_length(pubkey) = 64) AND (pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT community_members_role_check CHECK ((role = ANY (ARRAY['owner'::text, 'admin'::text, 'member'::text])))
);

COMMENT ON TABLE public.community_members IS 'Community membership and role. Written by the write-service.';

CREATE TABLE public.event_tags (
    community_id uuid NOT NULL,
    event_id text NOT NULL,
    name text NOT NULL,
    value_hash bytea NOT NULL,
    created_at bigint NOT NULL,
    CONSTRAINT event_tags_name_check CHECK (((octet_length(name) >= 1) AND (octet_length(name) <= 64))),
    CONSTRAINT event_tags_value_hash_check CHECK ((octet_length(value_hash) = 32))
);

COMMENT ON TABLE public.event_tags IS 'First-value tag index of generic filters. Written by the write-service with its event.';

CREATE TABLE public.events (
    community_id uuid NOT NULL,
    id text NOT NULL,
    seq bigint NOT NULL,
    pubkey text NOT NULL,
    kind bigint NOT NULL,
    created_at bigint NOT NULL,
    channel_id uuid,
    raw text NOT NULL,
    accepted_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    deleted_at timestamp with time zone,
    redacted_at timestamp with time zone,
    thread_root text,
    CONSTRAINT events_id_check CHECK (((octet_length(id) = 64) AND (id ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT events_thread_root_check CHECK (((thread_root IS NULL) OR ((octet_length(thread_root) = 64) AND (thread_root ~ '^[0-9a-f]*$'::text))))
);

COMMENT ON TABLE public.events IS 'Every stored event, as served. Written by the write-service.';

ALTER TABLE public.events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.mentions (
    community_id uuid NOT NULL,
    pubkey text NOT NULL,
    event_id text NOT NULL,
    channel_id uuid NOT NULL,
    seq bigint NOT NULL,
    created_at bigint NOT NULL,
    CONSTRAINT mentions_pubkey_check CHECK (((octet_length(pubkey) = 64) AND (pubkey ~ '^[0-9a-f]*$'::text)))
);

COMMENT ON TABLE public.mentions IS 'Mentions of members by events. Written by the write-service.';

CREATE TABLE public.read_markers (
    community_id uuid NOT NULL,
    channel_id uuid NOT NULL,
    pubkey text NOT NULL,
    seq bigint NOT NULL,
    event_id text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT read_markers_event_id_check CHECK (((octet_length(event_id) = 64) AND (event_id ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT read_markers_pubkey_check CHECK (((octet_length(pubkey) = 64) AND (pubkey ~ '^[0-9a-f]*$'::text)))
);

COMMENT ON TABLE public.read_markers IS 'Read position of a member in a channel. Written by the write-service.';

CREATE TABLE public.tokens (
    community_id uuid NOT NULL,
    token_hash text NOT NULL,
    pubkey text NOT NULL,
    scopes text[] NOT NULL,
    channel_ids uuid[],
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tokens_channel_ids_check CHECK (((channel_ids IS NULL) OR (cardinality(channel_ids) > 0))),
    CONSTRAINT tokens_pubkey_check CHECK (((octet_length(pubkey) = 64) AND (pubkey ~ '^[0-9a-f]*$'::text))),
    CONSTRAINT tokens_scopes_check CHECK (((cardinality(scopes) > 0) AND (scopes <@ ARRAY['messages:read'::text, 'messages:write'::text, 'channels:write'::text, 'members:write'::text]))),
    CONSTRAINT tokens_token_hash_check CHECK (((octet_length(token_hash) = 64) AND (token_hash ~ '^[0-9a-f]*$'::text)))
);

COMMENT ON TABLE public.tokens IS 'Bearer token grants (hashes only). Written by the write-service.';

ALTER TABLE ONLY public.artifact_current_tags
    ADD CONSTRAINT artifact_current_tags_pkey PRIMARY KEY (community_id, d, name, value_hash) INCLUDE (home_channel, updated_at, expires_at);

ALTER TABLE ONLY public.artifact_revisions
    ADD CONSTRAINT artifact_revisions_pkey PRIMARY KEY (community_id, revision_id);

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (community_id, d);

ALTER TABLE ONLY public.channel_members
    ADD CONSTRAINT channel_members_pkey PRIMARY KEY (community_id, channel_id, pubkey);

ALTER TABLE ONLY public.channels
    ADD CONSTRAINT channels_pkey PRIMARY KEY (community_id, id);

ALTER TABLE ONLY public.communities
    ADD CONSTRAINT communities_host_key UNIQUE (host);

ALTER TABLE ONLY public.communities
    ADD CONSTRAINT communities_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.community_audit
    ADD CONSTRAINT community_audit_pkey PRIMARY KEY (community_id, seq);

ALTER TABLE ONLY public.community_auth_upgrades
    ADD CONSTRAINT community_auth_upgrades_pkey PRIMARY KEY (operation_id);

ALTER TABLE ONLY public.community_bans
    ADD CONSTRAINT community_bans_pkey PRIMARY KEY (community_id, pubkey);

ALTER TABLE ONLY public.community_event_bans
    ADD CONSTRAINT community_event_bans_pkey PRIMARY KEY (community_id, event_id);

ALTER TABLE ONLY public.community_fi_bindings
    ADD CONSTRAINT community_fi_bindings_pkey PRIMARY KEY (community_id, issuer);

ALTER TABLE ONLY public.community_members
    ADD CONSTRAINT community_members_pkey PRIMARY KEY (community_id, pubkey);

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (community_id, id);

ALTER TABLE ONLY public.mentions
    ADD CONSTRAINT mentions_pkey PRIMARY KEY (community_id, pubkey, event_id);

ALTER TABLE ONLY public.read_markers
    ADD CONSTRAINT read_markers_pkey PRIMARY KEY (community_id, channel_id, pubkey);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_pkey PRIMARY KEY (community_id, token_hash);

CREATE INDEX artifact_current_tags_by_channel ON public.artifact_current_tags USING btree (community_id, name, value_hash, home_channel) INCLUDE (updated_at, d, expires_at, revision, type);

CREATE INDEX artifact_current_tags_by_time ON public.artifact_current_tags USING btree (community_id, name, value_hash, updated_at DESC, d) INCLUDE (home_channel, expires_at, revision, type);

CREATE INDEX artifact_current_tags_by_type ON public.artifact_current_tags USING btree (community_id, type, updated_at DESC, d) INCLUDE (home_channel, expires_at, revision) WHERE (name = 'h'::text);

CREATE INDEX artifact_current_tags_live_by_time ON public.artifact_current_tags USING btree (community_id, updated_at DESC, d) INCLUDE (home_channel, expires_at, revision) WHERE (name = 'h'::text);

CREATE INDEX artifact_revisions_by_artifact ON public.artifact_revisions USING btree (community_id, d, accepted_seq);

CREATE UNIQUE INDEX artifact_revisions_one_successor ON public.artifact_revisions USING btree (community_id, prev) WHERE (prev IS NOT NULL);

CREATE UNIQUE INDEX artifacts_by_current ON public.artifacts USING btree (community_id, current_revision);

CREATE INDEX channel_members_by_pubkey ON public.channel_members USING btree (community_id, pubkey) WHERE (removed_at IS NULL);

CREATE INDEX community_auth_upgrades_by_community ON public.community_auth_upgrades USING btree (community_id, accepted_policy_generation);

CREATE INDEX event_tags_by_event ON public.event_tags USING btree (community_id, event_id);

CREATE INDEX event_tags_lookup ON public.event_tags USING btree (community_id, name, value_hash, created_at DESC);

CREATE INDEX events_by_author ON public.events USING btree (community_id, pubkey, created_at DESC);

CREATE INDEX events_by_channel ON public.events USING btree (community_id, channel_id, created_at DESC);

CREATE INDEX events_by_channel_seq ON public.events USING btree (community_id, channel_id, seq) WHERE (kind = 9);

CREATE INDEX events_by_kind ON public.events USING btree (community_id, kind, created_at DESC);

CREATE INDEX events_by_thread ON public.events USING btree (community_id, thread_root) WHERE (thread_root IS NOT NULL);

CREATE INDEX events_by_time ON public.events USING btree (community_id, created_at DESC, id);

CREATE INDEX events_expiring ON public.events USING btree (expires_at) WHERE (expires_at IS NOT NULL);

CREATE INDEX events_revisions_by_age ON public.events USING btree (community_id, accepted_at) WHERE (kind = 45010);

CREATE INDEX events_revisions_by_channel ON public.events USING btree (community_id, channel_id, created_at DESC) WHERE (kind = 45010);

CREATE INDEX events_search ON public.events USING gin (to_tsvector('simple'::regconfig, ((COALESCE((jsonb_path_query_first((raw)::jsonb, 'strict $."tags"[*]?(@[0] == "title")[1]'::jsonpath, '{}'::jsonb, true) #>> '{}'::text[]), ''::text) || ' '::text) || COALESCE(((raw)::jsonb ->> 'content'::text), ''::text)))) WHERE (kind = ANY (ARRAY[(9)::bigint, (45010)::bigint]));

CREATE INDEX events_search_community ON public.events USING gin (community_id, to_tsvector('simple'::regconfig, ((COALESCE((jsonb_path_query_first((raw)::jsonb, 'strict $."tags"[*]?(@[0] == "title")[1]'::jsonpath, '{}'::jsonb, true) #>> '{}'::text[]), ''::text) || ' '::text) || COALESCE(((raw)::jsonb ->> 'content'::text), ''::text)))) WHERE (kind = ANY (ARRAY[(9)::bigint, (45010)::bigint]));

CREATE INDEX mentions_by_event ON public.mentions USING btree (community_id, event_id);

CREATE INDEX mentions_by_member ON public.mentions USING btree (community_id, pubkey, seq DESC);

CREATE INDEX mentions_by_member_channel ON public.mentions USING btree (community_id, pubkey, channel_id, seq);

CREATE INDEX tokens_by_pubkey ON public.tokens USING btree (community_id, pubkey);

CREATE INDEX tokens_expiring ON public.tokens USING btree (expires_at);

CREATE TRIGGER artifacts_deleted AFTER DELETE ON public.artifacts REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION public.buzz_artifacts_deleted();

CREATE TRIGGER events_deleted AFTER DELETE ON public.events REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION public.buzz_events_deleted();

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.channel_members
    ADD CONSTRAINT channel_members_community_id_channel_id_fkey FOREIGN KEY (community_id, channel_id) REFERENCES public.channels(community_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.channels
    ADD CONSTRAINT channels_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.community_audit
    ADD CONSTRAINT community_audit_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.community_bans
    ADD CONSTRAINT community_bans_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.community_event_bans
    ADD CONSTRAINT community_event_bans_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.community_fi_bindings
    ADD CONSTRAINT community_fi_bindings_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.community_members
    ADD CONSTRAINT community_members_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.mentions
    ADD CONSTRAINT mentions_community_id_event_id_fkey FOREIGN KEY (community_id, event_id) REFERENCES public.events(community_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.read_markers
    ADD CONSTRAINT read_markers_community_id_channel_id_fkey FOREIGN KEY (community_id, channel_id) REFERENCES public.channels(community_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_community_id_fkey FOREIGN KEY (community_id) REFERENCES public.communities(id) ON DELETE CASCADE;

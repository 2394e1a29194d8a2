-- statesman 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION statesman UPDATE TO '0.4.0'" to load this file. \quit

-- The postgres sink's password rule (postgres_fdw's password_required): the role that created
-- or last altered an outbox is recorded; a non-superuser's postgres sink must give a password
-- and the remote must ask for it. Outboxes from before 0.4.0 have no recorded role: their
-- postgres sinks need a password until a superuser alters them (statesman.alter_outbox(id)).
ALTER TABLE statesman.outboxes ADD COLUMN changed_by name;

-- Whether a sink's checked options give a password of their own (the postgres sink's conninfo);
-- NULL for a sink the password rule does not apply to.
CREATE FUNCTION statesman._sink_gives_password(sink text, sink_options jsonb) RETURNS boolean
    LANGUAGE c STABLE STRICT
    AS 'MODULE_PATHNAME', 'statesman_sink_gives_password';
COMMENT ON FUNCTION statesman._sink_gives_password(text, jsonb) IS
    'whether a sink''s options give a password of their own (NULL: the password rule does not apply)';
REVOKE ALL ON FUNCTION statesman._sink_gives_password(text, jsonb) FROM PUBLIC;

-- The role calling create_outbox or alter_outbox. Inside these SECURITY DEFINER functions
-- current_user is the extension's owner, so this is the session's role: the one SET ROLE chose,
-- else session_user (PostgreSQL's GetOuterUserId()).
CREATE FUNCTION statesman._calling_role() RETURNS name
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
SELECT CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none' THEN pg_catalog.session_user()
            ELSE pg_catalog.current_setting('role')::pg_catalog.name END
$$;
COMMENT ON FUNCTION statesman._calling_role() IS
    'the session''s role (SET ROLE, else session_user): who calls create_outbox or alter_outbox';

-- Whether role `r` is a superuser now (false for NULL or a role that no longer exists).
CREATE FUNCTION statesman._is_superuser(r name) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
SELECT COALESCE((SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname OPERATOR(pg_catalog.=) r), false)
$$;
COMMENT ON FUNCTION statesman._is_superuser(name) IS 'whether a role (by name) is a superuser now';

-- The password rule of postgres_fdw, for the sinks that log in with the server's OS identity
-- (postgres): trust, peer or a password file of that user could let such a sink in as any
-- role, a superuser included. Options set by a role that is not a superuser must give a
-- password of their own (2F003), and only a superuser may waive the rule with
-- "password_required": false (42501); `unchanged` (alter_outbox left sink and options as they
-- were) keeps a superuser's waiver when another role alters the outbox's other settings. The
-- dispatcher checks again at every connection that the server asked for that password
-- (statesman._sink_options_to_use).
CREATE FUNCTION statesman._check_sink_role(sink text, sink_options jsonb, by_role name, unchanged boolean)
    RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    gives boolean := statesman._sink_gives_password(sink, sink_options);
BEGIN
    IF gives IS NULL OR statesman._is_superuser(by_role) THEN
        RETURN;
    END IF;
    IF sink_options->'password_required' = 'false'::jsonb THEN
        IF unchanged THEN
            RETURN;  -- waived by a superuser, and the connection is still the one they set
        END IF;
        RAISE EXCEPTION 'sink "%": option "password_required" may be set to false only by a superuser', sink
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Role "%s" is not a superuser.', by_role);
    END IF;
    IF NOT gives THEN
        RAISE EXCEPTION 'sink "%": password is required', sink
            USING ERRCODE = 'prohibited_sql_statement_attempted',
                  DETAIL = format('Role "%s" is not a superuser: its outboxes must give a password in the conninfo.',
                                  by_role),
                  HINT = 'The sink connects as the database server''s operating-system user, whom trust, peer '
                         'or a password file could let in as any role. Give the remote role''s password '
                         '(password=… or postgresql://user:password@…), and have the remote server ask for it.';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_sink_role(text, jsonb, name, boolean) IS
    'the password rule: a non-superuser''s postgres sink must give a password; only a superuser may waive it';
REVOKE ALL ON FUNCTION statesman._check_sink_role(text, jsonb, name, boolean) FROM PUBLIC;

-- The sink options a dispatcher opens the sink with: for a sink under the password rule,
-- "password_required" is the rule's verdict for the outbox now (true unless the role that last
-- changed it is a superuser now, or a superuser waived the rule), so it is judged again at
-- every connection, also after that role lost superuser or was dropped.
CREATE FUNCTION statesman._sink_options_to_use(o statesman.outboxes) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
SELECT CASE WHEN o.sink OPERATOR(pg_catalog.=) 'postgres' THEN
           pg_catalog.jsonb_set(o.sink_options, '{password_required}', pg_catalog.to_jsonb(
               o.sink_options->'password_required' IS DISTINCT FROM 'false'::jsonb
               AND NOT statesman._is_superuser(o.changed_by)))
       ELSE o.sink_options END
$$;
COMMENT ON FUNCTION statesman._sink_options_to_use(statesman.outboxes) IS
    'an outbox''s sink options as a dispatcher uses them: the password rule''s verdict filled in';
REVOKE ALL ON FUNCTION statesman._sink_options_to_use(statesman.outboxes) FROM PUBLIC;

CREATE OR REPLACE FUNCTION statesman.create_outbox(
    outbox_id text, sink text DEFAULT 'table', sink_options jsonb DEFAULT '{}', root text DEFAULT NULL,
    batch_size integer DEFAULT 1000, poll_interval interval DEFAULT '1 second',
    require_lease boolean DEFAULT true, lease_ttl interval DEFAULT '30 seconds',
    lease_renew_interval interval DEFAULT NULL, min_retry_delay interval DEFAULT '200 milliseconds',
    max_retry_delay interval DEFAULT '15 seconds', skip_poison_after_attempts integer DEFAULT NULL,
    fingerprint text DEFAULT NULL, payload_content_type text DEFAULT NULL, enabled boolean DEFAULT true)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
BEGIN
    PERFORM statesman._check_id(create_outbox.outbox_id, 'outbox_id');
    o := ROW(create_outbox.outbox_id, create_outbox.sink, NULL, lower(create_outbox.root),
             create_outbox.batch_size, create_outbox.poll_interval, create_outbox.require_lease,
             create_outbox.lease_ttl, create_outbox.lease_renew_interval, create_outbox.min_retry_delay,
             create_outbox.max_retry_delay, create_outbox.skip_poison_after_attempts,
             NULLIF(create_outbox.fingerprint, ''), NULLIF(create_outbox.payload_content_type, ''),
             create_outbox.enabled,
             now(), now(), statesman._calling_role())::statesman.outboxes;
    PERFORM statesman._check_outbox(o);
    IF EXISTS (SELECT FROM statesman.outboxes x WHERE x.outbox_id = create_outbox.outbox_id) THEN
        RAISE EXCEPTION 'outbox "%" already exists', create_outbox.outbox_id
            USING ERRCODE = 'unique_violation', HINT = 'Use statesman.alter_outbox() to change it.';
    END IF;
    o.sink_options := statesman._check_sink(create_outbox.sink, create_outbox.sink_options);
    PERFORM statesman._check_sink_timeout(o.sink_options, o.lease_ttl);
    PERFORM statesman._check_sink_role(o.sink, o.sink_options, o.changed_by, false);
    BEGIN
        INSERT INTO statesman.outboxes SELECT o.*;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'outbox "%" already exists', create_outbox.outbox_id
            USING ERRCODE = 'unique_violation', HINT = 'Use statesman.alter_outbox() to change it.';
    END;
    INSERT INTO statesman.outbox_state (outbox_id) VALUES (o.outbox_id);
    INSERT INTO statesman.leases (outbox_id) VALUES (o.outbox_id);
END
$$;
CREATE OR REPLACE FUNCTION statesman.alter_outbox(
    outbox_id text, sink text DEFAULT NULL, sink_options jsonb DEFAULT NULL, root text DEFAULT NULL,
    batch_size integer DEFAULT NULL, poll_interval interval DEFAULT NULL,
    require_lease boolean DEFAULT NULL, lease_ttl interval DEFAULT NULL,
    lease_renew_interval interval DEFAULT NULL, min_retry_delay interval DEFAULT NULL,
    max_retry_delay interval DEFAULT NULL, skip_poison_after_attempts integer DEFAULT NULL,
    fingerprint text DEFAULT NULL, payload_content_type text DEFAULT NULL, enabled boolean DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes := statesman._outbox_for_update(alter_outbox.outbox_id);
    before statesman.outboxes := o;
BEGIN
    o.root := CASE WHEN alter_outbox.root = '' THEN NULL ELSE COALESCE(lower(alter_outbox.root), o.root) END;
    o.batch_size := COALESCE(alter_outbox.batch_size, o.batch_size);
    o.poll_interval := COALESCE(alter_outbox.poll_interval, o.poll_interval);
    o.require_lease := COALESCE(alter_outbox.require_lease, o.require_lease);
    o.lease_ttl := COALESCE(alter_outbox.lease_ttl, o.lease_ttl);
    o.lease_renew_interval := CASE WHEN alter_outbox.lease_renew_interval = interval '0' THEN NULL
                                   ELSE COALESCE(alter_outbox.lease_renew_interval, o.lease_renew_interval) END;
    o.min_retry_delay := COALESCE(alter_outbox.min_retry_delay, o.min_retry_delay);
    o.max_retry_delay := COALESCE(alter_outbox.max_retry_delay, o.max_retry_delay);
    o.skip_poison_after_attempts := CASE WHEN alter_outbox.skip_poison_after_attempts = 0 THEN NULL
        ELSE COALESCE(alter_outbox.skip_poison_after_attempts, o.skip_poison_after_attempts) END;
    o.fingerprint := CASE WHEN alter_outbox.fingerprint = '' THEN NULL
                          ELSE COALESCE(alter_outbox.fingerprint, o.fingerprint) END;
    o.payload_content_type := CASE WHEN alter_outbox.payload_content_type = '' THEN NULL
                                   ELSE COALESCE(alter_outbox.payload_content_type, o.payload_content_type) END;
    o.enabled := COALESCE(alter_outbox.enabled, o.enabled);
    PERFORM statesman._check_outbox(o);
    IF alter_outbox.sink IS NOT NULL OR alter_outbox.sink_options IS NOT NULL THEN
        -- New options, or the current ones when only the sink is named again; a different
        -- sink without options starts from its defaults.
        o.sink_options := statesman._check_sink(COALESCE(alter_outbox.sink, o.sink),
            COALESCE(alter_outbox.sink_options,
                     CASE WHEN COALESCE(alter_outbox.sink, o.sink) = o.sink THEN o.sink_options
                          ELSE '{}'::jsonb END));
        o.sink := COALESCE(alter_outbox.sink, o.sink);
    END IF;
    PERFORM statesman._check_sink_timeout(o.sink_options, o.lease_ttl);
    -- Whoever alters an outbox answers for its connection from then on, whatever they change.
    o.changed_by := statesman._calling_role();
    PERFORM statesman._check_sink_role(o.sink, o.sink_options, o.changed_by,
        o.sink = before.sink AND o.sink_options = before.sink_options);
    UPDATE statesman.outboxes x
    SET sink = o.sink, sink_options = o.sink_options, root = o.root, batch_size = o.batch_size,
        poll_interval = o.poll_interval, require_lease = o.require_lease, lease_ttl = o.lease_ttl,
        lease_renew_interval = o.lease_renew_interval, min_retry_delay = o.min_retry_delay,
        max_retry_delay = o.max_retry_delay, skip_poison_after_attempts = o.skip_poison_after_attempts,
        fingerprint = o.fingerprint, payload_content_type = o.payload_content_type,
        enabled = o.enabled, updated_at = now(), changed_by = o.changed_by
    WHERE x.outbox_id = o.outbox_id;
END
$$;

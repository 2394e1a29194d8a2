-------------------------------------------------------------------------------
-- Outboxes
-------------------------------------------------------------------------------

-- The sinks this build knows, in the order error messages list them.
CREATE FUNCTION statesman._known_sinks() RETURNS text[]
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_known_sinks';
COMMENT ON FUNCTION statesman._known_sinks() IS 'the sink names create_outbox accepts';

-- When the calling transaction commits, the launcher starts this database's database worker
-- at once if none runs, instead of at its next look (statesman.naptime later): called by
-- create_outbox and resume_outbox.
CREATE FUNCTION statesman._wake_launcher() RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_wake_launcher';
COMMENT ON FUNCTION statesman._wake_launcher() IS
    'has the launcher start this database''s worker when the transaction commits';
REVOKE ALL ON FUNCTION statesman._wake_launcher() FROM PUBLIC;

-- 'waiting for a worker slot: statesman.max_workers=N is reached (…)' while the outbox's
-- dispatcher, or its database's database worker, cannot start for want of a slot; else NULL.
-- Shown as outbox_status.last_error.
CREATE FUNCTION statesman._slot_wait(outbox_id text) RETURNS text
    LANGUAGE c STABLE STRICT
    AS 'MODULE_PATHNAME', 'statesman_slot_wait';
COMMENT ON FUNCTION statesman._slot_wait(text) IS
    'why an outbox''s worker waits for a worker slot, or NULL';

-- The `table` sink's target as a quoted, schema-qualified name, from its options.
CREATE FUNCTION statesman._sink_table(sink_options jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    parts text[];
BEGIN
    IF jsonb_typeof(sink_options->'table') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'sink option "table" must be a string naming schema.table'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        parts := parse_ident(sink_options->>'table');
    EXCEPTION WHEN invalid_parameter_value THEN
        parts := NULL;
    END;
    IF parts IS NULL OR cardinality(parts) <> 2 OR parts[1] = '' OR parts[2] = '' THEN
        RAISE EXCEPTION 'sink option "table" must be a schema-qualified table name, e.g. "statesman.delivered"'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Got %s.', sink_options->'table');
    END IF;
    -- PostgreSQL would truncate a longer name: the option would not name the table it delivers to.
    IF octet_length(parts[1]) > 63 OR octet_length(parts[2]) > 63 THEN
        RAISE EXCEPTION 'sink option "table": schema and table names must be at most 63 bytes each'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A temporary table lives in one session: no dispatcher could ever see it.
    IF parts[1] ~ '^pg_(temp|toast)' THEN
        RAISE EXCEPTION 'sink option "table" must not name a temporary or TOAST schema (got "%")', parts[1]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The system schemas are PostgreSQL's, not a place for deliveries (as CREATE PUBLICATION
    -- refuses system tables).
    IF parts[1] IN ('pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'sink option "table" must not name a table in the system schema "%"', parts[1]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN format('%I.%I', parts[1], parts[2]);
END
$$;
COMMENT ON FUNCTION statesman._sink_table(jsonb) IS
    'the table sink''s target from its options, quoted and schema-qualified';

-- The table sink's target must survive a crash as the cursor does: the cursor is WAL-logged,
-- so an UNLOGGED table (emptied by crash recovery) or a temporary one would lose delivered
-- rows while the cursor stays past them. Checked at registration and again on every page, so
-- a table altered later (ALTER TABLE ... SET UNLOGGED) fails the page instead of taking it.
-- 22023 with the reason in the detail, as CREATE PUBLICATION refuses such tables.
CREATE FUNCTION statesman._check_sink_target(target text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_persistence "char";
    v_schema name;
BEGIN
    SELECT c.relpersistence, n.nspname INTO v_persistence, v_schema
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = to_regclass(_check_sink_target.target);
    IF NOT FOUND THEN
        RETURN;  -- a missing table: the delivery's insert reports it
    END IF;
    IF v_persistence = 'u' THEN
        RAISE EXCEPTION 'table % cannot take deliveries: it is UNLOGGED', target
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Crash recovery empties an UNLOGGED table while the outbox''s cursor stays past '
                           'the rows it held: those messages would never be delivered again.',
                  HINT = format('ALTER TABLE %s SET LOGGED', target);
    ELSIF v_persistence = 't' THEN
        RAISE EXCEPTION 'table % cannot take deliveries: it is a temporary table', target
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF v_schema IN ('pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'table % cannot take deliveries: it is in the system schema "%"', target, v_schema
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_sink_target(text) IS
    'refuses an UNLOGGED, temporary or system table as the table sink''s target';

-- Checks a sink name and its options; returns the options as stored (defaults filled in).
-- For the `table` sink the target table is created when absent, or checked when present.
CREATE FUNCTION statesman._check_sink(sink text, sink_options jsonb) RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    unknown text;
    target text;
    rel oid;
BEGIN
    PERFORM statesman._require(sink, 'sink');
    PERFORM statesman._require(sink_options, 'sink_options');
    IF NOT sink = ANY (statesman._known_sinks()) THEN
        RAISE EXCEPTION 'unknown sink "%" (known sinks: %)', sink, array_to_string(statesman._known_sinks(), ', ')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(sink_options) <> 'object' THEN
        RAISE EXCEPTION 'sink_options must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sink <> 'table' THEN
        -- Sinks outside this database check their own options (src/sinks/).
        RETURN statesman._check_sink_options(sink, sink_options);
    END IF;

    -- sink = 'table'
    SELECT string_agg(format('"%s"', k), ', ') INTO unknown
    FROM jsonb_object_keys(sink_options) k WHERE k <> 'table';
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'unknown option % for sink "table"', unknown
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The table sink takes one option: "table".';
    END IF;
    IF NOT sink_options ? 'table' THEN
        sink_options := jsonb_build_object('table', 'statesman.delivered');
    END IF;
    target := statesman._sink_table(sink_options);
    rel := to_regclass(target);
    IF rel IS NULL THEN
        EXECUTE format('CREATE TABLE %s (
                            message_id      text PRIMARY KEY,
                            global_position bigint NOT NULL,
                            message         jsonb NOT NULL,
                            published_at    timestamptz NOT NULL DEFAULT pg_catalog.now())', target);
    ELSIF NOT EXISTS (
        SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid = rel AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL
          AND a.attname = 'message_id')
       OR (SELECT count(*) FROM pg_attribute a
           WHERE a.attrelid = rel AND NOT a.attisdropped
             AND a.attname IN ('message_id', 'global_position', 'message')) <> 3
       -- Columns the delivery's insert could not fill: the three of the wrong type, or any
       -- other NOT NULL column without a default.
       OR EXISTS (
           SELECT FROM pg_attribute a
           WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
             AND CASE a.attname
                     WHEN 'message_id' THEN a.atttypid NOT IN ('text'::regtype, 'varchar'::regtype)
                     WHEN 'global_position' THEN a.atttypid NOT IN ('bigint'::regtype, 'numeric'::regtype)
                     WHEN 'message' THEN a.atttypid NOT IN ('jsonb'::regtype, 'json'::regtype, 'text'::regtype)
                     ELSE a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
                 END) THEN
        RAISE EXCEPTION 'table % cannot take deliveries', target
            USING ERRCODE = 'invalid_table_definition',
                  HINT = 'It needs columns message_id (text, unique), global_position (bigint) and message '
                         '(jsonb); any other NOT NULL column needs a default.';
    END IF;
    PERFORM statesman._check_sink_target(target);
    RETURN sink_options;
END
$$;
COMMENT ON FUNCTION statesman._check_sink(text, jsonb) IS
    'validates a sink and its options; prepares the table sink''s target';

-- Checks the options of a sink outside this database (redis, postgres) and returns them with
-- defaults filled in; raises 22023 naming the option. Never echoes a secret.
CREATE FUNCTION statesman._check_sink_options(sink text, sink_options jsonb) RETURNS jsonb
    LANGUAGE c STABLE STRICT
    AS 'MODULE_PATHNAME', 'statesman_check_sink_options';
COMMENT ON FUNCTION statesman._check_sink_options(text, jsonb) IS
    'validates the options of a sink outside this database; fills in defaults';

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

-- A sink call must end before the lease would expire (docs/design.md §6).
CREATE FUNCTION statesman._check_sink_timeout(sink_options jsonb, lease_ttl interval) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF jsonb_typeof(sink_options->'timeout_ms') = 'number'
       AND (sink_options->>'timeout_ms')::numeric >= statesman._millis(lease_ttl) THEN
        RAISE EXCEPTION 'sink option "timeout_ms" (% ms) must be shorter than lease_ttl (%)',
            sink_options->>'timeout_ms', lease_ttl
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A sink call that outlasts the lease would let a second dispatcher publish at the same time.';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_sink_timeout(jsonb, interval) IS
    'checks that a sink''s timeout_ms is shorter than the outbox''s lease_ttl';

-- An interval in whole milliseconds, as the workers use it: extract(epoch …) counts a day as
-- 24 hours, a month as 30 days and a year as 365.25 days (interval comparison counts a year as
-- 360 days: '-1 year 360 days' is 0 to it, -5.25 days here). Clamped to ±9e18, so that any
-- interval has a value for the range checks.
CREATE FUNCTION statesman._millis(value interval) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT LEAST(GREATEST(pg_catalog.round(EXTRACT(epoch FROM value) * 1000),
                                -9e18), 9e18)::bigint $$;
COMMENT ON FUNCTION statesman._millis(interval) IS 'an interval in milliseconds, as the workers count it';

-- The intervals of an outbox in the milliseconds the dispatcher uses: the one conversion,
-- read by the dispatcher's settings load and checked by statesman._check_outbox.
CREATE FUNCTION statesman._outbox_millis(o statesman.outboxes,
    OUT poll_interval bigint, OUT lease_ttl bigint, OUT lease_renew_interval bigint,
    OUT min_retry_delay bigint, OUT max_retry_delay bigint)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT statesman._millis(o.poll_interval), statesman._millis(o.lease_ttl),
           COALESCE(statesman._millis(o.lease_renew_interval), statesman._millis(o.lease_ttl) / 3),
           statesman._millis(o.min_retry_delay), statesman._millis(o.max_retry_delay)
$$;
COMMENT ON FUNCTION statesman._outbox_millis(statesman.outboxes) IS
    'an outbox''s intervals in the milliseconds the dispatcher uses';

-- Checks every setting of an outbox row (create_outbox and alter_outbox); raises 22023/22004.
CREATE FUNCTION statesman._check_outbox(o statesman.outboxes) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    renew interval := COALESCE(o.lease_renew_interval, o.lease_ttl / 3);
    ms record;
    how constant text := 'The worker counts it as %s ms (a day as 24 hours, a month as 30 days, a year as 365.25 days).';
BEGIN
    PERFORM statesman._require(o.batch_size, 'batch_size');
    PERFORM statesman._require(o.poll_interval, 'poll_interval');
    PERFORM statesman._require(o.require_lease, 'require_lease');
    PERFORM statesman._require(o.lease_ttl, 'lease_ttl');
    PERFORM statesman._require(o.min_retry_delay, 'min_retry_delay');
    PERFORM statesman._require(o.max_retry_delay, 'max_retry_delay');
    PERFORM statesman._require(o.enabled, 'enabled');
    IF o.root IS NOT NULL THEN
        PERFORM statesman._check_name(o.root, 'root');
    END IF;
    IF o.batch_size < 1 OR o.batch_size > 100000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 100000 (got %)', o.batch_size
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The checks are on the values the dispatcher will use, not on the intervals as
    -- PostgreSQL compares them (see statesman._millis).
    ms := statesman._outbox_millis(o);
    IF ms.poll_interval < 10 OR ms.poll_interval > 3600000 THEN
        RAISE EXCEPTION 'poll_interval must be between 10 milliseconds and 1 hour (got %)', o.poll_interval
            USING ERRCODE = 'invalid_parameter_value', DETAIL = format(how, ms.poll_interval);
    END IF;
    IF ms.lease_ttl < 1000 OR ms.lease_ttl > 86400000 THEN
        RAISE EXCEPTION 'lease_ttl must be between 1 second and 1 day (got %)', o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value', DETAIL = format(how, ms.lease_ttl);
    END IF;
    IF o.lease_renew_interval IS NOT NULL AND ms.lease_renew_interval <= 0 THEN
        RAISE EXCEPTION 'lease_renew_interval must be positive (got %)', o.lease_renew_interval
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format(how, ms.lease_renew_interval);
    END IF;
    IF ms.lease_renew_interval >= ms.lease_ttl THEN
        RAISE EXCEPTION 'lease_renew_interval (%) must be shorter than lease_ttl (%)', renew, o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF ms.min_retry_delay < 0 THEN
        RAISE EXCEPTION 'min_retry_delay must not be negative (got %)', o.min_retry_delay
            USING ERRCODE = 'invalid_parameter_value', DETAIL = format(how, ms.min_retry_delay);
    END IF;
    IF ms.min_retry_delay > ms.max_retry_delay THEN
        RAISE EXCEPTION 'min_retry_delay (%) must not exceed max_retry_delay (%)', o.min_retry_delay, o.max_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF ms.max_retry_delay >= ms.lease_ttl THEN
        RAISE EXCEPTION 'max_retry_delay (%) must be shorter than lease_ttl (%)', o.max_retry_delay, o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A leader that waits longer than its lease would lose it while backing off.';
    END IF;
    IF o.skip_poison_after_attempts < 1 THEN
        RAISE EXCEPTION 'skip_poison_after_attempts must be at least 1 (or NULL to never skip)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(o.fingerprint) > 1024 OR octet_length(o.payload_content_type) > 1024 THEN
        RAISE EXCEPTION 'fingerprint and payload_content_type must be at most 1024 bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_outbox(statesman.outboxes) IS 'validates an outbox''s settings';

-- Raises 42704 when the outbox does not exist; returns its row, locked against concurrent change.
CREATE FUNCTION statesman._outbox_for_update(outbox_id text) RETURNS statesman.outboxes
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
BEGIN
    PERFORM statesman._check_id(outbox_id, 'outbox_id');
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _outbox_for_update.outbox_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox "%" does not exist', outbox_id USING ERRCODE = 'undefined_object';
    END IF;
    RETURN o;
END
$$;
COMMENT ON FUNCTION statesman._outbox_for_update(text) IS 'an outbox''s row, locked; 42704 when absent';

CREATE FUNCTION statesman.create_outbox(
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
    IF o.enabled THEN
        PERFORM statesman._wake_launcher();
    END IF;
END
$$;
COMMENT ON FUNCTION statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean, interval,
    interval, interval, interval, integer, text, text, boolean) IS
    'registers an outbox: a sink that the worker delivers every feed record to';

-- NULL leaves a setting as it is. To clear an optional setting: root, fingerprint or
-- payload_content_type => '' ; lease_renew_interval => '0' (back to lease_ttl / 3);
-- skip_poison_after_attempts => 0 (never skip).
CREATE FUNCTION statesman.alter_outbox(
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
COMMENT ON FUNCTION statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean, interval,
    interval, interval, interval, integer, text, text, boolean) IS
    'changes an outbox''s settings (NULL: unchanged); a running dispatcher picks them up within one poll interval';

CREATE FUNCTION statesman.drop_outbox(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_id(drop_outbox.outbox_id, 'outbox_id');
    -- Waits for a page under way to commit (see statesman._page_outbox). Taken before
    -- the row lock, in the order pages take them: a page's insert into dead_letters checks this
    -- row's key.
    PERFORM pg_advisory_xact_lock(statesman._lock_space('page'), statesman._lease_key(drop_outbox.outbox_id));
    PERFORM statesman._outbox_for_update(drop_outbox.outbox_id);
    -- Its state, lease row and dead letters go with it (ON DELETE CASCADE); so does its cursor.
    DELETE FROM statesman.outboxes x WHERE x.outbox_id = drop_outbox.outbox_id;
    DELETE FROM statesman.cursors c WHERE c.outbox_id = drop_outbox.outbox_id;
END
$$;
COMMENT ON FUNCTION statesman.drop_outbox(text) IS
    'removes an outbox with its cursor, state and dead letters; the sink''s table stays';

CREATE FUNCTION statesman.pause_outbox(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._outbox_for_update(pause_outbox.outbox_id);
    UPDATE statesman.outboxes x SET enabled = false, updated_at = now()
    WHERE x.outbox_id = pause_outbox.outbox_id AND x.enabled;
END
$$;
COMMENT ON FUNCTION statesman.pause_outbox(text) IS
    'stops delivery after the current page; the cursor stays (a paused outbox does not hold retention back)';

CREATE FUNCTION statesman.resume_outbox(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._outbox_for_update(resume_outbox.outbox_id);
    UPDATE statesman.outboxes x SET enabled = true, updated_at = now()
    WHERE x.outbox_id = resume_outbox.outbox_id AND NOT x.enabled;
    UPDATE statesman.outbox_state s SET attempts = 0 WHERE s.outbox_id = resume_outbox.outbox_id;
    PERFORM statesman._wake_launcher();
END
$$;
COMMENT ON FUNCTION statesman.resume_outbox(text) IS 'resumes delivery from the outbox''s cursor';

CREATE FUNCTION statesman.redeliver(outbox_id text, message_id text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM statesman._outbox_for_update(redeliver.outbox_id);
    -- A dead letter without a message (its record's message cannot be built) has nothing to hand over.
    UPDATE statesman.dead_letters d SET requeued_at = now()
    WHERE d.outbox_id = redeliver.outbox_id AND d.message IS NOT NULL
      AND (redeliver.message_id IS NULL OR d.message_id = redeliver.message_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 AND EXISTS (SELECT FROM statesman.dead_letters d
                         WHERE d.outbox_id = redeliver.outbox_id AND d.message_id = redeliver.message_id) THEN
        RAISE EXCEPTION 'parked message "%" of outbox "%" has no message to hand to the sink',
                        redeliver.message_id, redeliver.outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its record''s message cannot be built; the record stays in statesman.history.';
    END IF;
    IF n = 0 AND redeliver.message_id IS NOT NULL THEN
        RAISE EXCEPTION 'outbox "%" has no parked message "%"', redeliver.outbox_id, redeliver.message_id
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION statesman.redeliver(text, text) IS
    'queues parked messages (all, or one message id) to be handed to the sink again; returns how many';

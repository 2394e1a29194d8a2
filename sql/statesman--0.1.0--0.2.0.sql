-- statesman 0.1.0 -> 0.2.0: the delivery worker's objects (outboxes, leases, dead letters,
-- deferred retention, dispatch_once, outbox_status). Nothing of 0.1.0 changes.

\echo Use "ALTER EXTENSION statesman UPDATE TO '0.2.0'" to load this file. \quit

-- Outboxes: where the dispatcher delivers the feed. sink_options may hold secrets, so this
-- table is readable only by the extension's owner (statesman.outbox_status shows no options).
CREATE TABLE statesman.outboxes (
    outbox_id                  text PRIMARY KEY,
    sink                       text NOT NULL,
    sink_options               jsonb NOT NULL,
    root                       text,
    batch_size                 integer NOT NULL,
    poll_interval              interval NOT NULL,
    require_lease              boolean NOT NULL,
    lease_ttl                  interval NOT NULL,
    lease_renew_interval       interval,      -- NULL: lease_ttl / 3
    min_retry_delay            interval NOT NULL,
    max_retry_delay            interval NOT NULL,
    skip_poison_after_attempts integer,       -- NULL: never skip
    fingerprint                text,
    payload_content_type       text,
    enabled                    boolean NOT NULL,
    created_at                 timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at                 timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- What the dispatcher of each outbox is doing: failures, totals, its process. Bounded: one row
-- per outbox, updated in place.
CREATE TABLE statesman.outbox_state (
    outbox_id          text PRIMARY KEY REFERENCES statesman.outboxes ON DELETE CASCADE,
    dispatcher_pid     integer,
    dispatcher_state   text,        -- 'leading' or 'standby', as the dispatcher last said
    attempts           integer NOT NULL DEFAULT 0,   -- consecutive failed attempts
    last_error         text,
    last_error_at      timestamptz,
    last_published_at  timestamptz,
    published_total    bigint NOT NULL DEFAULT 0,
    deduplicated_total bigint NOT NULL DEFAULT 0,
    skipped_total      bigint NOT NULL DEFAULT 0
);

-- The lease row of each outbox; the lease itself is a session advisory lock (see
-- statesman._acquire_lease). round_trips counts acquisitions and renewals.
CREATE TABLE statesman.leases (
    outbox_id    text PRIMARY KEY REFERENCES statesman.outboxes ON DELETE CASCADE,
    holder_pid   integer,
    acquired_at  timestamptz,
    renewed_at   timestamptz,
    round_trips  bigint NOT NULL DEFAULT 0
);

-- Messages skipped by skip_poison_after_attempts, parked in the same transaction as the cursor
-- move that skipped them. statesman.redeliver() sets requeued_at; the dispatcher then hands
-- them to the sink again and removes them once the sink accepted them.
CREATE TABLE statesman.dead_letters (
    outbox_id       text NOT NULL REFERENCES statesman.outboxes ON DELETE CASCADE,
    global_position bigint NOT NULL,
    message_id      text NOT NULL,
    message         jsonb NOT NULL,
    last_error      text,
    attempts        integer NOT NULL,
    parked_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    requeued_at     timestamptz,
    PRIMARY KEY (outbox_id, global_position)
);

-- Addresses whose retention could not prune everything it wanted, because an enabled outbox
-- had not delivered those records yet (or they had no feed position yet). The worker prunes
-- them again once the cursors have passed.
CREATE TABLE statesman.prune_pending (
    address     text PRIMARY KEY,
    noted_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- The default target of the `table` sink.
CREATE TABLE statesman.delivered (
    message_id      text PRIMARY KEY,
    global_position bigint NOT NULL,
    message         jsonb NOT NULL,
    published_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);

SELECT pg_catalog.pg_extension_config_dump('statesman.outboxes', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.outbox_state', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.leases', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.prune_pending', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.delivered', '');

-- Outboxes
-------------------------------------------------------------------------------

-- The sinks this build knows, in the order error messages list them.
CREATE FUNCTION statesman._known_sinks() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT ARRAY['table']::text[] $$;
COMMENT ON FUNCTION statesman._known_sinks() IS 'the sink names create_outbox accepts';

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
    RETURN format('%I.%I', parts[1], parts[2]);
END
$$;
COMMENT ON FUNCTION statesman._sink_table(jsonb) IS
    'the table sink''s target from its options, quoted and schema-qualified';

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
             AND a.attname IN ('message_id', 'global_position', 'message')) <> 3 THEN
        RAISE EXCEPTION 'table % cannot take deliveries', target
            USING ERRCODE = 'invalid_table_definition',
                  HINT = 'It needs columns message_id (unique), global_position and message.';
    END IF;
    RETURN sink_options;
END
$$;
COMMENT ON FUNCTION statesman._check_sink(text, jsonb) IS
    'validates a sink and its options; prepares the table sink''s target';

-- Checks every setting of an outbox row (create_outbox and alter_outbox); raises 22023/22004.
CREATE FUNCTION statesman._check_outbox(o statesman.outboxes) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    renew interval := COALESCE(o.lease_renew_interval, o.lease_ttl / 3);
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
    IF o.poll_interval < interval '10 milliseconds' OR o.poll_interval > interval '1 hour' THEN
        RAISE EXCEPTION 'poll_interval must be between 10 milliseconds and 1 hour (got %)', o.poll_interval
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.lease_ttl < interval '1 second' OR o.lease_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'lease_ttl must be between 1 second and 1 day (got %)', o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.lease_renew_interval IS NOT NULL AND o.lease_renew_interval <= interval '0' THEN
        RAISE EXCEPTION 'lease_renew_interval must be positive (got %)', o.lease_renew_interval
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF renew >= o.lease_ttl THEN
        RAISE EXCEPTION 'lease_renew_interval (%) must be shorter than lease_ttl (%)', renew, o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.min_retry_delay < interval '0' THEN
        RAISE EXCEPTION 'min_retry_delay must not be negative (got %)', o.min_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.min_retry_delay > o.max_retry_delay THEN
        RAISE EXCEPTION 'min_retry_delay (%) must not exceed max_retry_delay (%)', o.min_retry_delay, o.max_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.max_retry_delay >= o.lease_ttl THEN
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
             now(), now())::statesman.outboxes;
    PERFORM statesman._check_outbox(o);
    IF EXISTS (SELECT FROM statesman.outboxes x WHERE x.outbox_id = create_outbox.outbox_id) THEN
        RAISE EXCEPTION 'outbox "%" already exists', create_outbox.outbox_id
            USING ERRCODE = 'unique_violation', HINT = 'Use statesman.alter_outbox() to change it.';
    END IF;
    o.sink_options := statesman._check_sink(create_outbox.sink, create_outbox.sink_options);
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
    UPDATE statesman.outboxes x
    SET sink = o.sink, sink_options = o.sink_options, root = o.root, batch_size = o.batch_size,
        poll_interval = o.poll_interval, require_lease = o.require_lease, lease_ttl = o.lease_ttl,
        lease_renew_interval = o.lease_renew_interval, min_retry_delay = o.min_retry_delay,
        max_retry_delay = o.max_retry_delay, skip_poison_after_attempts = o.skip_poison_after_attempts,
        fingerprint = o.fingerprint, payload_content_type = o.payload_content_type,
        enabled = o.enabled, updated_at = now()
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
    PERFORM pg_advisory_xact_lock(1398033745, statesman._lease_key(drop_outbox.outbox_id));
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
    UPDATE statesman.dead_letters d SET requeued_at = now()
    WHERE d.outbox_id = redeliver.outbox_id
      AND (redeliver.message_id IS NULL OR d.message_id = redeliver.message_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 AND redeliver.message_id IS NOT NULL THEN
        RAISE EXCEPTION 'outbox "%" has no parked message "%"', redeliver.outbox_id, redeliver.message_id
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION statesman.redeliver(text, text) IS
    'queues parked messages (all, or one message id) to be handed to the sink again; returns how many';

-------------------------------------------------------------------------------
-- Delivery (called by the dispatcher and by dispatch_once; not for applications)
-------------------------------------------------------------------------------

-- The advisory lock key of an outbox's lease: (1398033744, hashtext(outbox_id)).
CREATE FUNCTION statesman._lease_key(outbox_id text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT pg_catalog.hashtext(outbox_id) $$;
COMMENT ON FUNCTION statesman._lease_key(text) IS 'second half of an outbox''s lease lock key';

-- A leader that is alive but stuck (a sink call that hangs) stops renewing its lease. A
-- dispatcher renews its lease row; a dispatch_once session holds the lease only for its
-- transaction (its row update is not visible to others), so it is judged by its transaction's
-- age. A holder past lease_ttl is terminated, which releases the lock, so the outbox is never
-- blocked for much longer than lease_ttl + poll_interval. True when it terminated one.
CREATE FUNCTION statesman._expire_stuck_lease(outbox_id text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    l statesman.leases;
    v_pid integer;
    v_since timestamptz;
BEGIN
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _expire_stuck_lease.outbox_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT * INTO l FROM statesman.leases x WHERE x.outbox_id = o.outbox_id;
    -- Who holds the lease lock, and since when it last showed life.
    SELECT k.pid, CASE WHEN k.pid = l.holder_pid AND a.backend_type = 'statesman dispatcher'
                       THEN l.renewed_at ELSE a.xact_start END
    INTO v_pid, v_since
    FROM pg_locks k JOIN pg_stat_activity a ON a.pid = k.pid
    WHERE k.locktype = 'advisory' AND k.granted
      AND k.classid::bigint = 1398033744
      AND k.objid = statesman._lease_key(o.outbox_id)::oid AND k.objsubid = 2
      AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
    LIMIT 1;
    IF v_pid IS NULL OR v_pid = pg_backend_pid() OR v_since IS NULL
       OR v_since >= clock_timestamp() - o.lease_ttl THEN
        RETURN false;
    END IF;
    RAISE WARNING 'statesman: outbox "%": the lease holder (pid %) has not renewed for %; terminating it',
                  o.outbox_id, v_pid, clock_timestamp() - v_since;
    RETURN pg_terminate_backend(v_pid);
END
$$;
COMMENT ON FUNCTION statesman._expire_stuck_lease(text) IS
    'terminates a lease holder that has not renewed within lease_ttl';

-- Tries to take the lease: a session advisory lock, kept across transactions until released
-- or the session ends. A holder whose lease row was not renewed within lease_ttl is stuck: it
-- is terminated (its lock goes with its session) and the next attempt can take over.
CREATE FUNCTION statesman._acquire_lease(outbox_id text, transactional boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    got boolean;
BEGIN
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _acquire_lease.outbox_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- transactional: dispatch_once's lease, released when the caller's transaction ends.
    IF transactional THEN
        got := pg_try_advisory_xact_lock(1398033744, statesman._lease_key(o.outbox_id));
    ELSE
        got := pg_try_advisory_lock(1398033744, statesman._lease_key(o.outbox_id));
    END IF;
    IF got THEN
        UPDATE statesman.leases x
        SET holder_pid = pg_backend_pid(), acquired_at = clock_timestamp(),
            renewed_at = clock_timestamp(), round_trips = x.round_trips + 1
        WHERE x.outbox_id = o.outbox_id;
        RETURN true;
    END IF;
    PERFORM statesman._expire_stuck_lease(o.outbox_id);
    RETURN false;
END
$$;
COMMENT ON FUNCTION statesman._acquire_lease(text, boolean) IS 'tries to take an outbox''s lease';

-- Renews a held lease; false when this session does not hold it.
CREATE FUNCTION statesman._renew_lease(outbox_id text) RETURNS boolean
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE statesman.leases x SET renewed_at = clock_timestamp(), round_trips = x.round_trips + 1
    WHERE x.outbox_id = _renew_lease.outbox_id AND x.holder_pid = pg_backend_pid()
    RETURNING true
$$;
COMMENT ON FUNCTION statesman._renew_lease(text) IS 'renews the lease this session holds';

CREATE FUNCTION statesman._release_lease(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE statesman.leases x SET holder_pid = NULL
    WHERE x.outbox_id = _release_lease.outbox_id AND x.holder_pid = pg_backend_pid();
    PERFORM pg_advisory_unlock(1398033744, statesman._lease_key(_release_lease.outbox_id));
END
$$;
COMMENT ON FUNCTION statesman._release_lease(text) IS 'releases the lease this session holds';

-- The dispatcher's own report of what it is doing ('leading', 'standby' or NULL when it stops).
CREATE FUNCTION statesman._note_dispatcher(outbox_id text, state text) RETURNS void
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE statesman.outbox_state s
    SET dispatcher_pid = CASE WHEN _note_dispatcher.state IS NULL THEN NULL ELSE pg_backend_pid() END,
        dispatcher_state = _note_dispatcher.state
    WHERE s.outbox_id = _note_dispatcher.outbox_id
      AND (s.dispatcher_pid IS DISTINCT FROM pg_backend_pid() OR s.dispatcher_state IS DISTINCT FROM _note_dispatcher.state)
      AND (_note_dispatcher.state IS NOT NULL OR s.dispatcher_pid = pg_backend_pid())
$$;
COMMENT ON FUNCTION statesman._note_dispatcher(text, text) IS 'records the dispatcher''s process and role';

-- The outcome of one page of delivery.
CREATE TYPE statesman._page_result AS (
    status        text,      -- 'delivered', 'empty', 'failed', 'paused' or 'gone'
    read          bigint,    -- feed records in the page
    last_position bigint,    -- the cursor after the page
    published     bigint,
    deduplicated  bigint,
    attempts      integer,   -- consecutive failures so far (after a failure)
    error         text,
    full_page     boolean    -- the page had batch_size records: more may follow at once
);

-- Records a failed attempt. Runs in the dispatcher's transaction, outside the rolled-back
-- sink work, so the failure is kept.
CREATE FUNCTION statesman._note_failure(outbox_id text, error text) RETURNS integer
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE statesman.outbox_state s
    SET attempts = s.attempts + 1, last_error = left(_note_failure.error, 2000), last_error_at = clock_timestamp()
    WHERE s.outbox_id = _note_failure.outbox_id
    RETURNING s.attempts
$$;
COMMENT ON FUNCTION statesman._note_failure(text, text) IS 'counts a failed delivery attempt';

-- The outbox a page works for, with the page lock held until the transaction ends: shared
-- between pages, exclusive for drop_outbox, so a dropped outbox's cursor can never be written
-- back by a page that was under way (an advisory lock: no row lock, no WAL). NULL fields when
-- the outbox is gone.
CREATE FUNCTION statesman._page_outbox(outbox_id text) RETURNS statesman.outboxes
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1398033745, statesman._lease_key(_page_outbox.outbox_id));
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _page_outbox.outbox_id;
    RETURN o;
END
$$;
COMMENT ON FUNCTION statesman._page_outbox(text) IS 'an outbox''s row, under the page lock';

-- Moves an outbox's cursor forward to a position delivered (or parked) in this transaction.
CREATE FUNCTION statesman._move_cursor(outbox_id text, "position" bigint) RETURNS void
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    INSERT INTO statesman.cursors AS c (outbox_id, position) VALUES (_move_cursor.outbox_id, _move_cursor."position")
    ON CONFLICT ON CONSTRAINT cursors_pkey DO UPDATE
        SET position = EXCLUDED.position, updated_at = now()
        WHERE c.position < EXCLUDED.position
$$;
COMMENT ON FUNCTION statesman._move_cursor(text, bigint) IS 'moves a cursor forward within a page''s transaction';

-- Delivers the next page of the feed to a `table` sink: the inserts, the cursor advance and the
-- totals commit together, so delivery into the table is exactly-once. The sink's failure
-- (a constraint, a trigger, a missing table) is caught, recorded and reported as 'failed'.
CREATE FUNCTION statesman._deliver_table_page(outbox_id text) RETURNS statesman._page_result
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    r statesman._page_result;
    v_after bigint;
    v_matching bigint;
    v_target text;
    v_store text;
    v_epoch uuid;
    v_insert text;
BEGIN
    o := statesman._page_outbox(_deliver_table_page.outbox_id);
    IF o.outbox_id IS NULL THEN
        r.status := 'gone'; RETURN r;
    ELSIF NOT o.enabled THEN
        r.status := 'paused'; RETURN r;
    END IF;
    v_after := COALESCE((SELECT c.position FROM statesman.cursors c WHERE c.outbox_id = o.outbox_id), 0);

    SELECT count(*), max(p.global_position), count(*) FILTER (WHERE o.root IS NULL OR p.root = o.root)
    INTO r.read, r.last_position, v_matching
    FROM (SELECT h.global_position, h.root FROM statesman.history h
          WHERE h.global_position > v_after ORDER BY h.global_position LIMIT o.batch_size) p;
    IF r.read = 0 THEN
        r.status := 'empty'; r.last_position := NULLIF(v_after, 0); RETURN r;
    END IF;

    r.published := 0;
    IF v_matching > 0 THEN
        SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch FROM statesman.store s;
        BEGIN
            v_target := statesman._sink_table(o.sink_options);
            v_insert := format(
                'INSERT INTO %s AS t (message_id, global_position, message) '
                'SELECT $4 || ''/'' || h.address || ''#'' || h.revision, h.global_position, '
                '  statesman._message($4, $5, h.address, h.root, h.path, h.partition, h.revision, '
                '    h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version, '
                '    h.source, COALESCE(h.fingerprint, $6, r.fingerprint), COALESCE(h.content_type, $7, r.content_type), '
                '    h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error) '
                'FROM statesman.history h LEFT JOIN statesman.roots r ON r.root OPERATOR(pg_catalog.=) h.root '
                'WHERE h.global_position OPERATOR(pg_catalog.>) $1 AND h.global_position OPERATOR(pg_catalog.<=) $2 '
                '  AND ($3::text IS NULL OR h.root OPERATOR(pg_catalog.=) $3) '
                'ORDER BY h.global_position', v_target);
            BEGIN
                -- The common case: nothing of this page is in the table yet.
                EXECUTE v_insert USING v_after, r.last_position, o.root, v_store, v_epoch, o.fingerprint, o.payload_content_type;
            EXCEPTION WHEN unique_violation THEN
                -- Re-delivery (a cursor seeded back, a restored table): keep what is there.
                EXECUTE v_insert || ' ON CONFLICT (message_id) DO NOTHING'
                    USING v_after, r.last_position, o.root, v_store, v_epoch, o.fingerprint, o.payload_content_type;
            END;
            GET DIAGNOSTICS r.published = ROW_COUNT;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS r.error = MESSAGE_TEXT;
            r.error := format('table sink %s: %s', COALESCE(v_target, o.sink_options->>'table'), r.error);
            r.status := 'failed';
            r.attempts := statesman._note_failure(o.outbox_id, r.error);
            r.last_position := NULLIF(v_after, 0);
            RETURN r;
        END;
    END IF;
    r.deduplicated := v_matching - r.published;

    PERFORM statesman._move_cursor(o.outbox_id, r.last_position);
    UPDATE statesman.outbox_state s
    SET attempts = 0, published_total = s.published_total + r.published,
        deduplicated_total = s.deduplicated_total + r.deduplicated,
        last_published_at = CASE WHEN r.published > 0 THEN clock_timestamp() ELSE s.last_published_at END
    WHERE s.outbox_id = o.outbox_id;
    r.status := 'delivered';
    r.attempts := 0;
    r.full_page := r.read >= o.batch_size;
    RETURN r;
END
$$;
COMMENT ON FUNCTION statesman._deliver_table_page(text) IS
    'delivers the next page of the feed to a table sink, with the cursor advance in the same transaction';

-- Skips the next page after repeated failures: parks its messages in dead_letters and moves
-- the cursor past it, in one transaction. Returns how many messages were parked.
CREATE FUNCTION statesman._park_page(outbox_id text, error text, attempts integer, page_records bigint)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    v_after bigint;
    v_last bigint;
    v_store text;
    v_epoch uuid;
    parked bigint;
BEGIN
    o := statesman._page_outbox(_park_page.outbox_id);
    IF o.outbox_id IS NULL OR NOT o.enabled THEN
        RETURN 0;
    END IF;
    v_after := COALESCE((SELECT c.position FROM statesman.cursors c WHERE c.outbox_id = o.outbox_id), 0);
    -- Exactly the page that failed: records sequenced since then were never tried.
    SELECT max(p.global_position) INTO v_last
    FROM (SELECT h.global_position FROM statesman.history h
          WHERE h.global_position > v_after ORDER BY h.global_position
          LIMIT LEAST(o.batch_size, _park_page.page_records)) p;
    IF v_last IS NULL THEN
        RETURN 0;
    END IF;
    SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch FROM statesman.store s;
    INSERT INTO statesman.dead_letters AS d (outbox_id, global_position, message_id, message, last_error, attempts)
    SELECT o.outbox_id, h.global_position, v_store || '/' || h.address || '#' || h.revision,
           statesman._message(v_store, v_epoch, h.address, h.root, h.path, h.partition, h.revision,
               h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
               h.source, COALESCE(h.fingerprint, o.fingerprint, r.fingerprint),
               COALESCE(h.content_type, o.payload_content_type, r.content_type),
               h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error),
           left(_park_page.error, 2000), _park_page.attempts
    FROM statesman.history h LEFT JOIN statesman.roots r ON r.root = h.root
    WHERE h.global_position > v_after AND h.global_position <= v_last
      AND (o.root IS NULL OR h.root = o.root)
    ON CONFLICT ON CONSTRAINT dead_letters_pkey DO UPDATE
        SET last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts, parked_at = EXCLUDED.parked_at;
    GET DIAGNOSTICS parked = ROW_COUNT;
    PERFORM statesman._move_cursor(o.outbox_id, v_last);
    UPDATE statesman.outbox_state s SET attempts = 0, skipped_total = s.skipped_total + parked
    WHERE s.outbox_id = o.outbox_id;
    RETURN parked;
END
$$;
COMMENT ON FUNCTION statesman._park_page(text, text, integer, bigint) IS
    'skips the next page: parks its messages in dead_letters and moves the cursor past it';

-- Hands requeued dead letters to a `table` sink (at most one page); delivered ones leave
-- dead_letters in the same transaction. On failure they stay parked and are no longer
-- requeued, so one broken message cannot stall the feed: redeliver() again to retry.
CREATE FUNCTION statesman._redeliver_table_page(outbox_id text) RETURNS statesman._page_result
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    r statesman._page_result;
    v_target text;
    v_positions bigint[];
BEGIN
    o := statesman._page_outbox(_redeliver_table_page.outbox_id);
    IF o.outbox_id IS NULL OR NOT o.enabled THEN
        r.status := 'empty'; r.read := 0; RETURN r;
    END IF;
    SELECT array_agg(d.global_position ORDER BY d.global_position) INTO v_positions
    FROM (SELECT d.global_position FROM statesman.dead_letters d
          WHERE d.outbox_id = o.outbox_id AND d.requeued_at IS NOT NULL
          ORDER BY d.global_position LIMIT o.batch_size) d;
    r.read := COALESCE(cardinality(v_positions), 0);
    IF r.read = 0 THEN
        r.status := 'empty'; RETURN r;
    END IF;
    BEGIN
        v_target := statesman._sink_table(o.sink_options);
        EXECUTE format(
            'INSERT INTO %s AS t (message_id, global_position, message) '
            'SELECT d.message_id, d.global_position, d.message FROM statesman.dead_letters d '
            'WHERE d.outbox_id OPERATOR(pg_catalog.=) $1 AND d.global_position OPERATOR(pg_catalog.=) ANY ($2) '
            'ORDER BY d.global_position ON CONFLICT (message_id) DO NOTHING', v_target)
            USING o.outbox_id, v_positions;
        GET DIAGNOSTICS r.published = ROW_COUNT;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS r.error = MESSAGE_TEXT;
        r.error := format('table sink %s: %s', COALESCE(v_target, o.sink_options->>'table'), r.error);
        UPDATE statesman.dead_letters d
        SET requeued_at = NULL, attempts = d.attempts + 1, last_error = left(r.error, 2000)
        WHERE d.outbox_id = o.outbox_id AND d.global_position = ANY (v_positions);
        r.status := 'failed';
        RETURN r;
    END;
    DELETE FROM statesman.dead_letters d WHERE d.outbox_id = o.outbox_id AND d.global_position = ANY (v_positions);
    r.deduplicated := r.read - r.published;
    UPDATE statesman.outbox_state s
    SET published_total = s.published_total + r.published,
        deduplicated_total = s.deduplicated_total + r.deduplicated,
        last_published_at = CASE WHEN r.published > 0 THEN clock_timestamp() ELSE s.last_published_at END
    WHERE s.outbox_id = o.outbox_id;
    r.status := 'delivered';
    RETURN r;
END
$$;
COMMENT ON FUNCTION statesman._redeliver_table_page(text) IS
    'hands requeued dead letters to a table sink and removes the delivered ones';

-- Runs one dispatch cycle in the calling session: see the C entry point.
CREATE FUNCTION statesman.dispatch_once(outbox_id text)
    RETURNS TABLE (published bigint, skipped bigint, deduplicated bigint, cursor_position bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_dispatch_once';
COMMENT ON FUNCTION statesman.dispatch_once(text) IS
    'runs one delivery cycle of an outbox in this session (zeros when another holder has the lease)';

-------------------------------------------------------------------------------
-- Retention that waits for delivery
-------------------------------------------------------------------------------

-- The highest position every enabled outbox has delivered (NULL: no enabled outbox, so no
-- limit). Records above it must stay for those outboxes (docs/design.md §2, no prune loss).
CREATE FUNCTION statesman._prune_horizon() RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT min(COALESCE(c.position, 0))
    FROM statesman.outboxes o LEFT JOIN statesman.cursors c ON c.outbox_id = o.outbox_id
    WHERE o.enabled
$$;
COMMENT ON FUNCTION statesman._prune_horizon() IS
    'the position below which every enabled outbox has delivered; NULL when there is none';

-- Prunes an address down to its root's limits (passed in: the append has them at hand). Only
-- records that have a feed position at or below the horizon go (a record leaves history and
-- feed together); when over-limit records had to stay, the address is noted in prune_pending
-- for the worker to prune later. Returns how many records were pruned.
CREATE FUNCTION statesman._prune(address text, max_revisions integer, max_bytes bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_horizon bigint := COALESCE(statesman._prune_horizon(), 9223372036854775807);
    pruned bigint;
    blocked boolean;
BEGIN
    IF max_revisions IS NULL AND max_bytes IS NULL THEN
        RETURN 0;
    END IF;
    WITH doomed AS (
        SELECT x.revision, x.global_position FROM (
            SELECT k.revision, k.global_position, row_number() OVER w AS rn,
                   sum(COALESCE(octet_length(k.payload), 0)) OVER w AS bytes
            FROM statesman.history k WHERE k.address = _prune.address
            WINDOW w AS (ORDER BY k.revision DESC)) x
        WHERE x.rn > 1 AND (x.rn > _prune.max_revisions OR x.bytes > _prune.max_bytes)
    ), gone AS (
        DELETE FROM statesman.history h USING doomed d
        WHERE h.address = _prune.address AND h.revision = d.revision
          AND d.global_position IS NOT NULL AND d.global_position <= v_horizon
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone),
           EXISTS (SELECT FROM doomed d WHERE d.global_position IS NULL OR d.global_position > v_horizon)
    INTO pruned, blocked;
    IF blocked THEN
        INSERT INTO statesman.prune_pending (address) VALUES (_prune.address) ON CONFLICT DO NOTHING;
    END IF;
    RETURN pruned;
END
$$;
COMMENT ON FUNCTION statesman._prune(text, integer, bigint) IS
    'applies an address''s retention as far as delivery allows; notes the rest for later';

-- The worker's deferred pruning: retries up to max_addresses noted addresses (a note goes, and
-- comes back when records must still wait). Returns how many records were pruned.
CREATE FUNCTION statesman._prune_deferred(max_addresses integer DEFAULT 1000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    p record;
    pruned bigint := 0;
BEGIN
    FOR p IN SELECT n.address, r.max_revisions, r.max_bytes
             FROM statesman.prune_pending n
             LEFT JOIN LATERAL (SELECT h.root FROM statesman.history h
                                WHERE h.address = n.address LIMIT 1) h ON true
             LEFT JOIN statesman.roots r ON r.root = h.root
             ORDER BY n.noted_at LIMIT max_addresses
             FOR UPDATE OF n SKIP LOCKED LOOP
        DELETE FROM statesman.prune_pending n WHERE n.address = p.address;
        pruned := pruned + statesman._prune(p.address, p.max_revisions, p.max_bytes);
    END LOOP;
    RETURN pruned;
END
$$;
COMMENT ON FUNCTION statesman._prune_deferred(integer) IS 'prunes addresses whose retention waited for delivery';

-------------------------------------------------------------------------------

-- One row per outbox. Sink options are never shown: they may hold secrets.
CREATE VIEW statesman.outbox_status AS
SELECT o.outbox_id,
       o.sink,
       o.enabled,
       CASE WHEN NOT o.enabled THEN 'paused'
            WHEN st.attempts > 0 THEN 'backing_off'
            WHEN holder.pid IS NOT NULL THEN 'leading'
            WHEN st.dispatcher_state = 'standby' AND disp.pid IS NOT NULL THEN 'standby'
            ELSE 'idle' END AS state,
       c.position AS cursor_position,
       head.position AS head_position,
       GREATEST(COALESCE(head.position, 0) - COALESCE(c.position, 0), 0) AS lag_records,
       COALESCE(EXTRACT(epoch FROM pg_catalog.now() - nxt.occurred_at), 0)::double precision AS lag_seconds,
       holder.pid AS leader_pid,
       CASE WHEN holder.pid IS NOT NULL THEN l.renewed_at END AS lease_renewed_at,
       st.attempts,
       st.last_error,
       st.last_error_at,
       st.published_total,
       st.deduplicated_total,
       st.skipped_total,
       (SELECT count(*) FROM statesman.dead_letters d WHERE d.outbox_id = o.outbox_id) AS parked,
       l.round_trips AS lease_round_trips,
       st.last_published_at
FROM statesman.outboxes o
LEFT JOIN statesman.outbox_state st ON st.outbox_id = o.outbox_id
LEFT JOIN statesman.leases l ON l.outbox_id = o.outbox_id
LEFT JOIN statesman.cursors c ON c.outbox_id = o.outbox_id
CROSS JOIN LATERAL (SELECT max(h.global_position) AS position FROM statesman.history h) head
LEFT JOIN LATERAL (
    SELECT h.occurred_at FROM statesman.history h
    WHERE h.global_position > COALESCE(c.position, 0) ORDER BY h.global_position LIMIT 1) nxt ON true
-- The leader: the session that holds the lease lock (an unleased outbox: its dispatcher).
LEFT JOIN LATERAL (
    SELECT k.pid FROM pg_catalog.pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.classid::bigint = 1398033744
      AND k.objid = statesman._lease_key(o.outbox_id)::oid AND k.objsubid = 2
      AND k.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
    UNION ALL
    SELECT a.pid FROM pg_catalog.pg_stat_activity a
    WHERE NOT o.require_lease AND a.pid = st.dispatcher_pid AND st.dispatcher_state = 'leading'
    LIMIT 1) holder ON true
LEFT JOIN LATERAL (
    SELECT a.pid FROM pg_catalog.pg_stat_activity a WHERE a.pid = st.dispatcher_pid) disp ON true;
COMMENT ON VIEW statesman.outbox_status IS
    'each outbox: state, cursor, lag, lease, failures and totals (sink options are never shown)';

REVOKE ALL ON FUNCTION statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.drop_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.pause_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.resume_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.redeliver(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.dispatch_once(text) FROM PUBLIC;

-- The delivery internals act on outboxes, cursors and leases: never for PUBLIC.
REVOKE ALL ON FUNCTION statesman._check_sink(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._outbox_for_update(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._acquire_lease(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._renew_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._expire_stuck_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._release_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_dispatcher(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_failure(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._page_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._move_cursor(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._deliver_table_page(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._park_page(text, text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._redeliver_table_page(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune(text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune_deferred(integer) FROM PUBLIC;

-- Monitoring: the outbox view shows no secrets, but its errors may quote sink data.
GRANT SELECT ON statesman.outbox_status TO pg_monitor;

-- statesman 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION statesman UPDATE TO '0.4.0'" to load this file. \quit

-- Hardening of the workers: named lock spaces, foreign lock holders, worker settings, interval checks, slot waits
CREATE OR REPLACE FUNCTION statesman._lock_space(name text) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    CASE name
        WHEN 'address' THEN RETURN 1398033742;
        WHEN 'sequencer' THEN RETURN 1398033743;
        WHEN 'lease' THEN RETURN 1398033744;
        WHEN 'page' THEN RETURN 1398033745;
        ELSE RAISE EXCEPTION 'unknown lock space "%"', name USING ERRCODE = 'invalid_parameter_value';
    END CASE;
END
$$;
COMMENT ON FUNCTION statesman._lock_space(text) IS
    'the advisory lock space of statesman''s address, sequencer, lease and page locks';

CREATE OR REPLACE FUNCTION statesman._millis(value interval) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT LEAST(GREATEST(pg_catalog.round(EXTRACT(epoch FROM value) * 1000),
                                -9e18), 9e18)::bigint $$;
COMMENT ON FUNCTION statesman._millis(interval) IS 'an interval in milliseconds, as the workers count it';

CREATE OR REPLACE FUNCTION statesman._outbox_millis(o statesman.outboxes,
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

CREATE OR REPLACE FUNCTION statesman._check_outbox(o statesman.outboxes) RETURNS void
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

CREATE OR REPLACE FUNCTION statesman._check_sink_timeout(sink_options jsonb, lease_ttl interval) RETURNS void
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

CREATE OR REPLACE FUNCTION statesman._wake_launcher() RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_wake_launcher';
COMMENT ON FUNCTION statesman._wake_launcher() IS
    'has the launcher start this database''s worker when the transaction commits';
REVOKE ALL ON FUNCTION statesman._wake_launcher() FROM PUBLIC;

CREATE OR REPLACE FUNCTION statesman._slot_wait(outbox_id text) RETURNS text
    LANGUAGE c STABLE STRICT
    AS 'MODULE_PATHNAME', 'statesman_slot_wait';
COMMENT ON FUNCTION statesman._slot_wait(text) IS
    'why an outbox''s worker waits for a worker slot, or NULL';

-- (create_outbox is replaced below, with the postgres sink's password rule: that copy also
-- wakes the launcher.)

CREATE OR REPLACE FUNCTION statesman.resume_outbox(outbox_id text) RETURNS void
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

CREATE OR REPLACE FUNCTION statesman.sequence_feed(max_records integer DEFAULT 10000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET plan_cache_mode = force_generic_plan
    AS $$
DECLARE
    sequenced bigint;
    head bigint;
BEGIN
    PERFORM statesman._require(max_records, 'max_records');
    IF max_records < 1 THEN
        RAISE EXCEPTION 'max_records must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Under REPEATABLE READ or SERIALIZABLE the snapshot predates the lock, so rows sequenced
    -- by the previous run would look unsequenced and the UPDATE would fail.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'statesman.sequence_feed() must run at READ COMMITTED isolation'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF NOT pg_try_advisory_xact_lock(statesman._lock_space('sequencer'), 0) THEN
        RETURN statesman.head_position();   -- another session is sequencing right now
    END IF;

    WITH todo AS MATERIALIZED (
        SELECT h.ctid AS tid FROM statesman.history h
        WHERE h.global_position IS NULL
        ORDER BY h.id
        LIMIT max_records
    ), numbered AS MATERIALIZED (
        SELECT t.tid, pg_catalog.nextval('statesman.feed_position_seq'::regclass) AS pos FROM todo t
    )
    UPDATE statesman.history h SET global_position = n.pos
    FROM numbered n
    WHERE h.ctid = n.tid;
    GET DIAGNOSTICS sequenced = ROW_COUNT;

    head := statesman.head_position();
    IF sequenced > 0 THEN
        -- Readers may act on these positions as soon as this transaction ends: make the end
        -- durable, so that a crash cannot hand the same positions to other records.
        PERFORM set_config('synchronous_commit', 'on', true);
        -- A wake-up hint for whoever listens; sent by the sequencer, never by appends.
        PERFORM pg_notify('statesman', head::text);
    END IF;
    RETURN head;
END
$$;
COMMENT ON FUNCTION statesman.sequence_feed(integer) IS
    'gives feed positions to up to max_records committed records; returns the head position';

CREATE OR REPLACE FUNCTION statesman._expire_stuck_lease(outbox_id text) RETURNS boolean
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
      AND k.classid::bigint = statesman._lock_space('lease')
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

CREATE OR REPLACE FUNCTION statesman._acquire_lease(outbox_id text, transactional boolean DEFAULT false) RETURNS boolean
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
        got := pg_try_advisory_xact_lock(statesman._lock_space('lease'), statesman._lease_key(o.outbox_id));
    ELSE
        got := pg_try_advisory_lock(statesman._lock_space('lease'), statesman._lease_key(o.outbox_id));
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

CREATE OR REPLACE FUNCTION statesman._release_lease(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE statesman.leases x SET holder_pid = NULL
    WHERE x.outbox_id = _release_lease.outbox_id AND x.holder_pid = pg_backend_pid();
    PERFORM pg_advisory_unlock(statesman._lock_space('lease'), statesman._lease_key(_release_lease.outbox_id));
END
$$;
COMMENT ON FUNCTION statesman._release_lease(text) IS 'releases the lease this session holds';

CREATE OR REPLACE FUNCTION statesman.drop_outbox(outbox_id text) RETURNS void
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

CREATE OR REPLACE FUNCTION statesman._page_outbox(outbox_id text) RETURNS statesman.outboxes
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(statesman._lock_space('page'), statesman._lease_key(_page_outbox.outbox_id));
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _page_outbox.outbox_id;
    RETURN o;
END
$$;
COMMENT ON FUNCTION statesman._page_outbox(text) IS 'an outbox''s row, under the page lock';

CREATE OR REPLACE FUNCTION statesman._feed_status(
    OUT head_position bigint, OUT oldest_position bigint, OUT unsequenced_records bigint,
    OUT open_writers bigint, OUT oldest_writer_pid integer, OUT oldest_writer_age interval,
    OUT holding_back_pid integer, OUT holding_back_age interval)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH locks AS (
        SELECT l.pid, l.classid, a.xact_start
        FROM pg_catalog.pg_locks l
        LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
          AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                            WHERE d.datname = pg_catalog.current_database())
          AND l.classid::bigint IN (statesman._lock_space('address'), statesman._lock_space('sequencer'))
    ), writers AS (
        SELECT DISTINCT pid, xact_start FROM locks WHERE classid::bigint = statesman._lock_space('address')
    )
    SELECT (SELECT max(h.global_position) FROM statesman.history h),
           (SELECT min(h.global_position) FROM statesman.history h),
           (SELECT count(*) FROM statesman.history h WHERE h.global_position IS NULL),
           (SELECT count(*) FROM writers),
           w.pid, pg_catalog.now() - w.xact_start,
           s.pid, pg_catalog.now() - s.xact_start
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (SELECT * FROM writers ORDER BY xact_start LIMIT 1) w ON true
    LEFT JOIN LATERAL (SELECT * FROM locks WHERE classid::bigint = statesman._lock_space('sequencer')
                       AND pid <> pg_catalog.pg_backend_pid() LIMIT 1) s ON true
$$;
COMMENT ON FUNCTION statesman._feed_status() IS 'the row of statesman.feed_status';

CREATE OR REPLACE VIEW statesman.outbox_status AS
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
       -- A worker that waits for a slot says so (the state is idle: no dispatcher runs).
       CASE WHEN o.enabled AND holder.pid IS NULL
            THEN COALESCE(statesman._slot_wait(o.outbox_id), st.last_error)
            ELSE st.last_error END AS last_error,
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
    WHERE k.locktype = 'advisory' AND k.granted AND k.classid::bigint = statesman._lock_space('lease')
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


-- Table sink targets: UNLOGGED, temporary and system tables are refused, at registration
-- and on every page.
CREATE OR REPLACE FUNCTION statesman._check_sink_target(target text) RETURNS void
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

CREATE OR REPLACE FUNCTION statesman._sink_table(sink_options jsonb) RETURNS text
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

CREATE OR REPLACE FUNCTION statesman._check_sink(sink text, sink_options jsonb) RETURNS jsonb
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

-- A table sink's rows are inserted as the target table's owner (see statesman--0.4.0.sql).
CREATE FUNCTION statesman._insert_sink_rows(target text, message_ids text[], global_positions bigint[],
                                            messages jsonb[]) RETURNS bigint
    LANGUAGE c VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_insert_sink_rows';
COMMENT ON FUNCTION statesman._insert_sink_rows(text, text[], bigint[], jsonb[]) IS
    'inserts rows into a table sink''s target as its owner (ON CONFLICT (message_id) DO NOTHING)';
REVOKE ALL ON FUNCTION statesman._insert_sink_rows(text, text[], bigint[], jsonb[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION statesman._redeliver_table_page(outbox_id text) RETURNS statesman._page_result
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    r statesman._page_result;
    v_target text;
    v_positions bigint[];
    v_ids text[];
    v_row_positions bigint[];
    v_messages jsonb[];
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
        PERFORM statesman._check_sink_target(v_target);
        -- The three arrays from one query, so that they stay in step.
        SELECT array_agg(d.message_id ORDER BY d.global_position), array_agg(d.global_position ORDER BY d.global_position),
               array_agg(d.message ORDER BY d.global_position)
          INTO v_ids, v_row_positions, v_messages
          FROM statesman.dead_letters d
         WHERE d.outbox_id = o.outbox_id AND d.global_position = ANY (v_positions);
        r.published := statesman._insert_sink_rows(v_target, v_ids, v_row_positions, v_messages);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS r.error = MESSAGE_TEXT;
        r.error := format('table sink %s: %s', COALESCE(v_target, o.sink_options->>'table'), r.error);
        PERFORM statesman._requeued_outcome(o.outbox_id, v_positions, false, 0, 0, r.error);
        r.status := 'failed';
        RETURN r;
    END;
    r.deduplicated := r.read - r.published;
    PERFORM statesman._requeued_outcome(o.outbox_id, v_positions, true, r.published, r.deduplicated, NULL);
    r.status := 'delivered';
    RETURN r;
END
$$;
COMMENT ON FUNCTION statesman._redeliver_table_page(text) IS
    'hands requeued dead letters to a table sink and removes the delivered ones';
REVOKE ALL ON FUNCTION statesman._check_sink_target(text) FROM PUBLIC;

-- Records the feed cannot carry: a page whose messages cannot be built is
-- parked record by record; a dead letter whose message cannot be built keeps no message and is
-- never requeued; a root's envelope fallbacks are limited to 1024 bytes like an outbox's.
ALTER TABLE statesman.dead_letters ALTER COLUMN message DROP NOT NULL;
CREATE OR REPLACE FUNCTION statesman.redeliver(outbox_id text, message_id text DEFAULT NULL) RETURNS bigint
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

CREATE OR REPLACE FUNCTION statesman.declare_root(
    root text, fingerprint text DEFAULT NULL, content_type text DEFAULT NULL,
    max_revisions integer DEFAULT NULL, max_bytes bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_name(declare_root.root, 'root');
    IF declare_root.max_revisions < 1 THEN
        RAISE EXCEPTION 'max_revisions must be at least 1 (or NULL to keep all)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Messages fall back to these (see read_feed): the append functions' size check counts
    -- at most 1024 bytes for each, as for an outbox's fallbacks.
    IF octet_length(declare_root.fingerprint) > 1024 OR octet_length(declare_root.content_type) > 1024 THEN
        RAISE EXCEPTION 'fingerprint and content_type must be at most 1024 bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF declare_root.max_bytes < 1 THEN
        RAISE EXCEPTION 'max_bytes must be at least 1 (or NULL to keep all)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO statesman.roots AS r (root, fingerprint, content_type, max_revisions, max_bytes)
    VALUES (lower(declare_root.root), declare_root.fingerprint, declare_root.content_type,
            declare_root.max_revisions, declare_root.max_bytes)
    ON CONFLICT ON CONSTRAINT roots_pkey DO UPDATE
        SET fingerprint = EXCLUDED.fingerprint, content_type = EXCLUDED.content_type,
            max_revisions = EXCLUDED.max_revisions, max_bytes = EXCLUDED.max_bytes,
            declared_at = pg_catalog.now();
END
$$;
COMMENT ON FUNCTION statesman.declare_root(text, text, text, integer, bigint) IS
    'declares a root''s envelope (fingerprint, content type) and retention; NULL limits keep all';

-- Who may read and write: PUBLIC no longer writes the ledger or reads its
-- payloads; consumer positions belong to the role that stored them (rows from before 0.4.0 have
-- no owner and are claimed by the first role that moves them).
REVOKE ALL ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text, integer, text,
    text, text, jsonb, text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.append_delete(text, text, text, text, text, integer, text, text, text, jsonb, text,
    timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.read_feed(bigint, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.history(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.current(text, text, text) FROM PUBLIC;
ALTER TABLE statesman.applied ADD COLUMN owner name;
ALTER TABLE statesman.applied ALTER COLUMN owner SET DEFAULT CURRENT_USER;
ALTER TABLE statesman.applied ENABLE ROW LEVEL SECURITY;
CREATE POLICY applied_read ON statesman.applied FOR SELECT USING (true);
CREATE POLICY applied_insert ON statesman.applied FOR INSERT WITH CHECK (owner = CURRENT_USER);
CREATE POLICY applied_update ON statesman.applied FOR UPDATE
    USING (owner IS NULL OR owner = CURRENT_USER) WITH CHECK (owner = CURRENT_USER);
GRANT SELECT, INSERT ON statesman.applied TO PUBLIC;
GRANT UPDATE (epoch, position, applied_at, owner) ON statesman.applied TO PUBLIC;
CREATE OR REPLACE FUNCTION statesman.mark_applied(consumer text, feed text, epoch uuid, "position" bigint)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    stored boolean;
    v_owner name;
BEGIN
    PERFORM statesman._check_applied_args(mark_applied.consumer, mark_applied.feed,
                                          mark_applied.epoch, mark_applied."position");
    -- A position belongs to the role that stored it first (NULL: a row from before 0.4.0,
    -- claimed now). Runs as the caller, so statesman.applied's row-level security also refuses
    -- (42501) a row another role stored between this check and the insert.
    SELECT a.owner INTO v_owner FROM statesman.applied a
    WHERE a.consumer = mark_applied.consumer AND a.feed = mark_applied.feed;
    IF v_owner IS DISTINCT FROM CURRENT_USER AND v_owner IS NOT NULL THEN
        RAISE EXCEPTION 'consumer "%" of feed "%" belongs to role "%"', mark_applied.consumer,
                        mark_applied.feed, v_owner
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A consumer''s position is moved only by the role that stored it first.';
    END IF;
    -- The row lock of ON CONFLICT serialises concurrent callers for one (consumer, feed); the
    -- second re-checks the condition against what the first committed.
    INSERT INTO statesman.applied AS a (consumer, feed, epoch, position, owner)
    VALUES (mark_applied.consumer, mark_applied.feed, mark_applied.epoch, mark_applied."position", CURRENT_USER)
    ON CONFLICT ON CONSTRAINT applied_pkey DO UPDATE
        SET epoch = EXCLUDED.epoch, position = EXCLUDED.position, applied_at = pg_catalog.now(),
            owner = EXCLUDED.owner
        WHERE NOT (a.epoch = EXCLUDED.epoch AND a.position >= EXCLUDED.position)
    RETURNING true INTO stored;
    RETURN COALESCE(stored, false);
END
$$;
COMMENT ON FUNCTION statesman.mark_applied(text, text, uuid, bigint) IS
    'records (epoch, position) as applied in the caller''s transaction; false when already applied';

CREATE OR REPLACE FUNCTION statesman.mark_applied(consumer text, message jsonb) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_epoch uuid;
    v_position bigint;
BEGIN
    PERFORM statesman._require(message, 'message');
    IF jsonb_typeof(message) IS DISTINCT FROM 'object'
       OR jsonb_typeof(message->'store') IS DISTINCT FROM 'string'
       OR jsonb_typeof(message->'epoch') IS DISTINCT FROM 'string'
       OR jsonb_typeof(message->'globalPosition') IS DISTINCT FROM 'number' THEN
        RAISE EXCEPTION 'message must be a statesman.state-change/v1 object with store, epoch and globalPosition'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        v_epoch := (message->>'epoch')::uuid;
        v_position := (message->>'globalPosition')::bigint;
    EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        RAISE EXCEPTION 'message epoch must be a UUID and globalPosition an integer'
            USING ERRCODE = 'invalid_parameter_value';
    END;
    RETURN statesman.mark_applied(consumer, message->>'store', v_epoch, v_position);
END
$$;
COMMENT ON FUNCTION statesman.mark_applied(text, jsonb) IS
    'mark_applied with feed, epoch and position taken from a statesman.state-change/v1 message';

CREATE OR REPLACE FUNCTION statesman.already_applied(consumer text, feed text, epoch uuid, "position" bigint)
    RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_applied_args(already_applied.consumer, already_applied.feed,
                                          already_applied.epoch, already_applied."position");
    RETURN EXISTS (
        SELECT FROM statesman.applied a
        WHERE a.consumer = already_applied.consumer AND a.feed = already_applied.feed
          AND a.epoch = already_applied.epoch AND a.position >= already_applied."position");
END
$$;
COMMENT ON FUNCTION statesman.already_applied(text, text, uuid, bigint) IS
    'true when (epoch, position) is at or before what the consumer applied (same epoch only)';

CREATE OR REPLACE FUNCTION statesman.applied_position(consumer text, feed text)
    RETURNS TABLE (epoch uuid, "position" bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_id(applied_position.consumer, 'consumer');
    PERFORM statesman._check_feed(applied_position.feed);
    RETURN QUERY SELECT a.epoch, a.position FROM statesman.applied a
                 WHERE a.consumer = applied_position.consumer AND a.feed = applied_position.feed;
END
$$;
COMMENT ON FUNCTION statesman.applied_position(text, text) IS
    'the (epoch, position) a consumer last applied for a feed, or no row';

-- seed_cursor(outbox, 0) replays from the very beginning, and waits for a page under way.
CREATE OR REPLACE FUNCTION statesman.seed_cursor(outbox_id text, at_position bigint DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    head bigint := statesman.head_position();
    target bigint := COALESCE(at_position, head);
BEGIN
    PERFORM statesman._check_id(seed_cursor.outbox_id, 'outbox_id');
    IF at_position < 0 THEN
        RAISE EXCEPTION 'at_position must not be negative (0: before the first record)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF at_position > COALESCE(head, 0) THEN
        RAISE EXCEPTION 'at_position % is beyond the feed''s head (%)',
                        at_position, COALESCE(head::text, 'empty')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Waits for a page of this outbox that is under way to commit (the page lock, see
    -- statesman._page_outbox): its cursor move can then not overtake the seed, and once a
    -- paused outbox is seeded nothing more of it reaches the sink until it is resumed.
    PERFORM pg_advisory_xact_lock(1398033745, statesman._lease_key(seed_cursor.outbox_id));
    IF target IS NULL OR target = 0 THEN
        -- Before the first record (at_position 0, or the head of an empty feed): the cursor is
        -- removed, as before its first write (a stored position is never 0), and the whole
        -- retained feed is read again.
        DELETE FROM statesman.cursors c WHERE c.outbox_id = seed_cursor.outbox_id;
        RETURN NULL;
    END IF;
    INSERT INTO statesman.cursors AS c (outbox_id, position)
    VALUES (seed_cursor.outbox_id, target)
    ON CONFLICT ON CONSTRAINT cursors_pkey DO UPDATE
        SET position = EXCLUDED.position, updated_at = pg_catalog.now();
    RETURN target;
END
$$;
COMMENT ON FUNCTION statesman.seed_cursor(text, bigint) IS
    'sets where an outbox starts (NULL: the current head; 0: before the first record); the only way to move a cursor back';


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
    IF o.enabled THEN
        PERFORM statesman._wake_launcher();
    END IF;
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

-- The feed written once (ticks)
-- A record is written once: its position is derived from a tick (statesman.ticks), never
-- stored in its row. Every record of 0.3.0 keeps the position stored in its row (the column
-- is renamed legacy_position; statesman._feed_page reads those first, all below the ticks'),
-- the records still without one get it here the 0.3.0 way, and the chain of ticks starts above
-- the old head and above every position 0.3.0 handed out (feed_position_seq).
-- No 0.3.0 append is in flight from here on: the lock waits for every transaction that wrote
-- the ledger and holds off new ones until the update commits.
LOCK TABLE statesman.history IN ACCESS EXCLUSIVE MODE;
WITH todo AS MATERIALIZED (
    SELECT h.ctid AS tid FROM statesman.history h WHERE h.global_position IS NULL ORDER BY h.id
), numbered AS MATERIALIZED (
    SELECT t.tid, pg_catalog.nextval('statesman.feed_position_seq'::regclass) AS pos FROM todo t
)
UPDATE statesman.history h SET global_position = n.pos FROM numbered n WHERE h.ctid = n.tid;
CREATE TEMP TABLE statesman_feed_upgrade ON COMMIT DROP AS
    SELECT GREATEST((SELECT max(h.global_position) FROM statesman.history h),
                    (SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END FROM statesman.feed_position_seq s),
                    0) + 1 AS base,
           COALESCE(pg_catalog.pg_sequence_last_value('statesman.history_id_seq'::regclass), 0) AS last_id;
DROP INDEX statesman.history_unsequenced;
ALTER TABLE statesman.history RENAME COLUMN global_position TO legacy_position;
ALTER INDEX statesman.history_global_position RENAME TO history_legacy_position;
ALTER TABLE statesman.history ADD COLUMN txid xid8;
CREATE INDEX history_id ON statesman.history (id);
ALTER EXTENSION statesman DROP SEQUENCE statesman.feed_position_seq;
DROP SEQUENCE statesman.feed_position_seq;

CREATE FUNCTION statesman._system_id() RETURNS bigint
    LANGUAGE c STABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_system_id';
COMMENT ON FUNCTION statesman._system_id() IS 'the cluster''s system identifier (each tick stores it)';
CREATE FUNCTION statesman._durable(value bigint) RETURNS bigint
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_durable';
COMMENT ON FUNCTION statesman._durable(bigint) IS
    'flushes the WAL written so far (not when value is NULL) and returns value';
CREATE FUNCTION statesman._note_own_tick() RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_note_own_tick';
COMMENT ON FUNCTION statesman._note_own_tick() IS
    'notes that this transaction stored a tick counting its own records (see src/feed/ticks.cpp)';
-- In C (src/feed/ticker.cpp), the same code as the ticker's own.
CREATE FUNCTION statesman._tick_snapshot() RETURNS pg_snapshot
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_tick_snapshot';
COMMENT ON FUNCTION statesman._tick_snapshot() IS
    'the current snapshot with the current transaction (when it has an xid) counted as ended';

CREATE TABLE statesman.ticks (
    tick_id    bigint PRIMARY KEY,
    base       bigint NOT NULL,
    lo         bigint NOT NULL,
    hi         bigint NOT NULL CHECK (hi >= lo - 1),
    last_id    bigint NOT NULL,
    xid        xid8 NOT NULL,
    snap       pg_snapshot,
    prev_snap  pg_snapshot,
    system_id  bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX ticks_base ON statesman.ticks (base);
CREATE INDEX ticks_hi ON statesman.ticks (hi, lo);
CREATE INDEX ticks_anchors ON statesman.ticks (tick_id) WHERE hi < lo;
-- The chain's start: the next position is above every one 0.3.0 gave.
INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id)
SELECT 0, u.base, 1, 0, u.last_id, '0', statesman._tick_snapshot(), statesman._tick_snapshot(),
       statesman._system_id()
FROM statesman_feed_upgrade u;
-- (This transaction counts as ended in tick 0: its appends, if it makes any, get ticks of their own.)
SELECT statesman._note_own_tick();
DROP TABLE statesman_feed_upgrade;

CREATE FUNCTION statesman._ticks_restore() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE statesman.ticks t
    SET base = NEW.base, lo = NEW.lo, hi = NEW.hi, last_id = NEW.last_id, xid = NEW.xid, snap = NEW.snap,
        prev_snap = NEW.prev_snap, system_id = NEW.system_id, created_at = NEW.created_at
    WHERE t.tick_id = NEW.tick_id;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION statesman._ticks_restore() IS
    'a restored tick 0 replaces the one CREATE EXTENSION made';

CREATE TRIGGER ticks_restore BEFORE INSERT ON statesman.ticks
    FOR EACH ROW WHEN (NEW.tick_id = 0) EXECUTE FUNCTION statesman._ticks_restore();
SELECT pg_catalog.pg_extension_config_dump('statesman.ticks', '');

CREATE FUNCTION statesman._position_of(id bigint, txid xid8, legacy_position bigint) RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET jit = off
    AS $$
    SELECT COALESCE($3,
        (SELECT t.base + ($1 - t.lo) FROM statesman.ticks t
         WHERE t.hi >= $1 AND t.lo <= $1
           AND (t.snap IS NULL
                OR (pg_visible_in_snapshot($2, t.snap) AND NOT pg_visible_in_snapshot($2, t.prev_snap)))
         ORDER BY t.hi
         LIMIT 1))
$$;
COMMENT ON FUNCTION statesman._position_of(bigint, xid8, bigint) IS
    'a record''s feed position (from its tick), NULL while it has none';

CREATE FUNCTION statesman._position_of(h statesman.history) RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT statesman._position_of($1.id, $1.txid, $1.legacy_position)
$$;
COMMENT ON FUNCTION statesman._position_of(statesman.history) IS 'a ledger row''s feed position, NULL while it has none';

-- The address in byte order, as a fresh install has it (sql/install/01_tables.sql); the view
-- over the column goes while its type changes, and the primary key is rebuilt in that order.
DROP VIEW statesman._records;
ALTER TABLE statesman.history ALTER COLUMN address TYPE text COLLATE "C";
CREATE VIEW statesman._records AS
    SELECT h.root, h.path, h.partition, h.address, h.revision,
           statesman._position_of(h.id, h.txid, h.legacy_position) AS global_position, h.occurred_at,
           h.operation, h.status, h.value_type, h.schema_version, h.source, h.payload,
           h.fingerprint, h.content_type, h.serializer_id, h.correlation_id, h.causation_id,
           h.error, h.metadata, h.fresh_until, h.serve_until
    FROM statesman.history h;

-- PL/pgSQL rather than SQL, to keep its plan between calls (head_position calls it for every read).
CREATE FUNCTION statesman._head() RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET jit = off
    AS $$
BEGIN
    RETURN COALESCE((SELECT t.base + (t.hi - t.lo) FROM statesman.ticks t WHERE t.hi >= t.lo
                     ORDER BY t.tick_id DESC LIMIT 1),
                    (SELECT max(h.legacy_position) FROM statesman.history h));
END
$$;
COMMENT ON FUNCTION statesman._head() IS 'the last position of the last tick (or of the records from before 0.4.0)';

CREATE OR REPLACE FUNCTION statesman.head_position() RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN statesman._durable(statesman._head());
END
$$;
COMMENT ON FUNCTION statesman.head_position() IS
    'the highest readable feed position, NULL while the feed is empty';

CREATE FUNCTION statesman._feed_page(after bigint, upto bigint, max_records integer, root text)
    RETURNS TABLE (global_position bigint, id bigint, address text, root text, path text,
                   partition text, revision bigint, occurred_at timestamptz, operation text,
                   status text, value_type text, schema_version integer, source text,
                   payload bytea, fingerprint text, content_type text, serializer_id text,
                   correlation_id text, causation_id text, error text, metadata jsonb)
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET jit = off
    AS $$
    WITH page AS MATERIALIZED (
        SELECT x.* FROM (
            (SELECT h.legacy_position AS pos, h.id, h.address, h.root, h.path, h.partition, h.revision,
                    h.occurred_at, h.operation, h.status, h.value_type, h.schema_version, h.source,
                    h.payload, h.fingerprint, h.content_type, h.serializer_id, h.correlation_id,
                    h.causation_id, h.error, h.metadata
             FROM statesman.history h
             WHERE h.legacy_position > LEAST(COALESCE($1, 0), 9223372036854775806) AND ($2 IS NULL OR h.legacy_position <= $2)
               AND ($4 IS NULL OR h.root = $4)
             ORDER BY h.legacy_position
             LIMIT $3)
            UNION ALL
            (SELECT t.base + (h.id - t.lo), h.id, h.address, h.root, h.path, h.partition, h.revision,
                    h.occurred_at, h.operation, h.status, h.value_type, h.schema_version, h.source,
                    h.payload, h.fingerprint, h.content_type, h.serializer_id, h.correlation_id,
                    h.causation_id, h.error, h.metadata
             FROM statesman.ticks t
             CROSS JOIN LATERAL (
                 SELECT h.* FROM statesman.history h
                 WHERE h.id >= t.lo + LEAST(GREATEST(LEAST(COALESCE($1, 0), 9223372036854775806) + 1 - t.base, 0), t.hi - t.lo + 1)
                   AND h.id <= CASE WHEN $2 IS NULL THEN t.hi ELSE t.lo + LEAST($2 - t.base, t.hi - t.lo) END
                   AND (t.snap IS NULL
                        OR (pg_visible_in_snapshot(h.txid, t.snap) AND NOT pg_visible_in_snapshot(h.txid, t.prev_snap)))
                   AND ($4 IS NULL OR h.root = $4)
                 ORDER BY h.id
                 LIMIT $3) h
             WHERE t.tick_id >= COALESCE((SELECT s.tick_id FROM statesman.ticks s WHERE s.base <= LEAST(COALESCE($1, 0), 9223372036854775806) + 1
                                          ORDER BY s.base DESC LIMIT 1), 0)
               AND t.hi >= t.lo
               AND ($2 IS NULL OR t.base <= $2)
             ORDER BY t.tick_id, h.id
             LIMIT $3)) x
        ORDER BY x.pos
        LIMIT $3
    )
    -- d reads the whole page and flushes before any row of it is returned.
    SELECT p.pos, p.id, p.address, p.root, p.path, p.partition, p.revision, p.occurred_at, p.operation,
           p.status, p.value_type, p.schema_version, p.source, p.payload, p.fingerprint, p.content_type,
           p.serializer_id, p.correlation_id, p.causation_id, p.error, p.metadata
    FROM (SELECT statesman._durable(max(page.pos)) AS flushed FROM page) d
    CROSS JOIN LATERAL (SELECT page.* FROM page WHERE d.flushed IS NOT NULL) p
    ORDER BY p.pos
$$;
COMMENT ON FUNCTION statesman._feed_page(bigint, bigint, integer, text) IS
    'the feed''s readable records after a position (up to another), in position order: every reader''s row source';

CREATE OR REPLACE FUNCTION statesman.store_info(
    OUT store text, OUT epoch uuid, OUT head_position bigint, OUT oldest_position bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- (plpgsql: the feed's functions are defined further on, in 07_sequencer.sql)
    SELECT COALESCE(s.store_name, pg_catalog.current_database()), s.epoch INTO store, epoch
    FROM statesman.store s;
    head_position := statesman.head_position();
    oldest_position := (SELECT p.global_position FROM statesman._feed_page(NULL, NULL, 1, NULL) p);
END
$$;
COMMENT ON FUNCTION statesman.store_info() IS
    'the store''s name, its position lineage (epoch) and the feed''s head and oldest positions';

CREATE FUNCTION statesman._unsequenced() RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET jit = off
    AS $$
DECLARE
    last statesman.ticks;
    cur pg_snapshot := pg_current_snapshot();
    m xid8;
    bound bigint;
BEGIN
    SELECT * INTO last FROM statesman.ticks t WHERE t.snap IS NOT NULL ORDER BY t.tick_id DESC LIMIT 1;
    m := least(pg_snapshot_xmax(last.snap),
               (SELECT min(x) FROM pg_snapshot_xip(last.snap) x WHERE pg_visible_in_snapshot(x, cur)));
    bound := COALESCE((SELECT t.last_id FROM statesman.ticks t WHERE t.xid < m ORDER BY t.tick_id DESC LIMIT 1), 0);
    RETURN (SELECT count(*) FROM statesman.history h
            WHERE h.id > bound AND NOT pg_visible_in_snapshot(h.txid, last.snap)
              AND statesman._position_of(h.id, h.txid, h.legacy_position) IS NULL);
END
$$;
COMMENT ON FUNCTION statesman._unsequenced() IS 'committed records that no tick holds yet';

CREATE FUNCTION statesman._restart_ticks() RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET jit = off
    AS $$
DECLARE
    last statesman.ticks;
    anchor statesman.ticks;
    v_last_id bigint;
    v_maxhi bigint;
    v_next bigint;
    v_tick bigint;
    v_lo bigint;
    v_hi bigint;
    v_system bigint := statesman._system_id();
    r record;
BEGIN
    PERFORM set_config('lock_timeout', '1s', true);
    BEGIN
        LOCK TABLE statesman.history IN SHARE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN false;
    END;
    SELECT * INTO last FROM statesman.ticks t ORDER BY t.tick_id DESC LIMIT 1;
    SELECT * INTO anchor FROM statesman.ticks t WHERE t.hi < t.lo ORDER BY t.tick_id DESC LIMIT 1;
    v_last_id := GREATEST(COALESCE(pg_sequence_last_value('statesman.history_id_seq'::regclass), 0),
                          (SELECT max(h.id) FROM statesman.history h), 0);
    v_maxhi := GREATEST(anchor.last_id, (SELECT max(t.hi) FROM statesman.ticks t WHERE t.tick_id > anchor.tick_id));
    v_next := last.base + (last.hi - last.lo + 1);
    v_tick := last.tick_id;
    FOR r IN SELECT h.id FROM statesman.history h
             WHERE h.id > anchor.last_id AND h.id <= v_maxhi AND h.txid IS NOT NULL
               AND NOT pg_visible_in_snapshot(h.txid, (SELECT t.snap FROM statesman.ticks t WHERE t.snap IS NOT NULL
                                                       ORDER BY t.tick_id DESC LIMIT 1))
               AND statesman._position_of(h.id, h.txid, NULL) IS NULL
             ORDER BY h.id LOOP
        v_tick := v_tick + 1;
        INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id)
        VALUES (v_tick, v_next, r.id, r.id, v_last_id, '0', NULL, NULL, v_system);
        v_next := v_next + 1;
    END LOOP;
    SELECT min(h.id), max(h.id) INTO v_lo, v_hi FROM statesman.history h WHERE h.id > v_maxhi;
    IF v_lo IS NOT NULL THEN
        v_tick := v_tick + 1;
        INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id)
        VALUES (v_tick, v_next, v_lo, v_hi, v_last_id, '0', NULL, NULL, v_system);
        v_next := v_next + (v_hi - v_lo + 1);
    END IF;
    INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id)
    VALUES (v_tick + 1, v_next, v_last_id + 1, v_last_id, v_last_id, '0', statesman._tick_snapshot(),
            statesman._tick_snapshot(), v_system);
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        PERFORM statesman._note_own_tick();   -- see statesman._tick_snapshot
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION statesman._restart_ticks() IS
    'starts a new chain of ticks after a restore into another cluster, keeping every position';

CREATE FUNCTION statesman._tick_own_record() RETURNS bigint
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET jit = off
    AS $$
    INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id)
    SELECT t.tick_id + 1, t.base + (t.hi - t.lo + 1), currval('statesman.history_id_seq'::regclass),
           currval('statesman.history_id_seq'::regclass), currval('statesman.history_id_seq'::regclass),
           '9223372036854775807', NULL, NULL, t.system_id
    FROM statesman.ticks t ORDER BY t.tick_id DESC LIMIT 1
    RETURNING base
$$;
COMMENT ON FUNCTION statesman._tick_own_record() IS
    'a tick holding the record this session appended last (after a tick of its own transaction)';

CREATE FUNCTION statesman._tick(max_records integer, durable boolean) RETURNS bigint
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_tick';
COMMENT ON FUNCTION statesman._tick(integer, boolean) IS
    'the ticker (sequence_feed; the database worker with durable false); returns the head position';

CREATE OR REPLACE FUNCTION statesman.sequence_feed(max_records integer DEFAULT 10000) RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT statesman._tick(sequence_feed.max_records, true)
$$;
COMMENT ON FUNCTION statesman.sequence_feed(integer) IS
    'stores a tick for the records committed since the last one (positions for them); returns the head position';

CREATE FUNCTION statesman._prune_ticks() RETURNS bigint
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET jit = off
    AS $$
    WITH oldest AS MATERIALIZED (
        -- Of the oldest 1,000, only those whose records are all gone are joined below: in the
        -- steady state none is, and the join's index probes were most of the call.
        SELECT o.tick_id
        FROM (SELECT t.tick_id, t.hi FROM statesman.ticks t WHERE t.tick_id > 0 ORDER BY t.tick_id LIMIT 1000) o
        WHERE o.hi < (SELECT h.id FROM statesman.history h ORDER BY h.id LIMIT 1)
    ), gone AS (
        DELETE FROM statesman.ticks t USING oldest o
        WHERE t.tick_id = o.tick_id
          AND t.hi < (SELECT h.id FROM statesman.history h ORDER BY h.id LIMIT 1)
          AND t.tick_id < (SELECT x.tick_id FROM statesman.ticks x ORDER BY x.tick_id DESC LIMIT 1)
          AND t.tick_id <> COALESCE((SELECT x.tick_id FROM statesman.ticks x WHERE x.hi >= x.lo
                                     ORDER BY x.tick_id DESC LIMIT 1), -1)
          AND t.tick_id <> COALESCE((SELECT x.tick_id FROM statesman.ticks x WHERE x.hi < x.lo
                                     ORDER BY x.tick_id DESC LIMIT 1), -1)
          AND t.tick_id <> COALESCE((SELECT x.tick_id FROM statesman.ticks x WHERE x.snap IS NOT NULL
                                     ORDER BY x.tick_id DESC LIMIT 1), -1)
        RETURNING 1)
    SELECT count(*) FROM gone
$$;
COMMENT ON FUNCTION statesman._prune_ticks() IS 'deletes the oldest ticks whose records are all gone';

CREATE OR REPLACE FUNCTION statesman._prune(address text, max_revisions integer, max_bytes bigint) RETURNS bigint
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
        SELECT x.revision, statesman._position_of(x.id, x.txid, x.legacy_position) AS global_position FROM (
            SELECT k.revision, k.id, k.txid, k.legacy_position, row_number() OVER w AS rn,
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

CREATE OR REPLACE FUNCTION statesman._feed_status(
    OUT head_position bigint, OUT oldest_position bigint, OUT unsequenced_records bigint,
    OUT open_writers bigint, OUT oldest_writer_pid integer, OUT oldest_writer_age interval,
    OUT holding_back_pid integer, OUT holding_back_age interval)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH locks AS (
        SELECT l.pid, l.classid, a.xact_start
        FROM pg_catalog.pg_locks l
        LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
          AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                            WHERE d.datname = pg_catalog.current_database())
          AND l.classid::bigint IN (statesman._lock_space('address'), statesman._lock_space('sequencer'))
    ), writers AS (
        SELECT DISTINCT pid, xact_start FROM locks WHERE classid::bigint = statesman._lock_space('address')
    )
    SELECT statesman.head_position(),
           (SELECT p.global_position FROM statesman._feed_page(NULL, NULL, 1, NULL) p),
           statesman._unsequenced(),
           (SELECT count(*) FROM writers),
           w.pid, pg_catalog.now() - w.xact_start,
           s.pid, pg_catalog.now() - s.xact_start
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (SELECT * FROM writers ORDER BY xact_start LIMIT 1) w ON true
    LEFT JOIN LATERAL (SELECT * FROM locks WHERE classid::bigint = statesman._lock_space('sequencer')
                       AND pid <> pg_catalog.pg_backend_pid() LIMIT 1) s ON true
$$;
COMMENT ON FUNCTION statesman._feed_status() IS 'the row of statesman.feed_status';

CREATE FUNCTION statesman._next_occurred_at(after bigint) RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT p.occurred_at FROM statesman._feed_page(_next_occurred_at.after, NULL, 1, NULL) p
$$;
COMMENT ON FUNCTION statesman._next_occurred_at(bigint) IS
    'when the first feed record after a position was appended (NULL: none)';

CREATE OR REPLACE VIEW statesman.outbox_status AS
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
       -- A worker that waits for a slot says so (the state is idle: no dispatcher runs).
       CASE WHEN o.enabled AND holder.pid IS NULL
            THEN COALESCE(statesman._slot_wait(o.outbox_id), st.last_error)
            ELSE st.last_error END AS last_error,
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
CROSS JOIN LATERAL (SELECT statesman.head_position() AS position) head
LEFT JOIN LATERAL (SELECT statesman._next_occurred_at(c.position) AS occurred_at) nxt ON true
-- The leader: the session that holds the lease lock (an unleased outbox: its dispatcher).
LEFT JOIN LATERAL (
    SELECT k.pid FROM pg_catalog.pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.classid::bigint = statesman._lock_space('lease')
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


REVOKE ALL ON FUNCTION statesman._feed_page(bigint, bigint, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._durable(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._position_of(bigint, xid8, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._position_of(statesman.history) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._head() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._unsequenced() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._restart_ticks() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune_ticks() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._ticks_restore() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_own_tick() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._tick_snapshot() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._tick_own_record() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._tick(integer, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._next_occurred_at(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION statesman._next_occurred_at(bigint) TO pg_monitor;

-- ============================================================================
-- readpath: the read path in C++. Every reader of the feed gets its records from
-- statesman._feed_page (created by the section above); read_feed and the `table` sink's page are C functions that build each
-- message from the row; the dispatcher reads a page in one step, so _open_page and
-- _page_messages (and their type) go.
-- ============================================================================

CREATE OR REPLACE FUNCTION statesman.read_feed(
    after bigint DEFAULT NULL, max_records integer DEFAULT 1000, root text DEFAULT NULL)
    RETURNS TABLE (global_position bigint, message_id text, address text, revision bigint,
                   message jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_read_feed';
COMMENT ON FUNCTION statesman.read_feed(bigint, integer, text) IS
    'feed records after a position, in position order, as statesman.state-change/v1 messages';

CREATE OR REPLACE FUNCTION statesman._deliver_table_page(outbox_id text) RETURNS statesman._page_result
    LANGUAGE c VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_deliver_table_page';
COMMENT ON FUNCTION statesman._deliver_table_page(text) IS
    'delivers the next page of the feed to a table sink, with the cursor advance in the same transaction';

CREATE OR REPLACE FUNCTION statesman._park_page(outbox_id text, error text, attempts integer, page_records bigint)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    v_after bigint;
    v_last bigint;
    v_limit integer;
    v_store text;
    v_epoch uuid;
    v_message jsonb;
    v_error text;
    rec record;
    parked bigint;
BEGIN
    o := statesman._page_outbox(_park_page.outbox_id);
    IF o.outbox_id IS NULL OR NOT o.enabled THEN
        RETURN 0;
    END IF;
    v_after := COALESCE((SELECT c.position FROM statesman.cursors c WHERE c.outbox_id = o.outbox_id), 0);
    v_limit := LEAST(o.batch_size, _park_page.page_records);
    SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch FROM statesman.store s;
    BEGIN
        -- Exactly the page that failed (records sequenced since then were never tried), read
        -- once: its last position and the messages of the records the outbox publishes.
        WITH p AS MATERIALIZED (
            SELECT * FROM statesman._feed_page(v_after, NULL, v_limit, NULL)
        ), parked_rows AS (
            INSERT INTO statesman.dead_letters AS d (outbox_id, global_position, message_id, message, last_error, attempts)
            SELECT o.outbox_id, h.global_position, v_store || '/' || h.address || '#' || h.revision,
                   statesman._message(v_store, v_epoch, h.address, h.root, h.path, h.partition, h.revision,
                       h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
                       h.source, COALESCE(h.fingerprint, o.fingerprint, r.fingerprint),
                       COALESCE(h.content_type, o.payload_content_type, r.content_type),
                       h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error),
                   left(_park_page.error, 2000), _park_page.attempts
            FROM p h LEFT JOIN statesman.roots r ON r.root = h.root
            WHERE o.root IS NULL OR h.root = o.root
            ORDER BY h.global_position
            ON CONFLICT ON CONSTRAINT dead_letters_pkey DO UPDATE
                SET last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts, parked_at = EXCLUDED.parked_at
            RETURNING 1
        )
        SELECT (SELECT max(p.global_position) FROM p), (SELECT count(*) FROM parked_rows) INTO v_last, parked;
    EXCEPTION WHEN OTHERS THEN
        -- A message of the page cannot be built (a record too large for a jsonb message, written
        -- before the append functions refused such records): the page fails for that reason, so
        -- parking it must not. Each record is parked on its own; one whose message cannot be
        -- built is parked without a message, with the reason, and stays in statesman.history.
        parked := 0;
        v_last := NULL;
        FOR rec IN
            SELECT x.*, r.fingerprint AS root_fingerprint, r.content_type AS root_content_type
            FROM statesman._feed_page(v_after, NULL, v_limit, NULL) x LEFT JOIN statesman.roots r ON r.root = x.root
            ORDER BY x.global_position
        LOOP
            v_last := rec.global_position;
            CONTINUE WHEN o.root IS NOT NULL AND rec.root IS DISTINCT FROM o.root;
            v_error := _park_page.error;
            BEGIN
                v_message := statesman._message(v_store, v_epoch, rec.address, rec.root, rec.path, rec.partition,
                    rec.revision, rec.global_position, rec.occurred_at, rec.operation, rec.status, rec.value_type,
                    rec.schema_version, rec.source, COALESCE(rec.fingerprint, o.fingerprint, rec.root_fingerprint),
                    COALESCE(rec.content_type, o.payload_content_type, rec.root_content_type),
                    rec.serializer_id, rec.payload, rec.correlation_id, rec.causation_id, rec.metadata, rec.error);
            EXCEPTION WHEN OTHERS THEN
                v_message := NULL;
                v_error := format('its message cannot be built (%s); the record stays in statesman.history '
                                  '(address %s, revision %s)', SQLERRM, rec.address, rec.revision);
            END;
            INSERT INTO statesman.dead_letters AS d
                (outbox_id, global_position, message_id, message, last_error, attempts)
            VALUES (o.outbox_id, rec.global_position, v_store || '/' || rec.address || '#' || rec.revision, v_message,
                    left(v_error, 2000), _park_page.attempts)
            ON CONFLICT ON CONSTRAINT dead_letters_pkey DO UPDATE
                SET message = EXCLUDED.message, last_error = EXCLUDED.last_error,
                    attempts = EXCLUDED.attempts, parked_at = EXCLUDED.parked_at;
            parked := parked + 1;
        END LOOP;
    END;
    IF v_last IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM statesman._move_cursor(o.outbox_id, v_last);
    UPDATE statesman.outbox_state s SET attempts = 0, skipped_total = s.skipped_total + parked
    WHERE s.outbox_id = o.outbox_id;
    RETURN parked;
END
$$;
COMMENT ON FUNCTION statesman._park_page(text, text, integer, bigint) IS
    'skips the next page: parks its messages in dead_letters and moves the cursor past it';

DROP FUNCTION statesman._open_page(text, bigint);
DROP FUNCTION statesman._page_messages(text, bigint, bigint);
DROP TYPE statesman._page;

-- The append's session copies of the root declarations, invalidated by changes of statesman.roots.
-- The append keeps each root's declaration in its session between appends; a change of
-- statesman.roots (any statement, TRUNCATE included) invalidates those copies in every session
-- when it commits, as a change of the table's definition would (src/store/append.cpp).
CREATE FUNCTION statesman._roots_changed() RETURNS trigger
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'statesman_roots_changed';
COMMENT ON FUNCTION statesman._roots_changed() IS
    'invalidates the sessions'' copies of the root declarations when statesman.roots changes';
CREATE TRIGGER roots_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON statesman.roots
    FOR EACH STATEMENT EXECUTE FUNCTION statesman._roots_changed();
REVOKE ALL ON FUNCTION statesman._roots_changed() FROM PUBLIC;

-- Capturing existing tables: statesman.captures, capture_table, release_table, backfill_table, the capture triggers and their event triggers, captured_tables
-- One row per captured table, keyed by the table's OID (a regclass: pg_dump writes it as the
-- table's name, so a restore finds the new OID): the trigger reads its configuration from here
-- (never from trigger arguments, which a table owner could change), so only capture_table
-- decides which root a table's rows go to. Owner-only: no role but the extension owner reads
-- or writes it.
CREATE TABLE statesman.captures (
    tab regclass PRIMARY KEY,
    root text NOT NULL,
    key_columns text[] NOT NULL,
    columns text[],
    partition_column text,
    since timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE statesman.captures IS
    'the captured tables: the root, key, columns and partition column of each (statesman.capture_table)';
-- The trigger keeps each table's configuration in its session; a change of this table
-- invalidates those copies in every session when it commits (src/store/capture.cpp).
CREATE TRIGGER captures_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON statesman.captures
    FOR EACH STATEMENT EXECUTE FUNCTION statesman._roots_changed();

-- The progress of each table's backfill: the last key of the last committed batch (the next
-- batch starts after it), so an interrupted backfill resumes there.
CREATE TABLE statesman.capture_backfills (
    tab regclass PRIMARY KEY REFERENCES statesman.captures (tab) ON DELETE CASCADE,
    after_key text[],
    rows_done bigint NOT NULL DEFAULT 0,
    batches bigint NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    finished_at timestamptz
);
COMMENT ON TABLE statesman.capture_backfills IS
    'the progress of each captured table''s backfill (statesman.backfill_table)';
SELECT pg_catalog.pg_extension_config_dump('statesman.captures', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.capture_backfills', '');

-- The row trigger: one record per INSERT, UPDATE and DELETE, appended in the writing
-- transaction through the append path (C++). Not executable by PUBLIC: CREATE TRIGGER checks
-- EXECUTE, so only capture_table (as the extension owner) aims it at a table.
CREATE FUNCTION statesman._capture_row() RETURNS trigger
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'statesman_capture_row';
COMMENT ON FUNCTION statesman._capture_row() IS
    'the row trigger of a captured table: appends a record per INSERT, UPDATE and DELETE';

CREATE FUNCTION statesman._capture_truncate() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'cannot truncate %: it is captured by statesman', TG_RELID::regclass
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'A TRUNCATE fires no row triggers, so the feed would keep every row. DELETE the rows '
                     '(each becomes a tombstone), or call statesman.release_table first.';
END
$$;
COMMENT ON FUNCTION statesman._capture_truncate() IS 'refuses TRUNCATE of a captured table';

-- The record of one row as the trigger would append it, for the backfill (operation put,
-- metadata op "backfill").
CREATE FUNCTION statesman._capture_put(tab oid, r record) RETURNS void
    LANGUAGE c VOLATILE STRICT
    AS 'MODULE_PATHNAME', 'statesman_capture_put';
COMMENT ON FUNCTION statesman._capture_put(oid, record) IS
    'appends a captured table''s row as a put record with metadata op backfill';

CREATE FUNCTION statesman._capture_table(tab regclass, root text, key text[], columns text[],
    partition_column text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_rel pg_catalog.pg_class;
    v_root text := root;
    v_key text[] := key;
    v_col text;
BEGIN
    SELECT * INTO v_rel FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) tab;
    IF v_rel.relkind OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'cannot capture %: it is a partitioned table', tab
            USING ERRCODE = 'wrong_object_type', HINT = 'Capture each of its partitions.';
    ELSIF v_rel.relkind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION 'cannot capture %: only an ordinary table can be captured', tab
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF v_rel.relnamespace OPERATOR(pg_catalog.=) 'statesman'::regnamespace THEN
        RAISE EXCEPTION 'cannot capture %: it is one of statesman''s own tables', tab
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_rel.relpersistence OPERATOR(pg_catalog.=) 't' THEN
        RAISE EXCEPTION 'cannot capture %: it is a temporary table', tab USING ERRCODE = 'wrong_object_type';
    END IF;
    IF EXISTS (SELECT FROM statesman.captures c WHERE c.tab OPERATOR(pg_catalog.=) v_rel.oid) THEN
        RAISE EXCEPTION '% is already captured', tab
            USING ERRCODE = 'duplicate_object',
                  HINT = 'statesman.release_table releases it; then capture it again with other settings.';
    END IF;
    v_root := COALESCE(v_root, v_rel.relname::text);
    IF v_root !~ '^[A-Za-z0-9_.-]{1,63}$' THEN
        RAISE EXCEPTION 'root must match ^[A-Za-z0-9_.-]{1,63}$ (it is "%")', v_root
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The root defaults to the table''s name; pass root => ''…'' for another.';
    END IF;
    IF v_key IS NULL THEN
        SELECT pg_catalog.array_agg(a.attname::text ORDER BY k.i) INTO v_key
        FROM pg_catalog.pg_index x
        CROSS JOIN LATERAL pg_catalog.unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, i)
        JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) x.indrelid
             AND a.attnum OPERATOR(pg_catalog.=) k.attnum
        WHERE x.indrelid OPERATOR(pg_catalog.=) v_rel.oid AND x.indisprimary;
        IF v_key IS NULL THEN
            RAISE EXCEPTION 'cannot capture %: it has no primary key and no key was given', tab
                USING ERRCODE = 'invalid_table_definition',
                      HINT = 'Pass key => ARRAY[''column'', …]: the columns whose values make a row''s path.';
        END IF;
    END IF;
    IF pg_catalog.cardinality(v_key) OPERATOR(pg_catalog.=) 0 THEN
        RAISE EXCEPTION 'key must name at least one column' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT pg_catalog.count(DISTINCT k) FROM pg_catalog.unnest(v_key) k) <> pg_catalog.cardinality(v_key)
       OR pg_catalog.array_position(v_key, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'key must name each column once, none NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF columns IS NOT NULL AND (pg_catalog.cardinality(columns) OPERATOR(pg_catalog.=) 0
                                OR pg_catalog.array_position(columns, NULL) IS NOT NULL) THEN
        RAISE EXCEPTION 'columns must name at least one column, none NULL (or be NULL for every column)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR v_col IN SELECT c FROM pg_catalog.unnest(v_key || COALESCE(columns, '{}') ||
                                                 CASE WHEN partition_column IS NULL THEN '{}'::text[]
                                                      ELSE ARRAY[partition_column] END) c LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                       WHERE a.attrelid OPERATOR(pg_catalog.=) v_rel.oid AND a.attname OPERATOR(pg_catalog.=) v_col
                         AND a.attnum > 0 AND NOT a.attisdropped) THEN
            RAISE EXCEPTION 'column "%" of % does not exist', v_col, tab USING ERRCODE = 'undefined_column';
        END IF;
    END LOOP;
    INSERT INTO statesman.captures (tab, root, key_columns, columns, partition_column)
    VALUES (v_rel.oid, v_root, v_key, columns, partition_column);
    -- ENABLE ALWAYS: the triggers fire under session_replication_role = replica too (a logical
    -- replication apply worker, a session that set it): a change is never skipped silently.
    EXECUTE pg_catalog.format('CREATE TRIGGER statesman_capture AFTER INSERT OR UPDATE OR DELETE ON %s '
                              'FOR EACH ROW EXECUTE FUNCTION statesman._capture_row()', tab);
    EXECUTE pg_catalog.format('CREATE TRIGGER statesman_capture_truncate BEFORE TRUNCATE ON %s '
                              'FOR EACH STATEMENT EXECUTE FUNCTION statesman._capture_truncate()', tab);
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER statesman_capture, '
                              'ENABLE ALWAYS TRIGGER statesman_capture_truncate', tab);
END
$$;
COMMENT ON FUNCTION statesman._capture_table(regclass, text, text[], text[], text) IS
    'the body of capture_table, run as the extension owner once the caller''s ownership is checked';

CREATE FUNCTION statesman._release_table(tab regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_trigger name;
BEGIN
    DELETE FROM statesman.captures c WHERE c.tab OPERATOR(pg_catalog.=) _release_table.tab::oid;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% is not captured', tab USING ERRCODE = 'undefined_object';
    END IF;
    FOR v_trigger IN
        SELECT t.tgname FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid OPERATOR(pg_catalog.=) _release_table.tab::oid
          AND t.tgfoid IN ('statesman._capture_row()'::regprocedure, 'statesman._capture_truncate()'::regprocedure)
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', v_trigger, tab);
    END LOOP;
END
$$;
COMMENT ON FUNCTION statesman._release_table(regclass) IS
    'the body of release_table, run as the extension owner once the caller''s ownership is checked';

-- capture_table, release_table and backfill_table check that the caller owns the table (or is
-- a member of its owner role), then run their bodies as the extension owner (C).
CREATE FUNCTION statesman.capture_table(tab regclass, root text DEFAULT NULL, key text[] DEFAULT NULL,
    columns text[] DEFAULT NULL, partition_column text DEFAULT NULL) RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_capture_table';
COMMENT ON FUNCTION statesman.capture_table(regclass, text, text[], text[], text) IS
    'captures a table: every INSERT, UPDATE and DELETE of a row appends a record in the same transaction';

CREATE FUNCTION statesman.release_table(tab regclass) RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_release_table';
COMMENT ON FUNCTION statesman.release_table(regclass) IS 'stops capturing a table (drops its triggers)';

-- One batch of a backfill, in the backfill worker's transaction: the next batch_size rows
-- after the last key, in key order, each locked FOR SHARE while its record is appended.
CREATE FUNCTION statesman._backfill_batch(tab oid, batch_size integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c statesman.captures;
    p statesman.capture_backfills;
    v_cols text;
    v_params text;
    v_texts text;
    v_sql text;
    v_row record;
    v_last text[];
    n integer := 0;
BEGIN
    SELECT * INTO c FROM statesman.captures x WHERE x.tab OPERATOR(pg_catalog.=) _backfill_batch.tab;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not captured', tab::regclass USING ERRCODE = 'undefined_object';
    END IF;
    SELECT * INTO p FROM statesman.capture_backfills x WHERE x.tab OPERATOR(pg_catalog.=) _backfill_batch.tab
    FOR UPDATE;
    SELECT pg_catalog.string_agg(pg_catalog.format('t.%I', u.k), ', ' ORDER BY u.i),
           pg_catalog.string_agg(pg_catalog.format('$1[%s]::%s', u.i, pg_catalog.format_type(a.atttypid, a.atttypmod)),
                                 ', ' ORDER BY u.i),
           pg_catalog.string_agg(pg_catalog.format('t.%I::text', u.k), ', ' ORDER BY u.i)
    INTO v_cols, v_params, v_texts
    FROM pg_catalog.unnest(c.key_columns) WITH ORDINALITY AS u(k, i)
    JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.tab AND a.attname OPERATOR(pg_catalog.=) u.k;
    v_sql := pg_catalog.format('SELECT t AS r, ARRAY[%s] AS k FROM ONLY %s t %s ORDER BY %s LIMIT $2 FOR SHARE OF t',
                               v_texts, c.tab::regclass,
                               CASE WHEN p.after_key IS NULL THEN ''
                                    ELSE pg_catalog.format('WHERE (%s) > (%s)', v_cols, v_params) END,
                               v_cols);
    FOR v_row IN EXECUTE v_sql USING p.after_key, batch_size LOOP
        PERFORM statesman._capture_put(c.tab, v_row.r);
        v_last := v_row.k;
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        UPDATE statesman.capture_backfills x
        SET after_key = v_last, rows_done = x.rows_done + n, batches = x.batches + 1,
            updated_at = pg_catalog.clock_timestamp()
        WHERE x.tab OPERATOR(pg_catalog.=) c.tab;
    END IF;
    IF n < batch_size THEN
        UPDATE statesman.capture_backfills x
        SET finished_at = pg_catalog.clock_timestamp(), updated_at = pg_catalog.clock_timestamp()
        WHERE x.tab OPERATOR(pg_catalog.=) c.tab;
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION statesman._backfill_batch(oid, integer) IS
    'one batch of a backfill: the next rows in key order, locked FOR SHARE, appended as put records';

-- Starts a backfill, or resumes the one that was interrupted: the progress row as the worker
-- begins (a finished or absent one starts over from the first key).
CREATE FUNCTION statesman._backfill_start(tab oid) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    AS $$
    INSERT INTO statesman.capture_backfills AS x (tab) VALUES (_backfill_start.tab)
    ON CONFLICT (tab) DO UPDATE
        SET after_key = NULL, rows_done = 0, batches = 0, started_at = pg_catalog.now(),
            updated_at = pg_catalog.now(), finished_at = NULL
        WHERE x.finished_at IS NOT NULL
$$;
COMMENT ON FUNCTION statesman._backfill_start(oid) IS
    'starts a table''s backfill, or keeps the progress of an interrupted one to resume it';

CREATE FUNCTION statesman.backfill_table(tab regclass, batch_size integer DEFAULT 10000) RETURNS bigint
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_backfill_table';
COMMENT ON FUNCTION statesman.backfill_table(regclass, integer) IS
    'appends every current row of a captured table as a put record, in batches of their own transactions';

-- DDL that would break a capture: a key, captured or partition column dropped or renamed, a
-- capture trigger disabled (or set to fire only for origin or replica sessions). The ERROR rolls
-- the command back.
CREATE FUNCTION statesman._capture_ddl() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT x.tab, x.key_columns, x.columns, x.partition_column FROM statesman.captures x
        WHERE EXISTS (SELECT FROM pg_catalog.pg_class r WHERE r.oid OPERATOR(pg_catalog.=) x.tab)
    LOOP
        IF EXISTS (SELECT FROM pg_catalog.unnest(c.key_columns || COALESCE(c.columns, '{}') ||
                                                 CASE WHEN c.partition_column IS NULL THEN '{}'::text[]
                                                      ELSE ARRAY[c.partition_column] END) k
                   WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                                     WHERE a.attrelid OPERATOR(pg_catalog.=) c.tab
                                       AND a.attname OPERATOR(pg_catalog.=) k AND a.attnum > 0
                                       AND NOT a.attisdropped)) THEN
            RAISE EXCEPTION 'cannot drop or rename a key, captured or partition column of %: it is captured '
                            'by statesman (key %, columns %, partition column %)',
                            c.tab::regclass, c.key_columns, COALESCE(c.columns::text, 'all'),
                            COALESCE(c.partition_column, 'none')
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = 'Call statesman.release_table first, then capture the table again.';
        END IF;
        -- Only the state of the triggers that exist: a restore (pg_restore) creates them after
        -- the table's other definitions and data, each followed by its ENABLE ALWAYS.
        IF EXISTS (SELECT FROM pg_catalog.pg_trigger t
                   WHERE t.tgrelid OPERATOR(pg_catalog.=) c.tab AND t.tgenabled OPERATOR(pg_catalog.<>) 'A'
                     AND t.tgfoid IN ('statesman._capture_row()'::regprocedure,
                                      'statesman._capture_truncate()'::regprocedure)) THEN
            RAISE EXCEPTION 'cannot disable the capture triggers of %: its changes would be lost', c.tab
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Call statesman.release_table to stop capturing it.';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION statesman._capture_ddl() IS
    'refuses ALTER TABLE that drops or renames a captured column or disables a capture trigger';
CREATE EVENT TRIGGER statesman_capture_ddl ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER TRIGGER')
    EXECUTE FUNCTION statesman._capture_ddl();

-- A dropped table's capture goes with it; dropping a capture trigger of a table that stays
-- captured is refused (release_table forgets the capture before it drops the triggers).
CREATE FUNCTION statesman._capture_drop() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_tab regclass;
BEGIN
    DELETE FROM statesman.captures x
    WHERE x.tab IN (SELECT d.objid FROM pg_catalog.pg_event_trigger_dropped_objects() d
                    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
                      AND d.objsubid OPERATOR(pg_catalog.=) 0);
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() d
                   WHERE d.object_type OPERATOR(pg_catalog.=) 'trigger') THEN
        RETURN;
    END IF;
    SELECT x.tab INTO v_tab FROM statesman.captures x
    WHERE (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger t
           WHERE t.tgrelid OPERATOR(pg_catalog.=) x.tab
             AND t.tgfoid IN ('statesman._capture_row()'::regprocedure,
                              'statesman._capture_truncate()'::regprocedure)) < 2
    LIMIT 1;
    IF v_tab IS NOT NULL THEN
        RAISE EXCEPTION 'cannot drop the capture triggers of %: its changes would be lost', v_tab
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call statesman.release_table to stop capturing it.';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._capture_drop() IS
    'forgets the capture of a dropped table; refuses dropping a capture trigger of a captured table';
CREATE EVENT TRIGGER statesman_capture_drop ON sql_drop EXECUTE FUNCTION statesman._capture_drop();

CREATE VIEW statesman.captured_tables AS
SELECT c.tab AS "table", c.root, c.key_columns AS key, c.columns, c.partition_column, c.since,
       b.rows_done AS backfilled_rows, b.batches AS backfill_batches, b.after_key AS backfill_after_key,
       b.started_at AS backfill_started_at, b.finished_at AS backfill_finished_at
FROM statesman.captures c
LEFT JOIN statesman.capture_backfills b ON b.tab OPERATOR(pg_catalog.=) c.tab;
COMMENT ON VIEW statesman.captured_tables IS
    'the captured tables, their root, key, columns, since when, and their backfill''s progress';

-- Capturing and backfilling are for the extension owner and the roles it grants them to
-- (a grantee must also own the table); the internals are never for PUBLIC.
REVOKE ALL ON FUNCTION statesman.capture_table(regclass, text, text[], text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.release_table(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.backfill_table(regclass, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_row() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_truncate() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_put(oid, record) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_table(regclass, text, text[], text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._release_table(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._backfill_batch(oid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._backfill_start(oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_ddl() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_drop() FROM PUBLIC;
GRANT SELECT ON statesman.captured_tables TO pg_monitor;

-- The page's cursor move and its finish in PL/pgSQL, so that their plans are kept for the
-- session (an SQL function's body is parsed and planned at every call).
CREATE OR REPLACE FUNCTION statesman._move_cursor(outbox_id text, "position" bigint) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    INSERT INTO statesman.cursors AS c (outbox_id, position) VALUES (_move_cursor.outbox_id, _move_cursor."position")
    ON CONFLICT ON CONSTRAINT cursors_pkey DO UPDATE
        SET position = EXCLUDED.position, updated_at = now()
        WHERE c.position < EXCLUDED.position;
END
$$;
CREATE OR REPLACE FUNCTION statesman._finish_page(outbox_id text, last_position bigint, published bigint, deduplicated bigint)
    RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._move_cursor(_finish_page.outbox_id, _finish_page.last_position);
    UPDATE statesman.outbox_state s
    SET attempts = 0, published_total = s.published_total + _finish_page.published,
        deduplicated_total = s.deduplicated_total + _finish_page.deduplicated,
        last_published_at = CASE WHEN _finish_page.published > 0 THEN clock_timestamp() ELSE s.last_published_at END
    WHERE s.outbox_id = _finish_page.outbox_id;
END
$$;

-- The planner's support of the append functions (see statesman--0.4.0.sql).
CREATE FUNCTION statesman._append_support(internal) RETURNS internal
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'statesman_append_support';
REVOKE ALL ON FUNCTION statesman._append_support(internal) FROM PUBLIC;
ALTER FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) SUPPORT statesman._append_support;
ALTER FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text, integer, text,
    text, text, jsonb, text, timestamptz, timestamptz) SUPPORT statesman._append_support;
ALTER FUNCTION statesman.append_delete(text, text, text, text, text, integer, text, text, text, jsonb, text,
    timestamptz, timestamptz) SUPPORT statesman._append_support;

-- The plain twins of the three append functions (see statesman--0.4.0.sql): the same C code and arguments, OUT (address,
-- revision), not a set. The planner's support turns a call of an append function in a select
-- list into a call of its twin where that changes nothing the statement does (one set-returning
-- call in the list, not also in FROM): a set-returning call has its row type rebuilt from
-- pg_proc and a one-row result set made at every execution. Open to PUBLIC because a plan that
-- calls a twin is checked for EXECUTE on the twin; each twin checks EXECUTE on its declared
-- function itself, once per execution as the executor would, and refuses as that function
-- would (42501).
CREATE FUNCTION statesman._append_row(
    root text, path text, payload jsonb, partition text, operation text, status text,
    value_type text, schema_version integer, source text, correlation_id text, causation_id text,
    metadata jsonb, error text, fresh_until timestamptz, serve_until timestamptz,
    OUT address text, OUT revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_row';
CREATE FUNCTION statesman._append_bytes_row(
    root text, path text, payload bytea, content_type text, serializer_id text, partition text,
    operation text, status text, value_type text, schema_version integer, source text,
    correlation_id text, causation_id text, metadata jsonb, error text, fresh_until timestamptz,
    serve_until timestamptz, OUT address text, OUT revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_bytes_row';
CREATE FUNCTION statesman._append_delete_row(
    root text, path text, partition text, status text, value_type text, schema_version integer,
    source text, correlation_id text, causation_id text, metadata jsonb, error text,
    fresh_until timestamptz, serve_until timestamptz, OUT address text, OUT revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_delete_row';

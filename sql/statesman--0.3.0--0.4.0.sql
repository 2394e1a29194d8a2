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
             now(), now())::statesman.outboxes;
    PERFORM statesman._check_outbox(o);
    IF EXISTS (SELECT FROM statesman.outboxes x WHERE x.outbox_id = create_outbox.outbox_id) THEN
        RAISE EXCEPTION 'outbox "%" already exists', create_outbox.outbox_id
            USING ERRCODE = 'unique_violation', HINT = 'Use statesman.alter_outbox() to change it.';
    END IF;
    o.sink_options := statesman._check_sink(create_outbox.sink, create_outbox.sink_options);
    PERFORM statesman._check_sink_timeout(o.sink_options, o.lease_ttl);
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

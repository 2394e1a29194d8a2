-------------------------------------------------------------------------------
-- The lease of an outbox (called by the dispatcher and by dispatch_once; not for applications)
-------------------------------------------------------------------------------

-- The advisory lock key of an outbox's lease: (statesman._lock_space('lease'), hashtext(outbox_id)).
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
    PERFORM pg_advisory_unlock(statesman._lock_space('lease'), statesman._lease_key(_release_lease.outbox_id));
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

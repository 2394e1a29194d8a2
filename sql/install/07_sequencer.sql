-------------------------------------------------------------------------------
-- The change feed: its head and the sequencer
-------------------------------------------------------------------------------

CREATE FUNCTION statesman.head_position() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT max(h.global_position) FROM statesman.history h
$$;
COMMENT ON FUNCTION statesman.head_position() IS
    'the highest readable feed position, NULL while the feed is empty';

-- The sequencer. Gives feed positions to committed records that have none, in insert order,
-- one sequencer at a time (the lock is held until this transaction ends). Lossless because a
-- position is given only after the record's transaction committed, and a run's positions
-- become visible, all at once, before the next run can start: a record can never appear
-- below a position that a reader has already seen. Per-address order holds because revision
-- r+1 is inserted (larger id) only after revision r's transaction ended, so r is visible to
-- every snapshot that sees r+1.
-- Its plan never depends on statistics (the SET clauses): the partial index on unsequenced
-- records, in id order, then each row by its ctid, planned once per session. Statistics taken
-- while a backlog waited (every global_position NULL) otherwise made each run plan afresh and
-- tripled the database worker's CPU until the next ANALYZE.
CREATE FUNCTION statesman.sequence_feed(max_records integer DEFAULT 10000) RETURNS bigint
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

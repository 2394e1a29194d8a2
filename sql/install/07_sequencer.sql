-------------------------------------------------------------------------------
-- The change feed: ticks, positions, the ticker
-------------------------------------------------------------------------------

-- A record is written once (F6): its position is derived, never stored in its row. The ticker
-- (statesman.sequence_feed) stores one row per step that found records, PgQ-style: tick k
-- holds the records whose transaction is visible in its snapshot and not in the previous
-- tick's, and a record's position is base + (id - lo) of its tick. docs/feed.md gives the
-- invariant arguments; docs/sequencing.md the designs measured before this one was chosen.
--
-- Every query on the ticks forces its plan (the SET clauses): the plans must not depend on
-- statistics, and jit is off because a disabled scan's cost would push them over jit_above_cost.

-- The head as the ticks say it, without the flush of head_position (for the ticker's callers).
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

CREATE FUNCTION statesman.head_position() RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RETURN statesman._durable(statesman._head());
END
$$;
COMMENT ON FUNCTION statesman.head_position() IS
    'the highest readable feed position, NULL while the feed is empty';

-- The feed's row source: every reader of the feed gets its records here (read_feed, the
-- delivery pages, outbox_status). The readable records with after < position <= upto (after
-- NULL: 0; upto NULL: no limit), of one root when root is not NULL (lower-case), in position
-- order, at most max_records. Records from before 0.4.0 first (their stored positions are
-- below every tick's), then the ticks from the one holding after + 1, each one's records in id
-- order. Nothing is returned before the WAL holding the ticks read is flushed (_durable, after
-- the whole page was read): the ticker commits asynchronously, and no reader may act on a
-- position that a crash could give to another record.
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

-- Committed records that no tick holds yet: what the next tick will take (feed_status).
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

-- A new chain of ticks after a restore into another cluster: the restored ticks' transaction
-- ids and snapshots are the other cluster's, so no snapshot of this one may be compared with
-- them. Under a SHARE lock on the ledger (no appending transaction is open, none starts until
-- this one ends) the records that the restored chain had not taken get positions after its
-- last one: those of the old chain's range that its last snapshot did not see (their
-- transactions committed after its last tick), one range tick each, then every record above
-- that range in one range tick (snap NULL: every committed record with id in [lo, hi]), then an
-- anchor (xid 0, last_id = every id drawn so far) from which this cluster's ticks go on. No
-- readable position changes: the restored ticks stay as they are. Returns false when the lock
-- was not granted within a second (the next run tries again).
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

-- A tick of its own for the record this session appended last (currval of the identity): for
-- a transaction that appends after a tick of its own (sequence_feed in the same transaction,
-- which holds the sequencer lock until it ends). A range tick of one id holds that record.
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

-- The ticker. One tick per call that finds records: it reads the identity's last value L,
-- takes the snapshot S, finds the committed records visible in S and not in the last tick's
-- snapshot, and stores (base, lo = their smallest id, hi = their largest, L, its own xid X,
-- S, the last snapshot). One ticker at a time (the lock is held until this transaction ends),
-- each from a snapshot taken after the previous tick committed: a record that commits later
-- lands in a later tick, above everything readable (F1).
--
-- Which ids to scan. A record's id is drawn after its transaction got its top-level xid (the
-- append takes it first) and ids rise in real time (CACHE 1). A record new in this tick has a
-- transaction not visible in the last snapshot, so its xid is at least m = the smaller of that
-- snapshot's xmax and the smallest xid of its running list that has ended since. A tick j with
-- X_j < m took its X_j before that xid was assigned, and read L_j before X_j: every id of the
-- record's transaction is above L_j. So the scan is id > L_j for the newest such tick (an
-- anchor has X = 0: the scan never goes below the chain's start). In a steady stream that is a
-- tick or two of records; when a writer held open commits, once, the ids drawn since it began.
--
-- max_records no longer bounds a step: a tick is one row whatever it holds, and readers page
-- through a large tick like any other. It is still checked, for the callers that pass it.
--
-- The commit is asynchronous for the database worker (durable false): readers flush before
-- they hand on what they read (_feed_page). Other callers (sequence_feed: read_feed,
-- dispatch_once, a dispatcher's poll, a session) may hand on positions of the tick before
-- their transaction's commit is on disk, so for them it is synchronous.
--
-- In C (src/feed/ticker.cpp): it reads the ticks and the new records from their indexes under
-- one snapshot and writes the tick's row and index entries itself (through its INSERT when the
-- table has a trigger of someone else's). On a cluster restored from another one it calls
-- statesman._restart_ticks.
CREATE FUNCTION statesman._tick(max_records integer, durable boolean) RETURNS bigint
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_tick';
COMMENT ON FUNCTION statesman._tick(integer, boolean) IS
    'the ticker (sequence_feed; the database worker with durable false); returns the head position';

CREATE FUNCTION statesman.sequence_feed(max_records integer DEFAULT 10000) RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT statesman._tick(sequence_feed.max_records, true)
$$;
COMMENT ON FUNCTION statesman.sequence_feed(integer) IS
    'stores a tick for the records committed since the last one (positions for them); returns the head position';

-- Ticks whose records are all gone (every id of their range is below the ledger's smallest)
-- are deleted: no readable position depends on them. Each call looks at the oldest 1,000 ticks
-- only (the worker calls it every second). Kept: tick 0, the newest tick, the newest tick
-- with records, the newest anchor (the ticker's scans start from it) and the newest tick with
-- a snapshot (the next tick's previous snapshot). Returns how many ticks went.
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

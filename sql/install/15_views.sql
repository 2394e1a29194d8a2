-------------------------------------------------------------------------------
-- Views
-------------------------------------------------------------------------------

-- Open transactions that appended and have not ended hold an address lock; their records
-- join the feed when they commit (the next tick takes them), and they hold back no one else's.
-- The sequencer lock is held only while a tick is under way; a transaction that keeps it
-- (sequence_feed called inside a long transaction) holds the whole feed back, and is named
-- here. unsequenced_records: committed records that no tick holds yet.
CREATE FUNCTION statesman._feed_status(
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

CREATE VIEW statesman.feed_status AS SELECT * FROM statesman._feed_status();
COMMENT ON VIEW statesman.feed_status IS
    'feed head, records waiting for a position, open appending transactions, and who holds the feed back';


-- When the first record after a position was appended (outbox_status.lag_seconds): the view
-- is read by roles that may not read the ledger.
CREATE FUNCTION statesman._next_occurred_at(after bigint) RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT p.occurred_at FROM statesman._feed_page(_next_occurred_at.after, NULL, 1, NULL) p
$$;
COMMENT ON FUNCTION statesman._next_occurred_at(bigint) IS
    'when the first feed record after a position was appended (NULL: none)';

-- One row per outbox. Sink options are never shown: they may hold secrets. lag_records is the
-- distance from the cursor to the head in positions: positions have gaps, so it is at most the
-- records still to deliver.
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

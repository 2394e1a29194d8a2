-------------------------------------------------------------------------------
-- Reading the ledger
-------------------------------------------------------------------------------

-- One record's feed position: the stored one from before 0.4.0, else base + (id - lo) of the
-- tick holding it (NULL while no tick holds it yet). The ticks whose range holds the id are
-- found through ticks_hi; exactly one of them holds the record.
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

-- The same for a ledger row: statesman._position_of(h) for h in statesman.history.
CREATE FUNCTION statesman._position_of(h statesman.history) RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT statesman._position_of($1.id, $1.txid, $1.legacy_position)
$$;
COMMENT ON FUNCTION statesman._position_of(statesman.history) IS 'a ledger row''s feed position, NULL while it has none';

-- The record columns of the ledger, in statesman.record's order; global_position is derived
-- (statesman._position_of: NULL while no tick holds the record yet).
CREATE VIEW statesman._records AS
    SELECT h.root, h.path, h.partition, h.address, h.revision,
           statesman._position_of(h.id, h.txid, h.legacy_position) AS global_position, h.occurred_at,
           h.operation, h.status, h.value_type, h.schema_version, h.source, h.payload,
           h.fingerprint, h.content_type, h.serializer_id, h.correlation_id, h.causation_id,
           h.error, h.metadata, h.fresh_until, h.serve_until
    FROM statesman.history h;

CREATE FUNCTION statesman.history(root text, path text, partition text DEFAULT '')
    RETURNS SETOF statesman.record
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT r.* FROM statesman._records r
    WHERE r.address = statesman.address_of(history.root, history.path, history.partition)
    ORDER BY r.revision
$$;
COMMENT ON FUNCTION statesman.history(text, text, text) IS
    'every retained revision of an address, oldest first';

CREATE FUNCTION statesman.current(root text, path text, partition text DEFAULT '')
    RETURNS SETOF statesman.record
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT r.* FROM statesman._records r
    WHERE r.address = statesman.address_of(current.root, current.path, current.partition)
    ORDER BY r.revision DESC
    LIMIT 1
$$;
COMMENT ON FUNCTION statesman.current(text, text, text) IS
    'the latest record of an address (a tombstone included), or no row';

-------------------------------------------------------------------------------
-- Reading the ledger
-------------------------------------------------------------------------------

-- The record columns of the ledger, in statesman.record's order.
CREATE VIEW statesman._records AS
    SELECT h.root, h.path, h.partition, h.address, h.revision, h.global_position, h.occurred_at,
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

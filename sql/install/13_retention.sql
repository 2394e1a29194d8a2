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
-- feed together; its position, derived from its tick, is looked up only for the records over
-- the limits, and deleting them moves no other record's position); when over-limit records had to stay, the address is noted in prune_pending
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

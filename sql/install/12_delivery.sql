-------------------------------------------------------------------------------
-- Delivery pages (the dispatcher's and dispatch_once's calls)
-------------------------------------------------------------------------------

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
    PERFORM pg_advisory_xact_lock_shared(statesman._lock_space('page'), statesman._lease_key(_page_outbox.outbox_id));
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _page_outbox.outbox_id;
    RETURN o;
END
$$;
COMMENT ON FUNCTION statesman._page_outbox(text) IS 'an outbox''s row, under the page lock';

-- Delivers the next page of the feed to a `table` sink: the inserts, the cursor advance and the
-- totals commit together, so delivery into the table is exactly-once. The sink's failure
-- (a constraint, a trigger, a missing table) is caught, recorded and reported as 'failed'.
-- In C (src/feed/page.cpp): under the page lock, the outbox's row and cursor read once, the
-- page read in one pass (statesman._feed_page's rows, from the tables), its messages built in C++ and inserted as
-- COPY inserts rows into a plain table, else by one kept INSERT … SELECT FROM unnest(…)
-- (ON CONFLICT (message_id) DO NOTHING only after a unique violation: a re-delivery).
CREATE FUNCTION statesman._deliver_table_page(outbox_id text) RETURNS statesman._page_result
    LANGUAGE c VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_deliver_table_page';
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

-- Rows inserted into a `table` sink's target with ON CONFLICT (message_id) DO NOTHING, as the
-- target table's owner in a security-restricted operation (its triggers, defaults, constraints
-- and index expressions never run with the extension owner's rights); returns how many.
CREATE FUNCTION statesman._insert_sink_rows(target text, message_ids text[], global_positions bigint[],
                                            messages jsonb[]) RETURNS bigint
    LANGUAGE c VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_insert_sink_rows';
COMMENT ON FUNCTION statesman._insert_sink_rows(text, text[], bigint[], jsonb[]) IS
    'inserts rows into a table sink''s target as its owner (ON CONFLICT (message_id) DO NOTHING)';

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

-- Sinks outside this database (redis, postgres) take a page in two steps inside one
-- transaction of the dispatcher: the dispatcher reads the page in one step (src/feed/page.cpp:
-- under the page lock, the outbox's row and cursor read once, the records read in one pass
-- (statesman._feed_page's rows, from the tables) and their messages built in C++), the sink publishes them, and only
-- then _finish_page moves the cursor (publish first, then advance: docs/design.md §4).

-- After the sink accepted a page: the cursor moves past it and the totals count it.
-- PL/pgSQL, as _move_cursor: its plans are kept for the session.
CREATE FUNCTION statesman._finish_page(outbox_id text, last_position bigint, published bigint, deduplicated bigint)
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
COMMENT ON FUNCTION statesman._finish_page(text, bigint, bigint, bigint) IS
    'moves the cursor past a page the sink accepted and counts it';

-- Dead letters requeued by redeliver(), for a sink outside this database (at most one page).
CREATE FUNCTION statesman._requeued_messages(outbox_id text)
    RETURNS TABLE (global_position bigint, message_id text, message text)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
BEGIN
    o := statesman._page_outbox(_requeued_messages.outbox_id);
    IF o.outbox_id IS NULL OR NOT o.enabled THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT d.global_position, d.message_id, d.message::text FROM statesman.dead_letters d
        WHERE d.outbox_id = o.outbox_id AND d.requeued_at IS NOT NULL
        ORDER BY d.global_position LIMIT o.batch_size;
END
$$;
COMMENT ON FUNCTION statesman._requeued_messages(text) IS
    'requeued dead letters of an outbox, at most one page, for a sink outside this database';

-- After the sink accepted requeued dead letters (accepted: they leave dead_letters) or refused
-- them (refused: they stay parked, no longer requeued, so one broken message cannot stall the
-- feed).
CREATE FUNCTION statesman._requeued_outcome(outbox_id text, positions bigint[], accepted boolean,
                                            published bigint, deduplicated bigint, error text)
    RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF accepted THEN
        DELETE FROM statesman.dead_letters d
        WHERE d.outbox_id = _requeued_outcome.outbox_id AND d.global_position = ANY (_requeued_outcome.positions);
        UPDATE statesman.outbox_state s
        SET published_total = s.published_total + _requeued_outcome.published,
            deduplicated_total = s.deduplicated_total + _requeued_outcome.deduplicated,
            last_published_at = CASE WHEN _requeued_outcome.published > 0 THEN clock_timestamp()
                                     ELSE s.last_published_at END
        WHERE s.outbox_id = _requeued_outcome.outbox_id;
    ELSE
        UPDATE statesman.dead_letters d
        SET requeued_at = NULL, attempts = d.attempts + 1, last_error = left(_requeued_outcome.error, 2000)
        WHERE d.outbox_id = _requeued_outcome.outbox_id AND d.global_position = ANY (_requeued_outcome.positions);
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._requeued_outcome(text, bigint[], boolean, bigint, bigint, text) IS
    'removes requeued dead letters the sink accepted, or parks them again when it refused them';

-- Runs one dispatch cycle in the calling session: see the C entry point.
CREATE FUNCTION statesman.dispatch_once(outbox_id text)
    RETURNS TABLE (published bigint, skipped bigint, deduplicated bigint, cursor_position bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_dispatch_once';
COMMENT ON FUNCTION statesman.dispatch_once(text) IS
    'runs one delivery cycle of an outbox in this session (zeros when another holder has the lease)';

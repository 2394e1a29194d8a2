-------------------------------------------------------------------------------
-- Cursors
-------------------------------------------------------------------------------

CREATE FUNCTION statesman.cursor_position(outbox_id text) RETURNS bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_id(cursor_position.outbox_id, 'outbox_id');
    RETURN (SELECT c.position FROM statesman.cursors c WHERE c.outbox_id = cursor_position.outbox_id);
END
$$;
COMMENT ON FUNCTION statesman.cursor_position(text) IS
    'the stored cursor of an outbox or consumer; NULL before its first write';

CREATE FUNCTION statesman.advance_cursor(outbox_id text, new_position bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    moved boolean;
BEGIN
    PERFORM statesman._check_id(advance_cursor.outbox_id, 'outbox_id');
    PERFORM statesman._require(new_position, 'new_position');
    IF new_position < 1 THEN
        RAISE EXCEPTION 'new_position must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF new_position > COALESCE(statesman.head_position(), 0) THEN
        RAISE EXCEPTION 'new_position % is beyond the feed''s head (%)',
                        new_position, COALESCE(statesman.head_position()::text, 'empty')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A cursor past the head would skip records that are not in the feed yet.';
    END IF;
    -- Monotonic: one conditional write; an equal or lower position changes nothing.
    INSERT INTO statesman.cursors AS c (outbox_id, position)
    VALUES (advance_cursor.outbox_id, new_position)
    ON CONFLICT ON CONSTRAINT cursors_pkey DO UPDATE
        SET position = EXCLUDED.position, updated_at = pg_catalog.now()
        WHERE c.position < EXCLUDED.position
    RETURNING true INTO moved;
    RETURN COALESCE(moved, false);
END
$$;
COMMENT ON FUNCTION statesman.advance_cursor(text, bigint) IS
    'moves a cursor forward (never back); false when new_position is not above the stored one';

CREATE FUNCTION statesman.seed_cursor(outbox_id text, at_position bigint DEFAULT NULL) RETURNS bigint
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

-- The dispatcher's cursor move: moves an outbox's cursor forward to a position delivered (or
-- parked) in the page's transaction (statesman._finish_page, _deliver_table_page, _park_page).
-- PL/pgSQL rather than SQL: called once a page, it keeps its statement's plan for the session
-- (an SQL function's body is parsed and planned again at every call from another statement).
CREATE FUNCTION statesman._move_cursor(outbox_id text, "position" bigint) RETURNS void
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
COMMENT ON FUNCTION statesman._move_cursor(text, bigint) IS 'moves a cursor forward within a page''s transaction';

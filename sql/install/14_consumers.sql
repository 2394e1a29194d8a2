-------------------------------------------------------------------------------
-- Consumers: exactly-once with (epoch, position)
-------------------------------------------------------------------------------

-- Validates the (consumer, feed, epoch, position) arguments of the consumer kit.
CREATE FUNCTION statesman._check_applied_args(consumer text, feed text, epoch uuid, "position" bigint)
    RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_id(consumer, 'consumer');
    PERFORM statesman._check_feed(feed);
    PERFORM statesman._require(epoch, 'epoch');
    PERFORM statesman._require("position", 'position');
    IF "position" < 0 THEN
        RAISE EXCEPTION 'position must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_applied_args(text, text, uuid, bigint) IS
    'validates consumer-kit arguments';

CREATE FUNCTION statesman.mark_applied(consumer text, feed text, epoch uuid, "position" bigint)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    stored boolean;
    v_owner name;
BEGIN
    PERFORM statesman._check_applied_args(mark_applied.consumer, mark_applied.feed,
                                          mark_applied.epoch, mark_applied."position");
    -- A position belongs to the role that stored it first (NULL: a row from before 0.4.0,
    -- claimed now). Runs as the caller, so statesman.applied's row-level security also refuses
    -- (42501) a row another role stored between this check and the insert.
    SELECT a.owner INTO v_owner FROM statesman.applied a
    WHERE a.consumer = mark_applied.consumer AND a.feed = mark_applied.feed;
    IF v_owner IS DISTINCT FROM CURRENT_USER AND v_owner IS NOT NULL THEN
        RAISE EXCEPTION 'consumer "%" of feed "%" belongs to role "%"', mark_applied.consumer,
                        mark_applied.feed, v_owner
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A consumer''s position is moved only by the role that stored it first.';
    END IF;
    -- The row lock of ON CONFLICT serialises concurrent callers for one (consumer, feed); the
    -- second re-checks the condition against what the first committed.
    INSERT INTO statesman.applied AS a (consumer, feed, epoch, position, owner)
    VALUES (mark_applied.consumer, mark_applied.feed, mark_applied.epoch, mark_applied."position", CURRENT_USER)
    ON CONFLICT ON CONSTRAINT applied_pkey DO UPDATE
        SET epoch = EXCLUDED.epoch, position = EXCLUDED.position, applied_at = pg_catalog.now(),
            owner = EXCLUDED.owner
        WHERE NOT (a.epoch = EXCLUDED.epoch AND a.position >= EXCLUDED.position)
    RETURNING true INTO stored;
    RETURN COALESCE(stored, false);
END
$$;
COMMENT ON FUNCTION statesman.mark_applied(text, text, uuid, bigint) IS
    'records (epoch, position) as applied in the caller''s transaction; false when already applied';

CREATE FUNCTION statesman.mark_applied(consumer text, message jsonb) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_epoch uuid;
    v_position bigint;
BEGIN
    PERFORM statesman._require(message, 'message');
    IF jsonb_typeof(message) IS DISTINCT FROM 'object'
       OR jsonb_typeof(message->'store') IS DISTINCT FROM 'string'
       OR jsonb_typeof(message->'epoch') IS DISTINCT FROM 'string'
       OR jsonb_typeof(message->'globalPosition') IS DISTINCT FROM 'number' THEN
        RAISE EXCEPTION 'message must be a statesman.state-change/v1 object with store, epoch and globalPosition'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        v_epoch := (message->>'epoch')::uuid;
        v_position := (message->>'globalPosition')::bigint;
    EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        RAISE EXCEPTION 'message epoch must be a UUID and globalPosition an integer'
            USING ERRCODE = 'invalid_parameter_value';
    END;
    RETURN statesman.mark_applied(consumer, message->>'store', v_epoch, v_position);
END
$$;
COMMENT ON FUNCTION statesman.mark_applied(text, jsonb) IS
    'mark_applied with feed, epoch and position taken from a statesman.state-change/v1 message';

CREATE FUNCTION statesman.already_applied(consumer text, feed text, epoch uuid, "position" bigint)
    RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_applied_args(already_applied.consumer, already_applied.feed,
                                          already_applied.epoch, already_applied."position");
    RETURN EXISTS (
        SELECT FROM statesman.applied a
        WHERE a.consumer = already_applied.consumer AND a.feed = already_applied.feed
          AND a.epoch = already_applied.epoch AND a.position >= already_applied."position");
END
$$;
COMMENT ON FUNCTION statesman.already_applied(text, text, uuid, bigint) IS
    'true when (epoch, position) is at or before what the consumer applied (same epoch only)';

CREATE FUNCTION statesman.applied_position(consumer text, feed text)
    RETURNS TABLE (epoch uuid, "position" bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_id(applied_position.consumer, 'consumer');
    PERFORM statesman._check_feed(applied_position.feed);
    RETURN QUERY SELECT a.epoch, a.position FROM statesman.applied a
                 WHERE a.consumer = applied_position.consumer AND a.feed = applied_position.feed;
END
$$;
COMMENT ON FUNCTION statesman.applied_position(text, text) IS
    'the (epoch, position) a consumer last applied for a feed, or no row';

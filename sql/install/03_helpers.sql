-------------------------------------------------------------------------------
-- Internal helpers
-------------------------------------------------------------------------------

CREATE FUNCTION statesman._in_transaction_block() RETURNS boolean
    LANGUAGE c VOLATILE PARALLEL RESTRICTED
    AS 'MODULE_PATHNAME', 'statesman_in_transaction_block';
COMMENT ON FUNCTION statesman._in_transaction_block() IS
    'true inside an explicit transaction block (BEGIN … COMMIT)';

-- Raises 22004 when value is NULL.
CREATE FUNCTION statesman._require(value anyelement, argument text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', argument USING ERRCODE = 'null_value_not_allowed';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._require(anyelement, text) IS 'raises 22004 when value is NULL';

-- Validates a store, root or feed name: ^[A-Za-z0-9_.-]{1,63}$.
CREATE FUNCTION statesman._check_name(value text, argument text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._require(value, argument);
    IF value !~ '^[A-Za-z0-9_.-]{1,63}$' THEN
        RAISE EXCEPTION '% must match ^[A-Za-z0-9_.-]{1,63}$', argument
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_name(text, text) IS 'validates a store, root or feed name';

-- Validates a consumer-side feed name: any non-empty text of at most 255 bytes (a store name
-- defaults to the database's name, which need not follow the store-name pattern).
CREATE FUNCTION statesman._check_feed(value text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._require(value, 'feed');
    IF value = '' OR octet_length(value) > 255 THEN
        RAISE EXCEPTION 'feed must be 1 to 255 bytes long' USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_feed(text) IS 'validates a consumer-side feed name';

-- Validates an outbox or consumer id: ^[A-Za-z0-9_.:-]{1,63}$.
CREATE FUNCTION statesman._check_id(value text, argument text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._require(value, argument);
    IF value !~ '^[A-Za-z0-9_.:-]{1,63}$' THEN
        RAISE EXCEPTION '% must be 1 to 63 characters of A-Z, a-z, 0-9, ''_'', ''.'', '':'' or ''-''', argument
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_id(text, text) IS 'validates an outbox or consumer id';

-- The first half of statesman's two-int4 advisory lock keys: one space per kind of lock, so
-- that none collides with an application's (include/statesman/store/locks.hpp names the same
-- numbers in C++). 'address': an appending transaction's lock on each address it writes;
-- 'sequencer': the one sequencer (key 0); 'lease': an outbox's lease (key
-- statesman._lease_key(outbox_id)); 'page': a page of delivery (shared) against drop_outbox
-- (exclusive), same key. An unknown name raises: a NULL key would take no lock at all.
CREATE FUNCTION statesman._lock_space(name text) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    CASE name
        WHEN 'address' THEN RETURN 1398033742;
        WHEN 'sequencer' THEN RETURN 1398033743;
        WHEN 'lease' THEN RETURN 1398033744;
        WHEN 'page' THEN RETURN 1398033745;
        ELSE RAISE EXCEPTION 'unknown lock space "%"', name USING ERRCODE = 'invalid_parameter_value';
    END CASE;
END
$$;
COMMENT ON FUNCTION statesman._lock_space(text) IS
    'the advisory lock space of statesman''s address, sequencer, lease and page locks';

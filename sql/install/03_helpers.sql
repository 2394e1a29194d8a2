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

-------------------------------------------------------------------------------
-- Reading the feed
-------------------------------------------------------------------------------

-- Builds one statesman.state-change/v1 message (docs/design.md §5); serializerId is omitted when NULL.
CREATE FUNCTION statesman._message(
    store text, epoch uuid, address text, root text, path text, partition text, revision bigint,
    global_position bigint, occurred_at timestamptz, operation text, status text, value_type text,
    schema_version integer, source text, fingerprint text, content_type text, serializer_id text,
    payload bytea, correlation_id text, causation_id text, metadata jsonb, error text)
    RETURNS jsonb
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_message';
COMMENT ON FUNCTION statesman._message(text, uuid, text, text, text, text, bigint, bigint, timestamptz,
    text, text, text, integer, text, text, text, text, bytea, text, text, jsonb, text) IS
    'one statesman.state-change/v1 message built from a record''s fields';

-- The same message as JSON text, byte for byte _message(…)::text, written without building a
-- jsonb first: what sinks outside the database send.
CREATE FUNCTION statesman._message_text(
    store text, epoch uuid, address text, root text, path text, partition text, revision bigint,
    global_position bigint, occurred_at timestamptz, operation text, status text, value_type text,
    schema_version integer, source text, fingerprint text, content_type text, serializer_id text,
    payload bytea, correlation_id text, causation_id text, metadata jsonb, error text)
    RETURNS text
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_message_text';
COMMENT ON FUNCTION statesman._message_text(text, uuid, text, text, text, text, bigint, bigint, timestamptz,
    text, text, text, integer, text, text, text, text, bytea, text, text, jsonb, text) IS
    'one statesman.state-change/v1 message as JSON text (equal to _message(...)::text)';

CREATE FUNCTION statesman.read_feed(
    after bigint DEFAULT NULL, max_records integer DEFAULT 1000, root text DEFAULT NULL)
    RETURNS TABLE (global_position bigint, message_id text, address text, revision bigint,
                   message jsonb)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_store text;
    v_epoch uuid;
    v_root  text := lower(read_feed.root);
    v_after bigint := COALESCE(read_feed.after, 0);
    v_upto  bigint;                      -- read up to this position; NULL: to the head
    v_left  integer := read_feed.max_records;
    v_read  bigint;
BEGIN
    PERFORM statesman._require(read_feed.max_records, 'max_records');
    IF read_feed.max_records < 1 THEN
        RAISE EXCEPTION 'max_records must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF read_feed.after < 0 THEN
        RAISE EXCEPTION 'after must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF read_feed.root IS NOT NULL THEN
        PERFORM statesman._check_name(read_feed.root, 'root');
    END IF;

    -- Sequence on demand, but only in a READ COMMITTED transaction of its own: inside
    -- BEGIN … COMMIT the sequencer lock would be held until the caller commits and stall every
    -- other reader. Not in a read-only transaction (a hot standby's, for one): it serves what
    -- is sequenced. And only when the page is not full without it: the records sequenced now
    -- get positions above every readable one, so they could only extend a short page. The
    -- first pass reads up to the head as it is now; if that is short of a page, every readable
    -- record up to that head has been returned, and the second pass continues after it.
    IF NOT statesman._in_transaction_block()
       AND current_setting('transaction_isolation') = 'read committed'
       AND current_setting('transaction_read_only') = 'off' THEN
        v_upto := COALESCE(statesman.head_position(), 0);
    END IF;

    SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch
    FROM statesman.store s;

    LOOP
        RETURN QUERY
        SELECT h.global_position,
               v_store || '/' || h.address || '#' || h.revision,
               h.address,
               h.revision,
               statesman._message(
                   v_store, v_epoch, h.address, h.root, h.path, h.partition, h.revision,
                   h.global_position, h.occurred_at, h.operation, h.status, h.value_type,
                   h.schema_version, h.source, COALESCE(h.fingerprint, r.fingerprint),
                   COALESCE(h.content_type, r.content_type), h.serializer_id, h.payload,
                   h.correlation_id, h.causation_id, h.metadata, h.error)
        FROM statesman._feed_page(v_after, v_upto, v_left, v_root) h
        LEFT JOIN statesman.roots r ON r.root = h.root
        ORDER BY h.global_position;
        GET DIAGNOSTICS v_read = ROW_COUNT;
        v_left := v_left - v_read;
        EXIT WHEN v_upto IS NULL OR v_left = 0;
        PERFORM statesman.sequence_feed(GREATEST(read_feed.max_records, 10000));
        v_after := GREATEST(v_after, v_upto);
        v_upto := NULL;
    END LOOP;
END
$$;
COMMENT ON FUNCTION statesman.read_feed(bigint, integer, text) IS
    'feed records after a position, in position order, as statesman.state-change/v1 messages';

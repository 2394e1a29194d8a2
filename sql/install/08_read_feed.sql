-------------------------------------------------------------------------------
-- Reading the feed
-------------------------------------------------------------------------------

-- What every reader of the feed gets is defined by statesman._feed_page (07_sequencer.sql), the
-- one place where positions are derived; the C readers (src/feed/page.cpp) read the same rows
-- straight from the tables.

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

-- In C (src/feed/page.cpp): one pass over statesman._feed_page's rows (read from the tables by
-- the C++ row source), each message built from the row. Sequences on demand, but only in a READ COMMITTED transaction of its own (not
-- inside BEGIN … COMMIT: the sequencer lock would be held until the caller commits and stall
-- every other reader), not in a read-only one (a hot standby's: it serves what is sequenced),
-- and only when the first pass, up to the head as it was, is short of a page: the second pass
-- continues after that head.
CREATE FUNCTION statesman.read_feed(
    after bigint DEFAULT NULL, max_records integer DEFAULT 1000, root text DEFAULT NULL)
    RETURNS TABLE (global_position bigint, message_id text, address text, revision bigint,
                   message jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_read_feed';
COMMENT ON FUNCTION statesman.read_feed(bigint, integer, text) IS
    'feed records after a position, in position order, as statesman.state-change/v1 messages';

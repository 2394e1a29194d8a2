-- statesman: a ledger store with a lossless change feed (base install script).
-- Every name is schema-qualified and every function pins search_path, so objects that a
-- user creates in other schemas can never capture a call made here.

\echo Use "CREATE EXTENSION statesman" to load this file. \quit

-------------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------------

-- The store: one row. store_name NULL means "the current database's name".
CREATE TABLE statesman.store (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    store_name  text,
    epoch       uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO statesman.store (singleton) VALUES (true);

-- Root declarations: envelope defaults and retention (NULL limits: keep all).
CREATE TABLE statesman.roots (
    root          text PRIMARY KEY,
    fingerprint   text,
    content_type  text,
    max_revisions integer CHECK (max_revisions >= 1),
    max_bytes     bigint CHECK (max_bytes >= 1),
    declared_at   timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- The ledger and the feed. A committed record has global_position NULL until the sequencer
-- gives it one (see statesman.sequence_feed); id is the insert order.
CREATE TABLE statesman.history (
    -- Insert order. CACHE 1 matters: the sequencer relies on a later revision of an address
    -- always having a larger id than the earlier one, which per-backend caching would break.
    id              bigint GENERATED ALWAYS AS IDENTITY (CACHE 1),
    address         text NOT NULL,
    root            text NOT NULL,
    path            text NOT NULL,
    partition       text NOT NULL DEFAULT '',
    revision        bigint NOT NULL,
    global_position bigint,
    occurred_at     timestamptz NOT NULL,
    -- 'put' or 'delete', checked by the append functions (a CHECK constraint here would be
    -- re-compiled on every single-row insert).
    operation       text NOT NULL DEFAULT 'put',
    status          text,
    value_type      text,
    schema_version  integer,
    source          text,
    payload         bytea,
    fingerprint     text,
    content_type    text,
    serializer_id   text,
    correlation_id  text,
    causation_id    text,
    error           text,
    metadata        jsonb,
    fresh_until     timestamptz,
    serve_until     timestamptz,
    PRIMARY KEY (address, revision)
);
CREATE UNIQUE INDEX history_global_position ON statesman.history (global_position)
    WHERE global_position IS NOT NULL;
CREATE INDEX history_unsequenced ON statesman.history (id)
    WHERE global_position IS NULL;

-- Feed positions. A sequence, not a counter row: a position handed out by a sequencer run
-- that later rolls back is burnt, never reused for another record.
-- Never move it backwards (setval): positions must only grow.
CREATE SEQUENCE statesman.feed_position_seq AS bigint MINVALUE 1 NO CYCLE CACHE 1;

-- Durable cursors, keyed by outbox (or external consumer) id. Positions only move forward
-- through advance_cursor.
CREATE TABLE statesman.cursors (
    outbox_id   text PRIMARY KEY,
    position    bigint NOT NULL CHECK (position >= 1),
    updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- Consumer kit: the (epoch, position) a consumer last applied, per feed.
CREATE TABLE statesman.applied (
    consumer    text NOT NULL,
    feed        text NOT NULL,
    epoch       uuid NOT NULL,
    position    bigint NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (consumer, feed)
);

-- pg_dump keeps the contents of extension tables only when told to.
SELECT pg_catalog.pg_extension_config_dump('statesman.store', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.roots', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.history', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.feed_position_seq', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.cursors', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.applied', '');

-------------------------------------------------------------------------------
-- Types
-------------------------------------------------------------------------------

-- One record as current() and history() return it.
CREATE TYPE statesman.record AS (
    root            text,
    path            text,
    partition       text,
    address         text,
    revision        bigint,
    global_position bigint,
    occurred_at     timestamptz,
    operation       text,
    status          text,
    value_type      text,
    schema_version  integer,
    source          text,
    payload         bytea,
    fingerprint     text,
    content_type    text,
    serializer_id   text,
    correlation_id  text,
    causation_id    text,
    error           text,
    metadata        jsonb,
    fresh_until     timestamptz,
    serve_until     timestamptz
);

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

-------------------------------------------------------------------------------
-- The store
-------------------------------------------------------------------------------

CREATE FUNCTION statesman.store_info(
    OUT store text, OUT epoch uuid, OUT head_position bigint, OUT oldest_position bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT COALESCE(s.store_name, pg_catalog.current_database()), s.epoch,
           (SELECT max(h.global_position) FROM statesman.history h),
           (SELECT min(h.global_position) FROM statesman.history h)
    FROM statesman.store s
$$;
COMMENT ON FUNCTION statesman.store_info() IS
    'the store''s name, its position lineage (epoch) and the feed''s head and oldest positions';

CREATE FUNCTION statesman.set_store_name(name text) RETURNS text
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_name(name, 'name');
    -- Message ids embed the store name; renaming after records exist would change them.
    LOCK TABLE statesman.history IN SHARE MODE;
    IF EXISTS (SELECT FROM statesman.history) THEN
        RAISE EXCEPTION 'the store name can only change while the feed is empty'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Message ids contain the store name.';
    END IF;
    UPDATE statesman.store SET store_name = name;
    RETURN name;
END
$$;
COMMENT ON FUNCTION statesman.set_store_name(text) IS
    'renames the store; allowed only while the feed is empty';

CREATE FUNCTION statesman.reset_epoch() RETURNS uuid
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE statesman.store SET epoch = pg_catalog.gen_random_uuid() RETURNING epoch
$$;
COMMENT ON FUNCTION statesman.reset_epoch() IS
    'starts a new position lineage, for a copy that must not share positions with its source';

CREATE FUNCTION statesman.address_of(root text, path text, partition text DEFAULT '') RETURNS text
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_address_of';
COMMENT ON FUNCTION statesman.address_of(text, text, text) IS
    'the canonical address of (root, path, partition), validating each part';

CREATE FUNCTION statesman.declare_root(
    root text, fingerprint text DEFAULT NULL, content_type text DEFAULT NULL,
    max_revisions integer DEFAULT NULL, max_bytes bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_name(declare_root.root, 'root');
    IF declare_root.max_revisions < 1 THEN
        RAISE EXCEPTION 'max_revisions must be at least 1 (or NULL to keep all)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF declare_root.max_bytes < 1 THEN
        RAISE EXCEPTION 'max_bytes must be at least 1 (or NULL to keep all)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO statesman.roots AS r (root, fingerprint, content_type, max_revisions, max_bytes)
    VALUES (lower(declare_root.root), declare_root.fingerprint, declare_root.content_type,
            declare_root.max_revisions, declare_root.max_bytes)
    ON CONFLICT ON CONSTRAINT roots_pkey DO UPDATE
        SET fingerprint = EXCLUDED.fingerprint, content_type = EXCLUDED.content_type,
            max_revisions = EXCLUDED.max_revisions, max_bytes = EXCLUDED.max_bytes,
            declared_at = pg_catalog.now();
END
$$;
COMMENT ON FUNCTION statesman.declare_root(text, text, text, integer, bigint) IS
    'declares a root''s envelope (fingerprint, content type) and retention; NULL limits keep all';

-------------------------------------------------------------------------------
-- Writing
-------------------------------------------------------------------------------

-- The append functions are on every application's hot path, so they are not SECURITY DEFINER
-- (whose per-call search_path switch costs as much as the insert's own index work). The C code
-- instead acts on the ledger as its owner only around fixed statements in which every relation,
-- function and operator is schema-qualified, the way PostgreSQL's RI triggers do: a caller's
-- search_path cannot capture anything, and callers need no privileges on the tables.

CREATE FUNCTION statesman.append(
    root text, path text, payload jsonb, partition text DEFAULT '', operation text DEFAULT 'put',
    status text DEFAULT 'ok', value_type text DEFAULT NULL, schema_version integer DEFAULT NULL,
    source text DEFAULT NULL, correlation_id text DEFAULT NULL, causation_id text DEFAULT NULL,
    metadata jsonb DEFAULT NULL, error text DEFAULT NULL, fresh_until timestamptz DEFAULT NULL,
    serve_until timestamptz DEFAULT NULL)
    RETURNS TABLE (address text, revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append';
COMMENT ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text,
    text, jsonb, text, timestamptz, timestamptz) IS
    'appends a record with a JSON payload (stored as its UTF-8 text, content type application/json)';

CREATE FUNCTION statesman.append_bytes(
    root text, path text, payload bytea, content_type text, serializer_id text DEFAULT NULL,
    partition text DEFAULT '', operation text DEFAULT 'put', status text DEFAULT 'ok',
    value_type text DEFAULT NULL, schema_version integer DEFAULT NULL, source text DEFAULT NULL,
    correlation_id text DEFAULT NULL, causation_id text DEFAULT NULL, metadata jsonb DEFAULT NULL,
    error text DEFAULT NULL, fresh_until timestamptz DEFAULT NULL,
    serve_until timestamptz DEFAULT NULL)
    RETURNS TABLE (address text, revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_bytes';
COMMENT ON FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text,
    integer, text, text, text, jsonb, text, timestamptz, timestamptz) IS
    'appends a record with an opaque byte payload';

CREATE FUNCTION statesman.append_delete(
    root text, path text, partition text DEFAULT '', status text DEFAULT 'ok',
    value_type text DEFAULT NULL, schema_version integer DEFAULT NULL, source text DEFAULT NULL,
    correlation_id text DEFAULT NULL, causation_id text DEFAULT NULL, metadata jsonb DEFAULT NULL,
    error text DEFAULT NULL, fresh_until timestamptz DEFAULT NULL,
    serve_until timestamptz DEFAULT NULL)
    RETURNS TABLE (address text, revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_delete';
COMMENT ON FUNCTION statesman.append_delete(text, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) IS
    'appends a tombstone (operation delete, no payload)';

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

-------------------------------------------------------------------------------
-- The change feed
-------------------------------------------------------------------------------

CREATE FUNCTION statesman.head_position() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT max(h.global_position) FROM statesman.history h
$$;
COMMENT ON FUNCTION statesman.head_position() IS
    'the highest readable feed position, NULL while the feed is empty';

-- The sequencer. Gives feed positions to committed records that have none, in insert order,
-- one sequencer at a time (the lock is held until this transaction ends). Lossless because a
-- position is given only after the record's transaction committed, and a run's positions
-- become visible, all at once, before the next run can start: a record can never appear
-- below a position that a reader has already seen. Per-address order holds because revision
-- r+1 is inserted (larger id) only after revision r's transaction ended, so r is visible to
-- every snapshot that sees r+1.
CREATE FUNCTION statesman.sequence_feed(max_records integer DEFAULT 10000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    AS $$
DECLARE
    sequenced bigint;
BEGIN
    PERFORM statesman._require(max_records, 'max_records');
    IF max_records < 1 THEN
        RAISE EXCEPTION 'max_records must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Under REPEATABLE READ or SERIALIZABLE the snapshot predates the lock, so rows sequenced
    -- by the previous run would look unsequenced and the UPDATE would fail.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'statesman.sequence_feed() must run at READ COMMITTED isolation'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF NOT pg_try_advisory_xact_lock(1398033743, 0) THEN
        RETURN statesman.head_position();   -- another session is sequencing right now
    END IF;

    WITH todo AS MATERIALIZED (
        SELECT h.ctid AS tid FROM statesman.history h
        WHERE h.global_position IS NULL
        ORDER BY h.id
        LIMIT max_records
    ), numbered AS MATERIALIZED (
        SELECT t.tid, pg_catalog.nextval('statesman.feed_position_seq'::regclass) AS pos FROM todo t
    )
    UPDATE statesman.history h SET global_position = n.pos
    FROM numbered n
    WHERE h.ctid = n.tid;
    GET DIAGNOSTICS sequenced = ROW_COUNT;

    IF sequenced > 0 THEN
        -- Readers may act on these positions as soon as this transaction ends: make the end
        -- durable, so that a crash cannot hand the same positions to other records.
        PERFORM set_config('synchronous_commit', 'on', true);
        -- A wake-up hint for whoever listens; sent by the sequencer, never by appends.
        PERFORM pg_notify('statesman', statesman.head_position()::text);
    END IF;
    RETURN statesman.head_position();
END
$$;
COMMENT ON FUNCTION statesman.sequence_feed(integer) IS
    'gives feed positions to up to max_records committed records; returns the head position';

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
    -- other reader.
    IF NOT statesman._in_transaction_block()
       AND current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM statesman.sequence_feed(GREATEST(read_feed.max_records, 10000));
    END IF;

    SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch
    FROM statesman.store s;

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
    FROM statesman.history h
    LEFT JOIN statesman.roots r ON r.root = h.root
    WHERE h.global_position > COALESCE(read_feed.after, 0)
      AND (v_root IS NULL OR h.root = v_root)
    ORDER BY h.global_position
    LIMIT read_feed.max_records;
END
$$;
COMMENT ON FUNCTION statesman.read_feed(bigint, integer, text) IS
    'feed records after a position, in position order, as statesman.state-change/v1 messages';

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
    IF at_position < 1 THEN
        RAISE EXCEPTION 'at_position must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF at_position > COALESCE(head, 0) THEN
        RAISE EXCEPTION 'at_position % is beyond the feed''s head (%)',
                        at_position, COALESCE(head::text, 'empty')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target IS NULL THEN
        -- Empty feed: starting "at the head" is starting at the beginning.
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
    'sets where an outbox starts (NULL: the current head); the only way to move a cursor back';

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
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    stored boolean;
BEGIN
    PERFORM statesman._check_applied_args(mark_applied.consumer, mark_applied.feed,
                                          mark_applied.epoch, mark_applied."position");
    -- The row lock of ON CONFLICT serialises concurrent callers for one (consumer, feed); the
    -- second re-checks the condition against what the first committed.
    INSERT INTO statesman.applied AS a (consumer, feed, epoch, position)
    VALUES (mark_applied.consumer, mark_applied.feed, mark_applied.epoch, mark_applied."position")
    ON CONFLICT ON CONSTRAINT applied_pkey DO UPDATE
        SET epoch = EXCLUDED.epoch, position = EXCLUDED.position, applied_at = pg_catalog.now()
        WHERE NOT (a.epoch = EXCLUDED.epoch AND a.position >= EXCLUDED.position)
    RETURNING true INTO stored;
    RETURN COALESCE(stored, false);
END
$$;
COMMENT ON FUNCTION statesman.mark_applied(text, text, uuid, bigint) IS
    'records (epoch, position) as applied in the caller''s transaction; false when already applied';

CREATE FUNCTION statesman.mark_applied(consumer text, message jsonb) RETURNS boolean
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
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
    LANGUAGE plpgsql STABLE SECURITY DEFINER
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
    LANGUAGE plpgsql STABLE SECURITY DEFINER
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

-------------------------------------------------------------------------------
-- Views
-------------------------------------------------------------------------------

-- Open transactions that appended and have not ended hold an address lock; their records
-- join the feed when they commit. The sequencer lock is held only while a run is under way;
-- a transaction that keeps it (sequence_feed called inside a long transaction) holds the
-- whole feed back, and is named here.
CREATE FUNCTION statesman._feed_status(
    OUT head_position bigint, OUT oldest_position bigint, OUT unsequenced_records bigint,
    OUT open_writers bigint, OUT oldest_writer_pid integer, OUT oldest_writer_age interval,
    OUT holding_back_pid integer, OUT holding_back_age interval)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH locks AS (
        SELECT l.pid, l.classid, a.xact_start
        FROM pg_catalog.pg_locks l
        LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
          AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d
                            WHERE d.datname = pg_catalog.current_database())
          AND l.classid::bigint IN (1398033742, 1398033743)
    ), writers AS (
        SELECT DISTINCT pid, xact_start FROM locks WHERE classid::bigint = 1398033742
    )
    SELECT (SELECT max(h.global_position) FROM statesman.history h),
           (SELECT min(h.global_position) FROM statesman.history h),
           (SELECT count(*) FROM statesman.history h WHERE h.global_position IS NULL),
           (SELECT count(*) FROM writers),
           w.pid, pg_catalog.now() - w.xact_start,
           s.pid, pg_catalog.now() - s.xact_start
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (SELECT * FROM writers ORDER BY xact_start LIMIT 1) w ON true
    LEFT JOIN LATERAL (SELECT * FROM locks WHERE classid::bigint = 1398033743
                       AND pid <> pg_catalog.pg_backend_pid() LIMIT 1) s ON true
$$;
COMMENT ON FUNCTION statesman._feed_status() IS 'the row of statesman.feed_status';

CREATE VIEW statesman.feed_status AS SELECT * FROM statesman._feed_status();
COMMENT ON VIEW statesman.feed_status IS
    'feed head, records waiting for a position, open appending transactions, and who holds the feed back';

-------------------------------------------------------------------------------
-- Grants
-------------------------------------------------------------------------------

GRANT USAGE ON SCHEMA statesman TO PUBLIC;
GRANT SELECT ON statesman.feed_status TO PUBLIC;

-- Functions that change the store's identity, retention, sequencing or cursors are for the
-- extension owner and whoever it grants them to.
REVOKE ALL ON FUNCTION statesman.set_store_name(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.reset_epoch() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.declare_root(text, text, text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.sequence_feed(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.advance_cursor(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.seed_cursor(text, bigint) FROM PUBLIC;

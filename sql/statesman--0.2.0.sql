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

-- Outboxes: where the dispatcher delivers the feed. sink_options may hold secrets, so this
-- table is readable only by the extension's owner (statesman.outbox_status shows no options).
CREATE TABLE statesman.outboxes (
    outbox_id                  text PRIMARY KEY,
    sink                       text NOT NULL,
    sink_options               jsonb NOT NULL,
    root                       text,
    batch_size                 integer NOT NULL,
    poll_interval              interval NOT NULL,
    require_lease              boolean NOT NULL,
    lease_ttl                  interval NOT NULL,
    lease_renew_interval       interval,      -- NULL: lease_ttl / 3
    min_retry_delay            interval NOT NULL,
    max_retry_delay            interval NOT NULL,
    skip_poison_after_attempts integer,       -- NULL: never skip
    fingerprint                text,
    payload_content_type       text,
    enabled                    boolean NOT NULL,
    created_at                 timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at                 timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- What the dispatcher of each outbox is doing: failures, totals, its process. Bounded: one row
-- per outbox, updated in place.
CREATE TABLE statesman.outbox_state (
    outbox_id          text PRIMARY KEY REFERENCES statesman.outboxes ON DELETE CASCADE,
    dispatcher_pid     integer,
    dispatcher_state   text,        -- 'leading' or 'standby', as the dispatcher last said
    attempts           integer NOT NULL DEFAULT 0,   -- consecutive failed attempts
    last_error         text,
    last_error_at      timestamptz,
    last_published_at  timestamptz,
    published_total    bigint NOT NULL DEFAULT 0,
    deduplicated_total bigint NOT NULL DEFAULT 0,
    skipped_total      bigint NOT NULL DEFAULT 0
);

-- The lease row of each outbox; the lease itself is a session advisory lock (see
-- statesman._acquire_lease). round_trips counts acquisitions and renewals.
CREATE TABLE statesman.leases (
    outbox_id    text PRIMARY KEY REFERENCES statesman.outboxes ON DELETE CASCADE,
    holder_pid   integer,
    acquired_at  timestamptz,
    renewed_at   timestamptz,
    round_trips  bigint NOT NULL DEFAULT 0
);

-- Messages skipped by skip_poison_after_attempts, parked in the same transaction as the cursor
-- move that skipped them. statesman.redeliver() sets requeued_at; the dispatcher then hands
-- them to the sink again and removes them once the sink accepted them.
CREATE TABLE statesman.dead_letters (
    outbox_id       text NOT NULL REFERENCES statesman.outboxes ON DELETE CASCADE,
    global_position bigint NOT NULL,
    message_id      text NOT NULL,
    message         jsonb NOT NULL,
    last_error      text,
    attempts        integer NOT NULL,
    parked_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    requeued_at     timestamptz,
    PRIMARY KEY (outbox_id, global_position)
);

-- Addresses whose retention could not prune everything it wanted, because an enabled outbox
-- had not delivered those records yet (or they had no feed position yet). The worker prunes
-- them again once the cursors have passed.
CREATE TABLE statesman.prune_pending (
    address     text PRIMARY KEY,
    noted_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- The default target of the `table` sink.
CREATE TABLE statesman.delivered (
    message_id      text PRIMARY KEY,
    global_position bigint NOT NULL,
    message         jsonb NOT NULL,
    published_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- pg_dump keeps the contents of extension tables only when told to.
SELECT pg_catalog.pg_extension_config_dump('statesman.store', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.roots', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.history', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.feed_position_seq', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.cursors', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.applied', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.outboxes', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.outbox_state', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.leases', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.prune_pending', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.delivered', '');

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
-- Outboxes
-------------------------------------------------------------------------------

-- The sinks this build knows, in the order error messages list them.
CREATE FUNCTION statesman._known_sinks() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT ARRAY['table']::text[] $$;
COMMENT ON FUNCTION statesman._known_sinks() IS 'the sink names create_outbox accepts';

-- The `table` sink's target as a quoted, schema-qualified name, from its options.
CREATE FUNCTION statesman._sink_table(sink_options jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    parts text[];
BEGIN
    IF jsonb_typeof(sink_options->'table') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'sink option "table" must be a string naming schema.table'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        parts := parse_ident(sink_options->>'table');
    EXCEPTION WHEN invalid_parameter_value THEN
        parts := NULL;
    END;
    IF parts IS NULL OR cardinality(parts) <> 2 OR parts[1] = '' OR parts[2] = '' THEN
        RAISE EXCEPTION 'sink option "table" must be a schema-qualified table name, e.g. "statesman.delivered"'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Got %s.', sink_options->'table');
    END IF;
    RETURN format('%I.%I', parts[1], parts[2]);
END
$$;
COMMENT ON FUNCTION statesman._sink_table(jsonb) IS
    'the table sink''s target from its options, quoted and schema-qualified';

-- Checks a sink name and its options; returns the options as stored (defaults filled in).
-- For the `table` sink the target table is created when absent, or checked when present.
CREATE FUNCTION statesman._check_sink(sink text, sink_options jsonb) RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    unknown text;
    target text;
    rel oid;
BEGIN
    PERFORM statesman._require(sink, 'sink');
    PERFORM statesman._require(sink_options, 'sink_options');
    IF NOT sink = ANY (statesman._known_sinks()) THEN
        RAISE EXCEPTION 'unknown sink "%" (known sinks: %)', sink, array_to_string(statesman._known_sinks(), ', ')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(sink_options) <> 'object' THEN
        RAISE EXCEPTION 'sink_options must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- sink = 'table'
    SELECT string_agg(format('"%s"', k), ', ') INTO unknown
    FROM jsonb_object_keys(sink_options) k WHERE k <> 'table';
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'unknown option % for sink "table"', unknown
            USING ERRCODE = 'invalid_parameter_value', HINT = 'The table sink takes one option: "table".';
    END IF;
    IF NOT sink_options ? 'table' THEN
        sink_options := jsonb_build_object('table', 'statesman.delivered');
    END IF;
    target := statesman._sink_table(sink_options);
    rel := to_regclass(target);
    IF rel IS NULL THEN
        EXECUTE format('CREATE TABLE %s (
                            message_id      text PRIMARY KEY,
                            global_position bigint NOT NULL,
                            message         jsonb NOT NULL,
                            published_at    timestamptz NOT NULL DEFAULT pg_catalog.now())', target);
    ELSIF NOT EXISTS (
        SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid = rel AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL
          AND a.attname = 'message_id')
       OR (SELECT count(*) FROM pg_attribute a
           WHERE a.attrelid = rel AND NOT a.attisdropped
             AND a.attname IN ('message_id', 'global_position', 'message')) <> 3 THEN
        RAISE EXCEPTION 'table % cannot take deliveries', target
            USING ERRCODE = 'invalid_table_definition',
                  HINT = 'It needs columns message_id (unique), global_position and message.';
    END IF;
    RETURN sink_options;
END
$$;
COMMENT ON FUNCTION statesman._check_sink(text, jsonb) IS
    'validates a sink and its options; prepares the table sink''s target';

-- Checks every setting of an outbox row (create_outbox and alter_outbox); raises 22023/22004.
CREATE FUNCTION statesman._check_outbox(o statesman.outboxes) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    renew interval := COALESCE(o.lease_renew_interval, o.lease_ttl / 3);
BEGIN
    PERFORM statesman._require(o.batch_size, 'batch_size');
    PERFORM statesman._require(o.poll_interval, 'poll_interval');
    PERFORM statesman._require(o.require_lease, 'require_lease');
    PERFORM statesman._require(o.lease_ttl, 'lease_ttl');
    PERFORM statesman._require(o.min_retry_delay, 'min_retry_delay');
    PERFORM statesman._require(o.max_retry_delay, 'max_retry_delay');
    PERFORM statesman._require(o.enabled, 'enabled');
    IF o.root IS NOT NULL THEN
        PERFORM statesman._check_name(o.root, 'root');
    END IF;
    IF o.batch_size < 1 OR o.batch_size > 100000 THEN
        RAISE EXCEPTION 'batch_size must be between 1 and 100000 (got %)', o.batch_size
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.poll_interval < interval '10 milliseconds' OR o.poll_interval > interval '1 hour' THEN
        RAISE EXCEPTION 'poll_interval must be between 10 milliseconds and 1 hour (got %)', o.poll_interval
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.lease_ttl < interval '1 second' OR o.lease_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'lease_ttl must be between 1 second and 1 day (got %)', o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.lease_renew_interval IS NOT NULL AND o.lease_renew_interval <= interval '0' THEN
        RAISE EXCEPTION 'lease_renew_interval must be positive (got %)', o.lease_renew_interval
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF renew >= o.lease_ttl THEN
        RAISE EXCEPTION 'lease_renew_interval (%) must be shorter than lease_ttl (%)', renew, o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.min_retry_delay < interval '0' THEN
        RAISE EXCEPTION 'min_retry_delay must not be negative (got %)', o.min_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.min_retry_delay > o.max_retry_delay THEN
        RAISE EXCEPTION 'min_retry_delay (%) must not exceed max_retry_delay (%)', o.min_retry_delay, o.max_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.max_retry_delay >= o.lease_ttl THEN
        RAISE EXCEPTION 'max_retry_delay (%) must be shorter than lease_ttl (%)', o.max_retry_delay, o.lease_ttl
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A leader that waits longer than its lease would lose it while backing off.';
    END IF;
    IF o.skip_poison_after_attempts < 1 THEN
        RAISE EXCEPTION 'skip_poison_after_attempts must be at least 1 (or NULL to never skip)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(o.fingerprint) > 1024 OR octet_length(o.payload_content_type) > 1024 THEN
        RAISE EXCEPTION 'fingerprint and payload_content_type must be at most 1024 bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_outbox(statesman.outboxes) IS 'validates an outbox''s settings';

-- Raises 42704 when the outbox does not exist; returns its row, locked against concurrent change.
CREATE FUNCTION statesman._outbox_for_update(outbox_id text) RETURNS statesman.outboxes
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
BEGIN
    PERFORM statesman._check_id(outbox_id, 'outbox_id');
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _outbox_for_update.outbox_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outbox "%" does not exist', outbox_id USING ERRCODE = 'undefined_object';
    END IF;
    RETURN o;
END
$$;
COMMENT ON FUNCTION statesman._outbox_for_update(text) IS 'an outbox''s row, locked; 42704 when absent';

CREATE FUNCTION statesman.create_outbox(
    outbox_id text, sink text DEFAULT 'table', sink_options jsonb DEFAULT '{}', root text DEFAULT NULL,
    batch_size integer DEFAULT 1000, poll_interval interval DEFAULT '1 second',
    require_lease boolean DEFAULT true, lease_ttl interval DEFAULT '30 seconds',
    lease_renew_interval interval DEFAULT NULL, min_retry_delay interval DEFAULT '200 milliseconds',
    max_retry_delay interval DEFAULT '15 seconds', skip_poison_after_attempts integer DEFAULT NULL,
    fingerprint text DEFAULT NULL, payload_content_type text DEFAULT NULL, enabled boolean DEFAULT true)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
BEGIN
    PERFORM statesman._check_id(create_outbox.outbox_id, 'outbox_id');
    o := ROW(create_outbox.outbox_id, create_outbox.sink, NULL, lower(create_outbox.root),
             create_outbox.batch_size, create_outbox.poll_interval, create_outbox.require_lease,
             create_outbox.lease_ttl, create_outbox.lease_renew_interval, create_outbox.min_retry_delay,
             create_outbox.max_retry_delay, create_outbox.skip_poison_after_attempts,
             NULLIF(create_outbox.fingerprint, ''), NULLIF(create_outbox.payload_content_type, ''),
             create_outbox.enabled,
             now(), now())::statesman.outboxes;
    PERFORM statesman._check_outbox(o);
    IF EXISTS (SELECT FROM statesman.outboxes x WHERE x.outbox_id = create_outbox.outbox_id) THEN
        RAISE EXCEPTION 'outbox "%" already exists', create_outbox.outbox_id
            USING ERRCODE = 'unique_violation', HINT = 'Use statesman.alter_outbox() to change it.';
    END IF;
    o.sink_options := statesman._check_sink(create_outbox.sink, create_outbox.sink_options);
    BEGIN
        INSERT INTO statesman.outboxes SELECT o.*;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'outbox "%" already exists', create_outbox.outbox_id
            USING ERRCODE = 'unique_violation', HINT = 'Use statesman.alter_outbox() to change it.';
    END;
    INSERT INTO statesman.outbox_state (outbox_id) VALUES (o.outbox_id);
    INSERT INTO statesman.leases (outbox_id) VALUES (o.outbox_id);
END
$$;
COMMENT ON FUNCTION statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean, interval,
    interval, interval, interval, integer, text, text, boolean) IS
    'registers an outbox: a sink that the worker delivers every feed record to';

-- NULL leaves a setting as it is. To clear an optional setting: root, fingerprint or
-- payload_content_type => '' ; lease_renew_interval => '0' (back to lease_ttl / 3);
-- skip_poison_after_attempts => 0 (never skip).
CREATE FUNCTION statesman.alter_outbox(
    outbox_id text, sink text DEFAULT NULL, sink_options jsonb DEFAULT NULL, root text DEFAULT NULL,
    batch_size integer DEFAULT NULL, poll_interval interval DEFAULT NULL,
    require_lease boolean DEFAULT NULL, lease_ttl interval DEFAULT NULL,
    lease_renew_interval interval DEFAULT NULL, min_retry_delay interval DEFAULT NULL,
    max_retry_delay interval DEFAULT NULL, skip_poison_after_attempts integer DEFAULT NULL,
    fingerprint text DEFAULT NULL, payload_content_type text DEFAULT NULL, enabled boolean DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes := statesman._outbox_for_update(alter_outbox.outbox_id);
BEGIN
    o.root := CASE WHEN alter_outbox.root = '' THEN NULL ELSE COALESCE(lower(alter_outbox.root), o.root) END;
    o.batch_size := COALESCE(alter_outbox.batch_size, o.batch_size);
    o.poll_interval := COALESCE(alter_outbox.poll_interval, o.poll_interval);
    o.require_lease := COALESCE(alter_outbox.require_lease, o.require_lease);
    o.lease_ttl := COALESCE(alter_outbox.lease_ttl, o.lease_ttl);
    o.lease_renew_interval := CASE WHEN alter_outbox.lease_renew_interval = interval '0' THEN NULL
                                   ELSE COALESCE(alter_outbox.lease_renew_interval, o.lease_renew_interval) END;
    o.min_retry_delay := COALESCE(alter_outbox.min_retry_delay, o.min_retry_delay);
    o.max_retry_delay := COALESCE(alter_outbox.max_retry_delay, o.max_retry_delay);
    o.skip_poison_after_attempts := CASE WHEN alter_outbox.skip_poison_after_attempts = 0 THEN NULL
        ELSE COALESCE(alter_outbox.skip_poison_after_attempts, o.skip_poison_after_attempts) END;
    o.fingerprint := CASE WHEN alter_outbox.fingerprint = '' THEN NULL
                          ELSE COALESCE(alter_outbox.fingerprint, o.fingerprint) END;
    o.payload_content_type := CASE WHEN alter_outbox.payload_content_type = '' THEN NULL
                                   ELSE COALESCE(alter_outbox.payload_content_type, o.payload_content_type) END;
    o.enabled := COALESCE(alter_outbox.enabled, o.enabled);
    PERFORM statesman._check_outbox(o);
    IF alter_outbox.sink IS NOT NULL OR alter_outbox.sink_options IS NOT NULL THEN
        -- New options, or the current ones when only the sink is named again; a different
        -- sink without options starts from its defaults.
        o.sink_options := statesman._check_sink(COALESCE(alter_outbox.sink, o.sink),
            COALESCE(alter_outbox.sink_options,
                     CASE WHEN COALESCE(alter_outbox.sink, o.sink) = o.sink THEN o.sink_options
                          ELSE '{}'::jsonb END));
        o.sink := COALESCE(alter_outbox.sink, o.sink);
    END IF;
    UPDATE statesman.outboxes x
    SET sink = o.sink, sink_options = o.sink_options, root = o.root, batch_size = o.batch_size,
        poll_interval = o.poll_interval, require_lease = o.require_lease, lease_ttl = o.lease_ttl,
        lease_renew_interval = o.lease_renew_interval, min_retry_delay = o.min_retry_delay,
        max_retry_delay = o.max_retry_delay, skip_poison_after_attempts = o.skip_poison_after_attempts,
        fingerprint = o.fingerprint, payload_content_type = o.payload_content_type,
        enabled = o.enabled, updated_at = now()
    WHERE x.outbox_id = o.outbox_id;
END
$$;
COMMENT ON FUNCTION statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean, interval,
    interval, interval, interval, integer, text, text, boolean) IS
    'changes an outbox''s settings (NULL: unchanged); a running dispatcher picks them up within one poll interval';

CREATE FUNCTION statesman.drop_outbox(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_id(drop_outbox.outbox_id, 'outbox_id');
    -- Waits for a page under way to commit (see statesman._page_outbox). Taken before
    -- the row lock, in the order pages take them: a page's insert into dead_letters checks this
    -- row's key.
    PERFORM pg_advisory_xact_lock(1398033745, statesman._lease_key(drop_outbox.outbox_id));
    PERFORM statesman._outbox_for_update(drop_outbox.outbox_id);
    -- Its state, lease row and dead letters go with it (ON DELETE CASCADE); so does its cursor.
    DELETE FROM statesman.outboxes x WHERE x.outbox_id = drop_outbox.outbox_id;
    DELETE FROM statesman.cursors c WHERE c.outbox_id = drop_outbox.outbox_id;
END
$$;
COMMENT ON FUNCTION statesman.drop_outbox(text) IS
    'removes an outbox with its cursor, state and dead letters; the sink''s table stays';

CREATE FUNCTION statesman.pause_outbox(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._outbox_for_update(pause_outbox.outbox_id);
    UPDATE statesman.outboxes x SET enabled = false, updated_at = now()
    WHERE x.outbox_id = pause_outbox.outbox_id AND x.enabled;
END
$$;
COMMENT ON FUNCTION statesman.pause_outbox(text) IS
    'stops delivery after the current page; the cursor stays (a paused outbox does not hold retention back)';

CREATE FUNCTION statesman.resume_outbox(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._outbox_for_update(resume_outbox.outbox_id);
    UPDATE statesman.outboxes x SET enabled = true, updated_at = now()
    WHERE x.outbox_id = resume_outbox.outbox_id AND NOT x.enabled;
    UPDATE statesman.outbox_state s SET attempts = 0 WHERE s.outbox_id = resume_outbox.outbox_id;
END
$$;
COMMENT ON FUNCTION statesman.resume_outbox(text) IS 'resumes delivery from the outbox''s cursor';

CREATE FUNCTION statesman.redeliver(outbox_id text, message_id text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM statesman._outbox_for_update(redeliver.outbox_id);
    UPDATE statesman.dead_letters d SET requeued_at = now()
    WHERE d.outbox_id = redeliver.outbox_id
      AND (redeliver.message_id IS NULL OR d.message_id = redeliver.message_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 AND redeliver.message_id IS NOT NULL THEN
        RAISE EXCEPTION 'outbox "%" has no parked message "%"', redeliver.outbox_id, redeliver.message_id
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION statesman.redeliver(text, text) IS
    'queues parked messages (all, or one message id) to be handed to the sink again; returns how many';

-------------------------------------------------------------------------------
-- Delivery (called by the dispatcher and by dispatch_once; not for applications)
-------------------------------------------------------------------------------

-- The advisory lock key of an outbox's lease: (1398033744, hashtext(outbox_id)).
CREATE FUNCTION statesman._lease_key(outbox_id text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT pg_catalog.hashtext(outbox_id) $$;
COMMENT ON FUNCTION statesman._lease_key(text) IS 'second half of an outbox''s lease lock key';

-- A leader that is alive but stuck (a sink call that hangs) stops renewing its lease. A
-- dispatcher renews its lease row; a dispatch_once session holds the lease only for its
-- transaction (its row update is not visible to others), so it is judged by its transaction's
-- age. A holder past lease_ttl is terminated, which releases the lock, so the outbox is never
-- blocked for much longer than lease_ttl + poll_interval. True when it terminated one.
CREATE FUNCTION statesman._expire_stuck_lease(outbox_id text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    l statesman.leases;
    v_pid integer;
    v_since timestamptz;
BEGIN
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _expire_stuck_lease.outbox_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT * INTO l FROM statesman.leases x WHERE x.outbox_id = o.outbox_id;
    -- Who holds the lease lock, and since when it last showed life.
    SELECT k.pid, CASE WHEN k.pid = l.holder_pid AND a.backend_type = 'statesman dispatcher'
                       THEN l.renewed_at ELSE a.xact_start END
    INTO v_pid, v_since
    FROM pg_locks k JOIN pg_stat_activity a ON a.pid = k.pid
    WHERE k.locktype = 'advisory' AND k.granted
      AND k.classid::bigint = 1398033744
      AND k.objid = statesman._lease_key(o.outbox_id)::oid AND k.objsubid = 2
      AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
    LIMIT 1;
    IF v_pid IS NULL OR v_pid = pg_backend_pid() OR v_since IS NULL
       OR v_since >= clock_timestamp() - o.lease_ttl THEN
        RETURN false;
    END IF;
    RAISE WARNING 'statesman: outbox "%": the lease holder (pid %) has not renewed for %; terminating it',
                  o.outbox_id, v_pid, clock_timestamp() - v_since;
    RETURN pg_terminate_backend(v_pid);
END
$$;
COMMENT ON FUNCTION statesman._expire_stuck_lease(text) IS
    'terminates a lease holder that has not renewed within lease_ttl';

-- Tries to take the lease: a session advisory lock, kept across transactions until released
-- or the session ends. A holder whose lease row was not renewed within lease_ttl is stuck: it
-- is terminated (its lock goes with its session) and the next attempt can take over.
CREATE FUNCTION statesman._acquire_lease(outbox_id text, transactional boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    got boolean;
BEGIN
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _acquire_lease.outbox_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- transactional: dispatch_once's lease, released when the caller's transaction ends.
    IF transactional THEN
        got := pg_try_advisory_xact_lock(1398033744, statesman._lease_key(o.outbox_id));
    ELSE
        got := pg_try_advisory_lock(1398033744, statesman._lease_key(o.outbox_id));
    END IF;
    IF got THEN
        UPDATE statesman.leases x
        SET holder_pid = pg_backend_pid(), acquired_at = clock_timestamp(),
            renewed_at = clock_timestamp(), round_trips = x.round_trips + 1
        WHERE x.outbox_id = o.outbox_id;
        RETURN true;
    END IF;
    PERFORM statesman._expire_stuck_lease(o.outbox_id);
    RETURN false;
END
$$;
COMMENT ON FUNCTION statesman._acquire_lease(text, boolean) IS 'tries to take an outbox''s lease';

-- Renews a held lease; false when this session does not hold it.
CREATE FUNCTION statesman._renew_lease(outbox_id text) RETURNS boolean
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE statesman.leases x SET renewed_at = clock_timestamp(), round_trips = x.round_trips + 1
    WHERE x.outbox_id = _renew_lease.outbox_id AND x.holder_pid = pg_backend_pid()
    RETURNING true
$$;
COMMENT ON FUNCTION statesman._renew_lease(text) IS 'renews the lease this session holds';

CREATE FUNCTION statesman._release_lease(outbox_id text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE statesman.leases x SET holder_pid = NULL
    WHERE x.outbox_id = _release_lease.outbox_id AND x.holder_pid = pg_backend_pid();
    PERFORM pg_advisory_unlock(1398033744, statesman._lease_key(_release_lease.outbox_id));
END
$$;
COMMENT ON FUNCTION statesman._release_lease(text) IS 'releases the lease this session holds';

-- The dispatcher's own report of what it is doing ('leading', 'standby' or NULL when it stops).
CREATE FUNCTION statesman._note_dispatcher(outbox_id text, state text) RETURNS void
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE statesman.outbox_state s
    SET dispatcher_pid = CASE WHEN _note_dispatcher.state IS NULL THEN NULL ELSE pg_backend_pid() END,
        dispatcher_state = _note_dispatcher.state
    WHERE s.outbox_id = _note_dispatcher.outbox_id
      AND (s.dispatcher_pid IS DISTINCT FROM pg_backend_pid() OR s.dispatcher_state IS DISTINCT FROM _note_dispatcher.state)
      AND (_note_dispatcher.state IS NOT NULL OR s.dispatcher_pid = pg_backend_pid())
$$;
COMMENT ON FUNCTION statesman._note_dispatcher(text, text) IS 'records the dispatcher''s process and role';

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
    PERFORM pg_advisory_xact_lock_shared(1398033745, statesman._lease_key(_page_outbox.outbox_id));
    SELECT * INTO o FROM statesman.outboxes x WHERE x.outbox_id = _page_outbox.outbox_id;
    RETURN o;
END
$$;
COMMENT ON FUNCTION statesman._page_outbox(text) IS 'an outbox''s row, under the page lock';

-- Moves an outbox's cursor forward to a position delivered (or parked) in this transaction.
CREATE FUNCTION statesman._move_cursor(outbox_id text, "position" bigint) RETURNS void
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    INSERT INTO statesman.cursors AS c (outbox_id, position) VALUES (_move_cursor.outbox_id, _move_cursor."position")
    ON CONFLICT ON CONSTRAINT cursors_pkey DO UPDATE
        SET position = EXCLUDED.position, updated_at = now()
        WHERE c.position < EXCLUDED.position
$$;
COMMENT ON FUNCTION statesman._move_cursor(text, bigint) IS 'moves a cursor forward within a page''s transaction';

-- Delivers the next page of the feed to a `table` sink: the inserts, the cursor advance and the
-- totals commit together, so delivery into the table is exactly-once. The sink's failure
-- (a constraint, a trigger, a missing table) is caught, recorded and reported as 'failed'.
CREATE FUNCTION statesman._deliver_table_page(outbox_id text) RETURNS statesman._page_result
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    r statesman._page_result;
    v_after bigint;
    v_matching bigint;
    v_target text;
    v_store text;
    v_epoch uuid;
    v_insert text;
BEGIN
    o := statesman._page_outbox(_deliver_table_page.outbox_id);
    IF o.outbox_id IS NULL THEN
        r.status := 'gone'; RETURN r;
    ELSIF NOT o.enabled THEN
        r.status := 'paused'; RETURN r;
    END IF;
    v_after := COALESCE((SELECT c.position FROM statesman.cursors c WHERE c.outbox_id = o.outbox_id), 0);

    SELECT count(*), max(p.global_position), count(*) FILTER (WHERE o.root IS NULL OR p.root = o.root)
    INTO r.read, r.last_position, v_matching
    FROM (SELECT h.global_position, h.root FROM statesman.history h
          WHERE h.global_position > v_after ORDER BY h.global_position LIMIT o.batch_size) p;
    IF r.read = 0 THEN
        r.status := 'empty'; r.last_position := NULLIF(v_after, 0); RETURN r;
    END IF;

    r.published := 0;
    IF v_matching > 0 THEN
        SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch FROM statesman.store s;
        BEGIN
            v_target := statesman._sink_table(o.sink_options);
            v_insert := format(
                'INSERT INTO %s AS t (message_id, global_position, message) '
                'SELECT $4 || ''/'' || h.address || ''#'' || h.revision, h.global_position, '
                '  statesman._message($4, $5, h.address, h.root, h.path, h.partition, h.revision, '
                '    h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version, '
                '    h.source, COALESCE(h.fingerprint, $6, r.fingerprint), COALESCE(h.content_type, $7, r.content_type), '
                '    h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error) '
                'FROM statesman.history h LEFT JOIN statesman.roots r ON r.root OPERATOR(pg_catalog.=) h.root '
                'WHERE h.global_position OPERATOR(pg_catalog.>) $1 AND h.global_position OPERATOR(pg_catalog.<=) $2 '
                '  AND ($3::text IS NULL OR h.root OPERATOR(pg_catalog.=) $3) '
                'ORDER BY h.global_position', v_target);
            BEGIN
                -- The common case: nothing of this page is in the table yet.
                EXECUTE v_insert USING v_after, r.last_position, o.root, v_store, v_epoch, o.fingerprint, o.payload_content_type;
            EXCEPTION WHEN unique_violation THEN
                -- Re-delivery (a cursor seeded back, a restored table): keep what is there.
                EXECUTE v_insert || ' ON CONFLICT (message_id) DO NOTHING'
                    USING v_after, r.last_position, o.root, v_store, v_epoch, o.fingerprint, o.payload_content_type;
            END;
            GET DIAGNOSTICS r.published = ROW_COUNT;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS r.error = MESSAGE_TEXT;
            r.error := format('table sink %s: %s', COALESCE(v_target, o.sink_options->>'table'), r.error);
            r.status := 'failed';
            r.attempts := statesman._note_failure(o.outbox_id, r.error);
            r.last_position := NULLIF(v_after, 0);
            RETURN r;
        END;
    END IF;
    r.deduplicated := v_matching - r.published;

    PERFORM statesman._move_cursor(o.outbox_id, r.last_position);
    UPDATE statesman.outbox_state s
    SET attempts = 0, published_total = s.published_total + r.published,
        deduplicated_total = s.deduplicated_total + r.deduplicated,
        last_published_at = CASE WHEN r.published > 0 THEN clock_timestamp() ELSE s.last_published_at END
    WHERE s.outbox_id = o.outbox_id;
    r.status := 'delivered';
    r.attempts := 0;
    r.full_page := r.read >= o.batch_size;
    RETURN r;
END
$$;
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
    v_store text;
    v_epoch uuid;
    parked bigint;
BEGIN
    o := statesman._page_outbox(_park_page.outbox_id);
    IF o.outbox_id IS NULL OR NOT o.enabled THEN
        RETURN 0;
    END IF;
    v_after := COALESCE((SELECT c.position FROM statesman.cursors c WHERE c.outbox_id = o.outbox_id), 0);
    -- Exactly the page that failed: records sequenced since then were never tried.
    SELECT max(p.global_position) INTO v_last
    FROM (SELECT h.global_position FROM statesman.history h
          WHERE h.global_position > v_after ORDER BY h.global_position
          LIMIT LEAST(o.batch_size, _park_page.page_records)) p;
    IF v_last IS NULL THEN
        RETURN 0;
    END IF;
    SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch FROM statesman.store s;
    INSERT INTO statesman.dead_letters AS d (outbox_id, global_position, message_id, message, last_error, attempts)
    SELECT o.outbox_id, h.global_position, v_store || '/' || h.address || '#' || h.revision,
           statesman._message(v_store, v_epoch, h.address, h.root, h.path, h.partition, h.revision,
               h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
               h.source, COALESCE(h.fingerprint, o.fingerprint, r.fingerprint),
               COALESCE(h.content_type, o.payload_content_type, r.content_type),
               h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error),
           left(_park_page.error, 2000), _park_page.attempts
    FROM statesman.history h LEFT JOIN statesman.roots r ON r.root = h.root
    WHERE h.global_position > v_after AND h.global_position <= v_last
      AND (o.root IS NULL OR h.root = o.root)
    ON CONFLICT ON CONSTRAINT dead_letters_pkey DO UPDATE
        SET last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts, parked_at = EXCLUDED.parked_at;
    GET DIAGNOSTICS parked = ROW_COUNT;
    PERFORM statesman._move_cursor(o.outbox_id, v_last);
    UPDATE statesman.outbox_state s SET attempts = 0, skipped_total = s.skipped_total + parked
    WHERE s.outbox_id = o.outbox_id;
    RETURN parked;
END
$$;
COMMENT ON FUNCTION statesman._park_page(text, text, integer, bigint) IS
    'skips the next page: parks its messages in dead_letters and moves the cursor past it';

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
        EXECUTE format(
            'INSERT INTO %s AS t (message_id, global_position, message) '
            'SELECT d.message_id, d.global_position, d.message FROM statesman.dead_letters d '
            'WHERE d.outbox_id OPERATOR(pg_catalog.=) $1 AND d.global_position OPERATOR(pg_catalog.=) ANY ($2) '
            'ORDER BY d.global_position ON CONFLICT (message_id) DO NOTHING', v_target)
            USING o.outbox_id, v_positions;
        GET DIAGNOSTICS r.published = ROW_COUNT;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS r.error = MESSAGE_TEXT;
        r.error := format('table sink %s: %s', COALESCE(v_target, o.sink_options->>'table'), r.error);
        UPDATE statesman.dead_letters d
        SET requeued_at = NULL, attempts = d.attempts + 1, last_error = left(r.error, 2000)
        WHERE d.outbox_id = o.outbox_id AND d.global_position = ANY (v_positions);
        r.status := 'failed';
        RETURN r;
    END;
    DELETE FROM statesman.dead_letters d WHERE d.outbox_id = o.outbox_id AND d.global_position = ANY (v_positions);
    r.deduplicated := r.read - r.published;
    UPDATE statesman.outbox_state s
    SET published_total = s.published_total + r.published,
        deduplicated_total = s.deduplicated_total + r.deduplicated,
        last_published_at = CASE WHEN r.published > 0 THEN clock_timestamp() ELSE s.last_published_at END
    WHERE s.outbox_id = o.outbox_id;
    r.status := 'delivered';
    RETURN r;
END
$$;
COMMENT ON FUNCTION statesman._redeliver_table_page(text) IS
    'hands requeued dead letters to a table sink and removes the delivered ones';

-- Runs one dispatch cycle in the calling session: see the C entry point.
CREATE FUNCTION statesman.dispatch_once(outbox_id text)
    RETURNS TABLE (published bigint, skipped bigint, deduplicated bigint, cursor_position bigint)
    LANGUAGE c VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'statesman_dispatch_once';
COMMENT ON FUNCTION statesman.dispatch_once(text) IS
    'runs one delivery cycle of an outbox in this session (zeros when another holder has the lease)';

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
-- feed together); when over-limit records had to stay, the address is noted in prune_pending
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
        SELECT x.revision, x.global_position FROM (
            SELECT k.revision, k.global_position, row_number() OVER w AS rn,
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


-- One row per outbox. Sink options are never shown: they may hold secrets.
CREATE VIEW statesman.outbox_status AS
SELECT o.outbox_id,
       o.sink,
       o.enabled,
       CASE WHEN NOT o.enabled THEN 'paused'
            WHEN st.attempts > 0 THEN 'backing_off'
            WHEN holder.pid IS NOT NULL THEN 'leading'
            WHEN st.dispatcher_state = 'standby' AND disp.pid IS NOT NULL THEN 'standby'
            ELSE 'idle' END AS state,
       c.position AS cursor_position,
       head.position AS head_position,
       GREATEST(COALESCE(head.position, 0) - COALESCE(c.position, 0), 0) AS lag_records,
       COALESCE(EXTRACT(epoch FROM pg_catalog.now() - nxt.occurred_at), 0)::double precision AS lag_seconds,
       holder.pid AS leader_pid,
       CASE WHEN holder.pid IS NOT NULL THEN l.renewed_at END AS lease_renewed_at,
       st.attempts,
       st.last_error,
       st.last_error_at,
       st.published_total,
       st.deduplicated_total,
       st.skipped_total,
       (SELECT count(*) FROM statesman.dead_letters d WHERE d.outbox_id = o.outbox_id) AS parked,
       l.round_trips AS lease_round_trips,
       st.last_published_at
FROM statesman.outboxes o
LEFT JOIN statesman.outbox_state st ON st.outbox_id = o.outbox_id
LEFT JOIN statesman.leases l ON l.outbox_id = o.outbox_id
LEFT JOIN statesman.cursors c ON c.outbox_id = o.outbox_id
CROSS JOIN LATERAL (SELECT max(h.global_position) AS position FROM statesman.history h) head
LEFT JOIN LATERAL (
    SELECT h.occurred_at FROM statesman.history h
    WHERE h.global_position > COALESCE(c.position, 0) ORDER BY h.global_position LIMIT 1) nxt ON true
-- The leader: the session that holds the lease lock (an unleased outbox: its dispatcher).
LEFT JOIN LATERAL (
    SELECT k.pid FROM pg_catalog.pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.classid::bigint = 1398033744
      AND k.objid = statesman._lease_key(o.outbox_id)::oid AND k.objsubid = 2
      AND k.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
    UNION ALL
    SELECT a.pid FROM pg_catalog.pg_stat_activity a
    WHERE NOT o.require_lease AND a.pid = st.dispatcher_pid AND st.dispatcher_state = 'leading'
    LIMIT 1) holder ON true
LEFT JOIN LATERAL (
    SELECT a.pid FROM pg_catalog.pg_stat_activity a WHERE a.pid = st.dispatcher_pid) disp ON true;
COMMENT ON VIEW statesman.outbox_status IS
    'each outbox: state, cursor, lag, lease, failures and totals (sink options are never shown)';

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
REVOKE ALL ON FUNCTION statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.drop_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.pause_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.resume_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.redeliver(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.dispatch_once(text) FROM PUBLIC;

-- The delivery internals act on outboxes, cursors and leases: never for PUBLIC.
REVOKE ALL ON FUNCTION statesman._check_sink(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._outbox_for_update(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._acquire_lease(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._renew_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._expire_stuck_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._release_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_dispatcher(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_failure(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._page_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._move_cursor(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._deliver_table_page(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._park_page(text, text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._redeliver_table_page(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune(text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune_deferred(integer) FROM PUBLIC;

-- Monitoring: the outbox view shows no secrets, but its errors may quote sink data.
GRANT SELECT ON statesman.outbox_status TO pg_monitor;

-- statesman 0.2.0 → 0.3.0: the redis and postgres sinks behind one sink interface; a restored
-- store keeps its row and insert order; read_feed in read-only transactions; stricter table
-- sink targets.
-- The sink names and the options of sinks outside this database come from the library
-- (src/sinks/); pages for those sinks are read, published and finished in three steps.
\echo Use "ALTER EXTENSION statesman UPDATE TO '0.3.0'" to load this file. \quit

SELECT pg_catalog.pg_extension_config_dump('statesman.history_id_seq', '');

CREATE FUNCTION statesman._store_restore() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE statesman.store s
    SET store_name = NEW.store_name, epoch = NEW.epoch, created_at = NEW.created_at
    WHERE s.singleton;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION statesman._store_restore() IS
    'a restored store row replaces the one CREATE EXTENSION made';

CREATE TRIGGER store_restore BEFORE INSERT ON statesman.store
    FOR EACH ROW EXECUTE FUNCTION statesman._store_restore();

-- sequence_feed: its plan no longer depends on statistics.
CREATE OR REPLACE FUNCTION statesman.sequence_feed(max_records integer DEFAULT 10000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET plan_cache_mode = force_generic_plan
    AS $$
DECLARE
    sequenced bigint;
    head bigint;
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

    head := statesman.head_position();
    IF sequenced > 0 THEN
        -- Readers may act on these positions as soon as this transaction ends: make the end
        -- durable, so that a crash cannot hand the same positions to other records.
        PERFORM set_config('synchronous_commit', 'on', true);
        -- A wake-up hint for whoever listens; sent by the sequencer, never by appends.
        PERFORM pg_notify('statesman', head::text);
    END IF;
    RETURN head;
END
$$;
CREATE OR REPLACE FUNCTION statesman.read_feed(
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
        FROM statesman.history h
        LEFT JOIN statesman.roots r ON r.root = h.root
        WHERE h.global_position > v_after
          AND (v_upto IS NULL OR h.global_position <= v_upto)
          AND (v_root IS NULL OR h.root = v_root)
        ORDER BY h.global_position
        LIMIT v_left;
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

CREATE OR REPLACE FUNCTION statesman._sink_table(sink_options jsonb) RETURNS text
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
    -- PostgreSQL would truncate a longer name: the option would not name the table it delivers to.
    IF octet_length(parts[1]) > 63 OR octet_length(parts[2]) > 63 THEN
        RAISE EXCEPTION 'sink option "table": schema and table names must be at most 63 bytes each'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A temporary table lives in one session: no dispatcher could ever see it.
    IF parts[1] ~ '^pg_(temp|toast)' THEN
        RAISE EXCEPTION 'sink option "table" must not name a temporary or TOAST schema (got "%")', parts[1]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN format('%I.%I', parts[1], parts[2]);
END
$$;
COMMENT ON FUNCTION statesman._sink_table(jsonb) IS
    'the table sink''s target from its options, quoted and schema-qualified';

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

CREATE OR REPLACE FUNCTION statesman._known_sinks() RETURNS text[]
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_known_sinks';
COMMENT ON FUNCTION statesman._known_sinks() IS 'the sink names create_outbox accepts';

CREATE OR REPLACE FUNCTION statesman._check_sink(sink text, sink_options jsonb) RETURNS jsonb
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
    IF sink <> 'table' THEN
        -- Sinks outside this database check their own options (src/sinks/).
        RETURN statesman._check_sink_options(sink, sink_options);
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
             AND a.attname IN ('message_id', 'global_position', 'message')) <> 3
       -- Columns the delivery's insert could not fill: the three of the wrong type, or any
       -- other NOT NULL column without a default.
       OR EXISTS (
           SELECT FROM pg_attribute a
           WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
             AND CASE a.attname
                     WHEN 'message_id' THEN a.atttypid NOT IN ('text'::regtype, 'varchar'::regtype)
                     WHEN 'global_position' THEN a.atttypid NOT IN ('bigint'::regtype, 'numeric'::regtype)
                     WHEN 'message' THEN a.atttypid NOT IN ('jsonb'::regtype, 'json'::regtype, 'text'::regtype)
                     ELSE a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
                 END) THEN
        RAISE EXCEPTION 'table % cannot take deliveries', target
            USING ERRCODE = 'invalid_table_definition',
                  HINT = 'It needs columns message_id (text, unique), global_position (bigint) and message '
                         '(jsonb); any other NOT NULL column needs a default.';
    END IF;
    RETURN sink_options;
END
$$;
COMMENT ON FUNCTION statesman._check_sink(text, jsonb) IS
    'validates a sink and its options; prepares the table sink''s target';

CREATE FUNCTION statesman._check_sink_options(sink text, sink_options jsonb) RETURNS jsonb
    LANGUAGE c STABLE STRICT
    AS 'MODULE_PATHNAME', 'statesman_check_sink_options';
COMMENT ON FUNCTION statesman._check_sink_options(text, jsonb) IS
    'validates the options of a sink outside this database; fills in defaults';

CREATE FUNCTION statesman._check_sink_timeout(sink_options jsonb, lease_ttl interval) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    IF jsonb_typeof(sink_options->'timeout_ms') = 'number'
       AND (sink_options->>'timeout_ms')::numeric * interval '1 millisecond' >= lease_ttl THEN
        RAISE EXCEPTION 'sink option "timeout_ms" (% ms) must be shorter than lease_ttl (%)',
            sink_options->>'timeout_ms', lease_ttl
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A sink call that outlasts the lease would let a second dispatcher publish at the same time.';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_sink_timeout(jsonb, interval) IS
    'checks that a sink''s timeout_ms is shorter than the outbox''s lease_ttl';

CREATE OR REPLACE FUNCTION statesman.create_outbox(
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
    PERFORM statesman._check_sink_timeout(o.sink_options, o.lease_ttl);
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

CREATE OR REPLACE FUNCTION statesman.alter_outbox(
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
    PERFORM statesman._check_sink_timeout(o.sink_options, o.lease_ttl);
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

CREATE TYPE statesman._page AS (
    status        text,      -- 'ready', 'empty', 'paused' or 'gone'
    after         bigint,    -- the cursor before the page (0 when it has none)
    last_position bigint,    -- the cursor after the page
    read          bigint,    -- feed records in the page
    matching      bigint,    -- of them, the records the outbox publishes (its root)
    full_page     boolean    -- the page had batch_size records: more may follow at once
);

CREATE FUNCTION statesman._open_page(outbox_id text, after bigint DEFAULT NULL) RETURNS statesman._page
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    o statesman.outboxes;
    p statesman._page;
BEGIN
    o := statesman._page_outbox(_open_page.outbox_id);
    IF o.outbox_id IS NULL THEN
        p.status := 'gone'; RETURN p;
    ELSIF NOT o.enabled THEN
        p.status := 'paused'; RETURN p;
    END IF;
    p.after := COALESCE(_open_page.after,
                        (SELECT c.position FROM statesman.cursors c WHERE c.outbox_id = o.outbox_id), 0);
    SELECT count(*), max(x.global_position), count(*) FILTER (WHERE o.root IS NULL OR x.root = o.root)
    INTO p.read, p.last_position, p.matching
    FROM (SELECT h.global_position, h.root FROM statesman.history h
          WHERE h.global_position > p.after ORDER BY h.global_position LIMIT o.batch_size) x;
    IF p.read = 0 THEN
        p.status := 'empty'; p.last_position := NULLIF(p.after, 0); RETURN p;
    END IF;
    p.status := 'ready';
    p.full_page := p.read >= o.batch_size;
    RETURN p;
END
$$;
COMMENT ON FUNCTION statesman._open_page(text, bigint) IS
    'the bounds of the next page for a sink outside this database, under the page lock';

CREATE FUNCTION statesman._page_messages(outbox_id text, after bigint, last_position bigint)
    RETURNS TABLE (global_position bigint, message_id text, message text)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT h.global_position, v.store || '/' || h.address || '#' || h.revision,
           statesman._message_text(v.store, v.epoch, h.address, h.root, h.path, h.partition, h.revision,
               h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
               h.source, COALESCE(h.fingerprint, o.fingerprint, r.fingerprint),
               COALESCE(h.content_type, o.payload_content_type, r.content_type),
               h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error)
    FROM statesman.outboxes o
         CROSS JOIN (SELECT COALESCE(s.store_name, current_database()) AS store, s.epoch FROM statesman.store s) v
         JOIN statesman.history h
           ON h.global_position > _page_messages.after AND h.global_position <= _page_messages.last_position
         LEFT JOIN statesman.roots r ON r.root = h.root
    WHERE o.outbox_id = _page_messages.outbox_id AND (o.root IS NULL OR h.root = o.root)
    ORDER BY h.global_position
$$;
COMMENT ON FUNCTION statesman._page_messages(text, bigint, bigint) IS
    'the messages of a page that _open_page bounded, in feed order';

CREATE FUNCTION statesman._finish_page(outbox_id text, last_position bigint, published bigint, deduplicated bigint)
    RETURNS void
    LANGUAGE sql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT statesman._move_cursor(_finish_page.outbox_id, _finish_page.last_position);
    UPDATE statesman.outbox_state s
    SET attempts = 0, published_total = s.published_total + _finish_page.published,
        deduplicated_total = s.deduplicated_total + _finish_page.deduplicated,
        last_published_at = CASE WHEN _finish_page.published > 0 THEN clock_timestamp() ELSE s.last_published_at END
    WHERE s.outbox_id = _finish_page.outbox_id;
$$;
COMMENT ON FUNCTION statesman._finish_page(text, bigint, bigint, bigint) IS
    'moves the cursor past a page the sink accepted and counts it';

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

CREATE OR REPLACE FUNCTION statesman._deliver_table_page(outbox_id text) RETURNS statesman._page_result
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

    PERFORM statesman._finish_page(o.outbox_id, r.last_position, r.published, r.deduplicated);
    r.status := 'delivered';
    r.attempts := 0;
    r.full_page := r.read >= o.batch_size;
    RETURN r;
END
$$;
COMMENT ON FUNCTION statesman._deliver_table_page(text) IS
    'delivers the next page of the feed to a table sink, with the cursor advance in the same transaction';

CREATE OR REPLACE FUNCTION statesman._redeliver_table_page(outbox_id text) RETURNS statesman._page_result
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

REVOKE ALL ON FUNCTION statesman._store_restore() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._check_sink_options(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._check_sink_timeout(jsonb, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._open_page(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._page_messages(text, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._finish_page(text, bigint, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._requeued_messages(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._requeued_outcome(text, bigint[], boolean, bigint, bigint, text) FROM PUBLIC;

-- statesman 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION statesman UPDATE TO '0.4.0'" to load this file. \quit

-- Table sink targets: UNLOGGED, temporary and system tables are refused, at registration
-- and on every page (issue 17, item 6).
CREATE OR REPLACE FUNCTION statesman._check_sink_target(target text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_persistence "char";
    v_schema name;
BEGIN
    SELECT c.relpersistence, n.nspname INTO v_persistence, v_schema
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = to_regclass(_check_sink_target.target);
    IF NOT FOUND THEN
        RETURN;  -- a missing table: the delivery's insert reports it
    END IF;
    IF v_persistence = 'u' THEN
        RAISE EXCEPTION 'table % cannot take deliveries: it is UNLOGGED', target
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Crash recovery empties an UNLOGGED table while the outbox''s cursor stays past '
                           'the rows it held: those messages would never be delivered again.',
                  HINT = format('ALTER TABLE %s SET LOGGED', target);
    ELSIF v_persistence = 't' THEN
        RAISE EXCEPTION 'table % cannot take deliveries: it is a temporary table', target
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF v_schema IN ('pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'table % cannot take deliveries: it is in the system schema "%"', target, v_schema
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._check_sink_target(text) IS
    'refuses an UNLOGGED, temporary or system table as the table sink''s target';

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
    -- The system schemas are PostgreSQL's, not a place for deliveries (as CREATE PUBLICATION
    -- refuses system tables).
    IF parts[1] IN ('pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'sink option "table" must not name a table in the system schema "%"', parts[1]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN format('%I.%I', parts[1], parts[2]);
END
$$;
COMMENT ON FUNCTION statesman._sink_table(jsonb) IS
    'the table sink''s target from its options, quoted and schema-qualified';

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
    PERFORM statesman._check_sink_target(target);
    RETURN sink_options;
END
$$;
COMMENT ON FUNCTION statesman._check_sink(text, jsonb) IS
    'validates a sink and its options; prepares the table sink''s target';

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
            PERFORM statesman._check_sink_target(v_target);
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
        PERFORM statesman._check_sink_target(v_target);
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
REVOKE ALL ON FUNCTION statesman._check_sink_target(text) FROM PUBLIC;

-- Records the feed cannot carry (issue 17, item 5): a page whose messages cannot be built is
-- parked record by record; a dead letter whose message cannot be built keeps no message and is
-- never requeued; a root's envelope fallbacks are limited to 1024 bytes like an outbox's.
ALTER TABLE statesman.dead_letters ALTER COLUMN message DROP NOT NULL;
CREATE OR REPLACE FUNCTION statesman._park_page(outbox_id text, error text, attempts integer, page_records bigint)
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
    -- Exactly the page that failed: records sequenced since then were never tried.
    SELECT max(p.global_position) INTO v_last
    FROM (SELECT h.global_position FROM statesman.history h
          WHERE h.global_position > v_after ORDER BY h.global_position
          LIMIT LEAST(o.batch_size, _park_page.page_records)) p;
    IF v_last IS NULL THEN
        RETURN 0;
    END IF;
    SELECT COALESCE(s.store_name, current_database()), s.epoch INTO v_store, v_epoch FROM statesman.store s;
    BEGIN
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
    EXCEPTION WHEN OTHERS THEN
        -- A message of the page cannot be built (a record too large for a jsonb message, written
        -- before the append functions refused such records): the page fails for that reason, so
        -- parking it must not. Each record is parked on its own; one whose message cannot be
        -- built is parked without a message, with the reason, and stays in statesman.history.
        parked := 0;
        FOR rec IN
            SELECT x.*, r.fingerprint AS root_fingerprint, r.content_type AS root_content_type
            FROM statesman.history x LEFT JOIN statesman.roots r ON r.root = x.root
            WHERE x.global_position > v_after AND x.global_position <= v_last
              AND (o.root IS NULL OR x.root = o.root)
            ORDER BY x.global_position
        LOOP
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
    PERFORM statesman._move_cursor(o.outbox_id, v_last);
    UPDATE statesman.outbox_state s SET attempts = 0, skipped_total = s.skipped_total + parked
    WHERE s.outbox_id = o.outbox_id;
    RETURN parked;
END
$$;
COMMENT ON FUNCTION statesman._park_page(text, text, integer, bigint) IS
    'skips the next page: parks its messages in dead_letters and moves the cursor past it';

CREATE OR REPLACE FUNCTION statesman.redeliver(outbox_id text, message_id text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM statesman._outbox_for_update(redeliver.outbox_id);
    -- A dead letter without a message (its record's message cannot be built) has nothing to hand over.
    UPDATE statesman.dead_letters d SET requeued_at = now()
    WHERE d.outbox_id = redeliver.outbox_id AND d.message IS NOT NULL
      AND (redeliver.message_id IS NULL OR d.message_id = redeliver.message_id);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 AND EXISTS (SELECT FROM statesman.dead_letters d
                         WHERE d.outbox_id = redeliver.outbox_id AND d.message_id = redeliver.message_id) THEN
        RAISE EXCEPTION 'parked message "%" of outbox "%" has no message to hand to the sink',
                        redeliver.message_id, redeliver.outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its record''s message cannot be built; the record stays in statesman.history.';
    END IF;
    IF n = 0 AND redeliver.message_id IS NOT NULL THEN
        RAISE EXCEPTION 'outbox "%" has no parked message "%"', redeliver.outbox_id, redeliver.message_id
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION statesman.redeliver(text, text) IS
    'queues parked messages (all, or one message id) to be handed to the sink again; returns how many';

CREATE OR REPLACE FUNCTION statesman.declare_root(
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
    -- Messages fall back to these (see read_feed): the append functions' size check counts
    -- at most 1024 bytes for each, as for an outbox's fallbacks.
    IF octet_length(declare_root.fingerprint) > 1024 OR octet_length(declare_root.content_type) > 1024 THEN
        RAISE EXCEPTION 'fingerprint and content_type must be at most 1024 bytes'
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

-- Who may read and write (issue 17, item 8): PUBLIC no longer writes the ledger or reads its
-- payloads; consumer positions belong to the role that stored them (rows from before 0.4.0 have
-- no owner and are claimed by the first role that moves them).
REVOKE ALL ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text, integer, text,
    text, text, jsonb, text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.append_delete(text, text, text, text, text, integer, text, text, text, jsonb, text,
    timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.read_feed(bigint, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.history(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.current(text, text, text) FROM PUBLIC;
ALTER TABLE statesman.applied ADD COLUMN owner name;
ALTER TABLE statesman.applied ALTER COLUMN owner SET DEFAULT CURRENT_USER;
ALTER TABLE statesman.applied ENABLE ROW LEVEL SECURITY;
CREATE POLICY applied_read ON statesman.applied FOR SELECT USING (true);
CREATE POLICY applied_insert ON statesman.applied FOR INSERT WITH CHECK (owner = CURRENT_USER);
CREATE POLICY applied_update ON statesman.applied FOR UPDATE
    USING (owner IS NULL OR owner = CURRENT_USER) WITH CHECK (owner = CURRENT_USER);
GRANT SELECT, INSERT ON statesman.applied TO PUBLIC;
GRANT UPDATE (epoch, position, applied_at, owner) ON statesman.applied TO PUBLIC;
CREATE OR REPLACE FUNCTION statesman.mark_applied(consumer text, feed text, epoch uuid, "position" bigint)
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

CREATE OR REPLACE FUNCTION statesman.mark_applied(consumer text, message jsonb) RETURNS boolean
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

CREATE OR REPLACE FUNCTION statesman.already_applied(consumer text, feed text, epoch uuid, "position" bigint)
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

CREATE OR REPLACE FUNCTION statesman.applied_position(consumer text, feed text)
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

-- seed_cursor(outbox, 0) replays from the very beginning, and waits for a page under way
-- (issue 17, item 7).
CREATE OR REPLACE FUNCTION statesman.seed_cursor(outbox_id text, at_position bigint DEFAULT NULL) RETURNS bigint
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

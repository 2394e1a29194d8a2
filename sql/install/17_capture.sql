-------------------------------------------------------------------------------
-- Capturing existing tables (docs/capture.md)
-------------------------------------------------------------------------------

-- One row per captured table, keyed by the table's OID (a regclass: pg_dump writes it as the
-- table's name, so a restore finds the new OID): the trigger reads its configuration from here
-- (never from trigger arguments, which a table owner could change), so only capture_table
-- decides which root a table's rows go to. Owner-only: no role but the extension owner reads
-- or writes it.
CREATE TABLE statesman.captures (
    tab regclass PRIMARY KEY,
    root text NOT NULL,
    key_columns text[] NOT NULL,
    columns text[],
    partition_column text,
    since timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE statesman.captures IS
    'the captured tables: the root, key, columns and partition column of each (statesman.capture_table)';
-- The trigger keeps each table's configuration in its session; a change of this table
-- invalidates those copies in every session when it commits (src/store/capture.cpp).
CREATE TRIGGER captures_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON statesman.captures
    FOR EACH STATEMENT EXECUTE FUNCTION statesman._roots_changed();

-- The progress of each table's backfill: the last key of the last committed batch (the next
-- batch starts after it), so an interrupted backfill resumes there.
CREATE TABLE statesman.capture_backfills (
    tab regclass PRIMARY KEY REFERENCES statesman.captures (tab) ON DELETE CASCADE,
    after_key text[],
    rows_done bigint NOT NULL DEFAULT 0,
    batches bigint NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    finished_at timestamptz
);
COMMENT ON TABLE statesman.capture_backfills IS
    'the progress of each captured table''s backfill (statesman.backfill_table)';
SELECT pg_catalog.pg_extension_config_dump('statesman.captures', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.capture_backfills', '');

-- The row trigger: one record per INSERT, UPDATE and DELETE, appended in the writing
-- transaction through the append path (C++). Not executable by PUBLIC: CREATE TRIGGER checks
-- EXECUTE, so only capture_table (as the extension owner) aims it at a table.
CREATE FUNCTION statesman._capture_row() RETURNS trigger
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'statesman_capture_row';
COMMENT ON FUNCTION statesman._capture_row() IS
    'the row trigger of a captured table: appends a record per INSERT, UPDATE and DELETE';

CREATE FUNCTION statesman._capture_truncate() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    RAISE EXCEPTION 'cannot truncate %: it is captured by statesman', TG_RELID::regclass
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'A TRUNCATE fires no row triggers, so the feed would keep every row. DELETE the rows '
                     '(each becomes a tombstone), or call statesman.release_table first.';
END
$$;
COMMENT ON FUNCTION statesman._capture_truncate() IS 'refuses TRUNCATE of a captured table';

-- The record of one row as the trigger would append it, for the backfill (operation put,
-- metadata op "backfill").
CREATE FUNCTION statesman._capture_put(tab oid, r record) RETURNS void
    LANGUAGE c VOLATILE STRICT
    AS 'MODULE_PATHNAME', 'statesman_capture_put';
COMMENT ON FUNCTION statesman._capture_put(oid, record) IS
    'appends a captured table''s row as a put record with metadata op backfill';

CREATE FUNCTION statesman._capture_table(tab regclass, root text, key text[], columns text[],
    partition_column text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_rel pg_catalog.pg_class;
    v_root text := root;
    v_key text[] := key;
    v_col text;
BEGIN
    SELECT * INTO v_rel FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) tab;
    IF v_rel.relkind OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'cannot capture %: it is a partitioned table', tab
            USING ERRCODE = 'wrong_object_type', HINT = 'Capture each of its partitions.';
    ELSIF v_rel.relkind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION 'cannot capture %: only an ordinary table can be captured', tab
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF v_rel.relnamespace OPERATOR(pg_catalog.=) 'statesman'::regnamespace THEN
        RAISE EXCEPTION 'cannot capture %: it is one of statesman''s own tables', tab
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_rel.relpersistence OPERATOR(pg_catalog.=) 't' THEN
        RAISE EXCEPTION 'cannot capture %: it is a temporary table', tab USING ERRCODE = 'wrong_object_type';
    END IF;
    IF EXISTS (SELECT FROM statesman.captures c WHERE c.tab OPERATOR(pg_catalog.=) v_rel.oid) THEN
        RAISE EXCEPTION '% is already captured', tab
            USING ERRCODE = 'duplicate_object',
                  HINT = 'statesman.release_table releases it; then capture it again with other settings.';
    END IF;
    v_root := COALESCE(v_root, v_rel.relname::text);
    IF v_root !~ '^[A-Za-z0-9_.-]{1,63}$' THEN
        RAISE EXCEPTION 'root must match ^[A-Za-z0-9_.-]{1,63}$ (it is "%")', v_root
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The root defaults to the table''s name; pass root => ''…'' for another.';
    END IF;
    IF v_key IS NULL THEN
        SELECT pg_catalog.array_agg(a.attname::text ORDER BY k.i) INTO v_key
        FROM pg_catalog.pg_index x
        CROSS JOIN LATERAL pg_catalog.unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, i)
        JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) x.indrelid
             AND a.attnum OPERATOR(pg_catalog.=) k.attnum
        WHERE x.indrelid OPERATOR(pg_catalog.=) v_rel.oid AND x.indisprimary;
        IF v_key IS NULL THEN
            RAISE EXCEPTION 'cannot capture %: it has no primary key and no key was given', tab
                USING ERRCODE = 'invalid_table_definition',
                      HINT = 'Pass key => ARRAY[''column'', …]: the columns whose values make a row''s path.';
        END IF;
    END IF;
    IF pg_catalog.cardinality(v_key) OPERATOR(pg_catalog.=) 0 THEN
        RAISE EXCEPTION 'key must name at least one column' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT pg_catalog.count(DISTINCT k) FROM pg_catalog.unnest(v_key) k) <> pg_catalog.cardinality(v_key)
       OR pg_catalog.array_position(v_key, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'key must name each column once, none NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF columns IS NOT NULL AND (pg_catalog.cardinality(columns) OPERATOR(pg_catalog.=) 0
                                OR pg_catalog.array_position(columns, NULL) IS NOT NULL) THEN
        RAISE EXCEPTION 'columns must name at least one column, none NULL (or be NULL for every column)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR v_col IN SELECT c FROM pg_catalog.unnest(v_key || COALESCE(columns, '{}') ||
                                                 CASE WHEN partition_column IS NULL THEN '{}'::text[]
                                                      ELSE ARRAY[partition_column] END) c LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                       WHERE a.attrelid OPERATOR(pg_catalog.=) v_rel.oid AND a.attname OPERATOR(pg_catalog.=) v_col
                         AND a.attnum > 0 AND NOT a.attisdropped) THEN
            RAISE EXCEPTION 'column "%" of % does not exist', v_col, tab USING ERRCODE = 'undefined_column';
        END IF;
    END LOOP;
    INSERT INTO statesman.captures (tab, root, key_columns, columns, partition_column)
    VALUES (v_rel.oid, v_root, v_key, columns, partition_column);
    -- ENABLE ALWAYS: the triggers fire under session_replication_role = replica too (a logical
    -- replication apply worker, a session that set it): a change is never skipped silently.
    EXECUTE pg_catalog.format('CREATE TRIGGER statesman_capture AFTER INSERT OR UPDATE OR DELETE ON %s '
                              'FOR EACH ROW EXECUTE FUNCTION statesman._capture_row()', tab);
    EXECUTE pg_catalog.format('CREATE TRIGGER statesman_capture_truncate BEFORE TRUNCATE ON %s '
                              'FOR EACH STATEMENT EXECUTE FUNCTION statesman._capture_truncate()', tab);
    EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER statesman_capture, '
                              'ENABLE ALWAYS TRIGGER statesman_capture_truncate', tab);
END
$$;
COMMENT ON FUNCTION statesman._capture_table(regclass, text, text[], text[], text) IS
    'the body of capture_table, run as the extension owner once the caller''s ownership is checked';

CREATE FUNCTION statesman._release_table(tab regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_trigger name;
BEGIN
    DELETE FROM statesman.captures c WHERE c.tab OPERATOR(pg_catalog.=) _release_table.tab::oid;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% is not captured', tab USING ERRCODE = 'undefined_object';
    END IF;
    FOR v_trigger IN
        SELECT t.tgname FROM pg_catalog.pg_trigger t
        WHERE t.tgrelid OPERATOR(pg_catalog.=) _release_table.tab::oid
          AND t.tgfoid IN ('statesman._capture_row()'::regprocedure, 'statesman._capture_truncate()'::regprocedure)
    LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', v_trigger, tab);
    END LOOP;
END
$$;
COMMENT ON FUNCTION statesman._release_table(regclass) IS
    'the body of release_table, run as the extension owner once the caller''s ownership is checked';

-- capture_table, release_table and backfill_table check that the caller owns the table (or is
-- a member of its owner role), then run their bodies as the extension owner (C).
CREATE FUNCTION statesman.capture_table(tab regclass, root text DEFAULT NULL, key text[] DEFAULT NULL,
    columns text[] DEFAULT NULL, partition_column text DEFAULT NULL) RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_capture_table';
COMMENT ON FUNCTION statesman.capture_table(regclass, text, text[], text[], text) IS
    'captures a table: every INSERT, UPDATE and DELETE of a row appends a record in the same transaction';

CREATE FUNCTION statesman.release_table(tab regclass) RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_release_table';
COMMENT ON FUNCTION statesman.release_table(regclass) IS 'stops capturing a table (drops its triggers)';

-- One batch of a backfill, in the backfill worker's transaction: the next batch_size rows
-- after the last key, in key order, each locked FOR SHARE while its record is appended.
CREATE FUNCTION statesman._backfill_batch(tab oid, batch_size integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c statesman.captures;
    p statesman.capture_backfills;
    v_cols text;
    v_params text;
    v_texts text;
    v_sql text;
    v_row record;
    v_last text[];
    n integer := 0;
BEGIN
    SELECT * INTO c FROM statesman.captures x WHERE x.tab OPERATOR(pg_catalog.=) _backfill_batch.tab;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not captured', tab::regclass USING ERRCODE = 'undefined_object';
    END IF;
    SELECT * INTO p FROM statesman.capture_backfills x WHERE x.tab OPERATOR(pg_catalog.=) _backfill_batch.tab
    FOR UPDATE;
    SELECT pg_catalog.string_agg(pg_catalog.format('t.%I', u.k), ', ' ORDER BY u.i),
           pg_catalog.string_agg(pg_catalog.format('$1[%s]::%s', u.i, pg_catalog.format_type(a.atttypid, a.atttypmod)),
                                 ', ' ORDER BY u.i),
           pg_catalog.string_agg(pg_catalog.format('t.%I::text', u.k), ', ' ORDER BY u.i)
    INTO v_cols, v_params, v_texts
    FROM pg_catalog.unnest(c.key_columns) WITH ORDINALITY AS u(k, i)
    JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.tab AND a.attname OPERATOR(pg_catalog.=) u.k;
    v_sql := pg_catalog.format('SELECT t AS r, ARRAY[%s] AS k FROM ONLY %s t %s ORDER BY %s LIMIT $2 FOR SHARE OF t',
                               v_texts, c.tab::regclass,
                               CASE WHEN p.after_key IS NULL THEN ''
                                    ELSE pg_catalog.format('WHERE (%s) > (%s)', v_cols, v_params) END,
                               v_cols);
    FOR v_row IN EXECUTE v_sql USING p.after_key, batch_size LOOP
        PERFORM statesman._capture_put(c.tab, v_row.r);
        v_last := v_row.k;
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        UPDATE statesman.capture_backfills x
        SET after_key = v_last, rows_done = x.rows_done + n, batches = x.batches + 1,
            updated_at = pg_catalog.clock_timestamp()
        WHERE x.tab OPERATOR(pg_catalog.=) c.tab;
    END IF;
    IF n < batch_size THEN
        UPDATE statesman.capture_backfills x
        SET finished_at = pg_catalog.clock_timestamp(), updated_at = pg_catalog.clock_timestamp()
        WHERE x.tab OPERATOR(pg_catalog.=) c.tab;
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION statesman._backfill_batch(oid, integer) IS
    'one batch of a backfill: the next rows in key order, locked FOR SHARE, appended as put records';

-- Starts a backfill, or resumes the one that was interrupted: the progress row as the worker
-- begins (a finished or absent one starts over from the first key).
CREATE FUNCTION statesman._backfill_start(tab oid) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
    AS $$
    INSERT INTO statesman.capture_backfills AS x (tab) VALUES (_backfill_start.tab)
    ON CONFLICT (tab) DO UPDATE
        SET after_key = NULL, rows_done = 0, batches = 0, started_at = pg_catalog.now(),
            updated_at = pg_catalog.now(), finished_at = NULL
        WHERE x.finished_at IS NOT NULL
$$;
COMMENT ON FUNCTION statesman._backfill_start(oid) IS
    'starts a table''s backfill, or keeps the progress of an interrupted one to resume it';

CREATE FUNCTION statesman.backfill_table(tab regclass, batch_size integer DEFAULT 10000) RETURNS bigint
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_backfill_table';
COMMENT ON FUNCTION statesman.backfill_table(regclass, integer) IS
    'appends every current row of a captured table as a put record, in batches of their own transactions';

-- DDL that would break a capture: a key, captured or partition column dropped or renamed, a
-- capture trigger disabled (or set to fire only for origin or replica sessions). The ERROR rolls
-- the command back.
CREATE FUNCTION statesman._capture_ddl() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT x.tab, x.key_columns, x.columns, x.partition_column FROM statesman.captures x
        WHERE EXISTS (SELECT FROM pg_catalog.pg_class r WHERE r.oid OPERATOR(pg_catalog.=) x.tab)
    LOOP
        IF EXISTS (SELECT FROM pg_catalog.unnest(c.key_columns || COALESCE(c.columns, '{}') ||
                                                 CASE WHEN c.partition_column IS NULL THEN '{}'::text[]
                                                      ELSE ARRAY[c.partition_column] END) k
                   WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                                     WHERE a.attrelid OPERATOR(pg_catalog.=) c.tab
                                       AND a.attname OPERATOR(pg_catalog.=) k AND a.attnum > 0
                                       AND NOT a.attisdropped)) THEN
            RAISE EXCEPTION 'cannot drop or rename a key, captured or partition column of %: it is captured '
                            'by statesman (key %, columns %, partition column %)',
                            c.tab::regclass, c.key_columns, COALESCE(c.columns::text, 'all'),
                            COALESCE(c.partition_column, 'none')
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = 'Call statesman.release_table first, then capture the table again.';
        END IF;
        -- Only the state of the triggers that exist: a restore (pg_restore) creates them after
        -- the table's other definitions and data, each followed by its ENABLE ALWAYS.
        IF EXISTS (SELECT FROM pg_catalog.pg_trigger t
                   WHERE t.tgrelid OPERATOR(pg_catalog.=) c.tab AND t.tgenabled OPERATOR(pg_catalog.<>) 'A'
                     AND t.tgfoid IN ('statesman._capture_row()'::regprocedure,
                                      'statesman._capture_truncate()'::regprocedure)) THEN
            RAISE EXCEPTION 'cannot disable the capture triggers of %: its changes would be lost', c.tab
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Call statesman.release_table to stop capturing it.';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION statesman._capture_ddl() IS
    'refuses ALTER TABLE that drops or renames a captured column or disables a capture trigger';
CREATE EVENT TRIGGER statesman_capture_ddl ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER TRIGGER')
    EXECUTE FUNCTION statesman._capture_ddl();

-- A dropped table's capture goes with it; dropping a capture trigger of a table that stays
-- captured is refused (release_table forgets the capture before it drops the triggers).
CREATE FUNCTION statesman._capture_drop() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    v_tab regclass;
BEGIN
    DELETE FROM statesman.captures x
    WHERE x.tab IN (SELECT d.objid FROM pg_catalog.pg_event_trigger_dropped_objects() d
                    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
                      AND d.objsubid OPERATOR(pg_catalog.=) 0);
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() d
                   WHERE d.object_type OPERATOR(pg_catalog.=) 'trigger') THEN
        RETURN;
    END IF;
    SELECT x.tab INTO v_tab FROM statesman.captures x
    WHERE (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger t
           WHERE t.tgrelid OPERATOR(pg_catalog.=) x.tab
             AND t.tgfoid IN ('statesman._capture_row()'::regprocedure,
                              'statesman._capture_truncate()'::regprocedure)) < 2
    LIMIT 1;
    IF v_tab IS NOT NULL THEN
        RAISE EXCEPTION 'cannot drop the capture triggers of %: its changes would be lost', v_tab
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call statesman.release_table to stop capturing it.';
    END IF;
END
$$;
COMMENT ON FUNCTION statesman._capture_drop() IS
    'forgets the capture of a dropped table; refuses dropping a capture trigger of a captured table';
CREATE EVENT TRIGGER statesman_capture_drop ON sql_drop EXECUTE FUNCTION statesman._capture_drop();

CREATE VIEW statesman.captured_tables AS
SELECT c.tab AS "table", c.root, c.key_columns AS key, c.columns, c.partition_column, c.since,
       b.rows_done AS backfilled_rows, b.batches AS backfill_batches, b.after_key AS backfill_after_key,
       b.started_at AS backfill_started_at, b.finished_at AS backfill_finished_at
FROM statesman.captures c
LEFT JOIN statesman.capture_backfills b ON b.tab OPERATOR(pg_catalog.=) c.tab;
COMMENT ON VIEW statesman.captured_tables IS
    'the captured tables, their root, key, columns, since when, and their backfill''s progress';

-- Capturing and backfilling are for the extension owner and the roles it grants them to
-- (a grantee must also own the table); the internals are never for PUBLIC.
REVOKE ALL ON FUNCTION statesman.capture_table(regclass, text, text[], text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.release_table(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.backfill_table(regclass, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_row() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_truncate() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_put(oid, record) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_table(regclass, text, text[], text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._release_table(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._backfill_batch(oid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._backfill_start(oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_ddl() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._capture_drop() FROM PUBLIC;
GRANT SELECT ON statesman.captured_tables TO pg_monitor;

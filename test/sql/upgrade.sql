-- Upgrading from the released 0.1.0 script (through every later one) gives exactly the objects, definitions and
-- privileges of a fresh install of the current version.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS statesman CASCADE;

CREATE FUNCTION pg_temp.statesman_objects() RETURNS TABLE (object text, definition text)
LANGUAGE sql AS $$
    SELECT pg_describe_object(d.classid, d.objid, 0),
           CASE d.classid
             WHEN 'pg_proc'::regclass THEN
               pg_get_functiondef(d.objid) || COALESCE((SELECT p.proacl::text FROM pg_proc p WHERE p.oid = d.objid), '')
             WHEN 'pg_class'::regclass THEN
               (SELECT c.relkind::text || ':' || COALESCE(c.relacl::text, '') || ':' ||
                       COALESCE(pg_get_viewdef(c.oid), '') || ':' ||
                       COALESCE((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
                                                   CASE WHEN a.attnotnull THEN ' not null' ELSE '' END ||
                                                   COALESCE(' default ' || pg_get_expr(ad.adbin, ad.adrelid), ''),
                                                   ', ' ORDER BY a.attnum)
                                 FROM pg_attribute a
                                 LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                                 WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') || ':' ||
                       COALESCE((SELECT string_agg(pg_get_constraintdef(k.oid), ', ' ORDER BY pg_get_constraintdef(k.oid))
                                 FROM pg_constraint k WHERE k.conrelid = c.oid), '') || ':' ||
                       COALESCE((SELECT string_agg(pg_get_indexdef(i.indexrelid), ', ' ORDER BY pg_get_indexdef(i.indexrelid))
                                 FROM pg_index i WHERE i.indrelid = c.oid), '') || ':' ||
                       COALESCE((SELECT string_agg(pg_get_triggerdef(t.oid), ', ' ORDER BY t.tgname)
                                 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal), '')
                FROM pg_class c WHERE c.oid = d.objid)
             ELSE '' END
           || ':' || COALESCE(obj_description(d.objid, d.classid::regclass::name), '')
    FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT e.oid FROM pg_extension e WHERE e.extname = 'statesman')
$$;

CREATE EXTENSION statesman VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
-- Until the update, this library applies 0.1.0's retention to 0.1.0's objects.
SELECT statesman.declare_root('old', max_revisions => 1);
SELECT revision FROM statesman.append('old', 'a', '{"n": 1}');
SELECT statesman.sequence_feed() > 0 AS sequenced;
SELECT revision FROM statesman.append('old', 'a', '{"n": 2}');
SELECT array_agg(revision ORDER BY revision) AS kept FROM statesman.history('old', 'a');
ALTER EXTENSION statesman UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
CREATE TEMP TABLE upgraded AS SELECT * FROM pg_temp.statesman_objects();
CREATE TEMP TABLE upgraded_dump AS
    SELECT c.relname, x.cond FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(rel, cond)
    JOIN pg_class c ON c.oid = x.rel WHERE e.extname = 'statesman';

DROP EXTENSION statesman CASCADE;
CREATE EXTENSION statesman;
CREATE TEMP TABLE fresh AS SELECT * FROM pg_temp.statesman_objects();
CREATE TEMP TABLE fresh_dump AS
    SELECT c.relname, x.cond FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(rel, cond)
    JOIN pg_class c ON c.oid = x.rel WHERE e.extname = 'statesman';

-- Both directions must be empty.
SELECT 'only after upgrade' AS side, object FROM (TABLE upgraded EXCEPT TABLE fresh) x
UNION ALL
SELECT 'only in fresh install', object FROM (TABLE fresh EXCEPT TABLE upgraded) y
ORDER BY 1, 2;
SELECT 'dump config differs' AS problem, * FROM ((TABLE upgraded_dump EXCEPT TABLE fresh_dump)
                                                 UNION ALL (TABLE fresh_dump EXCEPT TABLE upgraded_dump)) z;
-- The comparison saw the whole extension.
SELECT count(*) > 50 AS many_objects FROM fresh;

-- From the released 0.3.0 with data in it: the update keeps every record's feed position and
-- message (read_feed before and after compared row for row), and gives a fresh install's objects.
DROP EXTENSION statesman CASCADE;
CREATE EXTENSION statesman VERSION '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
SELECT statesman.declare_root('kept');
SELECT count(*) AS appended
  FROM generate_series(1, 40) i,
       statesman.append('kept', 'k' || i % 7, jsonb_build_object('n', i, 'tags', jsonb_build_array('a', i)),
                        partition => CASE WHEN i % 3 = 0 THEN 'eu' ELSE '' END,
                        correlation_id => 'c' || i % 4, metadata => jsonb_build_object('i', i));
SELECT revision FROM statesman.append_delete('kept', 'k1');
SELECT revision FROM statesman.append_bytes('kept', 'blob', '\x00ff10'::bytea, 'application/octet-stream');
SELECT statesman.sequence_feed() AS sequenced;
CREATE TEMP TABLE feed_before AS SELECT * FROM statesman.read_feed(max_records => 1000);
SELECT count(*) AS records, count(DISTINCT global_position) AS positions,
       min(global_position) = 1 AS from_one FROM feed_before;
ALTER EXTENSION statesman UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
CREATE TEMP TABLE feed_after AS SELECT * FROM statesman.read_feed(max_records => 1000);
-- Both directions must be empty.
SELECT 'only before the update' AS side, global_position, message_id
  FROM (TABLE feed_before EXCEPT TABLE feed_after) x
UNION ALL
SELECT 'only after the update', global_position, message_id
  FROM (TABLE feed_after EXCEPT TABLE feed_before) y
ORDER BY 1, 2;
SELECT count(*) AS records_after FROM feed_after;
-- The next append after the update follows the old head.
SELECT revision FROM statesman.append('kept', 'k2', '{"after": "update"}');
SELECT statesman.sequence_feed() AS sequenced;
SELECT global_position = (SELECT max(global_position) + 1 FROM feed_before) AS next_position,
       message->>'address' AS address
  FROM statesman.read_feed(after => (SELECT max(global_position) FROM feed_before));
-- The objects equal a fresh install's here too.
SELECT 'only after upgrade from 0.3.0' AS side, object FROM (SELECT * FROM pg_temp.statesman_objects() EXCEPT TABLE fresh) x
UNION ALL
SELECT 'only in fresh install', object FROM (TABLE fresh EXCEPT SELECT * FROM pg_temp.statesman_objects()) y
ORDER BY 1, 2;

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
                                                   CASE WHEN a.attcollation <> 0
                                                        THEN ' collate ' || a.attcollation::regcollation::text
                                                        ELSE '' END ||
                                                   COALESCE(' default ' || pg_get_expr(ad.adbin, ad.adrelid), '') ||
                                                   COALESCE(' acl ' || a.attacl::text, ''),
                                                   ', ' ORDER BY a.attnum)
                                 FROM pg_attribute a
                                 LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                                 WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') || ':' ||
                       COALESCE((SELECT string_agg(pg_get_constraintdef(k.oid), ', ' ORDER BY pg_get_constraintdef(k.oid))
                                 FROM pg_constraint k WHERE k.conrelid = c.oid), '') || ':' ||
                       COALESCE((SELECT string_agg(pg_get_indexdef(i.indexrelid), ', ' ORDER BY pg_get_indexdef(i.indexrelid))
                                 FROM pg_index i WHERE i.indrelid = c.oid), '') || ':' ||
                       COALESCE((SELECT string_agg(pg_get_triggerdef(t.oid), ', ' ORDER BY t.tgname)
                                 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal), '') || ':' ||
                       -- row-level security and its policies (not extension members of their own)
                       c.relrowsecurity::text || ':' ||
                       COALESCE((SELECT string_agg(p.polname || ' ' || p.polcmd::text || ' ' || p.polroles::text || ' ' ||
                                                   COALESCE(pg_get_expr(p.polqual, p.polrelid), '') || ' ' ||
                                                   COALESCE(pg_get_expr(p.polwithcheck, p.polrelid), ''),
                                                   ', ' ORDER BY p.polname)
                                 FROM pg_policy p WHERE p.polrelid = c.oid), '')
                FROM pg_class c WHERE c.oid = d.objid)
             ELSE '' END
           || ':' || COALESCE(obj_description(d.objid, d.classid::regclass::name), '')
    FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT e.oid FROM pg_extension e WHERE e.extname = 'statesman')
$$;

CREATE EXTENSION statesman VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
-- Until the update, this library appends to no older version's objects: each append fails with
-- 55000 naming both versions and the fix, and writes nothing; reads keep working.
SELECT statesman.declare_root('old', max_revisions => 1);
\set VERBOSITY sqlstate
SELECT revision FROM statesman.append('old', 'a', '{"n": 1}');
SELECT revision FROM statesman.append_bytes('old', 'a', '\x01'::bytea, 'application/octet-stream');
SELECT revision FROM statesman.append_delete('old', 'a');
\set VERBOSITY default
SELECT revision FROM statesman.append('old', 'a', '{"n": 1}');
SELECT count(*) AS written FROM statesman.history;
ALTER EXTENSION statesman UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
-- From the update on, in the same session, appends work with the current version's retention.
SELECT revision FROM statesman.append('old', 'a', '{"n": 1}');
SELECT statesman.sequence_feed() > 0 AS sequenced;
SELECT revision FROM statesman.append('old', 'a', '{"n": 2}');
SELECT array_agg(revision ORDER BY revision) AS kept FROM statesman.history('old', 'a');
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

-- A backend that found the versions matching checks again after the extension changes: here it is
-- recreated at 0.1.0, and the next append in the same session is refused.
SELECT revision FROM statesman.append('fresh', 'a', '{"n": 1}');
DROP EXTENSION statesman CASCADE;
CREATE EXTENSION statesman VERSION '0.1.0';
\set VERBOSITY sqlstate
SELECT revision FROM statesman.append('fresh', 'a', '{"n": 1}');
\set VERBOSITY default
ALTER EXTENSION statesman UPDATE;
SELECT revision FROM statesman.append('fresh', 'a', '{"n": 1}');
DROP EXTENSION statesman CASCADE;
CREATE EXTENSION statesman;

-- From the released 0.3.0 with data in it: the update keeps every record's feed position and
-- message (read_feed before and after compared row for row), and gives a fresh install's objects.
DROP EXTENSION statesman CASCADE;
CREATE EXTENSION statesman VERSION '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
SELECT statesman.declare_root('kept');
-- This library refuses appends to another version's objects, so the records are written as
-- 0.3.0's append wrote them: one ledger row each, revisions counted per address.
INSERT INTO statesman.history (address, root, path, partition, revision, occurred_at, operation, status,
                               payload, content_type, correlation_id, metadata)
SELECT CASE WHEN part = '' THEN 'kept/' || path ELSE 'kept@' || part || '/' || path END, 'kept', path, part,
       row_number() OVER (PARTITION BY path, part ORDER BY i), now(), 'put', 'ok',
       convert_to(jsonb_build_object('n', i, 'tags', jsonb_build_array('a', i))::text, 'UTF8'),
       'application/json', 'c' || i % 4, jsonb_build_object('i', i)
  FROM (SELECT i, 'k' || i % 7 AS path, CASE WHEN i % 3 = 0 THEN 'eu' ELSE '' END AS part
          FROM generate_series(1, 40) i) r
 ORDER BY i;
INSERT INTO statesman.history (address, root, path, partition, revision, occurred_at, operation, status)
SELECT 'kept/k1', 'kept', 'k1', '', max(revision) + 1, now(), 'delete', 'ok'
  FROM statesman.history WHERE address = 'kept/k1';
INSERT INTO statesman.history (address, root, path, partition, revision, occurred_at, operation, status,
                               payload, content_type)
VALUES ('kept/blob', 'kept', 'blob', '', 1, now(), 'put', 'ok', '\x00ff10'::bytea, 'application/octet-stream');
SELECT statesman.sequence_feed() AS sequenced;
CREATE TEMP TABLE feed_before AS SELECT * FROM statesman.read_feed(max_records => 1000);
SELECT count(*) AS records, count(DISTINCT global_position) AS positions,
       min(global_position) = 1 AS from_one FROM feed_before;
-- Two records committed but not sequenced when the update runs: it gives them positions.
INSERT INTO statesman.history (address, root, path, partition, revision, occurred_at, operation, status,
                               payload, content_type)
VALUES ('kept/late', 'kept', 'late', '', 1, now(), 'put', 'ok', '\x01'::bytea, 'application/octet-stream'),
       ('kept/late', 'kept', 'late', '', 2, now(), 'put', 'ok', '\x02'::bytea, 'application/octet-stream');
SELECT count(*) FILTER (WHERE global_position IS NULL) AS unsequenced_before_update FROM statesman.history;
ALTER EXTENSION statesman UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'statesman';
-- Every record has its position; the late ones above the old head, in order, once each.
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced_after_update
  FROM statesman.history h;
SELECT address, revision, global_position > (SELECT max(global_position) FROM feed_before) AS above_old_head
  FROM statesman.read_feed(after => (SELECT max(global_position) FROM feed_before))
 ORDER BY global_position;
CREATE TEMP TABLE feed_after AS SELECT * FROM statesman.read_feed(max_records => 1000)
 WHERE address <> 'kept/late';
-- Both directions must be empty.
SELECT 'only before the update' AS side, global_position, message_id
  FROM (TABLE feed_before EXCEPT TABLE feed_after) x
UNION ALL
SELECT 'only after the update', global_position, message_id
  FROM (TABLE feed_after EXCEPT TABLE feed_before) y
ORDER BY 1, 2;
SELECT count(*) AS records_after FROM feed_after;
-- The next append after the update follows the old head and the late ones.
SELECT revision FROM statesman.append('kept', 'k2', '{"after": "update"}');
SELECT statesman.sequence_feed() AS sequenced;
SELECT global_position > (SELECT max(global_position) FROM feed_before) + 2 AS above_the_late_ones,
       message->>'address' AS address
  FROM statesman.read_feed(after => (SELECT max(global_position) FROM feed_before) + 2);
-- The objects equal a fresh install's here too.
SELECT 'only after upgrade from 0.3.0' AS side, object FROM (SELECT * FROM pg_temp.statesman_objects() EXCEPT TABLE fresh) x
UNION ALL
SELECT 'only in fresh install', object FROM (TABLE fresh EXCEPT SELECT * FROM pg_temp.statesman_objects()) y
ORDER BY 1, 2;

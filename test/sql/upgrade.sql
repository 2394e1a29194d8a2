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

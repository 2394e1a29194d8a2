--
-- hijack: the append functions run their statements with the caller's search_path (they are
-- not SECURITY DEFINER). Hostile objects earlier on that path must capture nothing, and a role
-- granted EXECUTE on append_bytes, with no privileges on statesman's tables, can still append.
--
CREATE ROLE statesman_hijacker;
GRANT EXECUTE ON FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text, integer,
    text, text, text, jsonb, text, timestamptz, timestamptz) TO statesman_hijacker;
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO statesman_hijacker;
-- An "=" for text that matches everything: captured, it would join every root declaration.
CREATE FUNCTION evil.always(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.always);
-- A clock stuck in 2000: captured, occurred_at would be 2000-01-01.
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$;
SELECT statesman.declare_root('hijack', content_type => 'right/type');
SELECT statesman.declare_root('aaa-other', content_type => 'wrong/type');

SET ROLE statesman_hijacker;
SET search_path = evil, pg_catalog, public;
SELECT 'x'::text = 'y'::text AS evil_equals_is_active;
SELECT * FROM statesman.append_bytes('hijack', 'a', '\x01', NULL);
SELECT * FROM statesman.append_bytes('hijack', 'a', '\x02', NULL);
SELECT * FROM statesman.append_bytes('hijack', 'b', '\x03', NULL);
SELECT count(*) FROM statesman.history;   -- no table privileges
RESET search_path;
RESET ROLE;

-- One row per append, the right declaration, the real clock, revisions per address.
SELECT address, revision, content_type, occurred_at > now() - interval '1 hour' AS real_clock
  FROM statesman.history WHERE root = 'hijack' ORDER BY address, revision;

DROP SCHEMA evil CASCADE;
REVOKE ALL ON FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text, integer,
    text, text, text, jsonb, text, timestamptz, timestamptz) FROM statesman_hijacker;
DROP ROLE statesman_hijacker;

-- The shared test helper from store.sql is no longer needed.
DROP FUNCTION public.settle();

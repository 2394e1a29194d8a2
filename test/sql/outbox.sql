--
-- outbox: registering, changing, pausing and dropping outboxes (docs/design.md §4
-- "Registration"), every validation rule with its SQLSTATE, and that a
-- rejected call stores nothing.
--
-- expect_error(statement) runs the statement, catches the error and returns
-- "SQLSTATE: message" (with the hint, when there is one), plus whether the
-- outbox catalog (outboxes, outbox_state, leases, cursors, dead letters) and
-- the set of tables in the database are the same afterwards. "no error" in
-- the output would mean a rule is not enforced.
--
CREATE EXTENSION IF NOT EXISTS statesman;

-- Everything an outbox call could write, without timestamps.
CREATE FUNCTION public.outbox_catalog() RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT concat_ws(' | ',
    (SELECT count(*) || ' outboxes ' || md5(coalesce(string_agg(
              concat_ws(',', outbox_id, sink, sink_options, root, batch_size, poll_interval,
                        require_lease, lease_ttl, lease_renew_interval, min_retry_delay,
                        max_retry_delay, skip_poison_after_attempts, fingerprint,
                        payload_content_type, enabled), ';' ORDER BY outbox_id), ''))
       FROM statesman.outboxes),
    (SELECT count(*) || ' states ' || coalesce(sum(attempts), 0) FROM statesman.outbox_state),
    (SELECT count(*) || ' leases' FROM statesman.leases),
    (SELECT count(*) || ' cursors ' || coalesce(sum(position), 0) FROM statesman.cursors),
    (SELECT count(*) || ' dead letters' FROM statesman.dead_letters),
    (SELECT count(*) || ' tables' FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
        AND n.nspname !~ '^pg_(toast_)?temp_'))
$$;

CREATE FUNCTION public.expect_error(stmt text, OUT result text, OUT nothing_written boolean)
LANGUAGE plpgsql AS $$
DECLARE
  before text := public.outbox_catalog();
  hint text;
BEGIN
  BEGIN
    EXECUTE stmt;
    result := 'no error';
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    result := SQLSTATE || ': ' || SQLERRM || CASE WHEN hint <> '' THEN ' HINT: ' || hint ELSE '' END;
  END;
  nothing_written := public.outbox_catalog() IS NOT DISTINCT FROM before;
END $$;

-- Settings as stored, without timestamps.
CREATE VIEW public.outbox_settings AS
SELECT outbox_id, sink, sink_options, root, batch_size, poll_interval, require_lease, lease_ttl,
       lease_renew_interval, min_retry_delay, max_retry_delay, skip_poison_after_attempts,
       fingerprint, payload_content_type, enabled
  FROM statesman.outboxes;

SELECT public.outbox_catalog() AS catalog_before \gset

--
-- A valid registration with every default: the stored row, its state and
-- lease rows, no cursor yet (a fresh outbox reads the whole backlog).
--
SELECT statesman.create_outbox('plain');
\x on
SELECT * FROM public.outbox_settings WHERE outbox_id = 'plain';
\x off
SELECT outbox_id, dispatcher_pid, dispatcher_state, attempts, last_error, last_error_at,
       last_published_at, published_total, deduplicated_total, skipped_total
  FROM statesman.outbox_state WHERE outbox_id = 'plain';
SELECT outbox_id, holder_pid, acquired_at, renewed_at, round_trips
  FROM statesman.leases WHERE outbox_id = 'plain';
SELECT statesman.cursor_position('plain') AS cursor_position;

-- Every setting given, in named notation; the root is kept in lower case.
SELECT statesman.create_outbox('every.setting:1', sink => 'table',
    sink_options => '{"table": "public.outbox_sink"}', root => 'Orders', batch_size => 100000,
    poll_interval => '10 milliseconds', require_lease => false, lease_ttl => '1 day',
    lease_renew_interval => '1 hour', min_retry_delay => '0', max_retry_delay => '1 hour',
    skip_poison_after_attempts => 1, fingerprint => 'fp-1', payload_content_type => 'text/plain',
    enabled => false);
\x on
SELECT * FROM public.outbox_settings WHERE outbox_id = 'every.setting:1';
\x off
-- The sink's table was created with the documented shape.
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid) AS default
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid = 'public.outbox_sink'::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum;
SELECT pg_get_indexdef(i.indexrelid) AS index
  FROM pg_index i WHERE i.indrelid = 'public.outbox_sink'::regclass;

-- The edges of each range are accepted.
SELECT statesman.create_outbox('edges-low', batch_size => 1, poll_interval => '1 hour',
    lease_ttl => '1 second', min_retry_delay => '500 milliseconds',
    max_retry_delay => '500 milliseconds', lease_renew_interval => '999 milliseconds');
-- lease_renew_interval left out: lease_ttl / 3 (1 s of 3 s) is shorter than
-- lease_ttl, so this is valid; the row keeps NULL ("the default").
SELECT statesman.create_outbox('default-renew', lease_ttl => '3 seconds',
    max_retry_delay => '2 seconds');
-- An id of 63 characters, every allowed kind of character.
SELECT statesman.create_outbox(rpad('Az09_.:-', 63, 'x'));
-- A quoted, mixed-case table name is created as such.
SELECT statesman.create_outbox('quoted-table', sink_options => '{"table": "public.\"Sink Table\""}');
-- An existing table with the right shape is used as it is.
CREATE TABLE public.ready_sink (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                                message jsonb NOT NULL, extra text);
SELECT statesman.create_outbox('ready', sink_options => '{"table": "public.ready_sink"}');
SELECT outbox_id, sink_options, lease_ttl, lease_renew_interval, max_retry_delay
  FROM public.outbox_settings ORDER BY outbox_id;
SELECT to_regclass('public."Sink Table"') IS NOT NULL AS quoted_table_created;
SELECT count(*) AS outboxes, (SELECT count(*) FROM statesman.outbox_state) AS states,
       (SELECT count(*) FROM statesman.leases) AS leases
  FROM statesman.outboxes;

-- Tables that cannot take deliveries: no unique message_id, message_id unique
-- only together with another column, a partial unique index, a missing
-- column; and a view, which is no table.
CREATE TABLE public.no_unique (message_id text, global_position bigint, message jsonb);
CREATE TABLE public.wide_unique (message_id text, global_position bigint, message jsonb,
                                 UNIQUE (message_id, global_position));
CREATE TABLE public.partial_unique (message_id text, global_position bigint, message jsonb);
CREATE UNIQUE INDEX ON public.partial_unique (message_id) WHERE global_position > 0;
CREATE TABLE public.no_message (message_id text PRIMARY KEY, global_position bigint);
CREATE VIEW public.a_view AS SELECT 'x'::text AS message_id, 1::bigint AS global_position, '{}'::jsonb AS message;

SELECT public.outbox_catalog() AS catalog_registered \gset

--
-- Duplicate outbox_id (23505), also with other settings and another sink table
-- (which is then not created).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('plain')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('plain', sink_options => '{"table": "public.never_created"}', batch_size => 5)$$);
SELECT to_regclass('public.never_created') AS never_created;

--
-- Required arguments (22004).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox(NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', batch_size => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', poll_interval => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', require_lease => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_ttl => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', min_retry_delay => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', max_retry_delay => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', enabled => NULL)$$);

--
-- Outbox ids: ^[A-Za-z0-9_.:-]{1,63}$ (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox(repeat('o', 64))$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('with space')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('quo''te')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('semi;colon')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('x; DROP TABLE statesman.outboxes; --')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('dbl"quote')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('ünïcode')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox(E'new\nline')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox(E'trailing-newline\n')$$);

--
-- Unknown sink (22023): the error lists the known ones.
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink => 'kinesis')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink => 'TABLE')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink => '')$$);

--
-- Sink options (22023 unless said otherwise).
--
-- Not an object.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '[]')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '"public.t"')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => 'null')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '42')$$);
-- An unknown key (also next to a valid "table").
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"tabel": "public.t"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.t", "password": "x"}')$$);
-- "table" not a string.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": 1}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": null}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": ["public", "t"]}')$$);
-- Not schema-qualified, too qualified, empty parts, not an identifier.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "delivered"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": ""}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "db.public.t"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public."}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": ".t"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.t; DROP TABLE statesman.outboxes"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.\"unterminated"}')$$);
-- The schema does not exist (3F000).
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "no_such_schema.t"}')$$);
-- Existing tables that cannot take deliveries (42P16), made above.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.no_unique"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.wide_unique"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.partial_unique"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.no_message"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.a_view"}')$$);
-- Names are case-sensitive once quoted: "Public" is another (missing) schema.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "\"Public\".t"}')$$);

--
-- batch_size between 1 and 100000 (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', batch_size => 0)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', batch_size => -1)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', batch_size => 100001)$$);

--
-- poll_interval between 10 milliseconds and 1 hour (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', poll_interval => '9 milliseconds')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', poll_interval => '0')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', poll_interval => '-1 second')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', poll_interval => '1 hour 1 second')$$);

--
-- lease_ttl between 1 second and 1 day (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_ttl => '999 milliseconds', max_retry_delay => '100 milliseconds', min_retry_delay => '0')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_ttl => '1 day 1 second')$$);

--
-- lease_renew_interval positive and shorter than lease_ttl (22023); left out,
-- it is lease_ttl / 3, which is always shorter.
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_renew_interval => '30 seconds')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_renew_interval => '31 seconds')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_ttl => '20 seconds', lease_renew_interval => '20 seconds')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_renew_interval => '0')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_renew_interval => '-1 second')$$);

--
-- max_retry_delay shorter than lease_ttl (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', max_retry_delay => '30 seconds')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', max_retry_delay => '1 minute')$$);
-- The default max_retry_delay (15 s) against a short lease_ttl.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_ttl => '15 seconds')$$);

--
-- min_retry_delay not negative and not above max_retry_delay (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', min_retry_delay => '16 seconds')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', min_retry_delay => '2 seconds', max_retry_delay => '1 second')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', min_retry_delay => '-1 millisecond')$$);

--
-- Intervals whose units have mixed signs: PostgreSQL compares them counting a year as 360
-- days, the worker counts 365.25 (extract(epoch …)). The checks are on the milliseconds
-- the worker uses (statesman._outbox_millis), so each of these is refused (22023) though
-- the interval itself compares as in range.
--
SELECT interval '-1 year 360 days 00:00:01' = interval '1 second' AS compares_as_one_second,
       statesman._millis(interval '-1 year 360 days 00:00:01') AS worker_ms;
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_ttl => '-1 year 360 days 00:00:01', max_retry_delay => '100 milliseconds', min_retry_delay => '0')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_ttl => '1 year -360 days 00:00:01', max_retry_delay => '100 milliseconds', min_retry_delay => '0')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', poll_interval => '-1 year 360 days 00:00:01')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', lease_renew_interval => '-1 year 360 days 00:00:01')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', min_retry_delay => '-1 year 360 days')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', max_retry_delay => '1 year -360 days')$$);
-- '-1 year 365 days 06:00:10' compares as 5 days 06:00:10 but is 10 s to the worker: a
-- valid lease_ttl, and a sink timeout_ms of 20 s is refused against it.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink => 'redis', sink_options => '{"timeout_ms": 20000}', lease_ttl => '-1 year 365 days 06:00:10', max_retry_delay => '1 second')$$);
SELECT statesman.create_outbox('mixed-signs', lease_ttl => '-1 year 365 days 06:00:10', max_retry_delay => '1 second');
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('mixed-signs', lease_ttl => '-1 year 360 days 00:00:01', max_retry_delay => '100 milliseconds', min_retry_delay => '0')$$);
-- What the dispatcher reads: the same milliseconds.
SELECT m.* FROM statesman.outboxes o, statesman._outbox_millis(o) m WHERE o.outbox_id = 'mixed-signs';
SELECT statesman.drop_outbox('mixed-signs');

--
-- skip_poison_after_attempts at least 1, or NULL (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', skip_poison_after_attempts => 0)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', skip_poison_after_attempts => -1)$$);

--
-- root a root name (22023); fingerprint and payload_content_type at most 1024
-- bytes (22023).
--
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', root => 'bad root')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', root => '')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', root => repeat('r', 64))$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', fingerprint => repeat('f', 1025))$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', payload_content_type => repeat('é', 513))$$);

-- A call with several problems stores nothing, whichever it reports.
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink_options => '{"table": "public.never_created"}', batch_size => 0)$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('n', sink => 'kinesis', sink_options => '{"table": "public.never_created"}')$$);
SELECT to_regclass('public.never_created') AS never_created;

-- Nothing was stored by any rejected call.
SELECT public.outbox_catalog() = :'catalog_registered' AS nothing_stored_by_rejected_calls;
SELECT count(*) AS outbox_n FROM statesman.outboxes WHERE outbox_id = 'n';

--
-- alter_outbox(): NULL keeps a setting, '' clears root / fingerprint /
-- payload_content_type, lease_renew_interval => '0' goes back to lease_ttl / 3,
-- skip_poison_after_attempts => 0 turns skipping off.
--
SELECT statesman.create_outbox('alter-me', root => 'Shop', lease_renew_interval => '5 seconds',
    skip_poison_after_attempts => 3, fingerprint => 'fp', payload_content_type => 'application/x',
    sink_options => '{"table": "public.outbox_sink"}');
CREATE TEMP TABLE saved AS SELECT * FROM public.outbox_settings WHERE outbox_id = 'alter-me';
-- Only the outbox id: nothing changes.
SELECT statesman.alter_outbox('alter-me');
SELECT (SELECT to_jsonb(s) FROM public.outbox_settings s WHERE outbox_id = 'alter-me')
       = (SELECT to_jsonb(t) FROM saved t) AS unchanged;
-- Every NULL given explicitly: nothing changes either.
SELECT statesman.alter_outbox('alter-me', sink => NULL, sink_options => NULL, root => NULL,
    batch_size => NULL, poll_interval => NULL, require_lease => NULL, lease_ttl => NULL,
    lease_renew_interval => NULL, min_retry_delay => NULL, max_retry_delay => NULL,
    skip_poison_after_attempts => NULL, fingerprint => NULL, payload_content_type => NULL,
    enabled => NULL);
SELECT (SELECT to_jsonb(s) FROM public.outbox_settings s WHERE outbox_id = 'alter-me')
       = (SELECT to_jsonb(t) FROM saved t) AS unchanged;
\x on
SELECT * FROM public.outbox_settings WHERE outbox_id = 'alter-me';
\x off
-- Changing some settings leaves the others as they were.
SELECT statesman.alter_outbox('alter-me', batch_size => 7, poll_interval => '250 milliseconds',
    root => 'Other');
SELECT root, batch_size, poll_interval, lease_renew_interval, skip_poison_after_attempts,
       fingerprint, payload_content_type, sink_options
  FROM public.outbox_settings WHERE outbox_id = 'alter-me';
-- Clearing and resetting.
SELECT statesman.alter_outbox('alter-me', root => '', fingerprint => '', payload_content_type => '',
    lease_renew_interval => '0', skip_poison_after_attempts => 0);
SELECT root, fingerprint, payload_content_type, lease_renew_interval, skip_poison_after_attempts
  FROM public.outbox_settings WHERE outbox_id = 'alter-me';
-- Another sink table (created when absent), and back.
SELECT statesman.alter_outbox('alter-me', sink_options => '{"table": "public.altered_sink"}');
SELECT sink_options, to_regclass('public.altered_sink') IS NOT NULL AS created
  FROM public.outbox_settings WHERE outbox_id = 'alter-me';
-- Naming the sink it already has keeps its options.
SELECT statesman.alter_outbox('alter-me', sink => 'table');
SELECT sink, sink_options FROM public.outbox_settings WHERE outbox_id = 'alter-me';
SELECT statesman.alter_outbox('alter-me', sink_options => '{}');
SELECT sink_options FROM public.outbox_settings WHERE outbox_id = 'alter-me';
-- enabled and require_lease.
SELECT statesman.alter_outbox('alter-me', enabled => false, require_lease => false);
SELECT enabled, require_lease FROM public.outbox_settings WHERE outbox_id = 'alter-me';
SELECT statesman.alter_outbox('alter-me', enabled => true, require_lease => true);
SELECT enabled, require_lease FROM public.outbox_settings WHERE outbox_id = 'alter-me';

--
-- alter_outbox() validates the merged row: a setting that is fine alone can
-- clash with a stored one (22023); nothing changes then.
--
SELECT statesman.alter_outbox('alter-me', lease_renew_interval => '20 seconds');
SELECT public.outbox_catalog() AS catalog_before_alter \gset
-- lease_ttl below the stored max_retry_delay (15 s).
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', lease_ttl => '10 seconds', lease_renew_interval => '1 second')$$);
-- max_retry_delay below the stored min_retry_delay (200 ms).
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', max_retry_delay => '100 milliseconds')$$);
-- lease_renew_interval at or above the stored lease_ttl (30 s).
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', lease_renew_interval => '30 seconds')$$);
-- A shorter lease_ttl would put the stored lease_renew_interval (20 s) at or
-- above it.
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', lease_ttl => '20 seconds', max_retry_delay => '1 second')$$);
-- Each single rule, as at registration.
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', batch_size => 0)$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', batch_size => 100001)$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', poll_interval => '1 millisecond')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', min_retry_delay => '-1 second')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', skip_poison_after_attempts => -1)$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', root => 'bad root')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', lease_renew_interval => '-1 second')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', sink => 'kinesis')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', sink_options => '[]')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', sink_options => '{"table": "nope"}')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', sink_options => '{"table": "public.no_unique"}')$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('alter-me', sink_options => '{"table": "public.never_created"}', batch_size => 0)$$);
SELECT to_regclass('public.never_created') AS never_created;
-- Unknown outbox (42704), bad or missing id (22023, 22004).
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('no-such-outbox', batch_size => 5)$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('bad id', batch_size => 5)$$);
SELECT * FROM expect_error($$SELECT statesman.alter_outbox(NULL, batch_size => 5)$$);
SELECT public.outbox_catalog() = :'catalog_before_alter' AS nothing_changed_by_rejected_alters;

--
-- pause_outbox() / resume_outbox(): enabled off and on, idempotent; resuming
-- clears the failure count. Unknown outbox: 42704.
--
UPDATE statesman.outbox_state SET attempts = 4 WHERE outbox_id = 'alter-me';
SELECT statesman.pause_outbox('alter-me');
SELECT statesman.pause_outbox('alter-me');
SELECT o.enabled, s.state, s.attempts
  FROM statesman.outboxes o JOIN statesman.outbox_status s USING (outbox_id) WHERE outbox_id = 'alter-me';
SELECT statesman.resume_outbox('alter-me');
SELECT statesman.resume_outbox('alter-me');
SELECT o.enabled, s.state, s.attempts
  FROM statesman.outboxes o JOIN statesman.outbox_status s USING (outbox_id) WHERE outbox_id = 'alter-me';
SELECT public.outbox_catalog() AS catalog_before_unknown \gset
SELECT * FROM expect_error($$SELECT statesman.pause_outbox('no-such-outbox')$$);
SELECT * FROM expect_error($$SELECT statesman.resume_outbox('no-such-outbox')$$);
SELECT * FROM expect_error($$SELECT statesman.drop_outbox('no-such-outbox')$$);
SELECT * FROM expect_error($$SELECT statesman.redeliver('no-such-outbox')$$);
SELECT * FROM expect_error($$SELECT * FROM statesman.dispatch_once('no-such-outbox')$$);
SELECT * FROM expect_error($$SELECT statesman.pause_outbox('bad id')$$);
SELECT * FROM expect_error($$SELECT statesman.resume_outbox(NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.drop_outbox('')$$);
SELECT * FROM expect_error($$SELECT statesman.drop_outbox(NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.redeliver(NULL)$$);
SELECT * FROM expect_error($$SELECT * FROM statesman.dispatch_once('bad id')$$);
SELECT * FROM expect_error($$SELECT * FROM statesman.dispatch_once(NULL)$$);
SELECT public.outbox_catalog() = :'catalog_before_unknown' AS nothing_changed;

--
-- drop_outbox(): the outbox goes with its state, lease row, dead letters and
-- cursor; its sink table and what was delivered into it stay.
--
SELECT statesman.create_outbox('to-drop', sink_options => '{"table": "public.drop_sink"}');
SELECT count(*) AS appended FROM statesman.append('outbox-test', 'x', '{}');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT statesman.advance_cursor('to-drop', 1) AS cursor_written;
INSERT INTO public.drop_sink (message_id, global_position, message) VALUES ('m#1', 1, '{}');
INSERT INTO statesman.dead_letters (outbox_id, global_position, message_id, message, last_error, attempts)
VALUES ('to-drop', 1, 'm#1', '{}', 'boom', 3);
-- An unrelated cursor with a similar name stays.
SELECT statesman.advance_cursor('to-drop-2', 1) AS other_cursor;
SELECT (SELECT count(*) FROM statesman.outboxes WHERE outbox_id = 'to-drop') AS outboxes,
       (SELECT count(*) FROM statesman.outbox_state WHERE outbox_id = 'to-drop') AS states,
       (SELECT count(*) FROM statesman.leases WHERE outbox_id = 'to-drop') AS leases,
       (SELECT count(*) FROM statesman.dead_letters WHERE outbox_id = 'to-drop') AS dead_letters,
       (SELECT count(*) FROM statesman.cursors WHERE outbox_id = 'to-drop') AS cursors,
       (SELECT count(*) FROM statesman.outbox_status WHERE outbox_id = 'to-drop') AS status_rows;
SELECT statesman.drop_outbox('to-drop');
SELECT (SELECT count(*) FROM statesman.outboxes WHERE outbox_id = 'to-drop') AS outboxes,
       (SELECT count(*) FROM statesman.outbox_state WHERE outbox_id = 'to-drop') AS states,
       (SELECT count(*) FROM statesman.leases WHERE outbox_id = 'to-drop') AS leases,
       (SELECT count(*) FROM statesman.dead_letters WHERE outbox_id = 'to-drop') AS dead_letters,
       (SELECT count(*) FROM statesman.cursors WHERE outbox_id = 'to-drop') AS cursors,
       (SELECT count(*) FROM statesman.outbox_status WHERE outbox_id = 'to-drop') AS status_rows,
       statesman.cursor_position('to-drop') AS cursor_position;
SELECT count(*) AS rows_left_in_sink FROM public.drop_sink;
SELECT statesman.cursor_position('to-drop-2') AS other_cursor_kept;
-- Dropped twice: the second time it is unknown (42704).
SELECT * FROM expect_error($$SELECT statesman.drop_outbox('to-drop')$$);
-- The id can be registered again, starting afresh.
SELECT statesman.create_outbox('to-drop', sink_options => '{"table": "public.drop_sink"}');
SELECT statesman.cursor_position('to-drop') AS cursor_position,
       (SELECT attempts FROM statesman.outbox_state WHERE outbox_id = 'to-drop') AS attempts;

--
-- The table sink's target must be as durable as the cursor: an UNLOGGED table
-- (emptied by crash recovery while the cursor stays past its rows), a
-- temporary one, or one in a system schema is refused (22023), also when the
-- table is altered after registration: the page then fails, the cursor stays.
--
CREATE UNLOGGED TABLE public.unlogged_sink (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                                            message jsonb NOT NULL);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('u', sink_options => '{"table": "public.unlogged_sink"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('u', sink_options => '{"table": "pg_catalog.sink"}')$$);
SELECT * FROM expect_error($$SELECT statesman.create_outbox('u', sink_options => '{"table": "information_schema.sink"}')$$);
SELECT statesman.create_outbox('logged', sink_options => '{"table": "public.logged_sink"}');
SELECT * FROM expect_error($$SELECT statesman.alter_outbox('logged', sink_options => '{"table": "public.unlogged_sink"}')$$);
SELECT count(*) AS appended FROM statesman.append('outbox-test', 'durable', '{"n": 1}');
SELECT published > 0 AS delivered FROM statesman.dispatch_once('logged');
SELECT statesman.cursor_position('logged') AS cursor_before \gset
ALTER TABLE public.logged_sink SET UNLOGGED;
SELECT count(*) AS appended FROM statesman.append('outbox-test', 'durable', '{"n": 2}');
SELECT published FROM statesman.dispatch_once('logged');
SELECT statesman.cursor_position('logged') = :cursor_before AS cursor_stayed, state, attempts, last_error
  FROM statesman.outbox_status WHERE outbox_id = 'logged';
SELECT count(*) AS rows_in_unlogged_sink FROM public.logged_sink WHERE message->>'path' = 'durable';
ALTER TABLE public.logged_sink SET LOGGED;
SELECT published FROM statesman.dispatch_once('logged');
SELECT count(*) AS rows_after_set_logged FROM public.logged_sink WHERE message->>'path' = 'durable';
SELECT statesman.drop_outbox('logged');
DROP TABLE public.unlogged_sink, public.logged_sink;

--
-- Clean up: no enabled outbox may stay behind (it would hold retention back
-- in the files that follow).
--
SELECT statesman.drop_outbox(outbox_id) FROM statesman.outboxes ORDER BY outbox_id;
SELECT count(*) AS outboxes_left, (SELECT count(*) FROM statesman.outbox_state) AS states_left,
       (SELECT count(*) FROM statesman.leases) AS leases_left,
       (SELECT count(*) FROM statesman.dead_letters) AS dead_letters_left
  FROM statesman.outboxes;
DELETE FROM statesman.cursors WHERE outbox_id = 'to-drop-2';
DROP TABLE public.outbox_sink, public."Sink Table", public.ready_sink, public.no_unique,
           public.wide_unique, public.partial_unique, public.no_message, public.altered_sink,
           public.drop_sink;
DROP TABLE saved;
SELECT public.outbox_catalog() = :'catalog_before' AS catalog_as_before;
DROP VIEW public.a_view, public.outbox_settings;
DROP FUNCTION public.expect_error(text);
DROP FUNCTION public.outbox_catalog();

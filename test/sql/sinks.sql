--
-- sinks: the sinks this build knows, and the options of the sinks outside this
-- database (redis, postgres, nats, rabbitmq; docs/design.md §6) as create_outbox and alter_outbox check
-- them: defaults filled in, every rule an ERROR with SQLSTATE 22023 that names
-- the option, nothing written, and no secret in any message or view.
-- (Delivery to real servers is tested in test/t/006_redis_sink.pl and
-- test/t/007_postgres_sink.pl, test/t/030_nats_sink.pl, test/t/033_rabbitmq_sink.pl.)
--
CREATE EXTENSION IF NOT EXISTS statesman;

-- Everything an outbox call could write.
CREATE FUNCTION public.sink_catalog() RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT concat_ws(' | ',
    (SELECT count(*) || ' outboxes ' || md5(coalesce(string_agg(
              concat_ws(',', outbox_id, sink, sink_options, lease_ttl), ';' ORDER BY outbox_id), ''))
       FROM statesman.outboxes),
    (SELECT count(*) || ' states' FROM statesman.outbox_state),
    (SELECT count(*) || ' leases' FROM statesman.leases))
$$;

-- "SQLSTATE: message (HINT: hint)", whether nothing was written, and whether
-- the error's message, detail or hint holds the secret (its context quotes the
-- caller's own statement, which does).
CREATE FUNCTION public.sink_error(stmt text, secret text DEFAULT NULL,
                                  OUT result text, OUT nothing_written boolean, OUT secret_shown boolean)
LANGUAGE plpgsql AS $$
DECLARE
  before text := public.sink_catalog();
  hint text; detail text;
BEGIN
  secret_shown := false;
  BEGIN
    EXECUTE stmt;
    result := 'no error';
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT, detail = PG_EXCEPTION_DETAIL;
    result := SQLSTATE || ': ' || SQLERRM || CASE WHEN hint <> '' THEN ' HINT: ' || hint ELSE '' END;
    secret_shown := secret IS NOT NULL AND
                    strpos(concat_ws(' ', SQLERRM, hint, detail), secret) > 0;
  END;
  nothing_written := public.sink_catalog() IS NOT DISTINCT FROM before;
END $$;

SELECT statesman._known_sinks();

--
-- redis: every default, then each option's rule.
--
SELECT statesman.create_outbox('r-defaults', 'redis');
SELECT sink, sink_options FROM statesman.outboxes WHERE outbox_id = 'r-defaults';
SELECT statesman.create_outbox('r-all', 'redis',
  '{"host": "cache.internal", "port": 6380, "db": 3, "password": "s3cr3t-r", "key_prefix": "shop",
    "stream": "orders", "max_length": 100000, "timeout_ms": 2000}');
SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'r-all';

SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"hots": "x"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '[]')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '"redis://x"')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"host": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"host": 1}')$$);
-- null is the option's default (docs/design.md §6 writes "max_length": null for "no trimming").
SELECT statesman.create_outbox('r-nulls', 'redis', '{"host": null, "max_length": null, "timeout_ms": null}');
SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'r-nulls';
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"port": "6379"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"port": 0}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"port": 65536}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"port": 6379.5}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"db": -1}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"key_prefix": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"stream": ["a"]}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"max_length": 0}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"max_length": 99999999999999999999}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"timeout_ms": 0}')$$);
-- A sink call must end before the lease could expire.
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"timeout_ms": 30000}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"timeout_ms": 5000}',
                                    lease_ttl => '4 seconds', max_retry_delay => '1 second')$$);
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('r-all', lease_ttl => '2 seconds', max_retry_delay => '1 second')$$);
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('r-all', sink_options => '{"timeout_ms": 40000}')$$);
-- A bad option next to a password: the password is in no part of the error.
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"password": "hunter2-r", "port": -5}')$$,
                                'hunter2-r');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"password": 12345}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"password": ""}')$$);
-- A null password is refused (22004), not stored as "no password".
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"password": null}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('r-all', sink_options => '{"password": null}')$$);
SELECT sink_options ? 'password' AS password_kept FROM statesman.outboxes WHERE outbox_id = 'r-all';
-- Routing by root and the format (docs/sinks.md): placeholders in "stream", "format".
SELECT statesman.create_outbox('r-routed', 'redis', '{"stream": "{store}.{root}.{partition}", "format": "cloudevents"}');
SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'r-routed';
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"stream": "by-{rot}"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"stream": "by-{root"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"stream": "by-root}"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"format": "avro"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('r', 'redis', '{"format": 1}')$$);

--
-- nats: every default, then each option's rule; every bad option is named in one error.
--
SELECT statesman.create_outbox('n-defaults', 'nats');
SELECT sink, sink_options FROM statesman.outboxes WHERE outbox_id = 'n-defaults';
SELECT statesman.create_outbox('n-all', 'nats',
  '{"url": "nats://mq.internal:4223,nats://mq2.internal:4223", "subject": "shop.{store}.{root}", "user": "shop",
    "password": "s3cr3t-n", "timeout_ms": 2000, "format": "cloudevents"}');
SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'n-all';
SELECT statesman.create_outbox('n-token', 'nats', '{"token": "s3cr3t-t", "subject": "events"}');
SELECT sink_options - 'token' AS options, sink_options ? 'token' AS token_kept FROM statesman.outboxes WHERE outbox_id = 'n-token';

SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"uri": "nats://x"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"url": "http://x:4222"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"url": "nats://"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"url": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"url": 4222}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"subject": "a.{roots}"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"subject": "a..b"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"subject": "a.*"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"subject": "a.{root}."}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"subject": "a b"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"timeout_ms": 0}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"timeout_ms": 30000}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"format": "json"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"user": "u"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"password": "hunter2-n"}')$$, 'hunter2-n');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"user": "u", "password": "hunter2-n", "token": "hunter3-n"}')$$, 'hunter');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"token": null}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"password": null, "user": "u"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"token": ""}')$$);
-- Several bad options, one error naming each; a password in the URL is never echoed.
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats',
  '{"url": "http://u:hunter2-n@x", "subject": "{nope}", "timeout_ms": -1, "format": "xml"}')$$, 'hunter2-n');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('n', 'nats', '{"url": "nats://u:hunter2-n@"}')$$, 'hunter2-n');

--
-- rabbitmq: every default, then each option's rule; every bad option is named in one error.
--
SELECT statesman.create_outbox('q-defaults', 'rabbitmq');
SELECT sink, sink_options FROM statesman.outboxes WHERE outbox_id = 'q-defaults';
SELECT statesman.create_outbox('q-all', 'rabbitmq',
  '{"host": "mq.internal", "port": 5673, "vhost": "shop", "user": "shop", "password": "s3cr3t-q",
    "exchange": "events", "routing_key": "shop.{store}.{root}.{partition}", "timeout_ms": 2000,
    "format": "cloudevents"}');
SELECT sink_options - 'password' AS options, sink_options ? 'password' AS password_kept
  FROM statesman.outboxes WHERE outbox_id = 'q-all';

SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"url": "amqp://x"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"host": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"host": "mq:5672"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"host": "mq/shop"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"port": 0}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"port": "5672"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"vhost": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"exchange": 1}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"exchange": "a\u0001b"}')$$);
SELECT left(result, 100) AS result, nothing_written, secret_shown FROM public.sink_error(format($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"exchange": "%s"}')$$, repeat('x', 256)));
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"routing_key": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"routing_key": "a.{roots}"}')$$);
SELECT left(result, 100) AS result, nothing_written, secret_shown FROM public.sink_error(format($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"routing_key": "%s{root}"}')$$, repeat('k', 255)));
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"timeout_ms": 0}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"timeout_ms": 30000}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"format": "json"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"user": "u"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"password": "hunter2-q"}')$$, 'hunter2-q');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"password": null, "user": "u"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq', '{"user": "u", "password": ""}')$$);
-- Several bad options, one error naming each; the password is never echoed.
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('q', 'rabbitmq',
  '{"host": "h", "port": 70000, "password": "hunter2-q", "routing_key": "{nope}", "timeout_ms": -1, "format": "xml"}')$$, 'hunter2-q');
-- webhook: the defaults, then each option's rule; every bad option is named in one error; no
-- secret (the secret, a header's value, the url's user info or query) is echoed.
--
SELECT statesman.create_outbox('w-defaults', 'webhook', '{"url": "https://hooks.example.com/in"}');
SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'w-defaults';
SELECT statesman.create_outbox('w-all', 'webhook',
  '{"url": "http://hooks.internal:8080/statesman", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "headers": {"Authorization": "Bearer s3cr3t-w", "X-Tenant": "shop"}, "batch_size": 100, "timeout_ms": 2000,
    "format": "cloudevents", "tls_verify": false}');
SELECT sink_options - 'secret' - 'headers' AS options, sink_options ? 'secret' AS secret_kept,
       sink_options -> 'headers' ? 'Authorization' AS header_kept
  FROM statesman.outboxes WHERE outbox_id = 'w-all';
SELECT statesman.create_outbox('w-plain', 'webhook', '{"url": "http://h/", "secret": "plain text key"}');

SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"uri": "http://x"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "ftp://x/"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x/a b"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": 80}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://u:hunter2-w@"}')$$, 'hunter2-w');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "ws://x/?token=hunter2-w"}')$$, 'hunter2-w');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "secret": null}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "secret": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "secret": "whsec_hunter2-w!"}')$$, 'hunter2-w');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "headers": ["a"]}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "headers": {"Bad Name": "v"}}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "headers": {"Webhook-Signature": "hunter2-w"}}')$$, 'hunter2-w');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "headers": {"X-Key": 7}}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "headers": {"X-Key": "hunter2-w\r\nX: y"}}')$$, 'hunter2-w');
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "batch_size": 0}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "batch_size": 10001}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "timeout_ms": 30000}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "format": "json"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook', '{"url": "http://x", "tls_verify": "no"}')$$);
-- Several bad options, one error naming each.
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('w', 'webhook',
  '{"url": "http://u:hunter2-w@x/?k=v", "secret": "whsec_!!", "batch_size": -1, "format": "xml", "tls_verify": 1}')$$, 'hunter2-w');

--
-- postgres
--
SELECT statesman.create_outbox('p-defaults', 'postgres', '{"conninfo": "host=127.0.0.1 dbname=shop"}');
SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'p-defaults';
SELECT statesman.create_outbox('p-all', 'postgres',
  '{"conninfo": "postgresql://shop:s3cr3t-p@db.internal:5433/shop", "table": "events.delivered", "timeout_ms": 1500}');
SELECT sink_options->>'table' AS "table", sink_options->'timeout_ms' AS timeout_ms
  FROM statesman.outboxes WHERE outbox_id = 'p-all';

SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres', '{"conninfo": ""}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres', '{"conninfo": 5}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres', '{"conninfo": "host=x", "tabel": "a.b"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres', '{"conninfo": "host=x", "table": "nodot"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres', '{"conninfo": "host=x", "table": "a.b.c"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres', '{"conninfo": "host=x", "timeout_ms": 31000}')$$);
-- Malformed conninfo: libpq's complaint, without the password.
SELECT (e).nothing_written, (e).secret_shown, (e).result LIKE '22023: %' AS is_22023
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "password=hunter2-p host=x bogus_keyword=1"}')$$, 'hunter2-p') e) x;
SELECT (e).nothing_written, (e).secret_shown, (e).result LIKE '22023: %' AS is_22023
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "postgresql://u:hunter2-p@[::1"}')$$, 'hunter2-p') e) x;
SELECT (e).nothing_written, (e).secret_shown, (e).result LIKE '22023: %' AS is_22023
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "password=''hunter2-p host=x"}')$$, 'hunter2-p') e) x;
-- libpq quotes a URI's password in its complaint about a bad percent-escape: the quote is
-- redacted.
SELECT (e).nothing_written, (e).secret_shown, (e).result
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "postgresql://u:hunter2-p%zz@x/db"}')$$, 'hunter2-p') e) x;

-- Every part of a malformed conninfo that is not a known keyword is redacted in libpq's
-- complaint: a password run into its keyword (no "="), in either form, a misspelled keyword
-- and its value, a URI parameter that is not a keyword.
SELECT (e).nothing_written, (e).secret_shown, (e).result
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "host=x passwordhunter2-p"}')$$, 'hunter2-p') e) x;
SELECT (e).nothing_written, (e).secret_shown, (e).result
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "postgresql://u@x/db?passwordhunter2-p"}')$$, 'hunter2-p') e) x;
SELECT (e).nothing_written, (e).secret_shown, (e).result
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "postgresql://u@x/db?sslmode=disable&hunter2-p=1"}')$$, 'hunter2-p') e) x;
SELECT (e).nothing_written, (e).secret_shown, (e).result
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "host=x pasword=hunter2-p"}')$$, 'pasword') e) x;
SELECT (e).nothing_written, (e).secret_shown, (e).result
  FROM (SELECT public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
          '{"conninfo": "host=x password=''hunter2-p dbname=db"}')$$, 'hunter2-p') e) x;
-- A URI whose "@" is missing parses (libpq reads the password as the port); the failed
-- connection's complaint about that port is redacted in last_error.
SELECT statesman.create_outbox('p-noat', 'postgres', '{"conninfo": "postgresql://u:hunter2-p/db"}');
SELECT published FROM statesman.dispatch_once('p-noat');
SELECT attempts, last_error LIKE '%hunter2%' AS secret_shown, last_error
  FROM statesman.outbox_status WHERE outbox_id = 'p-noat';
SELECT statesman.drop_outbox('p-noat');

--
-- The password rule (postgres_fdw's password_required): a role that is not a
-- superuser must give a password in the conninfo (2F003), may not waive the
-- rule (42501), and answers for the outbox once it alters it; superusers may.
--
CREATE ROLE sinks_owner LOGIN;
GRANT EXECUTE ON FUNCTION statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) TO sinks_owner;
GRANT EXECUTE ON FUNCTION statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) TO sinks_owner;
SET ROLE sinks_owner;
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p-user', 'postgres',
  '{"conninfo": "host=127.0.0.1 dbname=postgres user=postgres"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p-user', 'postgres',
  '{"conninfo": "postgresql://postgres@127.0.0.1/postgres"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p-user', 'postgres',
  '{"conninfo": "host=127.0.0.1 user=postgres password=''''"}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p-user', 'postgres',
  '{"conninfo": "host=127.0.0.1 user=postgres password=x", "password_required": false}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p-user', 'postgres',
  '{"conninfo": "host=127.0.0.1 user=postgres"}', enabled => false)$$);
-- Altering a superuser's outbox without a password, even only its batch size.
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('p-defaults', batch_size => 7)$$);
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('p-defaults',
  sink_options => '{"conninfo": "host=127.0.0.1 dbname=postgres user=postgres"}')$$);
-- With a password of its own it may; so may sinks without the rule.
SELECT statesman.create_outbox('p-user', 'postgres',
  '{"conninfo": "host=127.0.0.1 dbname=shop user=shop password=s3cr3t-u"}');
SELECT statesman.create_outbox('p-user-uri', 'postgres', '{"conninfo": "postgresql://shop:s3cr3t-u@127.0.0.1/shop"}');
SELECT statesman.create_outbox('r-user', 'redis');
SELECT statesman.create_outbox('t-user');
RESET ROLE;
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
  '{"conninfo": "host=x", "password_required": null}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.create_outbox('p', 'postgres',
  '{"conninfo": "host=x", "password_required": "no"}')$$);
SELECT statesman.create_outbox('p-waived', 'postgres',
  '{"conninfo": "host=127.0.0.1 dbname=shop", "password_required": false}');
-- A superuser's waiver survives another role's alter of other settings, not of the options.
SET ROLE sinks_owner;
SELECT statesman.alter_outbox('p-waived', batch_size => 9);
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('p-waived',
  sink_options => '{"conninfo": "host=127.0.0.1 dbname=postgres user=postgres", "password_required": false}')$$);
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('p-waived',
  sink_options => '{"conninfo": "host=127.0.0.1 dbname=postgres user=postgres"}')$$);
RESET ROLE;
SELECT statesman.create_outbox('p-waived-not', 'postgres',
  '{"conninfo": "host=127.0.0.1 dbname=shop", "password_required": true}');
-- A superuser role that registers an outbox, then loses superuser, then is dropped.
CREATE ROLE sinks_admin SUPERUSER;
SET ROLE sinks_admin;
SELECT statesman.create_outbox('p-admin', 'postgres', '{"conninfo": "host=127.0.0.1 dbname=shop"}');
RESET ROLE;
-- What each outbox records, and the rule's verdict a dispatcher connects with.
SELECT outbox_id, CASE WHEN changed_by = session_user THEN '(session user)' ELSE changed_by END AS changed_by,
       sink_options->'password_required' AS stored,
       statesman._sink_options_to_use(o)->'password_required' AS required
  FROM statesman.outboxes o WHERE outbox_id ~ '^(p-|r-user|t-user)' ORDER BY outbox_id;
ALTER ROLE sinks_admin NOSUPERUSER;
SELECT statesman._sink_options_to_use(o)->'password_required' AS required_after_nosuperuser
  FROM statesman.outboxes o WHERE outbox_id = 'p-admin';
DROP ROLE sinks_admin;
SELECT statesman._sink_options_to_use(o)->'password_required' AS required_after_drop
  FROM statesman.outboxes o WHERE outbox_id = 'p-admin';
-- A superuser's alter makes a non-superuser's outbox the superuser's.
SELECT statesman.alter_outbox('p-user', batch_size => 5);
SELECT changed_by = session_user AS by_session_user, statesman._sink_options_to_use(o)->'password_required' AS required
  FROM statesman.outboxes o WHERE outbox_id = 'p-user';
SELECT statesman.drop_outbox(o.outbox_id) FROM statesman.outboxes o
  WHERE outbox_id IN ('p-user', 'p-user-uri', 'r-user', 't-user', 'p-waived', 'p-waived-not', 'p-admin')
  ORDER BY o.outbox_id;
REVOKE ALL ON FUNCTION statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM sinks_owner;
REVOKE ALL ON FUNCTION statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM sinks_owner;
DROP ROLE sinks_owner;

--
-- Switching sinks: a new sink starts from its own defaults; back to `table`
-- too.
--
SELECT statesman.create_outbox('switch');
SELECT statesman.alter_outbox('switch', sink => 'redis');
SELECT sink, sink_options FROM statesman.outboxes WHERE outbox_id = 'switch';
SELECT * FROM public.sink_error($$SELECT statesman.alter_outbox('switch', sink => 'postgres')$$);
SELECT statesman.alter_outbox('switch', sink => 'table');
SELECT sink, sink_options FROM statesman.outboxes WHERE outbox_id = 'switch';

--
-- Secrets: the status view (granted to pg_monitor) shows no options, and a
-- role without grants reads neither the table nor the options through any
-- function.
--
SELECT count(*) AS rows, bool_or(s::text LIKE '%s3cr3t%') AS secret_shown
  FROM statesman.outbox_status s;
CREATE ROLE sinks_reader LOGIN IN ROLE pg_monitor;
SET ROLE sinks_reader;
SELECT count(*) AS rows_visible, bool_or(s::text LIKE '%s3cr3t%') AS secret_shown FROM statesman.outbox_status s;
SELECT * FROM public.sink_error($$SELECT sink_options FROM statesman.outboxes$$);
SELECT * FROM public.sink_error($$SELECT statesman._check_sink_options('redis', '{}')$$);
SELECT * FROM public.sink_error($$SELECT * FROM statesman._feed_page(0, NULL, 10, NULL)$$);
RESET ROLE;
DROP ROLE sinks_reader;

--
-- What the redis and postgres sinks send: _message_text writes the message as
-- JSON text directly; it must equal the jsonb message's text for every record
-- the earlier tests left in this database, and for strings that need escaping.
--
SELECT count(*) > 0 AS some_records,
       bool_and(statesman._message_text(v.store, v.epoch, h.address, h.root, h.path, h.partition, h.revision,
                  statesman._position_of(h), h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
                  h.source, h.fingerprint, h.content_type, h.serializer_id, h.payload, h.correlation_id,
                  h.causation_id, h.metadata, h.error)
                = statesman._message(v.store, v.epoch, h.address, h.root, h.path, h.partition, h.revision,
                  statesman._position_of(h), h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
                  h.source, h.fingerprint, h.content_type, h.serializer_id, h.payload, h.correlation_id,
                  h.causation_id, h.metadata, h.error)::text) AS all_equal
  FROM statesman.history h,
       (SELECT COALESCE(store_name, current_database()) AS store, epoch FROM statesman.store) v;
SELECT m = statesman._message('s', '00000000-0000-0000-0000-000000000001', E'a/"q"\\\t\x01\x1f é 😀', 'r', 'p', '',
             9223372036854775807, 1, '2026-11-30 12:00:00.5+00', 'put', 'ok', E'v\nt', -2147483648,
             E'src\r\b\f', NULL, NULL, 'ser', '\x00ff'::bytea, '', NULL,
             '{"k": ["x\u0007", 1.50, {"z": null}]}', NULL)::text AS equal, m
  FROM statesman._message_text('s', '00000000-0000-0000-0000-000000000001', E'a/"q"\\\t\x01\x1f é 😀', 'r', 'p', '',
             9223372036854775807, 1, '2026-11-30 12:00:00.5+00', 'put', 'ok', E'v\nt', -2147483648,
             E'src\r\b\f', NULL, NULL, 'ser', '\x00ff'::bytea, '', NULL,
             '{"k": ["x\u0007", 1.50, {"z": null}]}', NULL) m;
-- The text writer scans strings eight characters at a time: a character to escape at every
-- place around those steps (once or twice), in the fields that carry the caller's text.
SELECT count(*) AS strings,
       count(*) FILTER (WHERE statesman._message_text('s', '00000000-0000-0000-0000-000000000001', 'a/' || s, 'r', 'p', '',
                                1, 1, '2026-11-30 12:00:00+00', 'put', 'ok', s, NULL, s, NULL, NULL, NULL, NULL, s, NULL,
                                NULL, s)
                            = statesman._message('s', '00000000-0000-0000-0000-000000000001', 'a/' || s, 'r', 'p', '',
                                1, 1, '2026-11-30 12:00:00+00', 'put', 'ok', s, NULL, s, NULL, NULL, NULL, NULL, s, NULL,
                                NULL, s)::text) AS text_equal
  FROM (SELECT repeat('a', i) || c || repeat('b', n) || CASE WHEN n % 3 = 0 THEN c ELSE '' END AS s
          FROM generate_series(0, 17) i, generate_series(0, 9) n,
               unnest(ARRAY['"', E'\\', E'\x01', E'\x1f', E'\n', E'\t', ' ', 'é', '😀', '~', E'\x7f']) c) t;

SELECT statesman.drop_outbox(o.outbox_id) FROM statesman.outboxes o ORDER BY o.outbox_id;
DROP FUNCTION public.sink_error(text, text);
DROP FUNCTION public.sink_catalog();

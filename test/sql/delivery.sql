--
-- delivery: statesman.dispatch_once() end to end with the table sink (docs/design.md §4):
-- what a cycle returns, what lands in the sink, deduplication, the root filter,
-- envelope fallbacks, paging, failures and backoff state, poison skipping into
-- dead_letters, redelivery, pausing, outbox_status, and retention that waits
-- for delivery (docs/design.md §2, no prune loss).
--
-- The workers are off in this cluster: every cycle here is a dispatch_once()
-- call. Positions are shown relative to the head captured before each part
-- (:base); values that differ between runs (pids, timestamps, epochs) as
-- booleans.
--
CREATE EXTENSION IF NOT EXISTS statesman;

SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT store FROM statesman.store_info() \gset

-- The sink tables of this file.
CREATE SCHEMA sinks;

-- Messages in a sink table that read_feed() has the same way (message id,
-- position and message), and the ones it does not.
CREATE FUNCTION public.sink_vs_feed(sink regclass, after bigint, root text DEFAULT NULL,
    OUT in_sink bigint, OUT in_feed bigint, OUT same bigint)
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format($q$
    SELECT (SELECT count(*) FROM %1$s WHERE global_position > $1),
           (SELECT count(*) FROM statesman.read_feed($1, 100000, $2)),
           (SELECT count(*) FROM %1$s s JOIN statesman.read_feed($1, 100000, $2) f
               ON f.message_id = s.message_id AND f.global_position = s.global_position
              AND f.message = s.message)$q$, sink)
    USING after, root INTO in_sink, in_feed, same;
END $$;

-- "SQLSTATE: message" of a statement's error, or "no error".
CREATE FUNCTION public.expect_error(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE stmt;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- One outbox's status row, with volatile values as booleans.
CREATE VIEW public.status AS
SELECT outbox_id, sink, enabled, state, cursor_position IS NOT NULL AS has_cursor,
       cursor_position = head_position AS caught_up, lag_records, lag_seconds > 0 AS lagging, leader_pid IS NOT NULL AS has_leader,
       lease_renewed_at IS NOT NULL AS has_lease_renewal, attempts, last_error,
       last_error_at IS NOT NULL AS has_error_time, published_total, deduplicated_total,
       skipped_total, parked, lease_round_trips, last_published_at IS NOT NULL AS has_published_at
  FROM statesman.outbox_status;

--
-- A cycle: dispatch_once() publishes every record after the cursor, advances
-- the cursor to the last one, and the sink holds exactly read_feed()'s messages.
--
SELECT statesman.head_position() AS base \gset
SELECT statesman.create_outbox('main', sink_options => '{"table": "sinks.main"}');
SELECT statesman.seed_cursor('main') = :base AS seeded_at_head;
SELECT * FROM statesman.append('Deliver', 'item/1', '{"n": 1}');
SELECT * FROM statesman.append('Deliver', 'item/1', '{"n": 2}', partition => 'p1',
    status => 'warn', value_type => 'Item', schema_version => 2, source => 'svc',
    correlation_id => 'c-1', causation_id => 'k-1', metadata => '{"m": true}', error => 'e');
SELECT * FROM statesman.append_bytes('Deliver', 'blob', '\x00ff10', 'application/octet-stream', 'ser.1');
SELECT * FROM statesman.append_delete('Deliver', 'item/1');
SELECT * FROM statesman.append('Elsewhere', 'x', '[1, 2]');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('main');
SELECT * FROM public.sink_vs_feed('sinks.main', :base);
SELECT message_id = :'store' || '/' || (message->>'address') || '#' || (message->>'revision') AS message_id_ok,
       global_position - :base AS position, message->>'address' AS address,
       message->>'revision' AS revision, message->>'operation' AS operation,
       published_at IS NOT NULL AS has_published_at
  FROM sinks.main ORDER BY global_position;
SELECT statesman.cursor_position('main') - :base AS cursor_position;
-- Nothing new: a second cycle publishes nothing and the cursor stays.
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('main');
SELECT * FROM public.status WHERE outbox_id = 'main';

--
-- Deduplication: a cursor seeded back re-reads records the sink already has;
-- they count as deduplicated, not published, and the sink keeps one copy.
--
SELECT statesman.seed_cursor('main', :base + 2) - :base AS seeded_back_to;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('main');
-- Some already there, some not: the missing ones are published.
DELETE FROM sinks.main WHERE global_position IN (:base + 2, :base + 4);
SELECT statesman.seed_cursor('main', :base + 1) - :base AS seeded_back_to;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('main');
SELECT * FROM public.sink_vs_feed('sinks.main', :base);
SELECT published_total, deduplicated_total FROM public.status WHERE outbox_id = 'main';

--
-- A fresh outbox (no cursor) reads the entire retained backlog.
--
SELECT statesman.create_outbox('backlog', sink_options => '{"table": "sinks.backlog"}', batch_size => 7);
SELECT statesman.cursor_position('backlog') AS no_cursor_yet;
SELECT published = (SELECT count(*) FROM statesman.read_feed(NULL, 100000)) AS published_all,
       skipped, deduplicated, cursor_position = statesman.head_position() AS at_head
  FROM statesman.dispatch_once('backlog');
SELECT in_sink = in_feed AND in_feed = same AS sink_equals_feed FROM public.sink_vs_feed('sinks.backlog', 0);
SELECT statesman.drop_outbox('backlog');

--
-- root: only that root's records are published (the root name is
-- case-insensitive); the cursor still advances over the others.
--
SELECT statesman.head_position() AS base \gset
SELECT statesman.create_outbox('only-a', sink_options => '{"table": "sinks.only_a"}', root => 'Filter-A');
SELECT statesman.seed_cursor('only-a') = :base AS seeded_at_head;
SELECT * FROM statesman.append('filter-a', 'one', '1');
SELECT * FROM statesman.append('Filter-B', 'one', '1');
SELECT * FROM statesman.append('FILTER-A', 'two', '2');
SELECT * FROM statesman.append('filter-b', 'two', '2');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('only-a');
SELECT global_position - :base AS position, message->>'root' AS root, message->>'address' AS address
  FROM sinks.only_a ORDER BY global_position;
SELECT * FROM public.sink_vs_feed('sinks.only_a', :base, 'filter-a');
-- Only other roots after the cursor: nothing published, the cursor moves on.
SELECT * FROM statesman.append('Filter-B', 'three', '3');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('only-a');
SELECT lag_records FROM public.status WHERE outbox_id = 'only-a';

--
-- Envelope fallbacks: a message's fingerprint and contentType come from the
-- record's envelope, else from the outbox's fingerprint / payload_content_type,
-- else from the root's declaration.
--
SELECT statesman.head_position() AS base \gset
SELECT statesman.create_outbox('env-with', sink_options => '{"table": "sinks.env_with"}',
    fingerprint => 'fp-outbox', payload_content_type => 'ct/outbox');
SELECT statesman.create_outbox('env-without', sink_options => '{"table": "sinks.env_without"}');
SELECT statesman.seed_cursor('env-with') = :base AND statesman.seed_cursor('env-without') = :base AS seeded;
-- A declared root: its records carry the declaration in their own envelope.
SELECT statesman.declare_root('env-decl', fingerprint => 'fp-decl', content_type => 'ct/decl');
SELECT * FROM statesman.append_bytes('env-decl', 'bytes', '\x01', NULL);
-- JSON records carry application/json in their envelope.
SELECT * FROM statesman.append('env-decl', 'json', '{}');
-- No declaration at append time and no content type: an empty envelope ...
SELECT * FROM statesman.append_bytes('env-bare', 'bytes', '\x02', NULL);
SELECT * FROM statesman.append_bytes('env-late', 'bytes', '\x03', NULL);
SELECT * FROM statesman.append_bytes('env-late', 'typed', '\x04', 'ct/record');
-- ... and env-late is declared only afterwards.
SELECT statesman.declare_root('env-late', fingerprint => 'fp-late', content_type => 'ct/late');
SELECT address, fingerprint, content_type FROM statesman.history h
 WHERE root IN ('env-decl', 'env-bare', 'env-late') ORDER BY statesman._position_of(h);
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('env-with');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('env-without');
SELECT w.message->>'address' AS address,
       w.message->>'fingerprint' AS with_fingerprint, w.message->>'contentType' AS with_content_type,
       o.message->>'fingerprint' AS without_fingerprint, o.message->>'contentType' AS without_content_type
  FROM sinks.env_with w JOIN sinks.env_without o USING (message_id)
 ORDER BY w.global_position;
-- Without outbox fallbacks the sink has read_feed()'s messages exactly; with
-- them, the messages differ only where the outbox filled something in.
SELECT * FROM public.sink_vs_feed('sinks.env_without', :base);
SELECT * FROM public.sink_vs_feed('sinks.env_with', :base);
SELECT count(*) AS differ_only_in_envelope
  FROM sinks.env_with w JOIN statesman.read_feed(:base, 100) f USING (message_id)
 WHERE w.message - '{fingerprint,contentType}'::text[] = f.message - '{fingerprint,contentType}'::text[];
SELECT statesman.drop_outbox('env-with');
SELECT statesman.drop_outbox('env-without');

--
-- Paging: a cycle reads batch_size records per page and loops pages until a
-- page is empty.
--
SELECT statesman.head_position() AS base \gset
SELECT statesman.create_outbox('pages', sink_options => '{"table": "sinks.pages"}', batch_size => 2);
SELECT statesman.seed_cursor('pages') = :base AS seeded_at_head;
SELECT count(*) AS appended FROM generate_series(1, 7) i, statesman.append('paged', 'r/' || i, to_jsonb(i));
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT * FROM public.sink_vs_feed('sinks.pages', :base);
-- A sink that refuses one message: the pages before it are delivered, the
-- cursor stops at the end of the last accepted page.
CREATE FUNCTION sinks.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.message->>'path' LIKE 'poison%' THEN
    RAISE EXCEPTION 'refusing %', NEW.message->>'path';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON sinks.pages FOR EACH ROW EXECUTE FUNCTION sinks.refuse_poison();
SELECT statesman.head_position() AS base \gset
-- Pages of 2: [ok/1, ok/2] [ok/3, poison] [ok/5, ok/6]
SELECT * FROM statesman.append('paged', 'ok/1', '1');
SELECT * FROM statesman.append('paged', 'ok/2', '2');
SELECT * FROM statesman.append('paged', 'ok/3', '3');
SELECT * FROM statesman.append('paged', 'poison', '4');
SELECT * FROM statesman.append('paged', 'ok/5', '5');
SELECT * FROM statesman.append('paged', 'ok/6', '6');

--
-- Failures: the batch stays, the cycle reports it with a WARNING, and the
-- status view shows backing_off, the attempts and the last error.
--
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT state, attempts, last_error, has_error_time, published_total, skipped_total, parked, lag_records
  FROM public.status WHERE outbox_id = 'pages';
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT state, attempts, last_error, lag_records FROM public.status WHERE outbox_id = 'pages';
SELECT count(*) AS nothing_parked_yet FROM statesman.dead_letters WHERE outbox_id = 'pages';

--
-- skip_poison_after_attempts: at the third consecutive failure the page is
-- skipped, its messages parked in dead_letters, the cursor moved past it in the
-- same transaction; the cycle goes on with the next pages.
--
SELECT statesman.alter_outbox('pages', skip_poison_after_attempts => 3);
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT outbox_id, global_position - :base AS position, message_id = :'store' || '/paged/' || (message->>'path') || '#1' AS message_id_ok,
       message->>'path' AS path, last_error, attempts, parked_at IS NOT NULL AS has_parked_at, requeued_at
  FROM statesman.dead_letters ORDER BY global_position;
-- The parked message is the message read_feed() has.
SELECT count(*) AS parked_as_in_feed
  FROM statesman.dead_letters d JOIN statesman.read_feed(:base, 100) f
    ON f.message_id = d.message_id AND f.global_position = d.global_position AND f.message = d.message;
SELECT state, attempts, last_error, published_total, skipped_total, parked, lag_records
  FROM public.status WHERE outbox_id = 'pages';
SELECT message->>'path' AS delivered FROM sinks.pages WHERE global_position > :base ORDER BY global_position;

--
-- redeliver(): requeues parked messages (one message id, or all) for the next
-- cycle; unknown message ids are 42704. Delivered ones leave dead_letters; a
-- refused one stays parked (no longer requeued) with its attempts counted.
--
SELECT public.expect_error(format('SELECT statesman.redeliver(%L, %L)', 'pages', :'store' || '/paged/no-such#1'))
       = format('42704: outbox "pages" has no parked message "%s/paged/no-such#1"', :'store') AS unknown_message_is_42704;
SELECT count(*) FILTER (WHERE requeued_at IS NOT NULL) AS requeued FROM statesman.dead_letters;
SELECT statesman.redeliver('pages', :'store' || '/paged/ok/3#1') AS requeued;
SELECT message->>'path' AS path, requeued_at IS NOT NULL AS requeued FROM statesman.dead_letters ORDER BY global_position;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT message->>'path' AS path, attempts, requeued_at IS NOT NULL AS requeued FROM statesman.dead_letters ORDER BY global_position;
SELECT statesman.redeliver('pages') AS requeued;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT message->>'path' AS path, attempts, last_error, requeued_at IS NOT NULL AS requeued
  FROM statesman.dead_letters ORDER BY global_position;
-- The sink accepts it now.
DROP TRIGGER refuse_poison ON sinks.pages;
SELECT statesman.redeliver('pages') AS requeued;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT count(*) AS parked FROM statesman.dead_letters;
SELECT statesman.redeliver('pages') AS requeued_when_none_parked;
SELECT * FROM public.sink_vs_feed('sinks.pages', :base);
SELECT state, attempts, published_total, deduplicated_total, skipped_total, parked, lag_records
  FROM public.status WHERE outbox_id = 'pages';
-- A parked message that the sink already has counts as deduplicated.
INSERT INTO statesman.dead_letters (outbox_id, global_position, message_id, message, last_error, attempts)
SELECT 'pages', global_position, message_id, message, 'test', 1 FROM sinks.pages WHERE global_position = :base + 1;
SELECT statesman.redeliver('pages') AS requeued;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('pages');
SELECT count(*) AS parked FROM statesman.dead_letters;

--
-- A sink that refuses everything; min/max retry delays do not slow
-- dispatch_once (it is one cycle), and resume_outbox() clears the attempts.
--
SELECT statesman.head_position() AS base \gset
SELECT statesman.create_outbox('down', sink_options => '{"table": "sinks.down"}');
SELECT statesman.seed_cursor('down') = :base AS seeded_at_head;
CREATE FUNCTION sinks.refuse_all() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'sink is down'; END $$;
CREATE TRIGGER refuse_all BEFORE INSERT ON sinks.down FOR EACH ROW EXECUTE FUNCTION sinks.refuse_all();
SELECT * FROM statesman.append('down', 'a', '1');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT state, attempts, last_error, has_error_time, lag_records, lagging FROM public.status WHERE outbox_id = 'down';
SELECT statesman.cursor_position('down') - :base AS cursor_stays;

--
-- pause_outbox(): dispatch_once() returns zeros (and the cursor), whatever is
-- waiting; resume_outbox() delivers it.
--
SELECT statesman.pause_outbox('down');
SELECT state, enabled, attempts FROM public.status WHERE outbox_id = 'down';
DROP TRIGGER refuse_all ON sinks.down;
SELECT * FROM statesman.append('down', 'b', '2');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT count(*) AS in_sink FROM sinks.down;
SELECT statesman.resume_outbox('down');
SELECT state, enabled, attempts FROM public.status WHERE outbox_id = 'down';
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT * FROM public.sink_vs_feed('sinks.down', :base);

--
-- The lease of dispatch_once() belongs to the caller's transaction: inside it
-- the outbox is 'leading' with this session as leader; a rollback undoes the
-- delivery and the cursor move together; afterwards nobody holds the lease.
--
SELECT statesman.head_position() AS base \gset
SELECT * FROM statesman.append('down', 'c', '3');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT lease_round_trips AS round_trips_before FROM statesman.outbox_status WHERE outbox_id = 'down' \gset
BEGIN;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT state, leader_pid = pg_backend_pid() AS leader_is_me, lease_renewed_at IS NOT NULL AS has_lease_renewal
  FROM statesman.outbox_status WHERE outbox_id = 'down';
ROLLBACK;
SELECT state, leader_pid, lease_renewed_at, statesman.cursor_position('down') - :base AS cursor_position,
       lease_round_trips - :round_trips_before AS round_trips_added
  FROM statesman.outbox_status WHERE outbox_id = 'down';
SELECT count(*) AS in_sink FROM sinks.down WHERE global_position > :base;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT lease_round_trips - :round_trips_before AS round_trips_added
  FROM statesman.outbox_status WHERE outbox_id = 'down';
-- Unleased (require_lease => false): no lease taken, delivery the same.
SELECT statesman.alter_outbox('down', require_lease => false);
SELECT * FROM statesman.append('down', 'd', '4');
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT lease_round_trips - :round_trips_before AS round_trips_added
  FROM statesman.outbox_status WHERE outbox_id = 'down';

--
-- Another session holding the lease: dispatch_once() returns zeros and
-- leaves the cursor; the status view names the other session as leader.
--
CREATE EXTENSION dblink;
SELECT dblink_connect('holder', format('host=%s port=%s dbname=%s',
    split_part(current_setting('unix_socket_directories'), ',', 1), current_setting('port'),
    current_database())) AS connected;
SELECT * FROM dblink('holder', $$SELECT statesman._acquire_lease('down')$$) AS t(acquired boolean);
SELECT statesman.alter_outbox('down', require_lease => true);
SELECT statesman.head_position() AS base \gset
SELECT * FROM statesman.append('down', 'e', '5');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT state, leader_pid IS NOT NULL AND leader_pid <> pg_backend_pid() AS leader_is_other,
       lease_renewed_at IS NOT NULL AS has_lease_renewal, lag_records
  FROM statesman.outbox_status WHERE outbox_id = 'down';
-- The holder lets go: the next call delivers.
SELECT * FROM dblink('holder', $$SELECT statesman._release_lease('down')$$) AS t(released text);
SELECT dblink_disconnect('holder') AS disconnected;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('down');
SELECT state, leader_pid, lag_records FROM statesman.outbox_status WHERE outbox_id = 'down';
DROP EXTENSION dblink;

--
-- No prune loss: with an enabled outbox behind, retention keeps the records
-- it has not delivered and notes the address in prune_pending; once the
-- outbox has delivered them, deferred pruning removes them. A paused or
-- dropped outbox does not hold retention back.
--
-- Every outbox but the one under test is caught up first, and notes that earlier files left
-- (the worker would settle them) are settled.
SELECT count(*) AS cycles FROM statesman.outboxes o, statesman.dispatch_once(o.outbox_id);
SELECT statesman._prune_deferred() >= 0 AS settled;
SELECT count(*) AS notes_left FROM statesman.prune_pending;
SELECT statesman.head_position() AS base \gset
SELECT statesman.create_outbox('retained', sink_options => '{"table": "sinks.retained"}');
SELECT statesman.seed_cursor('retained') = :base AS seeded_at_head;
SELECT statesman.declare_root('keep-one', max_revisions => 1);
SELECT * FROM statesman.append('keep-one', 'a', '1');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT * FROM statesman.append('keep-one', 'a', '2');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT * FROM statesman.append('keep-one', 'a', '3');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT revision, statesman._position_of(h) - :base AS position FROM statesman.history h WHERE root = 'keep-one' ORDER BY revision;
SELECT address FROM statesman.prune_pending;
-- Nothing to prune yet: the outbox has not delivered them.
SELECT statesman._prune_deferred() AS pruned;
SELECT count(*) AS revisions FROM statesman.history WHERE root = 'keep-one';
-- The outbox delivers every revision (none was lost) ...
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('retained');
SELECT message->>'revision' AS delivered_revision FROM sinks.retained ORDER BY global_position;
-- ... but the other enabled outboxes have not delivered them yet: they stay.
SELECT statesman._prune_deferred() AS pruned;
SELECT count(*) AS revisions, (SELECT count(*) FROM statesman.prune_pending) AS pending
  FROM statesman.history WHERE root = 'keep-one';
-- Once every enabled outbox has, deferred pruning removes the old revisions.
SELECT outbox_id, published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.outboxes o, statesman.dispatch_once(o.outbox_id) ORDER BY outbox_id;
SELECT statesman._prune_deferred() AS pruned;
SELECT revision FROM statesman.history WHERE root = 'keep-one' ORDER BY revision;
SELECT count(*) AS pending_after FROM statesman.prune_pending;
-- A paused outbox behind does not hold pruning back.
SELECT statesman.pause_outbox('retained');
SELECT count(*) AS cycles FROM statesman.outboxes o, statesman.dispatch_once(o.outbox_id);
SELECT * FROM statesman.append('keep-one', 'a', '4');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT count(*) AS cycles FROM statesman.outboxes o, statesman.dispatch_once(o.outbox_id);
SELECT * FROM statesman.append('keep-one', 'a', '5');
SELECT revision FROM statesman.history WHERE root = 'keep-one' ORDER BY revision;
SELECT count(*) AS pending FROM statesman.prune_pending;
SELECT statesman.cursor_position('retained') - :base AS paused_cursor;
-- Resumed, it holds retention back again.
SELECT statesman.resume_outbox('retained');
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT count(*) AS cycles FROM statesman.outboxes o, statesman.dispatch_once(o.outbox_id) WHERE o.outbox_id <> 'retained';
SELECT * FROM statesman.append('keep-one', 'a', '6');
SELECT revision FROM statesman.history WHERE root = 'keep-one' ORDER BY revision;
SELECT address FROM statesman.prune_pending;
-- Dropped, it no longer does.
SELECT statesman.drop_outbox('retained');
SELECT statesman._prune_deferred() AS pruned;
SELECT revision FROM statesman.history WHERE root = 'keep-one' ORDER BY revision;
SELECT count(*) AS pending FROM statesman.prune_pending;

--
-- outbox_status: every column, for every outbox.
--
SELECT attname AS column_name, format_type(atttypid, atttypmod) AS type
  FROM pg_attribute WHERE attrelid = 'statesman.outbox_status'::regclass AND attnum > 0
 ORDER BY attnum;
SELECT count(*) AS cycles FROM statesman.outboxes o, statesman.dispatch_once(o.outbox_id);
\x on
SELECT * FROM public.status ORDER BY outbox_id;
\x off

-- Clean up: no outbox stays behind.
SELECT statesman.drop_outbox(outbox_id) FROM statesman.outboxes ORDER BY outbox_id;
SELECT count(*) AS outboxes_left FROM statesman.outboxes;
SET client_min_messages = warning;
DROP SCHEMA sinks CASCADE;
RESET client_min_messages;
DROP VIEW public.status;
DROP FUNCTION public.sink_vs_feed(regclass, bigint, text);
DROP FUNCTION public.expect_error(text);

--
-- store: the store's identity, writing records, reading the ledger, retention.
--
-- Values that differ between runs (epochs, timestamps, positions) are shown as
-- booleans or relative to a value captured earlier in the run.
--
CREATE EXTENSION IF NOT EXISTS statesman;

-- settle() (defined here, used by the later files of the schedule): gives a feed position to everything committed so far, by calling
-- statesman.sequence_feed() until nothing committed is left without one. It
-- retries while another session (such as a background worker) is sequencing.
CREATE FUNCTION public.settle() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..1000 LOOP
    PERFORM statesman.sequence_feed();
    IF statesman._unsequenced() = 0 THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN false;
END $$;

--
-- A new store is named after its database, has an epoch and an empty feed.
--
SELECT store = current_database() AS named_after_database,
       epoch IS NOT NULL AS has_epoch,
       head_position,
       oldest_position
  FROM statesman.store_info();

SELECT statesman.head_position() IS NULL AS empty_feed_has_no_head;

-- Seeding a cursor on an empty feed seeds at the head, which is "nothing yet":
-- the cursor stays unset (a cursor position is never 0).
SELECT statesman.seed_cursor('seeded-on-empty-feed') IS NULL AS seeded_at_null_head;
SELECT statesman.cursor_position('seeded-on-empty-feed') IS NULL AS still_unset;

--
-- reset_epoch() gives the store a new position lineage.
--
SELECT epoch AS epoch_before_reset FROM statesman.store_info() \gset
SELECT statesman.reset_epoch() AS reset_result \gset
SELECT epoch <> :'epoch_before_reset'::uuid AS epoch_changed,
       epoch IS NOT NULL AS has_epoch
  FROM statesman.store_info();

--
-- set_store_name(): any name matching ^[A-Za-z0-9_.-]{1,63}$, kept as given,
-- while the feed is empty.
--
SELECT statesman.set_store_name(repeat('n', 63)) AS set_result \gset
SELECT length(store) AS longest_name FROM statesman.store_info();
SELECT statesman.set_store_name('Shop-EU_1.test') AS set_result \gset
SELECT store FROM statesman.store_info();
SELECT statesman.set_store_name('shop-eu_1.test') AS set_result \gset
SELECT store FROM statesman.store_info();

--
-- Root declarations: stored under the lower-cased root name; declaring again
-- replaces the declaration.
--
SELECT statesman.declare_root('Orders', fingerprint => 'orders-fp-1') AS declare_result \gset
SELECT statesman.declare_root('ORDERS', fingerprint => 'orders-fp-2') AS declare_result \gset
SELECT statesman.declare_root('Blobs', content_type => 'application/x-protobuf',
                              fingerprint => 'blobs-fp') AS declare_result \gset
SELECT statesman.declare_root('keep2', max_revisions => 2) AS declare_result \gset
SELECT statesman.declare_root('cap10', max_bytes => 10) AS declare_result \gset
SELECT statesman.declare_root('keepall', max_revisions => NULL, max_bytes => NULL) AS declare_result \gset
SELECT root, fingerprint, content_type, max_revisions, max_bytes
  FROM statesman.roots ORDER BY root;

--
-- append(): returns (address, revision). The address is lower(root) || '/' ||
-- path, with '@' || partition after the root when a partition is given; root
-- is case-insensitive, path and partition are kept as given.
--
SELECT * FROM statesman.append('Orders', 'o/1', '{"total": 10}');
SELECT * FROM statesman.append('ORDERS', 'o/1', '{"total": 11}');

-- The feed is no longer empty (even before anything is sequenced): the store
-- name can no longer change, as it is part of every message id.
\set VERBOSITY sqlstate
SELECT statesman.set_store_name('renamed');
\set VERBOSITY default
SELECT store FROM statesman.store_info();

SELECT * FROM statesman.append('orders', 'o/1', '{"total": 12}', partition => 'eu-West.1');
SELECT * FROM statesman.append('Orders', 'O/1', '{"total": 13}');
SELECT * FROM statesman.append('Orders', 'a path/with spaces/ünïcode#?', '[1, "two", null]');
-- Limits that are still valid: 63-character root and partition, 1024-byte path.
SELECT length(address) AS address_length, revision
  FROM statesman.append(repeat('R', 63), 'p', '{}', partition => repeat('P', 63));
SELECT octet_length(address) AS address_bytes, revision
  FROM statesman.append('Orders', repeat('é', 512), '{}');

-- append_bytes(): any bytes, the caller's content type and serializer id.
SELECT * FROM statesman.append_bytes('Blobs', 'b/1', '\x00ff10'::bytea,
                                     'application/octet-stream', 'proto.v1');
-- No content type given: the root's declared one applies.
SELECT * FROM statesman.append_bytes('Blobs', 'b/1', '\x01'::bytea, NULL);
-- No content type given, none declared: the record has none.
SELECT * FROM statesman.append_bytes('Plain', 'b/1', '\x02'::bytea, NULL);

-- append_delete(): a tombstone, the next revision of the address.
SELECT * FROM statesman.append_delete('Orders', 'o/1');
SELECT * FROM statesman.append_delete('Orders', 'o/1', 'eu-West.1');
-- append() with operation 'delete' and no payload is a tombstone as well.
SELECT * FROM statesman.append('Orders', 'o/2', NULL, operation => 'delete');

--
-- current(): the latest record of an address, or no row.
--
SELECT address, revision, operation, payload IS NULL AS no_payload
  FROM statesman.current('orders', 'o/1');
SELECT address, revision, operation, convert_from(payload, 'UTF8') AS payload
  FROM statesman.current('ORDERS', 'o/1', 'eu-West.1')
UNION ALL
SELECT address, revision, operation, convert_from(payload, 'UTF8')
  FROM statesman.current('Orders', 'O/1');
SELECT count(*) AS rows_for_unknown_address FROM statesman.current('orders', 'nope');
SELECT count(*) AS rows_for_other_partition FROM statesman.current('orders', 'o/1', 'other');

--
-- history(): every retained revision, with the record's envelope.
--
SELECT root, path, partition, address, revision, operation, status,
       convert_from(payload, 'UTF8') AS payload, fingerprint, content_type,
       serializer_id
  FROM statesman.history('Orders', 'o/1')
 ORDER BY revision;
SELECT address, revision, operation, payload, fingerprint, content_type, serializer_id
  FROM statesman.history('blobs', 'b/1')
 ORDER BY revision;
SELECT address, revision, payload, fingerprint, content_type, serializer_id
  FROM statesman.history('plain', 'b/1');
SELECT address, revision, operation, payload IS NULL AS no_payload
  FROM statesman.history('orders', 'o/2');
SELECT count(*) AS rows_for_unknown_address FROM statesman.history('orders', 'nope');

-- A jsonb payload is stored as its text with content type application/json.
SELECT convert_from(payload, 'UTF8') AS payload, content_type
  FROM statesman.current('orders', 'a path/with spaces/ünïcode#?');

-- The payload's text and the metadata in a sink's message text are byte for byte what
-- jsonb's own output writes, whatever the value's shape: empty and nested containers, raw
-- scalars, numerics with scales, strings that need escapes, objects and arrays of more than
-- 32 elements (whose entries store offsets), long keys and strings.
CREATE TEMP TABLE jsonb_shapes (i serial, j jsonb);
INSERT INTO jsonb_shapes (j) VALUES ('{}'), ('[]'), ('1'), ('"s"'), ('null'), ('true'), ('false'), ('-0.000'),
  ('1e100'), ('[[], {}, [[]], {"a": {}}]'),
  ('[0, -0, 1, -1, 9999, 10000, -10000, 99999999, 100000000, 1234567890123456, -9999999999999999,
     12345678901234567, 9223372036854775807, -9223372036854775808, 1e4, 1.0, 0.5, -0.0001, 1e-20, 10.00]'),
  ('{"a": 1, "b": [1, 2.50, "x\"y\\z\n\t\b\f\r\u0001\u001f é 😀"], "c": {"d": null, "e": [true, false]}}'),
  (('{"' || repeat('k', 300) || '": "' || repeat('v', 5000) || '"}')::jsonb);
INSERT INTO jsonb_shapes (j) SELECT jsonb_agg(g) FROM generate_series(1, 100) g;
INSERT INTO jsonb_shapes (j)
SELECT jsonb_object_agg('key' || g, CASE WHEN g % 3 = 0 THEN to_jsonb(g * 1.5)
                                         WHEN g % 3 = 1 THEN to_jsonb(repeat('x', g))
                                         ELSE jsonb_build_array(g, jsonb_build_object('n', g)) END)
  FROM generate_series(1, 100) g;
INSERT INTO jsonb_shapes (j)
SELECT jsonb_build_object('nest', jsonb_agg(jsonb_build_array(g, repeat('y', g), jsonb_build_object('z', g::numeric / 7))))
  FROM generate_series(1, 40) g;
SELECT count(*) AS appended FROM (SELECT statesman.append('shapes', 'p' || i, j, metadata => j) FROM jsonb_shapes) a;
SELECT count(*) AS shapes,
       count(*) FILTER (WHERE convert_from(h.payload, 'UTF8') = s.j::text) AS payload_text_equal,
       count(*) FILTER (WHERE statesman._message_text('s', '00000000-0000-0000-0000-000000000001', h.address, h.root,
                                h.path, h.partition, h.revision, 1, h.occurred_at, h.operation, h.status,
                                h.value_type, h.schema_version, h.source, h.fingerprint, h.content_type,
                                h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error)
                            = statesman._message('s', '00000000-0000-0000-0000-000000000001', h.address, h.root,
                                h.path, h.partition, h.revision, 1, h.occurred_at, h.operation, h.status,
                                h.value_type, h.schema_version, h.source, h.fingerprint, h.content_type,
                                h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata,
                                h.error)::text) AS message_text_equal
  FROM jsonb_shapes s JOIN statesman.history h ON h.address = 'shapes/p' || s.i;

-- Every record has an occurrence time.
SELECT bool_and(occurred_at IS NOT NULL) AS all_have_occurred_at
  FROM statesman.history('orders', 'o/1');

--
-- Retention by max_revisions (root keep2 keeps the newest 2 revisions).
-- Pruning happens after an append and only removes records already
-- sequenced into the feed: sequence_feed() is called between appends here
-- (through settle()).
--
SELECT revision FROM statesman.append('keep2', 'k', '1');
SELECT statesman.sequence_feed() IS NOT NULL AS sequence_feed_returns_head;
SELECT public.settle() AS sequenced;
SELECT revision FROM statesman.append('keep2', 'k', '2');
SELECT public.settle() AS sequenced;
SELECT revision FROM statesman.history('keep2', 'k') ORDER BY revision;
-- Revision 3: the newest two are 2 and 3; revision 1 was sequenced, so it goes.
SELECT revision FROM statesman.append('keep2', 'k', '3');
SELECT revision FROM statesman.history('keep2', 'k') ORDER BY revision;
SELECT public.settle() AS sequenced;
-- In one transaction nothing written by the transaction itself is sequenced
-- (it is not committed). Revision 4 prunes 2, revision 5 prunes 3 (both
-- sequenced), revision 6 cannot prune the unsequenced revision 4: three stay.
BEGIN;
SELECT revision FROM statesman.append('keep2', 'k', '4');
SELECT revision FROM statesman.append('keep2', 'k', '5');
SELECT revision FROM statesman.append('keep2', 'k', '6');
SELECT revision FROM statesman.history('keep2', 'k') ORDER BY revision;
COMMIT;
SELECT public.settle() AS sequenced;
-- Once 4, 5 and 6 are sequenced, the next append prunes down to two again.
-- Revisions are never reused after pruning.
SELECT revision FROM statesman.append('KEEP2', 'k', '7');
SELECT revision FROM statesman.history('keep2', 'k') ORDER BY revision;
-- Retention is per address: another partition of the same path has its own revisions.
SELECT address, revision FROM statesman.append('keep2', 'k', '1', partition => 'p');
SELECT public.settle() AS sequenced;
SELECT address, revision FROM statesman.append('keep2', 'k', '2', partition => 'p');
SELECT public.settle() AS sequenced;
SELECT address, revision FROM statesman.append('keep2', 'k', '3', partition => 'p');
SELECT address, revision FROM statesman.history('keep2', 'k', 'p') ORDER BY revision;
SELECT revision FROM statesman.history('keep2', 'k') ORDER BY revision;
-- A pruned record leaves the feed too.
SELECT public.settle() AS sequenced;
SELECT address, revision FROM statesman.read_feed(root => 'keep2') WHERE address = 'keep2/k' ORDER BY global_position;

--
-- Retention by max_bytes (root cap10 keeps the newest revisions whose payload
-- bytes add up to at most 10; the newest always stays).
--
SELECT revision FROM statesman.append_bytes('cap10', 'c', '\x0102030405'::bytea, 'application/octet-stream');
SELECT public.settle() AS sequenced;
SELECT revision FROM statesman.append_bytes('cap10', 'c', '\x01020304'::bytea, 'application/octet-stream');
SELECT public.settle() AS sequenced;
-- 4 + 5 = 9 bytes: both stay.
SELECT revision, octet_length(payload) AS bytes FROM statesman.history('cap10', 'c') ORDER BY revision;
SELECT revision FROM statesman.append_bytes('cap10', 'c', '\x010203'::bytea, 'application/octet-stream');
-- 3 + 4 = 7 fits, 3 + 4 + 5 = 12 does not: revision 1 goes.
SELECT revision, octet_length(payload) AS bytes FROM statesman.history('cap10', 'c') ORDER BY revision;
SELECT public.settle() AS sequenced;
SELECT revision FROM statesman.append_bytes('cap10', 'c', '\x000102030405060708090a0b0c0d0e0f10111213'::bytea, 'application/octet-stream');
-- 20 bytes alone exceed the limit: the newest stays, all older ones go.
SELECT revision, octet_length(payload) AS bytes FROM statesman.history('cap10', 'c') ORDER BY revision;
SELECT public.settle() AS sequenced;
-- A tombstone has no payload bytes; with the 20-byte revision it is over the
-- limit, so only the tombstone stays.
SELECT revision FROM statesman.append_delete('cap10', 'c');
SELECT revision, operation, octet_length(payload) AS bytes FROM statesman.history('cap10', 'c') ORDER BY revision;

--
-- KeepAll: roots declared without limits (keepall; orders, which only has a
-- fingerprint) and undeclared roots keep every revision.
--
SELECT public.settle() AS sequenced;
SELECT count(*) AS appended FROM generate_series(1, 4) i,
       LATERAL statesman.append('keepall', 'k', to_jsonb(i));
SELECT count(*) AS appended FROM generate_series(1, 4) i,
       LATERAL statesman.append('undeclared', 'k', to_jsonb(i));
SELECT public.settle() AS sequenced;
SELECT revision FROM statesman.append('keepall', 'k', '5');
SELECT revision FROM statesman.append('undeclared', 'k', '5');
SELECT array_agg(revision ORDER BY revision) AS keepall_revisions FROM statesman.history('keepall', 'k');
SELECT array_agg(revision ORDER BY revision) AS undeclared_revisions FROM statesman.history('undeclared', 'k');
SELECT array_agg(revision ORDER BY revision) AS orders_revisions FROM statesman.history('orders', 'o/1');

--
-- store_info() follows the feed.
--
SELECT public.settle() AS sequenced;
SELECT i.store,
       i.head_position = statesman.head_position() AS head_matches,
       i.head_position = (SELECT max(statesman._position_of(h)) FROM statesman.history h) AS head_is_max,
       i.oldest_position = (SELECT min(statesman._position_of(h)) FROM statesman.history h) AS oldest_is_min
  FROM statesman.store_info() i;

--
-- A tombstone carries no content type from the call, whichever function wrote it: the root's
-- declaration (here none, then 'text/plain') applies to both alike.
--
SELECT revision FROM statesman.append('tomb', 'a', NULL, operation => 'delete');
SELECT revision FROM statesman.append_delete('tomb', 'b');
SELECT statesman.declare_root('tomb', content_type => 'text/plain');
SELECT revision FROM statesman.append('tomb', 'c', NULL, operation => 'delete');
SELECT revision FROM statesman.append_bytes('tomb', 'd', NULL, 'application/x-ignored', operation => 'delete');
SELECT address, operation, payload IS NULL AS no_payload, content_type
  FROM statesman.history WHERE root = 'tomb' ORDER BY address;

--
-- The append inserts its row without the executor when statesman.history is as installed, and
-- through an INSERT statement when the table has something only the executor applies: a row
-- trigger fires, a column added with a default gets it. Both write the same record, and the
-- transaction's later appends see the earlier ones (revisions 2, 3, 4 of one address).
--
BEGIN;
SELECT revision FROM statesman.append('direct', 'k', '{"n": 1}');
SELECT h.revision, h.id = (SELECT max(id) FROM statesman.history) AS latest_id,
       h.occurred_at BETWEEN now() AND clock_timestamp() AS occurred, h.txid = pg_current_xact_id() AS own_txid,
       h.legacy_position IS NULL AS no_legacy, h.content_type, h.operation
  FROM statesman.history h WHERE h.address = 'direct/k';
COMMIT;
BEGIN;
CREATE TABLE public.history_inserts (address text, revision bigint);
CREATE FUNCTION public.note_history_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.history_inserts VALUES (NEW.address, NEW.revision);
  RETURN NEW;
END $$;
CREATE TRIGGER note_insert AFTER INSERT ON statesman.history
  FOR EACH ROW EXECUTE FUNCTION public.note_history_insert();
SELECT revision FROM statesman.append('direct', 'k', '{"n": 2}');
DROP TRIGGER note_insert ON statesman.history;
SELECT revision FROM statesman.append('direct', 'k', '{"n": 3}');
SELECT * FROM public.history_inserts;
ALTER TABLE statesman.history ADD COLUMN extra text NOT NULL DEFAULT 'from the default';
SELECT revision FROM statesman.append('direct', 'k', '{"n": 4}');
SELECT revision, extra, payload FROM statesman.history WHERE address = 'direct/k' ORDER BY revision;
ROLLBACK;
SELECT array_agg(revision ORDER BY revision) AS revisions_after_rollback
  FROM statesman.history WHERE address = 'direct/k';

--
-- The session remembers the revision it last appended to an address, only as a hint of where
-- to look for the latest one: a hint whose transaction rolled back (to a savepoint or
-- wholly) is not visible, and the next append takes the revision after the latest visible one.
--
SELECT revision FROM statesman.append('hint', 'k', '1');
SELECT revision FROM statesman.append('hint', 'k', '2');
BEGIN;
SELECT revision FROM statesman.append('hint', 'k', '3');
SAVEPOINT s;
SELECT revision FROM statesman.append('hint', 'k', '4');
ROLLBACK TO SAVEPOINT s;
SELECT revision FROM statesman.append('hint', 'k', '"4 again"');
ROLLBACK;
SELECT revision FROM statesman.append('hint', 'k', '"3 again"');
SELECT revision, convert_from(payload, 'UTF8') AS payload FROM statesman.history
 WHERE address = 'hint/k' ORDER BY revision;

--
-- The direct insert gives a record its entry in every index of statesman.history it belongs
-- to: the installed ones and any an operator adds (plain, partial, on an expression, partial on
-- legacy_position IS NULL). Only a partial index that no appended row can enter (legacy_position
-- IS NOT NULL, as the index of the positions from before 0.4.0) is not opened. amcheck's
-- heapallindexed check fails for an index that misses a row it should hold.
--
BEGIN;
CREATE EXTENSION amcheck;
CREATE INDEX history_by_correlation ON statesman.history (correlation_id);
CREATE INDEX history_puts ON statesman.history (address) WHERE operation = 'put';
CREATE INDEX history_lower_path ON statesman.history (lower(path));
CREATE INDEX history_not_legacy ON statesman.history (id) WHERE legacy_position IS NULL;
CREATE INDEX history_legacy_addresses ON statesman.history (address) WHERE legacy_position IS NOT NULL;
SELECT count(*) AS appended
  FROM generate_series(1, 50) g,
       LATERAL statesman.append('indexed', 'K' || g, jsonb_build_object('g', g), correlation_id => 'c' || g) a;
SELECT revision FROM statesman.append_delete('indexed', 'K1');
SELECT c.relname, 'every row it should hold' AS checked
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid, LATERAL bt_index_check(c.oid, true)
 WHERE i.indrelid = 'statesman.history'::regclass ORDER BY c.relname;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT count(*) AS by_correlation FROM statesman.history WHERE correlation_id = 'c7';
SELECT count(*) AS puts_of_k1 FROM statesman.history WHERE address = 'indexed/K1' AND operation = 'put';
SELECT count(*) AS by_lower_path FROM statesman.history WHERE lower(path) = 'k9';
SELECT count(*) AS not_legacy FROM statesman.history WHERE legacy_position IS NULL AND root = 'indexed';
SELECT count(*) AS legacy FROM statesman.history WHERE legacy_position IS NOT NULL AND address = 'indexed/K2';
ROLLBACK;

--
-- The planner's support of the append functions drops the trailing arguments that hold what the
-- function reads for a missing one (NULL; '' for partition, 'put' for operation, 'ok' for
-- status), and keeps every other argument and every argument before one it keeps. The rows are
-- the same either way: each pair below is appended once with the defaults left out and once with
-- them given as other expressions (which the planner cannot drop), and must read alike.
--
SELECT p.proname, p.prosupport
  FROM pg_proc p WHERE p.pronamespace = 'statesman'::regnamespace AND p.proname LIKE 'append%' ORDER BY 1;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append('dropped', 'a', '{"n": 1}');
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append('dropped', 'a', '{"n": 1}', partition => '', status => 'ok');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append('dropped', 'a', '{"n": 1}', status => 'failed');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append('dropped', 'a', '{"n": 1}', metadata => '{"m": 1}');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append('dropped', 'a', '{"n": 1}', operation => 'PUT');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append_bytes('dropped', 'b', '\x01', 'text/plain');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append_bytes('dropped', 'b', '\x01', 'text/plain', partition => 'p1');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append_delete('dropped', 'a');
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM statesman.append_delete('dropped', 'a', status => 'gone');
PREPARE dropped_status(text) AS SELECT * FROM statesman.append('dropped', 'prepared', '{"n": 2}', status => $1);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE dropped_status('ok');  -- a custom plan: the parameter's value is a constant
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE dropped_status('ok');  -- the generic plan keeps the parameter
BEGIN;
-- Each pair: (left out) and (given as expressions the planner keeps).
SELECT revision FROM statesman.append('dropped', 'left', '{"n": 1}');
SELECT revision FROM statesman.append('dropped', 'given', '{"n": 1}', (SELECT ''), (SELECT 'put'), (SELECT 'ok'),
    (SELECT NULL::text), (SELECT NULL::int), (SELECT NULL::text), (SELECT NULL::text), (SELECT NULL::text),
    (SELECT NULL::jsonb), (SELECT NULL::text), (SELECT NULL::timestamptz), (SELECT NULL::timestamptz));
SELECT revision FROM statesman.append_bytes('dropped', 'left', '\x01', 'text/plain');
SELECT revision FROM statesman.append_bytes('dropped', 'given', '\x01', 'text/plain', (SELECT NULL::text),
    (SELECT ''), (SELECT 'put'), (SELECT 'ok'), (SELECT NULL::text), (SELECT NULL::int), (SELECT NULL::text),
    (SELECT NULL::text), (SELECT NULL::text), (SELECT NULL::jsonb), (SELECT NULL::text), (SELECT NULL::timestamptz),
    (SELECT NULL::timestamptz));
SELECT revision FROM statesman.append_delete('dropped', 'left');
SELECT revision FROM statesman.append_delete('dropped', 'given', (SELECT ''), (SELECT 'ok'), (SELECT NULL::text),
    (SELECT NULL::int), (SELECT NULL::text), (SELECT NULL::text), (SELECT NULL::text), (SELECT NULL::jsonb),
    (SELECT NULL::text), (SELECT NULL::timestamptz), (SELECT NULL::timestamptz));
EXECUTE dropped_status('ok');
EXECUTE dropped_status('failed');
SELECT l.revision, l.partition, l.operation, l.status, l.value_type, l.schema_version, l.source,
       l.correlation_id, l.causation_id, l.metadata, l.error, l.fresh_until, l.serve_until, l.content_type,
       l.serializer_id,
       (to_jsonb(l) - '{id,address,path,occurred_at,txid,legacy_position}'::text[])
         = (to_jsonb(g) - '{id,address,path,occurred_at,txid,legacy_position}'::text[]) AS same_as_given
  FROM statesman.history l
  JOIN statesman.history g ON g.root = l.root AND g.path = 'given' AND g.revision = l.revision
 WHERE l.root = 'dropped' AND l.path = 'left' ORDER BY l.revision;
SELECT revision, status FROM statesman.history WHERE root = 'dropped' AND path = 'prepared' ORDER BY revision;
ROLLBACK;
RESET plan_cache_mode;
DEALLOCATE dropped_status;

--
-- A call in a select list runs as a call of the function's plain twin (_append_row,
-- _append_bytes_row, _append_delete_row: not a set, one composite value) when that changes
-- nothing the statement does: one set-returning call in the select list, the same function not
-- also in FROM. Otherwise the call stays a set: `(append(…)).*` (two equal calls that run once),
-- next to another set-returning function (its row on the first row only), and in FROM.
--
SELECT p.proname, p.proretset, p.proargtypes = d.proargtypes AS same_arguments,
       pg_get_function_result(p.oid) AS result,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_execute
  FROM pg_proc p
  JOIN pg_proc d ON d.pronamespace = p.pronamespace AND '_' || d.proname || '_row' = p.proname
 WHERE p.pronamespace = 'statesman'::regnamespace ORDER BY 1;
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append('plaincall', 'a', '{"n": 1}');
EXPLAIN (VERBOSE, COSTS OFF) SELECT (statesman.append('plaincall', 'a', '{"n": 1}')).revision;
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append_bytes('plaincall', 'b', '\x01', 'text/plain', partition => 'p1');
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append_delete('plaincall', 'a', status => 'gone');
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append('plaincall', 'g' || g, '{}') FROM generate_series(1, 3) g;
EXPLAIN (VERBOSE, COSTS OFF) SELECT (statesman.append('plaincall', 'a', '{"n": 1}')).*;
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append('plaincall', 'a', '{"n": 1}'), generate_series(1, 3);
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append('plaincall', 'a', '{"n": 1}') FROM statesman.append('plaincall', 'b', '{}');
EXPLAIN (VERBOSE, COSTS OFF) SELECT statesman.append('plaincall', 'a', '{}'), statesman.append('plaincall', 'b', '{}');
EXPLAIN (VERBOSE, COSTS OFF) SELECT (SELECT statesman.append('plaincall', 'a', '{}'));
BEGIN;
-- What each returns and writes.
SELECT statesman.append('plaincall', 'a', '{"n": 1}');
SELECT (statesman.append('plaincall', 'a', '{"n": 2}')).revision;
SELECT statesman.append_bytes('plaincall', 'b', '\x01', 'text/plain', partition => 'p1');
SELECT statesman.append_delete('plaincall', 'a', status => 'gone');
SELECT statesman.append('plaincall', 'g' || g, '{}') FROM generate_series(1, 3) g;
SELECT (statesman.append('plaincall', 'star', '{"n": 1}')).*;
SELECT statesman.append('plaincall', 'beside', '{"n": 1}'), generate_series(1, 3);
SELECT (SELECT statesman.append('plaincall', 'sub', '{}')) FROM generate_series(1, 2);
SELECT address, revision, operation, status, convert_from(payload, 'UTF8') AS payload, content_type
  FROM statesman.history WHERE root = 'plaincall' ORDER BY address, revision;
ROLLBACK;
-- The twins check EXECUTE on their declared function (the executor checks only the twin's,
-- open to PUBLIC): called directly, or from a plan kept across a REVOKE. All in one transaction,
-- rolled back (each refusal rolls back to the statement's savepoint).
\set ON_ERROR_ROLLBACK on
BEGIN;
CREATE ROLE regress_plain_writer;
GRANT USAGE ON SCHEMA statesman TO regress_plain_writer;
GRANT EXECUTE ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) TO regress_plain_writer;
SET ROLE regress_plain_writer;
PREPARE plain_append AS SELECT statesman.append('plainpriv', 'a', '{}');
EXECUTE plain_append;
SELECT statesman._append_row('plainpriv', 'b', '{}', '', 'put', 'ok', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL);
SELECT statesman._append_delete_row('plainpriv', 'a', '', 'ok', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
RESET ROLE;
REVOKE EXECUTE ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) FROM regress_plain_writer;
SET ROLE regress_plain_writer;
EXECUTE plain_append;
SELECT statesman._append_row('plainpriv', 'c', '{}', '', 'put', 'ok', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL);
RESET ROLE;
DEALLOCATE plain_append;
SELECT address, revision FROM statesman.history WHERE root = 'plainpriv' ORDER BY address, revision;
ROLLBACK;
\unset ON_ERROR_ROLLBACK

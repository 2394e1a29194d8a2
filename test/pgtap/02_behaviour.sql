-- Behaviour checks: writing and reading the ledger, cursors, consumers, and
-- errors with their SQLSTATEs. Everything is rolled back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS statesman;
SELECT plan(52);

-- Roots unique to this run, so a database with data in it does not matter.
SELECT 'tap' || md5(random()::text) AS root \gset
SELECT lower(:'root') AS lroot \gset

-- append / append_bytes / append_delete
SELECT results_eq(
    format($$SELECT * FROM statesman.append(%L, 'a/1', '{"v": 1}')$$, upper(:'root')),
    format($$VALUES (%L::text, 1::bigint)$$, :'lroot' || '/a/1'),
    'append() returns the canonical address and revision 1');
SELECT results_eq(
    format($$SELECT * FROM statesman.append(%L, 'a/1', '{"v": 2}')$$, :'root'),
    format($$VALUES (%L::text, 2::bigint)$$, :'lroot' || '/a/1'),
    'a second append to the address is revision 2');
SELECT results_eq(
    format($$SELECT * FROM statesman.append(%L, 'a/1', '{"v": 3}', partition => 'P-1')$$, :'root'),
    format($$VALUES (%L::text, 1::bigint)$$, :'lroot' || '@P-1/a/1'),
    'a partition is a different address: root@partition/path');
SELECT results_eq(
    format($$SELECT * FROM statesman.append_bytes(%L, 'b/1', '\xdeadbeef'::bytea, 'application/octet-stream', 'ser-1')$$, :'root'),
    format($$VALUES (%L::text, 1::bigint)$$, :'lroot' || '/b/1'),
    'append_bytes() returns address and revision');
SELECT results_eq(
    format($$SELECT * FROM statesman.append_delete(%L, 'a/1')$$, :'root'),
    format($$VALUES (%L::text, 3::bigint)$$, :'lroot' || '/a/1'),
    'append_delete() appends revision 3');

-- current / history
SELECT results_eq(
    format($$SELECT address, revision, operation, payload FROM statesman.current(%L, 'a/1')$$, :'root'),
    format($$VALUES (%L::text, 3::bigint, 'delete'::text, NULL::bytea)$$, :'lroot' || '/a/1'),
    'current() is the tombstone');
SELECT results_eq(
    format($$SELECT revision, operation, convert_from(payload, 'UTF8') COLLATE "default", content_type
               FROM statesman.history(%L, 'a/1') ORDER BY revision$$, :'root'),
    $$VALUES (1::bigint, 'put'::text, '{"v": 1}'::text, 'application/json'::text),
             (2, 'put', '{"v": 2}', 'application/json'),
             (3, 'delete', NULL, NULL)$$,
    'history() has every revision');
SELECT results_eq(
    format($$SELECT address, revision, payload, content_type, serializer_id
               FROM statesman.current(%L, 'b/1')$$, :'root'),
    format($$VALUES (%L::text, 1::bigint, '\xdeadbeef'::bytea, 'application/octet-stream'::text, 'ser-1'::text)$$,
           :'lroot' || '/b/1'),
    'append_bytes() keeps bytes, content type and serializer id');
SELECT results_eq(
    format($$SELECT root, path, partition, address, revision
               FROM statesman.current(%L, 'a/1', 'P-1')$$, upper(:'root')),
    format($$VALUES (%L::text, 'a/1'::text, 'P-1'::text, %L::text, 1::bigint)$$,
           :'lroot', :'lroot' || '@P-1/a/1'),
    'current() with a partition');
SELECT is_empty(
    format($$SELECT * FROM statesman.current(%L, 'nope')$$, :'root'),
    'current() of an unknown address has no row');
SELECT is_empty(
    format($$SELECT * FROM statesman.history(%L, 'nope')$$, :'root'),
    'history() of an unknown address has no row');

-- retention
SELECT lives_ok(format($$SELECT statesman.declare_root(%L, max_revisions => 1)$$, :'root' || 'k'),
    'declare_root() with max_revisions');
SELECT lives_ok(format($$SELECT statesman.append(%L, 'k', '1')$$, :'root' || 'k'), 'append to a retained root');
SELECT is(
    (SELECT count(*) FROM statesman.history(:'root' || 'k', 'k')), 1::bigint,
    'one revision');

-- the feed: sequence what this transaction wrote, then read it back
SELECT ok(statesman.sequence_feed() IS NOT NULL, 'sequence_feed() returns the head');
SELECT results_eq(
    format($$SELECT address, revision FROM statesman.read_feed(root => %L) ORDER BY global_position$$, upper(:'root')),
    format($$VALUES (%1$L::text, 1::bigint), (%1$L, 2), (%2$L, 1), (%3$L, 1), (%1$L, 3)$$,
           :'lroot' || '/a/1', :'lroot' || '@P-1/a/1', :'lroot' || '/b/1'),
    'read_feed(root) has the root''s records in append order');
SELECT min(global_position) AS p_first, max(global_position) AS p_last
  FROM statesman.read_feed(root => :'root') \gset
SELECT is(
    (SELECT message->>'messageId' FROM statesman.read_feed(after => :p_first - 1, max_records => 1)),
    (SELECT store FROM statesman.store_info()) || '/' || :'lroot' || '/a/1#1',
    'messageId is {store}/{address}#{revision}');

-- cursors
SELECT ok(statesman.cursor_position(:'root') IS NULL, 'cursor_position() is NULL before the first write');
SELECT is(statesman.advance_cursor(:'root', :p_last - 1), true, 'advance_cursor() forward');
SELECT is(statesman.advance_cursor(:'root', :p_last - 1), false, 'advance_cursor() to the same position changes nothing');
SELECT is(statesman.advance_cursor(:'root', :p_first), false, 'advance_cursor() backwards changes nothing');
SELECT is(statesman.cursor_position(:'root'), (:p_last - 1)::bigint, 'cursor stays');
SELECT is(statesman.advance_cursor(:'root', :p_last), true, 'advance_cursor() forward again');
SELECT is(statesman.cursor_position(:'root'), :p_last::bigint, 'cursor at the last position');

-- consumers
SELECT is(statesman.mark_applied(:'root', 'feed', '00000000-0000-4000-8000-00000000000a', 10), true,
    'mark_applied() the first time');
SELECT is(statesman.mark_applied(:'root', 'feed', '00000000-0000-4000-8000-00000000000a', 10), false,
    'mark_applied() again is already applied');
SELECT is(statesman.already_applied(:'root', 'feed', '00000000-0000-4000-8000-00000000000a', 9), true,
    'an earlier position is already applied');
SELECT is(statesman.already_applied(:'root', 'feed', '00000000-0000-4000-8000-00000000000b', 9), false,
    'a different epoch is never already applied');
SELECT is(statesman.mark_applied(:'root',
        '{"store": "feed", "epoch": "00000000-0000-4000-8000-00000000000a", "globalPosition": 11}'::jsonb),
    true, 'mark_applied(consumer, message)');
SELECT results_eq(
    format($$SELECT * FROM statesman.applied_position(%L, 'feed')$$, :'root'),
    $$VALUES ('00000000-0000-4000-8000-00000000000a'::uuid, 11::bigint)$$,
    'applied_position()');

-- errors
SELECT throws_ok($$SELECT statesman.append(NULL, 'p', '{}')$$, '22004', NULL, 'append() NULL root: 22004');
SELECT throws_ok($$SELECT statesman.append('r', NULL, '{}')$$, '22004', NULL, 'append() NULL path: 22004');
SELECT throws_ok($$SELECT statesman.append('r', 'p', NULL)$$, '22004', NULL, 'append() NULL payload: 22004');
SELECT throws_ok($$SELECT statesman.append('bad root', 'p', '{}')$$, '22023', NULL, 'append() bad root: 22023');
SELECT throws_ok($$SELECT statesman.append(repeat('r', 64), 'p', '{}')$$, '22023', NULL, 'append() 64-character root: 22023');
SELECT throws_ok($$SELECT statesman.append('r', '', '{}')$$, '22023', NULL, 'append() empty path: 22023');
SELECT throws_ok($$SELECT statesman.append('r', repeat('x', 1025), '{}')$$, '22023', NULL, 'append() 1025-byte path: 22023');
SELECT throws_ok($$SELECT statesman.append('r', 'p', '{}', partition => 'a b')$$, '22023', NULL, 'append() bad partition: 22023');
SELECT throws_ok($$SELECT statesman.append('r', 'p', '{}', operation => 'update')$$, '22023', NULL, 'append() unknown operation: 22023');
SELECT throws_ok($$SELECT statesman.set_store_name('bad name')$$, '22023', NULL, 'set_store_name() bad name: 22023');
SELECT throws_ok($$SELECT statesman.set_store_name('good-name')$$, '55000', NULL, 'set_store_name() with a non-empty feed: 55000');
SELECT throws_ok($$SELECT statesman.declare_root('r', max_revisions => 0)$$, '22023', NULL, 'declare_root() max_revisions 0: 22023');
SELECT throws_ok($$SELECT statesman.declare_root('r', max_bytes => 0)$$, '22023', NULL, 'declare_root() max_bytes 0: 22023');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(max_records => 0)$$, '22023', NULL, 'read_feed() max_records 0: 22023');
SELECT throws_ok($$SELECT statesman.advance_cursor('c', NULL)$$, '22004', NULL, 'advance_cursor() NULL position: 22004');
SELECT throws_ok($$SELECT statesman.advance_cursor('c', 0)$$, '22023', NULL, 'advance_cursor() position 0: 22023');
SELECT throws_ok(
    format($$SELECT statesman.seed_cursor('c', %s)$$, coalesce(statesman.head_position(), 0) + 1000),
    '22023', NULL, 'seed_cursor() beyond the head: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied(NULL, 'f', '00000000-0000-4000-8000-00000000000a', 1)$$,
    '22004', NULL, 'mark_applied() NULL consumer: 22004');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '{"store": "f"}'::jsonb)$$,
    '22023', NULL, 'mark_applied() message without epoch and globalPosition: 22023');

-- privileges
CREATE ROLE tap_statesman_nobody;
SET LOCAL ROLE tap_statesman_nobody;
SELECT throws_ok($$SELECT statesman.reset_epoch()$$, '42501', NULL, 'reset_epoch() needs a grant: 42501');
SELECT throws_ok($$SELECT statesman.advance_cursor('c', 1)$$, '42501', NULL, 'advance_cursor() needs a grant: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.history$$, '42501', NULL, 'statesman.history is not readable: 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

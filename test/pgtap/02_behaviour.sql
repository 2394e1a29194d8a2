-- Behaviour that test/sql does not state: a transaction that appends and then calls
-- sequence_feed() itself reads its records back from the feed, in append order, before it
-- commits; current() of a partitioned address names its root, path and partition apart.
-- (Writing, reading the ledger, retention, cursors, consumers, the errors and the privileges of
-- the store functions are pg_regress's: test/sql/store.sql, feed.sql, consumer.sql,
-- bad_input.sql.) Everything is rolled back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS statesman;
SELECT plan(3);

-- Roots unique to this run, so a database with data in it does not matter.
SELECT 'tap' || md5(random()::text) AS root \gset
SELECT lower(:'root') AS lroot \gset

-- Five records of the root, written in this transaction.
SELECT format($f$DO $do$ BEGIN
    PERFORM statesman.append(%1$L, 'a/1', '{"v": 1}');
    PERFORM statesman.append(%2$L, 'a/1', '{"v": 2}');
    PERFORM statesman.append(%2$L, 'a/1', '{"v": 3}', partition => 'P-1');
    PERFORM statesman.append_bytes(%2$L, 'b/1', '\xdeadbeef'::bytea, 'application/octet-stream', 'ser-1');
    PERFORM statesman.append_delete(%2$L, 'a/1');
END $do$$f$, upper(:'root'), :'root') AS fixture \gset
:fixture;

SELECT results_eq(
    format($$SELECT root, path, partition, address, revision
               FROM statesman.current(%L, 'a/1', 'P-1')$$, upper(:'root')),
    format($$VALUES (%L::text, 'a/1'::text, 'P-1'::text, %L::text, 1::bigint)$$,
           :'lroot', :'lroot' || '@P-1/a/1'),
    'current() with a partition');

-- the feed: sequence what this transaction wrote, then read it back
SELECT ok(statesman.sequence_feed() IS NOT NULL, 'sequence_feed() returns the head');
SELECT results_eq(
    format($$SELECT address, revision FROM statesman.read_feed(root => %L) ORDER BY global_position$$, upper(:'root')),
    format($$VALUES (%1$L::text, 1::bigint), (%1$L, 2), (%2$L, 1), (%3$L, 1), (%1$L, 3)$$,
           :'lroot' || '/a/1', :'lroot' || '@P-1/a/1', :'lroot' || '/b/1'),
    'read_feed(root) has the root''s records in append order');

SELECT * FROM finish();
ROLLBACK;

-- Bad input to every SQL function of statesman (docs/design.md §2-§8): each is an ERROR
-- with a fitting SQLSTATE, never a crash (a crash would end this session), and
-- nothing is written: the row counts of every statesman table, the store row,
-- the cursors and the tables of schema public are compared before and after
-- each group.
--
-- test/sql/bad_input.sql and test/sql/outbox.sql already cover the naming
-- rules of append*, set_store_name, declare_root, read_feed, the cursor and
-- consumer functions, and the registration rules of create_outbox/alter_outbox
-- with ordinary values.  This file covers the rest: the read functions
-- (current, history, address_of, cursor_position, applied_position,
-- already_applied, sequence_feed), hostile names (quotes, semicolons, line
-- breaks, Unicode, very long) everywhere a name is taken, extreme numbers,
-- message objects with out-of-range positions, `table` sink targets that
-- exist but cannot take deliveries, and the docs/design.md §6 option rules of the
-- redis and postgres sinks.  Hostile values that are valid (a path, a feed, a
-- quoted table name) must be stored verbatim and never executed.
-- Everything is rolled back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS statesman;
SELECT plan(164);

-- Fixture: three records with positions, one outbox, one consumer position.
DO $$
BEGIN
    PERFORM statesman.append('badinput', 'p/' || g, '{}') FROM generate_series(1, 3) g;
    PERFORM statesman.sequence_feed();
    PERFORM statesman.create_outbox('badinput-box', sink_options => '{"table": "public.badinput_sink"}');
    PERFORM statesman.mark_applied('badinput-consumer', 'badinput-feed', '00000000-0000-4000-8000-000000000001', 1);
END $$;

-- Targets that exist but cannot take deliveries (docs/design.md §6 `table`).
CREATE TABLE public.badinput_message_int (message_id text PRIMARY KEY, global_position bigint, message integer);
CREATE TABLE public.badinput_id_int (message_id integer PRIMARY KEY, global_position bigint, message jsonb);
CREATE TABLE public.badinput_position_ts (message_id text PRIMARY KEY, global_position timestamptz, message jsonb);
CREATE TABLE public.badinput_extra_not_null (message_id text PRIMARY KEY, global_position bigint, message jsonb,
                                             tenant text NOT NULL);

-- Everything a failed call must leave as it was.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t record;
    n bigint;
    out text := '';
BEGIN
    FOR t IN SELECT c.oid::regclass AS rel FROM pg_class c
             WHERE c.relnamespace = 'statesman'::regnamespace AND c.relkind = 'r' ORDER BY c.relname LOOP
        EXECUTE format('SELECT count(*) FROM %s', t.rel) INTO n;
        out := out || t.rel || '=' || n || ' ';
    END LOOP;
    RETURN concat_ws(' | ', out,
        (SELECT s.store || ' ' || s.epoch || ' ' || s.head_position FROM statesman.store_info() s),
        (SELECT string_agg(c.outbox_id || ':' || c.position, ',' ORDER BY c.outbox_id) FROM statesman.cursors c),
        (SELECT string_agg(o::text, ',' ORDER BY o.outbox_id) FROM statesman.outboxes o),
        (SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_class c
          WHERE c.relnamespace = 'public'::regnamespace));
END $$;
SELECT pg_temp.state() AS before \gset

-- Runs a statement that must be refused and undoes it if it was not: the
-- error, when there is one, comes out unchanged; a statement that succeeded
-- is rolled back and reported as P0001 "no error", so one rule that is not
-- enforced cannot disturb the checks after it.
CREATE FUNCTION pg_temp.refused(stmt text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        EXECUTE stmt;
    EXCEPTION WHEN OTHERS THEN
        RAISE;
    END;
    RAISE EXCEPTION 'no error (the statement succeeded and was rolled back): %', stmt;
END $$;

--
-- Reading the ledger: current(), history(), address_of() (docs/design.md §2)
--
SELECT throws_ok($$SELECT * FROM statesman.current(NULL, 'p')$$, '22004', NULL, 'current(): NULL root: 22004');
SELECT throws_ok($$SELECT * FROM statesman.current('badinput', NULL)$$, '22004', NULL, 'current(): NULL path: 22004');
SELECT throws_ok($$SELECT * FROM statesman.current('badinput', 'p/1', NULL)$$, '22004', NULL, 'current(): NULL partition: 22004');
SELECT throws_ok($$SELECT * FROM statesman.current('', 'p')$$, '22023', NULL, 'current(): empty root: 22023');
SELECT throws_ok($$SELECT * FROM statesman.current('bad''; DROP TABLE statesman.history; --', 'p')$$, '22023', NULL,
    'current(): a root with a quote and a statement: 22023');
SELECT throws_ok($$SELECT * FROM statesman.current('badinput', '')$$, '22023', NULL, 'current(): empty path: 22023');
SELECT throws_ok($$SELECT * FROM statesman.current('badinput', repeat('x', 1025))$$, '22023', NULL, 'current(): 1025-byte path: 22023');
SELECT throws_ok($$SELECT * FROM statesman.current('badinput', 'p', 'a/b')$$, '22023', NULL, 'current(): partition with a slash: 22023');
SELECT throws_ok($$SELECT * FROM statesman.history(NULL, 'p')$$, '22004', NULL, 'history(): NULL root: 22004');
SELECT throws_ok($$SELECT * FROM statesman.history('badinput', NULL)$$, '22004', NULL, 'history(): NULL path: 22004');
SELECT throws_ok($$SELECT * FROM statesman.history('badinput', 'p/1', NULL)$$, '22004', NULL, 'history(): NULL partition: 22004');
SELECT throws_ok($$SELECT * FROM statesman.history(repeat('r', 100000), 'p')$$, '22023', NULL, 'history(): a 100,000-character root: 22023');
SELECT throws_ok($$SELECT * FROM statesman.history('badinput', repeat('é', 100000))$$, '22023', NULL, 'history(): a 200,000-byte path: 22023');
SELECT throws_ok($$SELECT * FROM statesman.history('badinput', 'p', E'eu\nwest')$$, '22023', NULL, 'history(): partition with a line break: 22023');
SELECT throws_ok($$SELECT statesman.address_of(NULL, 'p')$$, '22004', NULL, 'address_of(): NULL root: 22004');
SELECT throws_ok($$SELECT statesman.address_of('r', NULL)$$, '22004', NULL, 'address_of(): NULL path: 22004');
SELECT throws_ok($$SELECT statesman.address_of('r', 'p', NULL)$$, '22004', NULL, 'address_of(): NULL partition: 22004');
SELECT throws_ok($$SELECT statesman.address_of('r;', 'p')$$, '22023', NULL, 'address_of(): root with a semicolon: 22023');
SELECT throws_ok($$SELECT statesman.address_of(E'r\n', 'p')$$, '22023', NULL, 'address_of(): root with a trailing line break: 22023');
SELECT throws_ok($$SELECT statesman.address_of('ｒｏｏｔ', 'p')$$, '22023', NULL, 'address_of(): full-width Unicode root: 22023');
SELECT throws_ok($$SELECT statesman.address_of('r', 'p', 'p"q')$$, '22023', NULL, 'address_of(): partition with a double quote: 22023');
SELECT is(pg_temp.state(), :'before', 'reading the ledger with bad input wrote nothing');

--
-- Writing: hostile names and values (docs/design.md §2)
--
SELECT throws_ok($$SELECT statesman.append('orders''--', 'p', '{}')$$, '22023', NULL, 'append(): root with a quote: 22023');
SELECT throws_ok($$SELECT statesman.append('orders;', 'p', '{}')$$, '22023', NULL, 'append(): root with a semicolon: 22023');
SELECT throws_ok($$SELECT statesman.append(E'orders\n', 'p', '{}')$$, '22023', NULL, 'append(): root with a trailing line break: 22023');
SELECT throws_ok($$SELECT statesman.append(E'orders\t', 'p', '{}')$$, '22023', NULL, 'append(): root with a tab: 22023');
SELECT throws_ok($$SELECT statesman.append('ｏｒｄｅｒｓ', 'p', '{}')$$, '22023', NULL, 'append(): full-width Unicode root: 22023');
SELECT throws_ok($$SELECT statesman.append('orders', 'p', '{}', partition => 'eu''west')$$, '22023', NULL, 'append(): partition with a quote: 22023');
SELECT throws_ok($$SELECT statesman.append('orders', 'p', '{}', partition => E'eu\n')$$, '22023', NULL, 'append(): partition with a line break: 22023');
SELECT throws_ok($$SELECT statesman.append('orders', 'p', '{}', partition => 'éu')$$, '22023', NULL, 'append(): Unicode partition: 22023');
SELECT throws_ok($$SELECT statesman.append('orders', 'p', '{}', partition => repeat('p', 100000))$$, '22023', NULL, 'append(): 100,000-character partition: 22023');
SELECT throws_ok($$SELECT statesman.append('orders', repeat('x', 1000000), '{}')$$, '22023', NULL, 'append(): 1 MB path: 22023');
SELECT throws_ok($$SELECT statesman.append('orders', 'p', '{}', operation => 'PUT')$$, '22023', NULL, 'append(): operation in upper case: 22023');
SELECT throws_ok($$SELECT statesman.append('orders', 'p', '{}', operation => 'put; DROP TABLE statesman.history')$$, '22023', NULL, 'append(): operation with a statement: 22023');
SELECT throws_ok($$SELECT statesman.append_bytes('orders;', 'p', '\x00', 'a/b')$$, '22023', NULL, 'append_bytes(): root with a semicolon: 22023');
SELECT throws_ok($$SELECT statesman.append_bytes('orders', repeat('x', 1025), '\x00', 'a/b')$$, '22023', NULL, 'append_bytes(): 1025-byte path: 22023');
SELECT throws_ok($$SELECT statesman.append_bytes('orders', 'p', '\x00', 'a/b', operation => 'delete')$$, '22023', NULL, 'append_bytes(): a delete with a payload: 22023');
SELECT throws_ok($$SELECT statesman.append_bytes('orders', 'p', NULL, 'a/b', operation => NULL)$$, '22004', NULL, 'append_bytes(): NULL operation: 22004');
SELECT throws_ok($$SELECT statesman.append_bytes('orders', 'p', '\x00', 'a/b', partition => NULL)$$, '22004', NULL, 'append_bytes(): NULL partition: 22004');
SELECT throws_ok($$SELECT statesman.append_delete('orders''', 'p')$$, '22023', NULL, 'append_delete(): root with a quote: 22023');
SELECT throws_ok($$SELECT statesman.append_delete('orders', repeat('é', 513))$$, '22023', NULL, 'append_delete(): 1026-byte path: 22023');
SELECT throws_ok($$SELECT statesman.append_delete('orders', 'p', 'a/b')$$, '22023', NULL, 'append_delete(): partition with a slash: 22023');
SELECT is(pg_temp.state(), :'before', 'rejected appends wrote nothing');

-- Hostile but valid values are data: stored verbatim, never executed.
SELECT lives_ok(
    $$SELECT statesman.append('badinput', 'a''b"c;DROP TABLE statesman.history;--/é/😀', '{"x": "''; DROP TABLE statesman.cursors; --"}',
                              correlation_id => 'c''); DROP TABLE statesman.roots; --', source => E'line\nbreak')$$,
    'append(): quotes, semicolons, a line break and Unicode in a path and in carried fields are accepted');
SELECT statesman.sequence_feed() AS sequenced_head \gset
SELECT is(:sequenced_head::bigint,
    (SELECT statesman._position_of(h) FROM statesman.history h WHERE h.root = 'badinput' AND h.correlation_id = 'c''); DROP TABLE statesman.roots; --'),
    '... and sequenced: the head is its position');
SELECT is(
    (SELECT ROW(f.message_id, f.message->>'path', f.message->>'correlationId', f.message->>'source')::text
       FROM statesman.read_feed(statesman.head_position() - 1, 10) f),
    ROW(current_database() || '/badinput/a''b"c;DROP TABLE statesman.history;--/é/😀#1',
        'a''b"c;DROP TABLE statesman.history;--/é/😀', 'c''); DROP TABLE statesman.roots; --', E'line\nbreak')::text,
    '... and come back verbatim in the message');
SELECT ok(to_regclass('statesman.history') IS NOT NULL AND to_regclass('statesman.roots') IS NOT NULL
          AND to_regclass('statesman.cursors') IS NOT NULL, '... and nothing they spell was executed');
SELECT pg_temp.state() AS before \gset

--
-- The store and roots: hostile names, extreme limits
--
SELECT throws_ok($$SELECT statesman.set_store_name('shop''; DROP SCHEMA statesman CASCADE; --')$$, '22023', NULL, 'set_store_name(): a name with a statement: 22023');
SELECT throws_ok($$SELECT statesman.set_store_name(E'shop\n')$$, '22023', NULL, 'set_store_name(): trailing line break: 22023');
SELECT throws_ok($$SELECT statesman.set_store_name('ｓｈｏｐ')$$, '22023', NULL, 'set_store_name(): full-width Unicode: 22023');
SELECT throws_ok($$SELECT statesman.set_store_name('shop/../x')$$, '22023', NULL, 'set_store_name(): slashes: 22023');
SELECT throws_ok($$SELECT statesman.set_store_name(repeat('s', 100000))$$, '22023', NULL, 'set_store_name(): 100,000 characters: 22023');
SELECT throws_ok($$SELECT statesman.declare_root('r"oot')$$, '22023', NULL, 'declare_root(): a double quote: 22023');
SELECT throws_ok($$SELECT statesman.declare_root('root;')$$, '22023', NULL, 'declare_root(): a semicolon: 22023');
SELECT throws_ok($$SELECT statesman.declare_root('badinput', max_revisions => -2147483648)$$, '22023', NULL, 'declare_root(): max_revisions -2^31: 22023');
SELECT throws_ok($$SELECT statesman.declare_root('badinput', max_bytes => -9223372036854775808)$$, '22023', NULL, 'declare_root(): max_bytes -2^63: 22023');
SELECT throws_ok($$SELECT statesman.declare_root('badinput', max_revisions => 1, max_bytes => 0)$$, '22023', NULL, 'declare_root(): one good limit, one bad: 22023');
SELECT is(pg_temp.state(), :'before', 'rejected store and root changes wrote nothing');

--
-- The feed: read_feed(), sequence_feed() (docs/design.md §3)
--
SELECT throws_ok($$SELECT statesman.sequence_feed(NULL)$$, '22004', NULL, 'sequence_feed(): NULL max_records: 22004');
SELECT throws_ok($$SELECT statesman.sequence_feed(0)$$, '22023', NULL, 'sequence_feed(): max_records 0: 22023');
SELECT throws_ok($$SELECT statesman.sequence_feed(-2147483648)$$, '22023', NULL, 'sequence_feed(): max_records -2^31: 22023');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(after => -9223372036854775808)$$, '22023', NULL, 'read_feed(): after -2^63: 22023');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(max_records => -2147483648)$$, '22023', NULL, 'read_feed(): max_records -2^31: 22023');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(root => '')$$, '22023', NULL, 'read_feed(): empty root: 22023');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(root => 'x''; SELECT pg_sleep(10); --')$$, '22023', NULL, 'read_feed(): root with a statement: 22023');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(root => repeat('r', 64))$$, '22023', NULL, 'read_feed(): 64-character root: 22023');
SELECT is_empty($$SELECT * FROM statesman.read_feed(after => 9223372036854775807)$$, 'read_feed(): after 2^63-1 is simply past the head');
SELECT is(pg_temp.state(), :'before', 'rejected feed calls wrote nothing');

--
-- Cursors (docs/design.md §4 "Cursors")
--
SELECT throws_ok($$SELECT statesman.cursor_position(NULL)$$, '22004', NULL, 'cursor_position(): NULL id: 22004');
SELECT throws_ok($$SELECT statesman.cursor_position('')$$, '22023', NULL, 'cursor_position(): empty id: 22023');
SELECT throws_ok($$SELECT statesman.cursor_position('box''; --')$$, '22023', NULL, 'cursor_position(): id with a quote: 22023');
SELECT throws_ok($$SELECT statesman.cursor_position(repeat('c', 100000))$$, '22023', NULL, 'cursor_position(): 100,000-character id: 22023');
SELECT throws_ok($$SELECT statesman.advance_cursor('badinput-box', -9223372036854775808)$$, '22023', NULL, 'advance_cursor(): position -2^63: 22023');
SELECT throws_ok($$SELECT statesman.advance_cursor('badinput-box', 9223372036854775807)$$, '22023', NULL, 'advance_cursor(): position 2^63-1, beyond the head: 22023');
SELECT throws_ok($$SELECT statesman.advance_cursor('bad;id', 1)$$, '22023', NULL, 'advance_cursor(): id with a semicolon: 22023');
SELECT throws_ok($$SELECT statesman.advance_cursor('bäd', 1)$$, '22023', NULL, 'advance_cursor(): Unicode id: 22023');
SELECT throws_ok($$SELECT statesman.advance_cursor(E'box\n', 1)$$, '22023', NULL, 'advance_cursor(): id with a trailing line break: 22023');
SELECT throws_ok($$SELECT statesman.seed_cursor('badinput-box', 9223372036854775807)$$, '22023', NULL, 'seed_cursor(): position 2^63-1: 22023');
SELECT throws_ok($$SELECT statesman.seed_cursor('badinput-box', -9223372036854775808)$$, '22023', NULL, 'seed_cursor(): position -2^63: 22023');
SELECT throws_ok($$SELECT statesman.seed_cursor('box"x')$$, '22023', NULL, 'seed_cursor(): id with a double quote: 22023');
SELECT is(pg_temp.state(), :'before', 'rejected cursor calls wrote nothing');

--
-- Consumers (docs/design.md §7)
--
SELECT throws_ok($$SELECT * FROM statesman.applied_position(NULL, 'f')$$, '22004', NULL, 'applied_position(): NULL consumer: 22004');
SELECT throws_ok($$SELECT * FROM statesman.applied_position('c', NULL)$$, '22004', NULL, 'applied_position(): NULL feed: 22004');
SELECT throws_ok($$SELECT * FROM statesman.applied_position('bad consumer', 'f')$$, '22023', NULL, 'applied_position(): consumer with a space: 22023');
SELECT throws_ok($$SELECT * FROM statesman.applied_position('c', '')$$, '22023', NULL, 'applied_position(): empty feed: 22023');
SELECT throws_ok($$SELECT * FROM statesman.applied_position('c', repeat('é', 128))$$, '22023', NULL, 'applied_position(): 256-byte feed: 22023');
SELECT throws_ok($$SELECT statesman.already_applied(NULL, 'f', '00000000-0000-4000-8000-000000000001', 1)$$, '22004', NULL, 'already_applied(): NULL consumer: 22004');
SELECT throws_ok($$SELECT statesman.already_applied('c', NULL, '00000000-0000-4000-8000-000000000001', 1)$$, '22004', NULL, 'already_applied(): NULL feed: 22004');
SELECT throws_ok($$SELECT statesman.already_applied('c', 'f', NULL, 1)$$, '22004', NULL, 'already_applied(): NULL epoch: 22004');
SELECT throws_ok($$SELECT statesman.already_applied('c', 'f', '00000000-0000-4000-8000-000000000001', NULL)$$, '22004', NULL, 'already_applied(): NULL position: 22004');
SELECT throws_ok($$SELECT statesman.already_applied('c''--', 'f', '00000000-0000-4000-8000-000000000001', 1)$$, '22023', NULL, 'already_applied(): consumer with a quote: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', 'f', '00000000-0000-4000-8000-000000000001', -9223372036854775808)$$, '22023', NULL, 'mark_applied(): position -2^63: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied(repeat('c', 100000), 'f', '00000000-0000-4000-8000-000000000001', 1)$$, '22023', NULL, 'mark_applied(): 100,000-character consumer: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', repeat('f', 1000000), '00000000-0000-4000-8000-000000000001', 1)$$, '22023', NULL, 'mark_applied(): 1 MB feed: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 9223372036854775808}'::jsonb)$$, '22023', NULL, 'mark_applied(message): globalPosition 2^63: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 1e30}'::jsonb)$$, '22023', NULL, 'mark_applied(message): globalPosition 1e30: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '{"store": "", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 1}'::jsonb)$$, '22023', NULL, 'mark_applied(message): empty store: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '{"store": 7, "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 1}'::jsonb)$$, '22023', NULL, 'mark_applied(message): a numeric store: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": "1"}'::jsonb)$$, '22023', NULL, 'mark_applied(message): globalPosition as a string: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '"{}"'::jsonb)$$, '22023', NULL, 'mark_applied(message): a JSON string: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', 'null'::jsonb)$$, '22023', NULL, 'mark_applied(message): JSON null: 22023');
SELECT throws_ok($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001''; --", "globalPosition": 1}'::jsonb)$$, '22023', NULL, 'mark_applied(message): an epoch with a statement: 22023');
SELECT is(pg_temp.state(), :'before', 'rejected consumer calls wrote nothing');

-- A hostile feed name is a valid feed (any 1 to 255 bytes): stored verbatim.
SELECT lives_ok($$SELECT statesman.mark_applied('badinput-consumer', 'f''); DROP TABLE statesman.applied; --', '00000000-0000-4000-8000-000000000001', 5)$$,
    'mark_applied(): a feed name with a quote and a statement is accepted');
SELECT is((SELECT position FROM statesman.applied_position('badinput-consumer', 'f''); DROP TABLE statesman.applied; --')),
    5::bigint, '... stored verbatim, and statesman.applied is still there');
SELECT pg_temp.state() AS before \gset

--
-- Outboxes: hostile ids and extreme values (docs/design.md §4 "Registration")
--
SELECT throws_ok($$SELECT statesman.create_outbox(repeat('o', 100000))$$, '22023', NULL, 'create_outbox(): 100,000-character id: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', batch_size => 2147483647)$$, '22023', NULL, 'create_outbox(): batch_size 2^31-1: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', batch_size => -2147483648)$$, '22023', NULL, 'create_outbox(): batch_size -2^31: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', poll_interval => '178000000 years')$$, '22023', NULL, 'create_outbox(): poll_interval 178,000,000 years: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', poll_interval => '-178000000 years')$$, '22023', NULL, 'create_outbox(): poll_interval -178,000,000 years: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', lease_ttl => '178000000 years')$$, '22023', NULL, 'create_outbox(): lease_ttl 178,000,000 years: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', lease_ttl => '1 microsecond')$$, '22023', NULL, 'create_outbox(): lease_ttl 1 microsecond: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', min_retry_delay => '-178000000 years')$$, '22023', NULL, 'create_outbox(): min_retry_delay -178,000,000 years: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', max_retry_delay => '178000000 years')$$, '22023', NULL, 'create_outbox(): max_retry_delay 178,000,000 years: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', skip_poison_after_attempts => -2147483648)$$, '22023', NULL, 'create_outbox(): skip_poison_after_attempts -2^31: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', root => 'or''ders')$$, '22023', NULL, 'create_outbox(): root with a quote: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', root => 'orders; DROP TABLE x')$$, '22023', NULL, 'create_outbox(): root with a statement: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('box', fingerprint => repeat('f', 1000000))$$, '22023', NULL, 'create_outbox(): 1 MB fingerprint: 22023');
SELECT throws_ok($$SELECT statesman.create_outbox('badinput-box')$$, '23505', NULL, 'create_outbox(): the fixture''s id again: 23505');
SELECT throws_ok($$SELECT statesman.alter_outbox('badinput-box', batch_size => 2147483647)$$, '22023', NULL, 'alter_outbox(): batch_size 2^31-1: 22023');
SELECT throws_ok($$SELECT statesman.alter_outbox('badinput-box', lease_ttl => '-1 second')$$, '22023', NULL, 'alter_outbox(): negative lease_ttl: 22023');
SELECT throws_ok($$SELECT statesman.alter_outbox('badinput-box', root => 'a/b')$$, '22023', NULL, 'alter_outbox(): root with a slash: 22023');
SELECT throws_ok($$SELECT statesman.alter_outbox('badinput-box', payload_content_type => repeat('é', 100000))$$, '22023', NULL, 'alter_outbox(): 200,000-byte payload_content_type: 22023');
SELECT throws_ok($$SELECT statesman.alter_outbox('box''; --')$$, '22023', NULL, 'alter_outbox(): id with a quote: 22023');
SELECT throws_ok($$SELECT statesman.drop_outbox(repeat('d', 64))$$, '22023', NULL, 'drop_outbox(): 64-character id: 22023');
SELECT throws_ok($$SELECT statesman.pause_outbox('box;')$$, '22023', NULL, 'pause_outbox(): id with a semicolon: 22023');
SELECT throws_ok($$SELECT statesman.resume_outbox('bøx')$$, '22023', NULL, 'resume_outbox(): Unicode id: 22023');
SELECT throws_ok($$SELECT statesman.redeliver('badinput-box', '')$$, '42704', NULL, 'redeliver(): an empty message id is not parked: 42704');
SELECT throws_ok($$SELECT statesman.redeliver('badinput-box', repeat('m', 1000000))$$, '42704', NULL, 'redeliver(): a 1 MB message id is not parked: 42704');
SELECT throws_ok($$SELECT statesman.redeliver('box"')$$, '22023', NULL, 'redeliver(): id with a double quote: 22023');
SELECT throws_ok($$SELECT * FROM statesman.dispatch_once(repeat('x', 100000))$$, '22023', NULL, 'dispatch_once(): 100,000-character id: 22023');
SELECT throws_ok($$SELECT * FROM statesman.dispatch_once(E'badinput-box\n')$$, '22023', NULL, 'dispatch_once(): id with a trailing line break: 22023');
SELECT is(pg_temp.state(), :'before', 'rejected outbox calls wrote nothing');

--
-- The `table` sink's options (docs/design.md §6): targets that cannot take deliveries
-- are refused at registration, nothing stored, no table created.
--
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "public.badinput_message_int"}')$q$)$$,
    '42P16', NULL, 'table sink: a target whose message column is an integer: 42P16');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "public.badinput_id_int"}')$q$)$$,
    '42P16', NULL, 'table sink: a target whose message_id column is an integer: 42P16');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "public.badinput_position_ts"}')$q$)$$,
    '42P16', NULL, 'table sink: a target whose global_position column is a timestamp: 42P16');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "public.badinput_extra_not_null"}')$q$)$$,
    '42P16', NULL, 'table sink: a target with another NOT NULL column without a default: 42P16');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.alter_outbox('badinput-box', sink_options => '{"table": "public.badinput_message_int"}')$q$)$$,
    '42P16', NULL, 'table sink: alter_outbox to a target that cannot take deliveries: 42P16');
-- A temporary table lives in the registering session only: no dispatcher could ever see it.
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "pg_temp.badinput_sink"}')$q$)$$,
    '22023', NULL, 'table sink: a target in pg_temp: 22023');
-- A name PostgreSQL would truncate: the stored option would not name the table it delivers to.
SELECT throws_ok(format($$SELECT pg_temp.refused(format('SELECT statesman.create_outbox(''box'', sink_options => %%L)', %L::jsonb))$$,
                        jsonb_build_object('table', 'public.' || repeat('t', 64))),
    '22023', NULL, 'table sink: a 64-character table name: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "public.t", "table": "public.u", "x": 1}')$q$)$$,
    '22023', NULL, 'table sink: an unknown option next to a repeated one: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": {"schema": "public", "name": "t"}}')$q$)$$,
    '22023', NULL, 'table sink: "table" as an object: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "statesman.outboxes"}')$q$)$$,
    '42P16', NULL, 'table sink: statesman.outboxes as the target: 42P16');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "statesman.dead_letters"}')$q$)$$,
    '42P16', NULL, 'table sink: statesman.dead_letters (no unique message_id) as the target: 42P16');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink_options => '{"table": "pg_catalog.pg_class"}')$q$)$$,
    '22023', NULL, 'table sink: a system catalog as the target: 22023');
SELECT is(pg_temp.state(), :'before', 'refused table-sink registrations wrote nothing and created no table');

-- A hostile but valid quoted name is a table name, never SQL.
SELECT lives_ok($$SELECT statesman.create_outbox('badinput-quoted',
                      sink_options => '{"table": "public.\"x\"\"; DROP TABLE statesman.history; --\""}')$$,
    'table sink: a quoted table name with a quote and a statement in it is accepted');
SELECT has_table('public', 'x"; DROP TABLE statesman.history; --', '... it names the table that was created');
SELECT has_table('statesman', 'history', '... and statesman.history is still there');
SELECT is((SELECT published FROM statesman.dispatch_once('badinput-quoted')),
    (SELECT count(*) FROM statesman.history h WHERE statesman._position_of(h) IS NOT NULL),
    '... and the feed is delivered: every sequenced record published');
SELECT is((SELECT count(*) FROM public."x""; DROP TABLE statesman.history; --"),
    (SELECT count(*) FROM statesman.history h WHERE statesman._position_of(h) IS NOT NULL),
    '... into that table: it holds every sequenced record');
SELECT pg_temp.state() AS before \gset

--
-- The redis and postgres sinks: docs/design.md §6 names their options; anything else,
-- or options that are not an object, is refused (22023), nothing stored.
--
SELECT ok('redis' = ANY (statesman._known_sinks()) AND 'postgres' = ANY (statesman._known_sinks()),
    'the redis and postgres sinks are known');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'redis', sink_options => '[]')$q$)$$, '22023', NULL, 'redis sink: options as an array: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'redis', sink_options => '"host=localhost"')$q$)$$, '22023', NULL, 'redis sink: options as a string: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'redis', sink_options => 'null')$q$)$$, '22023', NULL, 'redis sink: options as JSON null: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'redis', sink_options => '{"hots": "localhost"}')$q$)$$, '22023', NULL, 'redis sink: an unknown option: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'redis', sink_options => '{"table": "public.t"}')$q$)$$, '22023', NULL, 'redis sink: the table sink''s option: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'redis', sink_options => NULL)$q$)$$, '22004', NULL, 'redis sink: NULL options: 22004');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'postgres', sink_options => '[]')$q$)$$, '22023', NULL, 'postgres sink: options as an array: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'postgres', sink_options => '42')$q$)$$, '22023', NULL, 'postgres sink: options as a number: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'postgres', sink_options => '{"conninfo": "host=127.0.0.1", "table": "public.t", "tabel": "public.t"}')$q$)$$,
    '22023', NULL, 'postgres sink: an unknown option: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.create_outbox('box', sink => 'postgres', sink_options => '{"table": "public.t"}')$q$)$$,
    '22023', NULL, 'postgres sink: no conninfo: 22023');
SELECT throws_ok($$SELECT pg_temp.refused($q$SELECT statesman.alter_outbox('badinput-box', sink => 'redis', sink_options => '{"hots": "localhost"}')$q$)$$,
    '22023', NULL, 'alter_outbox() to the redis sink with an unknown option: 22023');
SELECT is(pg_temp.state(), :'before', 'refused redis and postgres registrations wrote nothing');

SELECT * FROM finish();
ROLLBACK;

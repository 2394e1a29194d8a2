--
-- bad_input: every rule gets an ERROR with a fitting SQLSTATE, and nothing is written.
--
-- expect_error(statement) runs the statement, catches the error and returns
-- "SQLSTATE: message", plus whether the store's state (ledger, cursors,
-- consumer positions, roots, store name and epoch) is the same afterwards.
-- "no error" in the output would mean a rule is not enforced.
--
CREATE FUNCTION public.statesman_state() RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT concat_ws(' | ',
    (SELECT count(*) || ' records, ' || coalesce(sum(revision), 0) || ', '
            || coalesce(max(statesman._position_of(h)), 0) FROM statesman.history h),
    (SELECT count(*) || ' cursors, ' || coalesce(sum(position), 0) FROM statesman.cursors),
    (SELECT count(*) || ' applied, '
            || coalesce(string_agg(consumer || '/' || feed || '/' || epoch || '/' || position,
                                   ',' ORDER BY consumer, feed), '')
       FROM statesman.applied),
    (SELECT count(*) || ' roots, '
            || coalesce(string_agg(concat_ws(':', root, fingerprint, content_type,
                                              max_revisions, max_bytes), ',' ORDER BY root), '')
       FROM statesman.roots),
    (SELECT store || ' ' || epoch FROM statesman.store_info()))
$$;

CREATE FUNCTION public.expect_error(stmt text, OUT result text, OUT nothing_written boolean)
LANGUAGE plpgsql AS $$
DECLARE
  before text := public.statesman_state();
BEGIN
  BEGIN
    EXECUTE stmt;
    result := 'no error';
  EXCEPTION WHEN OTHERS THEN
    result := SQLSTATE || ': ' || SQLERRM;
  END;
  nothing_written := public.statesman_state() IS NOT DISTINCT FROM before;
END $$;

-- settle() comes from store.sql, the first file of the schedule.

-- Everything appended so far is sequenced.
SELECT public.settle() AS sequenced;
SELECT public.statesman_state() AS state_before \gset

--
-- append(): required values (22004)
--
SELECT * FROM expect_error($$SELECT statesman.append(NULL, 'p', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', NULL, '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', partition => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', operation => NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.append_bytes(NULL, 'p', '\x01', 'a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.append_bytes('r', NULL, '\x01', 'a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.append_bytes('r', 'p', NULL, 'a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.append_delete(NULL, 'p')$$);
SELECT * FROM expect_error($$SELECT statesman.append_delete('r', NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.append_delete('r', 'p', NULL)$$);

--
-- root: ^[A-Za-z0-9_.-]{1,63}$ (22023)
--
SELECT * FROM expect_error($$SELECT statesman.append('', 'p', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append('bad root', 'p', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append('a/b', 'p', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append('a@b', 'p', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append('rööt', 'p', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append(repeat('r', 64), 'p', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append_bytes('bad root', 'p', '\x01', 'a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.append_delete('bad root', 'p')$$);

--
-- path: non-empty, at most 1024 bytes (22023)
--
SELECT * FROM expect_error($$SELECT statesman.append('r', '', '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', repeat('x', 1025), '{}')$$);
-- 513 characters, 1026 bytes: the limit is in bytes.
SELECT * FROM expect_error($$SELECT statesman.append('r', repeat('é', 513), '{}')$$);
SELECT * FROM expect_error($$SELECT statesman.append_bytes('r', '', '\x01', 'a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.append_delete('r', '')$$);

--
-- partition: ^[A-Za-z0-9_.-]{0,63}$ (22023)
--
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', partition => 'eu west')$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', partition => 'a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', partition => repeat('p', 64))$$);
SELECT * FROM expect_error($$SELECT statesman.append_bytes('r', 'p', '\x01', 'a/b', partition => 'a@b')$$);
SELECT * FROM expect_error($$SELECT statesman.append_delete('r', 'p', 'eu west')$$);

--
-- operation: put or delete (22023); a delete carries no payload (22023)
--
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', operation => 'update')$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', operation => '')$$);
SELECT * FROM expect_error($$SELECT statesman.append_bytes('r', 'p', '\x01', 'a/b', operation => 'upsert')$$);
SELECT * FROM expect_error($$SELECT statesman.append('r', 'p', '{}', operation => 'delete')$$);

--
-- append_bytes() has no default content type: leaving it out is no call at
-- all (42883); an explicit NULL means "the root's declared one, if any".
--
SELECT * FROM expect_error($$SELECT statesman.append_bytes('r', 'p', '\x01'::bytea)$$);

SELECT public.statesman_state() = :'state_before' AS nothing_written_by_appends;

--
-- Store name: ^[A-Za-z0-9_.-]{1,63}$ (22023), NULL (22004); changing it once
-- the feed has records (55000).
--
SELECT * FROM expect_error($$SELECT statesman.set_store_name(NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.set_store_name('')$$);
SELECT * FROM expect_error($$SELECT statesman.set_store_name('bad name')$$);
SELECT * FROM expect_error($$SELECT statesman.set_store_name('a/b')$$);
SELECT * FROM expect_error($$SELECT statesman.set_store_name(repeat('s', 64))$$);
SELECT * FROM expect_error($$SELECT statesman.set_store_name('valid-name')$$);
SELECT store FROM statesman.store_info();

--
-- declare_root(): root rules, and limits of at least 1 (22023)
--
SELECT * FROM expect_error($$SELECT statesman.declare_root(NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('')$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('bad root')$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root(repeat('r', 64))$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('r', max_revisions => 0)$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('r', max_revisions => -1)$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('r', max_bytes => 0)$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('r', max_bytes => -1)$$);
-- The envelope fallbacks messages may carry: at most 1024 bytes each (22023).
SELECT * FROM expect_error($$SELECT statesman.declare_root('r', fingerprint => repeat('f', 1025))$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('r', content_type => repeat('c', 1025))$$);
-- Re-declaring an existing root with a bad limit keeps its declaration.
SELECT * FROM expect_error($$SELECT statesman.declare_root('keep2', max_revisions => 0)$$);
SELECT root, max_revisions, max_bytes FROM statesman.roots WHERE root = 'keep2';

--
-- read_feed(): max_records of at least 1 (22023), not NULL (22004)
--
SELECT * FROM expect_error($$SELECT * FROM statesman.read_feed(max_records => 0)$$);
SELECT * FROM expect_error($$SELECT * FROM statesman.read_feed(max_records => -1)$$);
SELECT * FROM expect_error($$SELECT * FROM statesman.read_feed(max_records => NULL)$$);
-- after is a position or NULL, root a root name (22023)
SELECT * FROM expect_error($$SELECT * FROM statesman.read_feed(after => -1)$$);
SELECT * FROM expect_error($$SELECT * FROM statesman.read_feed(root => 'bad root')$$);

--
-- Cursors: id and position required (22004), positions above 0 (22023),
-- seeding at most at the head (22023).
--
SELECT * FROM expect_error($$SELECT statesman.advance_cursor(NULL, 1)$$);
SELECT * FROM expect_error($$SELECT statesman.advance_cursor('bad-input', NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.advance_cursor('bad-input', 0)$$);
SELECT * FROM expect_error($$SELECT statesman.advance_cursor('bad-input', -1)$$);
-- A cursor past the head would skip records not in the feed yet (22023).
SELECT * FROM expect_error($$SELECT statesman.advance_cursor('bad-input', statesman.head_position() + 1)$$);
-- Cursor ids: ^[A-Za-z0-9_.:-]{1,63}$ (22023).
SELECT * FROM expect_error($$SELECT statesman.advance_cursor('bad id', 1)$$);
SELECT * FROM expect_error($$SELECT statesman.advance_cursor(repeat('c', 64), 1)$$);
SELECT * FROM expect_error($$SELECT statesman.seed_cursor('')$$);
SELECT * FROM expect_error($$SELECT statesman.seed_cursor(NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.seed_cursor('bad-input', -1)$$);
SELECT * FROM expect_error($$SELECT statesman.seed_cursor('bad-input', statesman.head_position() + 1)$$);
SELECT * FROM expect_error($$SELECT statesman.seed_cursor('feed-reader', statesman.head_position() + 1)$$);
SELECT statesman.cursor_position('bad-input') IS NULL AS no_cursor_written;

--
-- Consumers: consumer, feed, epoch and position required (22004), consumer
-- ids like cursor ids, feeds 1 to 255 bytes, positions not negative
-- (22023); a message must be an object with a store, an epoch (a UUID) and an
-- integer globalPosition (22023).
--
SELECT * FROM expect_error($$SELECT statesman.mark_applied(NULL, 'f', '00000000-0000-4000-8000-000000000001', 1)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', NULL, '00000000-0000-4000-8000-000000000001', 1)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', 'f', NULL, 1)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', 'f', '00000000-0000-4000-8000-000000000001', NULL)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', 'f', '00000000-0000-4000-8000-000000000001', -1)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('bad consumer', 'f', '00000000-0000-4000-8000-000000000001', 1)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '', '00000000-0000-4000-8000-000000000001', 1)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', repeat('f', 256), '00000000-0000-4000-8000-000000000001', 1)$$);
SELECT * FROM expect_error($$SELECT statesman.already_applied('c', 'f', '00000000-0000-4000-8000-000000000001', -1)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied(NULL, '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 1}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', NULL::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '[1, 2]'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 1}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"store": "f", "globalPosition": 1}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001"}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": null}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": "abc"}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 1.5}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": -1}'::jsonb)$$);
SELECT * FROM expect_error($$SELECT statesman.mark_applied('c', '{"store": "f", "epoch": "not-a-uuid", "globalPosition": 1}'::jsonb)$$);
SELECT count(*) AS rows FROM statesman.applied_position('c', 'f');

SELECT public.statesman_state() = :'state_before' AS nothing_written_at_all;

--
-- Privileges: a role without grants cannot change store names, epochs,
-- roots or cursors (42501), nor read the tables directly.
--
CREATE ROLE regress_statesman_nobody;
SET ROLE regress_statesman_nobody;
SELECT * FROM expect_error($$SELECT statesman.set_store_name('intruder')$$);
SELECT * FROM expect_error($$SELECT statesman.reset_epoch()$$);
SELECT * FROM expect_error($$SELECT statesman.declare_root('intruder', max_revisions => 1)$$);
SELECT * FROM expect_error($$SELECT statesman.seed_cursor('feed-reader')$$);
SELECT * FROM expect_error($$SELECT statesman.advance_cursor('feed-reader', statesman.head_position())$$);
SELECT * FROM expect_error($$SELECT count(*) FROM statesman.history$$);
SELECT * FROM expect_error($$SELECT count(*) FROM statesman.cursors$$);
-- Reading the feed and positions is open to everyone.
SELECT statesman.head_position() IS NOT NULL AS can_read_head,
       statesman.cursor_position('feed-reader') IS NOT NULL AS can_read_cursor;
RESET ROLE;
DROP ROLE regress_statesman_nobody;

SELECT public.statesman_state() = :'state_before' AS nothing_written_at_all;

DROP FUNCTION public.expect_error(text);
DROP FUNCTION public.statesman_state();

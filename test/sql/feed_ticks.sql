--
-- feed_ticks: positions come from ticks, never from a rewrite of the ledger row (F6), and
-- never move once readable, also when retention prunes the records around them and the ticks
-- whose records are all gone (docs/feed.md).
--
CREATE EXTENSION IF NOT EXISTS statesman;
-- Gives a position to everything committed so far.
CREATE FUNCTION pg_temp.settle() RETURNS boolean LANGUAGE plpgsql AS $$
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
-- Retention between positions. Records of two roots, interleaved, each sequenced on its own
-- (one tick each), all kept; then root ticks-prune keeps one revision per address, and the
-- next append of each of its addresses prunes the older ones: records between the positions
-- of ticks-keep's records, which stay.
--
SELECT statesman.declare_root('ticks-prune');
SELECT count(*) AS appended
  FROM generate_series(1, 12) i,
       LATERAL (SELECT * FROM statesman.append(CASE WHEN i % 2 = 0 THEN 'ticks-keep' ELSE 'ticks-prune' END,
                                               'k' || (i % 3), jsonb_build_object('i', i))) a,
       LATERAL (SELECT statesman.sequence_feed()) s;
SELECT pg_temp.settle() AS sequenced;
CREATE TEMP TABLE before_prune AS
    SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 100000)
     WHERE message->>'root' IN ('ticks-keep', 'ticks-prune');
SELECT count(*) AS records, count(DISTINCT global_position) AS positions FROM before_prune;
SELECT statesman.declare_root('ticks-prune', max_revisions => 1);
SELECT count(*) AS appended
  FROM generate_series(1, 3) i, LATERAL statesman.append('ticks-prune', 'k' || (i % 3), '{"last": true}') a;
SELECT pg_temp.settle() AS sequenced;
CREATE TEMP TABLE after_prune AS
    SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 100000)
     WHERE message->>'root' IN ('ticks-keep', 'ticks-prune');
-- Pruned: the six records of ticks-prune from before; all but the first lay between records
-- that stay.
SELECT count(*) AS pruned,
       count(*) FILTER (WHERE b.global_position > (SELECT min(a.global_position) FROM after_prune a)
                          AND b.global_position < (SELECT max(a.global_position) FROM after_prune a
                                                   WHERE a.message->>'root' = 'ticks-keep')) AS between_survivors
  FROM before_prune b WHERE b.message_id NOT IN (SELECT message_id FROM after_prune);
-- Every survivor is at the position, with the message, it had before the pruning.
SELECT count(*) AS survivors_compared,
       count(*) FILTER (WHERE a.global_position <> b.global_position OR a.message <> b.message) AS moved
  FROM after_prune a JOIN before_prune b ON b.message_id = a.message_id;
-- The three new records are above every position read before.
SELECT count(*) AS new_records, bool_and(a.global_position > (SELECT max(global_position) FROM before_prune)) AS above
  FROM after_prune a WHERE a.message_id NOT IN (SELECT message_id FROM before_prune);

-- The ticks whose records are all gone can go, and that moves no position either. (The
-- records of the earlier tests are still there, so only whole ticks of this root go: prune
-- the ledger below this root's first survivor first.)
DELETE FROM statesman.history h
 WHERE h.id < (SELECT min(x.id) FROM statesman.history x WHERE x.root IN ('ticks-keep', 'ticks-prune'));
SELECT statesman._prune_ticks() > 0 AS ticks_pruned;
SELECT count(*) AS ticks_left_below_the_ledger FROM statesman.ticks t
 WHERE t.hi < (SELECT min(h.id) FROM statesman.history h) AND t.hi >= t.lo
   AND t.tick_id < (SELECT max(x.tick_id) FROM statesman.ticks x WHERE x.hi >= x.lo);
SELECT count(*) AS moved_by_tick_pruning
  FROM (SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 100000)
         WHERE message->>'root' IN ('ticks-keep', 'ticks-prune')) a
  FULL JOIN after_prune b ON b.message_id = a.message_id
 WHERE a.global_position IS DISTINCT FROM b.global_position OR a.message IS DISTINCT FROM b.message;
SELECT (SELECT oldest_position FROM statesman.store_info()) = (SELECT min(global_position) FROM after_prune)
       AS oldest_is_the_first_survivor;

--
-- F6: no UPDATE of a ledger row gives positions. Appends in autocommit and in one
-- transaction that sequences its own records, then the ticker; the statistics of
-- statesman.history count the inserts and no update.
--
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT n_tup_ins AS ins0, n_tup_upd AS upd0 FROM pg_stat_user_tables
 WHERE relid = 'statesman.history'::regclass \gset
SELECT count(*) AS appended FROM generate_series(1, 20) i, LATERAL statesman.append('ticks-f6', 'a/' || i, '{}') a;
BEGIN;
SELECT count(*) AS appended FROM generate_series(1, 20) i, LATERAL statesman.append('ticks-f6', 'b/' || i, '{}') a;
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced_in_transaction;
SELECT count(*) AS readable_in_transaction FROM statesman.read_feed(NULL, 100000, 'ticks-f6');
COMMIT;
SELECT pg_temp.settle() AS sequenced;
SELECT count(*) AS in_feed, count(DISTINCT global_position) AS positions
  FROM statesman.read_feed(NULL, 100000, 'ticks-f6');
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT n_tup_ins - :ins0 AS inserted, n_tup_upd - :upd0 AS updated
  FROM pg_stat_user_tables WHERE relid = 'statesman.history'::regclass;

--
-- The ticker (src/feed/ticker.cpp) writes a tick's row and index entries itself, as its INSERT
-- would: created_at is the transaction's now(), the indexes are sound (amcheck checks every
-- entry against the heap), and the GiST index of the id ranges finds each new record's tick.
--
CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT count(*) AS appended FROM generate_series(1, 3) i, LATERAL statesman.append('ticks-direct', 'd/' || i, '{}') a;
BEGIN;
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT t.created_at = now() AS created_now, t.hi - t.lo + 1 AS ids, t.xid = pg_current_xact_id() AS own_xid,
       t.prev_snap::text = (SELECT p.snap::text FROM statesman.ticks p WHERE p.tick_id = t.tick_id - 1) AS chained
  FROM statesman.ticks t ORDER BY t.tick_id DESC LIMIT 1;
COMMIT;
SELECT c.relname, 'every row it should hold' AS checked
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid, LATERAL bt_index_check(c.oid, true)
 WHERE i.indrelid = 'statesman.ticks'::regclass AND c.relam = (SELECT oid FROM pg_am WHERE amname = 'btree')
 ORDER BY c.relname;
DROP EXTENSION amcheck;
SELECT count(*) AS records, count(*) FILTER (WHERE statesman._position_of(h.id, h.txid, h.legacy_position) = f.global_position)
       AS found_by_range
  FROM statesman.history h
  JOIN statesman.read_feed(NULL, 100000, 'ticks-direct') f ON f.address = h.address AND f.revision = h.revision
 WHERE h.root = 'ticks-direct';

-- With a trigger of its own on statesman.ticks, the tick goes through the INSERT, and the
-- trigger sees it.
CREATE TABLE public.ticks_seen (tick_id bigint, ids bigint, created_now boolean);
CREATE FUNCTION public.note_tick() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.ticks_seen VALUES (NEW.tick_id, NEW.hi - NEW.lo + 1, NEW.created_at = now());
  RETURN NEW;
END $$;
CREATE TRIGGER note_tick AFTER INSERT ON statesman.ticks FOR EACH ROW EXECUTE FUNCTION public.note_tick();
SELECT count(*) AS appended FROM generate_series(1, 2) i, LATERAL statesman.append('ticks-trigger', 't/' || i, '{}') a;
SELECT pg_temp.settle() AS sequenced;
SELECT s.ids, s.created_now, s.tick_id = (SELECT max(t.tick_id) FROM statesman.ticks t) AS newest
  FROM public.ticks_seen s;
SELECT count(*) AS in_feed FROM statesman.read_feed(NULL, 100000, 'ticks-trigger');
DROP TRIGGER note_tick ON statesman.ticks;
DROP FUNCTION public.note_tick();
DROP TABLE public.ticks_seen;

-- The ticker's refusals, with nothing written: a read-only transaction that finds records to
-- tick (the INSERT is refused as any INSERT is; one that finds none gets the head), another
-- isolation level, bad arguments, a role that may run the ticker but not read or write its
-- tables.
SELECT count(*) AS appended FROM statesman.append('ticks-refused', 'r/1', '{}') a;
SELECT count(*) AS ticks_before FROM statesman.ticks \gset
\set VERBOSITY sqlstate
BEGIN READ ONLY;
SELECT statesman.sequence_feed();
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT statesman.sequence_feed();
ROLLBACK;
SELECT statesman._tick(NULL, false);
SELECT statesman._tick(0, false);
CREATE ROLE regress_ticks_outsider;
GRANT USAGE ON SCHEMA statesman TO regress_ticks_outsider;
GRANT EXECUTE ON FUNCTION statesman._tick(integer, boolean) TO regress_ticks_outsider;
GRANT SELECT ON SEQUENCE statesman.history_id_seq TO regress_ticks_outsider;
SET ROLE regress_ticks_outsider;
SELECT statesman._tick(10, false);
RESET ROLE;
REVOKE ALL ON FUNCTION statesman._tick(integer, boolean) FROM regress_ticks_outsider;
REVOKE ALL ON SEQUENCE statesman.history_id_seq FROM regress_ticks_outsider;
REVOKE ALL ON SCHEMA statesman FROM regress_ticks_outsider;
DROP ROLE regress_ticks_outsider;
\set VERBOSITY default
SELECT count(*) - :ticks_before AS ticks_added FROM statesman.ticks;
SELECT pg_temp.settle() AS sequenced;
BEGIN READ ONLY;
SELECT statesman.sequence_feed() = statesman.head_position() AS head_when_nothing_is_new;
ROLLBACK;

--
-- An idle tick after a large one reads only the ids drawn since this session's last scan that
-- found nothing, not the large tick's records again for their transaction ids (counted as the
-- index entries of statesman.history_id read, which only the ticker reads here).
--
SELECT count(*) AS appended
  FROM generate_series(1, 5000) i, LATERAL statesman.append('ticks-large', 'l' || i, '{}') a;
SELECT statesman.sequence_feed() > 0 AS large_tick;
SELECT statesman.sequence_feed() = statesman.head_position() AS first_idle_tick;
SELECT pg_stat_force_next_flush();
SELECT idx_tup_read AS reads_before FROM pg_stat_user_indexes
 WHERE indexrelid = 'statesman.history_id'::regclass \gset
SELECT statesman.sequence_feed() = statesman.head_position() AS idle_tick_1;
SELECT statesman.sequence_feed() = statesman.head_position() AS idle_tick_2;
SELECT statesman.sequence_feed() = statesman.head_position() AS idle_tick_3;
SELECT pg_stat_force_next_flush();
SELECT idx_tup_read - :reads_before < 100 AS idle_ticks_skip_the_large_tick
  FROM pg_stat_user_indexes WHERE indexrelid = 'statesman.history_id'::regclass;
-- A record appended after them is ticked by the next call of the same session.
SELECT count(*) AS appended FROM statesman.append('ticks-large', 'after', '{}') a;
SELECT statesman.sequence_feed() > 0 AS ticked;
SELECT message->>'address' AS last_record FROM statesman.read_feed(statesman.head_position() - 1, 10);

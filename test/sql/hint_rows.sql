--
-- hint_rows: an append takes an address's latest revision from the shared hints when the
-- row the hint names is the address's at that revision and visible; otherwise it probes the
-- primary key. Either way it gets the revision after the latest committed one (docs/design.md
-- §2.4). pg_stat_get_xact_numscans counts the transaction's probes of the primary key.
--
DROP EXTENSION IF EXISTS statesman CASCADE;
CREATE EXTENSION statesman;
CREATE FUNCTION pg_temp.probes() RETURNS bigint LANGUAGE sql AS
  $$ SELECT pg_stat_get_xact_numscans('statesman.history_pkey'::regclass) $$;
CREATE FUNCTION pg_temp.revisions(addr text) RETURNS text LANGUAGE sql AS
  $$ SELECT string_agg(revision::text, ',' ORDER BY revision) FROM statesman.history WHERE address = addr $$;

-- A hint that holds: no probe.
SELECT revision FROM statesman.append('hints', 'a', '{"n": 1}');
SELECT revision FROM statesman.append('hints', 'a', '{"n": 2}');
BEGIN;
SELECT pg_temp.probes() AS before \gset
SELECT revision FROM statesman.append('hints', 'a', '{"n": 3}');
SELECT revision FROM statesman.append('hints', 'a', '{"n": 4}');
SELECT pg_temp.probes() - :before AS probes_with_the_hint;
COMMIT;

-- Under REPEATABLE READ the snapshot can predate the hint's row: the primary key is probed.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.probes() AS before \gset
SELECT revision FROM statesman.append('hints', 'a', '{"n": 5}');
SELECT pg_temp.probes() - :before AS probes_under_repeatable_read;
COMMIT;

-- The hint's row rolled back (wholly, and to a savepoint): not visible, so probed.
BEGIN;
SELECT revision FROM statesman.append('hints', 'a', '{"n": "gone"}');
ROLLBACK;
BEGIN;
SELECT pg_temp.probes() AS before \gset
SELECT revision FROM statesman.append('hints', 'a', '{"n": 6}');
SELECT pg_temp.probes() - :before AS probes_after_a_rollback;
SAVEPOINT s;
SELECT revision FROM statesman.append('hints', 'a', '{"n": "undone"}');
ROLLBACK TO SAVEPOINT s;
SELECT revision FROM statesman.append('hints', 'a', '{"n": 7}');
COMMIT;

-- The latest revision deleted by hand: the hint's row is gone, the one before it is latest.
DELETE FROM statesman.history WHERE address = 'hints/a' AND revision = 7;
BEGIN;
SELECT pg_temp.probes() AS before \gset
SELECT revision FROM statesman.append('hints', 'a', '{"n": "7 again"}');
SELECT pg_temp.probes() - :before AS probes_after_a_delete;
COMMIT;
SELECT pg_temp.revisions('hints/a') AS revisions;

-- The table cut short by VACUUM after the hint's rows were deleted: the hint names a page that
-- is gone, which is no error.
SELECT pg_relation_size('statesman.history') AS size_before \gset
SELECT count(*) AS appended
  FROM generate_series(1, 300) i, statesman.append('hints', 't', jsonb_build_object('i', i, 'pad', repeat('x', 400)));
SELECT pg_relation_size('statesman.history') AS size_full \gset
SELECT :size_full > :size_before AS grew;
DELETE FROM statesman.history WHERE address = 'hints/t';
VACUUM statesman.history;
SELECT pg_relation_size('statesman.history') < :size_full AS cut_short;
SELECT revision FROM statesman.append('hints', 't', '{"after": "vacuum"}');

-- Many addresses: nearly every one finds its hint the second time (two slots to a bucket).
SELECT count(*) AS appended FROM generate_series(1, 2000) i, statesman.append('hints', 'm' || i, '{}');
BEGIN;
SELECT pg_temp.probes() AS before \gset
SELECT count(*) AS appended, min(revision), max(revision)
  FROM generate_series(1, 2000) i, statesman.append('hints', 'm' || i, '{}');
SELECT pg_temp.probes() - :before < 20 AS nearly_all_from_the_hints;
COMMIT;

-- TRUNCATE: the ledger's storage is new, and so is every address's first revision.
TRUNCATE statesman.history;
SELECT revision FROM statesman.append('hints', 'a', '{"after": "truncate"}');

-- A row written into the ledger other than by an append is not in the hints: the append after
-- it fails once (23505, nothing written) and forgets the hint; the next one follows that row.
SELECT revision FROM statesman.append('hints', 'c', '{"n": 1}');
INSERT INTO statesman.history (address, root, path, revision, occurred_at, payload, txid)
  VALUES ('hints/c', 'hints', 'c', 2, now(), '\x7b7d', pg_current_xact_id());
\set VERBOSITY default
SELECT revision FROM statesman.append('hints', 'c', '{"n": 3}');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT revision FROM statesman.append('hints', 'c', '{"n": 3}');
SELECT pg_temp.revisions('hints/c') AS revisions;

#!/usr/bin/env bash
# Invariant checks of each prototype (called by run.sh with the cluster's directory; PGHOST,
# PGPORT, PGUSER, PGDATABASE set): every committed record has exactly one position, positions
# unique; a writer held open delays only its own record, records committed after it are
# readable at once, and the held record shows up above what a reader already saw (F1, F5); a
# rolled-back record gets none (F3); deleting records (retention) changes no other position.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$ROOT/scripts/lib.sh"
q() { as_pg psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }
fail() { echo "FAIL $*"; exit 1; }
ins() {  # design, address
  q -c "INSERT INTO $1.history (address, root, path, revision, occurred_at, payload)
        VALUES ('$2', 'check', '$2', 1, now(), '\\x00')"
}
pos_of() { q -c "SELECT p.pos FROM bench.positions('$1') p JOIN $1.history h ON h.id = p.id WHERE h.address = '$2'"; }
# A mixed stream first: 6 clients, two records per transaction with a pause between them, one
# transaction in ten rolled back, the sequencer loop running (nap 1 ms).
cat >"$PGHOST/mixed.sql" <<'SQL'
\set rev random(1, 9000000000000000000)
\set nap random(0, 20)
\set abort random(1, 10)
BEGIN;
INSERT INTO :d.history (address, root, path, revision, occurred_at, payload)
VALUES ('mixed/' || :client_id, 'mixed', 'm', :rev, now(), '\x01');
\sleep :nap ms
INSERT INTO :d.history (address, root, path, revision, occurred_at, payload)
VALUES ('mixed/' || :client_id, 'mixed', 'm', :rev + 1, now(), '\x01');
SELECT CASE WHEN :abort = 1 THEN 'ROLLBACK' ELSE 'COMMIT' END AS fin \gset
:fin;
SQL
for d in ${DESIGNS:-base a a2 b c}; do
  [ "$d" = bare ] && continue
  q -c "CALL bench.sequencer_loop('$d', 11, 0.001)" 2>/dev/null &
  as_pg pgbench -n -c 6 -j 2 -T 10 -D d="$d" -f "$PGHOST/mixed.sql" >/dev/null 2>&1
  wait
  q -c "CALL bench.sequence_all('$d')"
  # every record exactly one position, positions unique
  r=$(q -c "SELECT (SELECT count(*) FROM $d.history), count(*), count(DISTINCT pos), count(DISTINCT id)
            FROM bench.positions('$d')")
  IFS='|' read -r rows npos dpos dids <<<"$r"
  [ "$rows" = "$npos" ] && [ "$npos" = "$dpos" ] && [ "$npos" = "$dids" ] ||
    fail "$d: $rows records, $npos positions, $dpos distinct positions, $dids distinct records"
  echo "ok $d: $rows records (after a mixed stream of $(q -c "SELECT count(*) FROM $d.history WHERE root = 'mixed'") two-record transactions' records), one position each, all distinct"
  # F5 and F1: a writer held open for 3 s
  q -c "BEGIN; INSERT INTO $d.history (address, root, path, revision, occurred_at, payload)
        VALUES ('check/$d/held', 'check', 'held', 1, now(), '\\x00'); SELECT pg_sleep(3); COMMIT;" >/dev/null &
  held=$!
  sleep 0.5
  for i in 1 2 3 4 5; do ins "$d" "check/$d/after/$i"; done
  q -c "SELECT bench.sequence('$d')" >/dev/null
  seen=$(q -c "SELECT count(*), max(p.pos) FROM bench.positions('$d') p JOIN $d.history h ON h.id = p.id
               WHERE h.address LIKE 'check/$d/after/%'")
  IFS='|' read -r nafter maxafter <<<"$seen"
  [ "$nafter" = 5 ] || fail "$d: $nafter of 5 records committed after the held writer are readable"
  [ -z "$(pos_of "$d" "check/$d/held")" ] || fail "$d: the held record has a position before its commit"
  head=$(q -c "SELECT max(pos) FROM bench.positions('$d')")
  wait "$held"
  q -c "SELECT bench.sequence('$d')" >/dev/null
  hp=$(pos_of "$d" "check/$d/held")
  [ -n "$hp" ] && [ "$hp" -gt "$head" ] || fail "$d: held record at '$hp', head seen before its commit $head"
  echo "ok $d: held writer delayed only its own record (5 later records readable at once, up to $maxafter); after its commit it is at $hp > $head"
  # F3: a rolled-back record
  q -c "BEGIN; INSERT INTO $d.history (address, root, path, revision, occurred_at, payload)
        VALUES ('check/$d/aborted', 'check', 'aborted', 1, now(), '\\x00'); ROLLBACK;"
  ins "$d" "check/$d/after-abort"
  q -c "SELECT bench.sequence('$d')" >/dev/null
  [ -n "$(pos_of "$d" "check/$d/after-abort")" ] || fail "$d: record after the rollback not sequenced"
  echo "ok $d: rolled-back record invisible, the next one sequenced"
  # retention: delete every 7th record of the first 30,000 ids and a run of 50; no other position moves
  q -c "CREATE TEMP TABLE before_prune AS SELECT * FROM bench.positions('$d'); ANALYZE before_prune;
        DELETE FROM $d.history WHERE id <= 30000 AND (id % 7 = 0 OR id BETWEEN 1000 AND 1049);
        CREATE TEMP TABLE after_prune AS SELECT * FROM bench.positions('$d'); ANALYZE after_prune;
        DO \$\$ BEGIN
          IF EXISTS (SELECT id, pos FROM after_prune EXCEPT ALL SELECT id, pos FROM before_prune)
          THEN RAISE EXCEPTION 'positions moved'; END IF;
        END \$\$;" || fail "$d: pruning moved a position"
  echo "ok $d: $(q -c "SELECT count(*) FROM bench.positions('$d')") records left after pruning, no position moved"
done

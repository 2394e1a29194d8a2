#!/usr/bin/env bash
# Measures the sequencing prototypes of schema.sql on a throwaway cluster of the PostgreSQL that
# PG_CONFIG names: append tx/s and WAL bytes per record (sequencing included) with a sequencer
# loop running as the worker would, the drain of a backlog in pages, a reader resuming
# mid-backlog, the invariant checks of check.sql, and EXPLAIN (ANALYZE, BUFFERS) of each
# design's page read and sequencing step. Results go to stdout (markdown) and to $OUT.
#
# Environment: SECS (seconds per pgbench run, 20), ROUNDS (3), CLIENTS (2), NAP (seconds the
# sequencer loop sleeps between steps, 0.01), DRAIN (records drained, 200000), PAGE (1000),
# DESIGNS ("bare base a a2 b c"), OUT (directory for the raw results; default a temp dir),
# KEEP=1 keeps the cluster running at the end.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
: "${PG_CONFIG:?set PG_CONFIG to the pg_config of the PostgreSQL to measure}"
SECS=${SECS:-20} ROUNDS=${ROUNDS:-3} CLIENTS=${CLIENTS:-2} NAP=${NAP:-0.01}
DRAIN=${DRAIN:-200000} PAGE=${PAGE:-1000} DESIGNS=${DESIGNS:-"bare base a a2 b c"}
export DESIGNS PAGE CLIENTS OUT
source "$ROOT/scripts/lib.sh"

DIR=$(scratch_dir seqbench)
OUT=${OUT:-$DIR/results}
mkdir -p "$OUT"; chmod 777 "$OUT"
PORT=$(free_port 56100)
as_pg initdb -D "$DIR/data" -A trust -U postgres --no-sync >"$DIR/initdb.log" 2>&1
cat <<CONF | as_pg tee -a "$DIR/data/postgresql.conf" >/dev/null
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DIR'
fsync = on
shared_buffers = 256MB
max_wal_size = 8GB
checkpoint_timeout = 30min
max_connections = 20
jit = off
CONF
as_pg pg_ctl -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start >/dev/null
cleanup() { [ "${KEEP:-0}" = 1 ] || stop_cluster "$DIR"; }
trap cleanup EXIT
export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=seqbench
as_pg createdb seqbench
q() { as_pg psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }
q -f "$HERE/schema.sql" >/dev/null
say "cluster $DIR port $PORT; $(q -c 'SELECT version()')"

# The append: one record of a 200-byte JSON payload per transaction, the same in every design.
for d in $DESIGNS; do
  cat >"$DIR/append_$d.sql" <<SQL
\set id random(1, 1000000)
\set amount random(1, 1000000)
\set rev random(1, 9000000000000000000)
INSERT INTO $d.history (address, root, path, revision, occurred_at, payload, content_type)
VALUES ('bench/acct/' || :id, 'bench', 'acct/' || :id, :rev, now(),
        convert_to('{"account":' || :id || ',"amount":' || :amount || ',"currency":"EUR","client":' || :client_id
                   || ',"note":"' || repeat('x', 120) || '"}', 'UTF8'),
        'application/json');
SQL
done
say "payload bytes: $(q -c "SELECT octet_length('{\"account\":123456,\"amount\":123456,\"currency\":\"EUR\",\"client\":1,\"note\":\"' || repeat('x', 120) || '\"}')")"

# One cell: design $1, synchronous_commit $2, round $3 ->
#   "design sc round tps wal_per_record records sequencer_steps sequencer_cpu_ticks"
cell() {
  local d=$1 sc=$2 r=$3 lsn0 lsn1 out tps n seqpid="" steps=0 ticks=0
  : >"$DIR/seq.log"
  lsn0=$(q -c "SELECT pg_current_wal_insert_lsn()")
  if [ "$d" != bare ]; then
    q -c "CALL bench.sequencer_loop('$d', $SECS + 1, $NAP)" 2>"$DIR/seq.log" &
    seqpid=$!
  fi
  out=$(PGOPTIONS="-c synchronous_commit=$sc" as_pg pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" -f "$DIR/append_$d.sql" 2>&1)
  [ -n "$seqpid" ] && wait "$seqpid"
  [ "$d" != bare ] && q -c "CALL bench.sequence_all('$d')"
  lsn1=$(q -c "SELECT pg_current_wal_insert_lsn()")
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' <<<"$out")
  n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  if [ -s "$DIR/seq.log" ]; then
    steps=$(sed -n 's/.*steps \([0-9]*\) .*/\1/p' "$DIR/seq.log")
    ticks=$(sed -n 's/.*cpu_ticks \([0-9]*\).*/\1/p' "$DIR/seq.log")
  fi
  echo "$d $sc $r $tps $(q -c "SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / $n)") $n $steps $ticks"
}

: >"$OUT/append.txt"
for r in $(seq 1 "$ROUNDS"); do
  for sc in on off; do
    # rotate the order of the designs from round to round
    set -- $DESIGNS; ds=("$@"); k=${#ds[@]}; order=()
    for i in $(seq 0 $((k - 1))); do order+=("${ds[$(( (i + r - 1) % k ))]}"); done
    for d in "${order[@]}"; do
      line=$(cell "$d" "$sc" "$r"); echo "$line" >>"$OUT/append.txt"; say "append: $line"
    done
  done
done


q -c "VACUUM ANALYZE" >/dev/null
: >"$OUT/drain.txt"
for r in $(seq 1 "$ROUNDS"); do
  for d in $DESIGNS; do
    [ "$d" = bare ] && continue
    line=$(q -F ' ' -c "SELECT '$d', $r, records, pages, round(seconds::numeric, 3), last_pos,
                               round(records / seconds) FROM bench.drain('$d', $DRAIN, $PAGE)")
    echo "$line" >>"$OUT/drain.txt"; say "drain: $line"
  done
done
: >"$OUT/resume.txt"
for r in $(seq 1 "$ROUNDS"); do
  for d in $DESIGNS; do
    [ "$d" = bare ] && continue
    hi=$(awk -v d="$d" '$1 == d { print $6; exit }' "$OUT/drain.txt")
    line="$d $r $(q -c "SELECT round(bench.resume('$d', 50, 0, $hi, $PAGE)::numeric, 3)")"
    echo "$line" >>"$OUT/resume.txt"; say "resume: $line"
  done
done

# Invariant checks (they prune records, so after the drains).
DESIGNS="$DESIGNS" bash "$HERE/check.sh" >"$OUT/check.txt" 2>&1 || { cat "$OUT/check.txt" >&2; exit 1; }
say "checks: $(grep -c '^ok' "$OUT/check.txt") passed"

bash "$HERE/explain.sh" "$DIR" >"$OUT/explain.txt" 2>&1 || say "explain.sh failed (see $OUT/explain.txt)"

python3 "$HERE/report.py" "$OUT" "$SECS" "$CLIENTS" "$NAP" "$DRAIN" "$PAGE" | tee "$OUT/report.md"
say "raw results in $OUT"

#!/usr/bin/env bash
# EXPLAIN (ANALYZE, BUFFERS) of each design's page read (a page of PAGE records after the
# middle of the drained range) and of one sequencing step over 5,000 records appended by
# CLIENTS pgbench clients with no sequencer running (nested statements through auto_explain).
# Called by run.sh with the cluster's directory.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DIR=$1 OUT=${OUT:-$DIR/results}
source "$ROOT/scripts/lib.sh"
q() { as_pg psql -X -q -v ON_ERROR_STOP=1 -At "$@"; }
for d in ${DESIGNS:-base a a2 b c}; do
  [ "$d" = bare ] && continue
  mid=$(awk -v d="$d" '$1 == d { print int($6 / 2); exit }' "$OUT/drain.txt")
  echo "=== $d: page of ${PAGE:-1000} after position $mid"
  echo "SELECT 'EXPLAIN (ANALYZE, BUFFERS) ' || replace(replace($d.page_sql(), '\$1', '$mid'), '\$2', '${PAGE:-1000}') \\gexec" | q
done
for d in ${DESIGNS:-base a a2 b c}; do
  [ "$d" = bare ] && continue
  q -c "CALL bench.sequence_all('$d')"
  as_pg pgbench -n -c "${CLIENTS:-2}" -j "${CLIENTS:-2}" -t 2500 -f "$DIR/append_$d.sql" >/dev/null 2>&1
  echo "=== $d: one sequencing step over 5,000 new records"
  q -c "LOAD 'auto_explain'" \
    -c "SET auto_explain.log_min_duration = 0" -c "SET auto_explain.log_analyze = on" \
    -c "SET auto_explain.log_buffers = on" -c "SET auto_explain.log_nested_statements = on" \
    -c "SET auto_explain.log_level = notice" -c "SET client_min_messages = notice" \
    -c "SELECT bench.sequence('$d')" 2>&1
done

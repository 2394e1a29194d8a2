# The steady state of `make bench` (sourced by scripts/bench, not run on its own): appends at
# a constant rate for minutes while one outbox delivers them to the `table` sink, to show that
# nothing grows that should not: delivery lag, the dispatcher's memory, the hot bookkeeping
# tables (cursors, outbox_state, leases) and the indexes.
#
#   steady_bench     measures; one progress line per sample on stderr
#   steady_report    prints the markdown section (stdout)
#
# It uses what scripts/bench defines (DIR, CLIENTS, psql_q, stats, fmt_int, the append script
# "$DIR/statesman.sql") and what scripts/bench-delivery.sh defines (wait_for, wait_caught_up,
# head_pos). It needs the background worker on and track_commit_timestamp on, as the delivery
# part leaves the cluster; when either is off it turns them on and restarts the cluster.
#
# Environment:
#   BENCH_STEADY_SECONDS   length of the steady state (default 600)
#   BENCH_STEADY_RATE      appends/s (default 2000)
#   BENCH_STEADY_SAMPLE    seconds between samples (default 10)
#   BENCH_STEADY_SYNC      synchronous_commit of the appending sessions (default off: with
#                          the worker on, 2 clients with synchronous_commit on do not reach
#                          2,000 appends/s on this machine's disk)

STEADY_SECS=${BENCH_STEADY_SECONDS:-600}
STEADY_RATE=${BENCH_STEADY_RATE:-2000}
STEADY_SAMPLE=${BENCH_STEADY_SAMPLE:-10}
STEADY_SYNC=${BENCH_STEADY_SYNC:-off}
for v in STEADY_SECS STEADY_RATE STEADY_SAMPLE; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { say "bench: BENCH_STEADY_SECONDS, BENCH_STEADY_RATE and BENCH_STEADY_SAMPLE must be whole numbers >= 1"; exit 2; }
done
case $STEADY_SYNC in on|off) ;; *) say "bench: BENCH_STEADY_SYNC must be on or off"; exit 2 ;; esac

# The relations whose size is sampled: the two that grow with the records, and the hot small
# tables the dispatcher rewrites with every page or lease renewal.
STEADY_RELS=(statesman.history statesman.delivered statesman.cursors statesman.outbox_state statesman.leases)

# Results, filled in by steady_bench.
STEADY_SAMPLES=()    # "elapsed head cursor lag_records lag_ms pid vmrss_kb anon_kb" per sample
declare -A STEADY_SIZE_START=() STEADY_SIZE_END=()   # [rel]="heap_bytes index_bytes dead_tuples autovacuums"
declare -A STEADY_ROWS=()   # [rel]=rows at the end of the run
STEADY_LAT="" STEADY_THIRDS="" STEADY_TPS=0 STEADY_TXLAT="" STEADY_SCHED_LAG="" STEADY_N=0 STEADY_PIDS=""

# "heap index dead autovacuums" of each relation, one line per relation, in STEADY_RELS order.
steady_sizes() {
  local rel
  for rel in "${STEADY_RELS[@]}"; do
    echo "SELECT pg_relation_size('$rel') + COALESCE(pg_total_relation_size(reltoastrelid), 0), pg_indexes_size('$rel'),
                 COALESCE(s.n_dead_tup, 0), COALESCE(s.autovacuum_count, 0)
          FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = '$rel'::regclass;"
  done | psql_q -F ' '
}

# Reads VmRSS and RssAnon (kB) of a process: "vmrss anon", or "0 0" when it is gone.
proc_mem() {
  awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 } END { print r + 0, a + 0 }' "/proc/$1/status" 2>/dev/null || echo "0 0"
}

# steady_sample T0: one sample (appended to STEADY_SAMPLES) and its progress line.
steady_sample() {
  local t0=$1 row now head cursor lag lag_ms pid mem sizes h hi d di c o l elapsed rate
  # The lag: committed records not delivered yet, those still waiting for a position (which
  # outbox_status does not count: its head is the highest position) and head − cursor; and the
  # age of the oldest of them (0 when there are none).
  row=$(psql_q -F ' ' -c "
    SELECT extract(epoch FROM clock_timestamp()), COALESCE(s.head_position, 0), COALESCE(s.cursor_position, 0),
           s.lag_records + u.n,
           round((COALESCE(greatest(extract(epoch FROM clock_timestamp() - least(u.oldest, nxt.occurred_at)), 0), 0)
                  * 1000)::numeric, 1),
           COALESCE(s.leader_pid, (SELECT pid FROM pg_stat_activity WHERE backend_type = 'statesman dispatcher'
                                   AND datname = current_database() LIMIT 1), 0)
    FROM statesman.outbox_status s
    CROSS JOIN LATERAL (SELECT count(*) AS n, min(h.occurred_at) AS oldest
                        FROM statesman.history h WHERE h.global_position IS NULL) u
    LEFT JOIN LATERAL (SELECT h.occurred_at FROM statesman.history h
                       WHERE h.global_position > COALESCE(s.cursor_position, 0)
                       ORDER BY h.global_position LIMIT 1) nxt ON true
    WHERE s.outbox_id = 'steady'")
  read -r now head cursor lag lag_ms pid <<<"$row"
  mem=$(proc_mem "$pid")
  elapsed=$(awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.0f", b - a }')
  STEADY_SAMPLES+=("$elapsed $head $cursor $lag $lag_ms $pid $mem")
  case " $STEADY_PIDS " in *" $pid "*) ;; *) STEADY_PIDS="${STEADY_PIDS:+$STEADY_PIDS }$pid" ;; esac
  sizes=$(steady_sizes | awk '{ printf "%s %s ", $1, $2 }')
  read -r h hi d di c _ o _ l _ <<<"$sizes"
  rate=$(awk -v n="$((head - STEADY_HEAD0))" -v s="$elapsed" 'BEGIN { printf "%.0f", (s > 0) ? n / s : 0 }')
  say "  steady $(printf '%4s' "$elapsed")/$STEADY_SECS s: head +$(fmt_int $((head - STEADY_HEAD0))) ($(fmt_int "$rate")/s), lag $(fmt_int "$lag") records / $lag_ms ms; dispatcher $pid RSS $(awk -v k="${mem% *}" -v a="${mem#* }" 'BEGIN { printf "%.1f MB (private %.1f MB)", k / 1024, a / 1024 }'); history $(steady_mb "$h")+$(steady_mb "$hi") MB, delivered $(steady_mb "$d")+$(steady_mb "$di") MB (heap+indexes); cursors $((c / 1024)) kB, outbox_state $((o / 1024)) kB, leases $((l / 1024)) kB"
}
steady_mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# steady_record_sizes start|end: the sizes of STEADY_RELS into STEADY_SIZE_START or _END.
steady_record_sizes() {
  local when=$1 i=0 line
  while read -r line; do
    if [ "$when" = start ]; then
      STEADY_SIZE_START[${STEADY_RELS[$i]}]=$line
    else
      STEADY_SIZE_END[${STEADY_RELS[$i]}]=$line
    fi
    i=$((i + 1))
  done <<<"$(steady_sizes)"
}

steady_bench() {
  local t0 pid next left pos1 out row rel
  if [ "$(psql_q -c "SHOW statesman.enabled")" != on ] || [ "$(psql_q -c "SHOW track_commit_timestamp")" != on ]; then
    say "bench: steady state: restarting the cluster with the worker on (statesman.enabled) and track_commit_timestamp"
    psql_q -c "ALTER SYSTEM SET statesman.enabled = on" -c "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
    as_pg pg_ctl -D "$DIR/data" -l "$DIR/server.log" -w -t 60 restart >/dev/null
    wait_for "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'statesman database worker'
                             AND datname = current_database())" 30 "the database worker"
  fi
  [ "$(psql_q -c "SELECT count(*) FROM statesman.outboxes")" -eq 0 ] || {
    say "bench: steady state: another outbox exists; it would share the machine"; exit 1; }
  # From empty ledger and sink tables; the small tables vacuumed, so that their start is clean.
  psql_q -c "TRUNCATE statesman.history, statesman.delivered" \
         -c "VACUUM ANALYZE statesman.cursors, statesman.outbox_state, statesman.leases" >/dev/null
  psql_q -c "SELECT statesman.create_outbox('steady', 'table')" >/dev/null   # into statesman.delivered
  wait_for "SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'steady'" 30 "the dispatcher of outbox steady"
  # Unmeasured: connections, plans, the dispatcher's first pages.
  as_pg env PGOPTIONS="-c synchronous_commit=$STEADY_SYNC" \
    pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -R "$STEADY_RATE" -T 3 -f "$DIR/statesman.sql" >/dev/null 2>&1 || true
  wait_caught_up steady
  psql_q -c "CHECKPOINT" >/dev/null

  STEADY_HEAD0=$(head_pos)
  say "bench: steady state: $STEADY_SECS s at $(fmt_int "$STEADY_RATE") appends/s ($CLIENTS clients, synchronous_commit $STEADY_SYNC) into outbox steady (table sink, statesman.delivered); a sample every $STEADY_SAMPLE s"
  steady_record_sizes start
  t0=$(date +%s.%N)
  steady_sample "$t0"
  as_pg env PGOPTIONS="-c synchronous_commit=$STEADY_SYNC" \
    pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -R "$STEADY_RATE" -T "$STEADY_SECS" -f "$DIR/statesman.sql" \
    >"$DIR/steady-pgbench.log" 2>&1 &
  pid=$!
  next=$STEADY_SAMPLE
  # Samples while the appends run; the last one is taken when they end, below.
  while [ "$next" -lt "$STEADY_SECS" ] && kill -0 "$pid" 2>/dev/null; do
    # Sleep to the next multiple of the sample interval, a second at most at a time, to notice
    # pgbench's end.
    while kill -0 "$pid" 2>/dev/null; do
      left=$(( (${t0/./} / 1000000 + next * 1000) - $(date +%s%N) / 1000000 ))   # ms
      [ "$left" -gt 0 ] || break
      [ "$left" -gt 1000 ] && left=1000
      sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
    done
    kill -0 "$pid" 2>/dev/null || break
    steady_sample "$t0"
    next=$((next + STEADY_SAMPLE))
  done
  wait "$pid" || { say "bench: pgbench failed (steady state):"; cat "$DIR/steady-pgbench.log" >&2; exit 1; }
  out=$(cat "$DIR/steady-pgbench.log")
  if grep -q '^number of failed transactions: [1-9]' <<<"$out"; then
    say "bench: failed transactions (steady state):"; say "$out"; exit 1
  fi
  # The last sample: as the appends end, before delivery catches up.
  steady_sample "$t0"
  steady_record_sizes end
  STEADY_TPS=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")
  STEADY_TXLAT=$(awk '/^latency average = / { l = $4 } /^rate limit schedule lag: avg / { g = $6 }
                      END { if (l != "") printf "%.2f", l - g }' <<<"$out")
  STEADY_SCHED_LAG=$(awk '/^rate limit schedule lag: avg / { gsub(/\)/, "", $8); print $6, $8 }' <<<"$out")
  wait_caught_up steady
  pos1=$(head_pos)
  # Per record of the run: append (occurred_at) → commit of the sink transaction that inserted
  # it, as in the latency windows of the delivery part.
  row=$(psql_q -F ' ' -c "
    SELECT count(*),
           round(percentile_cont(0.50) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(max(ms)::numeric, 1)
    FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(d.xmin) - h.occurred_at) * 1000 AS ms
          FROM statesman.delivered d JOIN statesman.history h ON h.global_position = d.global_position
          WHERE d.global_position > $STEADY_HEAD0 AND d.global_position <= $pos1) x")
  STEADY_LAT=$row
  STEADY_N=${row%% *}
  # The same per third of the run (records in position order): "p50/p99" of each third, so
  # that the report can give the median of three with its min and max, and show a trend.
  STEADY_THIRDS=$(psql_q -F '/' -c "
    SELECT round(percentile_cont(0.50) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1)
    FROM (SELECT ntile(3) OVER (ORDER BY d.global_position) AS third,
                 extract(epoch FROM pg_xact_commit_timestamp(d.xmin) - h.occurred_at) * 1000 AS ms
          FROM statesman.delivered d JOIN statesman.history h ON h.global_position = d.global_position
          WHERE d.global_position > $STEADY_HEAD0 AND d.global_position <= $pos1) x
    GROUP BY third ORDER BY third" | paste -sd ' ')
  for rel in "${STEADY_RELS[@]}"; do
    STEADY_ROWS[$rel]=$(psql_q -c "SELECT count(*) FROM $rel")
  done
  say "  steady: $(fmt_int "$STEADY_N") records at $(fmt_int "$STEADY_TPS") appends/s; commit→sink latency p50 / p95 / p99 (max) $(awk '{ printf "%s / %s / %s (%s)", $2, $3, $4, $5 }' <<<"$row") ms"
  psql_q -c "SELECT statesman.drop_outbox('steady')" >/dev/null
}

# Median and max of the numbers on stdin. (A sample every 10 s gives some 60 numbers: a p99 of
# them would be their max.)
steady_median_max() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "- -"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[NR] }'
}

steady_report() {
  local first last n p50 p95 p99 max lagr lagr_max lags lags_max rss0 anon0 rss1 anon1 growth met rel
  local h0 i0 h1 i1 dead av0 av1 per
  first=${STEADY_SAMPLES[0]}
  last=${STEADY_SAMPLES[${#STEADY_SAMPLES[@]} - 1]}
  read -r n p50 p95 p99 max <<<"$STEADY_LAT"
  read -r lagr lagr_max <<<"$(printf '%s\n' "${STEADY_SAMPLES[@]}" | awk '{ print $4 }' | steady_median_max)"
  read -r lags lags_max <<<"$(printf '%s\n' "${STEADY_SAMPLES[@]}" | awk '{ print $5 }' | steady_median_max)"
  read -r _ _ _ _ _ _ rss0 anon0 <<<"$first"
  read -r _ _ _ _ _ _ rss1 anon1 <<<"$last"
  growth=$((anon1 - anon0))
  met=$(awk -v g="$growth" 'BEGIN { print (g <= 1024) ? "yes" : "**no**" }')
  echo
  echo "### Steady state: $STEADY_SECS s at $(fmt_int "$STEADY_RATE") appends/s, delivered to the \`table\` sink"
  echo
  echo "- the same cluster (worker on, \`track_commit_timestamp\` on), \`statesman.history\` and \`statesman.delivered\` emptied, \`statesman.cursors\`, \`outbox_state\` and \`leases\` vacuumed; one outbox \`steady\` (\`table\` sink into \`statesman.delivered\`, default options), its dispatcher leading and caught up after 3 s of unmeasured appends; autovacuum at PostgreSQL's defaults"
  echo "- pgbench \`-R $STEADY_RATE -c $CLIENTS -T $STEADY_SECS\` of the append part's statesman script (one append per transaction, \`synchronous_commit\` $STEADY_SYNC): $(fmt_int "$STEADY_TPS") appends/s achieved; an append transaction took $STEADY_TXLAT ms on average; pgbench's schedule lag avg / max: ${STEADY_SCHED_LAG/ / \/ } ms"
  echo "- a sample every $STEADY_SAMPLE s (${#STEADY_SAMPLES[@]} samples, from the start to the end of the appends): the lag (committed records not delivered yet: those still without a position, plus head − cursor from \`outbox_status\`; and the age of the oldest of them), the dispatcher's \`/proc/<pid>/status\` (pid = \`outbox_status.leader_pid\`; dispatcher pids seen: $STEADY_PIDS), and the relations' sizes. \`VmRSS\` counts the pages of \`shared_buffers\` the dispatcher touched (with normal pages), which belong to the server; its own memory is \`RssAnon\`."
  echo "- latency per record: the commit of the sink transaction that inserted it − its \`occurred_at\`, over all $(fmt_int "$n") records of the run"
  echo
  echo "| measurement | result | notes |"
  echo "|---|---|---|"
  echo "| commit → sink latency, ms: p50 / p95 / p99 (max) | $p50 / $p95 / $p99 ($max) | every record of the run |"
  echo "| commit → sink latency per third of the run, ms: p99 median (min–max) | $(steady_thirds_p99) | p50/p99 of each third: ${STEADY_THIRDS// / · } |"
  echo "| lag in the samples, records: median (max) | $(fmt_int "$lagr") ($(fmt_int "$lagr_max")) | committed, not delivered yet (without a position, or past the cursor) |"
  echo "| lag in the samples, ms: median (max) | $lags ($lags_max) | age of the oldest of them |"
  echo "| dispatcher memory, MB: private (\`RssAnon\`) at start → end | $(awk -v a="$anon0" -v b="$anon1" 'BEGIN { printf "%.1f → %.1f", a / 1024, b / 1024 }') | growth $(awk -v g="$growth" 'BEGIN { printf "%+.1f", g / 1024 }') MB; no growth (≤ 1 MB): $met |"
  echo "| dispatcher memory, MB: \`VmRSS\` at start → end | $(awk -v a="$rss0" -v b="$rss1" 'BEGIN { printf "%.1f → %.1f", a / 1024, b / 1024 }') | shared buffers included when not in huge pages |"
  echo
  echo "| relation | heap at start | heap at end | indexes at start | indexes at end | rows at end | bytes per row at end (heap + indexes) | dead tuples at end | autovacuums during the run |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for rel in "${STEADY_RELS[@]}"; do
    read -r h0 i0 _ av0 <<<"${STEADY_SIZE_START[$rel]}"
    read -r h1 i1 dead av1 <<<"${STEADY_SIZE_END[$rel]}"
    per=$(awk -v b="$((h1 + i1))" -v n="${STEADY_ROWS[$rel]}" 'BEGIN { printf "%.0f", (n > 0) ? b / n : 0 }')
    echo "| \`$rel\` | $(steady_size "$h0") | $(steady_size "$h1") | $(steady_size "$i0") | $(steady_size "$i1") | $(fmt_int "${STEADY_ROWS[$rel]}") | $(fmt_int "$per") | $(fmt_int "$dead") | $((av1 - av0)) |"
  done
  echo
  echo "Samples (elapsed s, head, cursor, lag records, lag ms, dispatcher pid, VmRSS kB, RssAnon kB):"
  echo
  echo '```'
  printf '%s\n' "${STEADY_SAMPLES[@]}"
  echo '```'
}
# "123 kB" below 1 MB, "12.3 MB" above.
steady_size() {
  awk -v b="$1" 'BEGIN { if (b < 1048576) printf "%d kB", b / 1024; else printf "%.1f MB", b / 1048576 }'
}
# "median (min–max)" of the p99s of the run's thirds (STEADY_THIRDS: "p50/p99 p50/p99 p50/p99").
steady_thirds_p99() {
  local t p99s=()
  for t in $STEADY_THIRDS; do p99s+=("${t#*/}"); done
  stats "${p99s[@]}" | awk '{ printf "%s (%s–%s)", $1, $2, $3 }'
}

# The PgQ baselines of `make bench` (sourced by scripts/bench, not run on its own): PgQ
# (Debian's postgresql-15-pgq3, with the pgqd ticker) is the established lossless queue inside
# PostgreSQL, measured on the bench's own throwaway cluster with the same payload, the same
# clients and the same way of measuring as statesman's figures (docs/design.md §9).
#
#   pgq_setup             CREATE EXTENSION pgq, the queue `bench` with one consumer, and the
#                         append workload "$DIR/pgq.sql" (after scripts/bench has defined
#                         VARS and PAYLOAD); sets PGQ_TRUNCATE, the event tables that the
#                         append part empties before each run
#   pgq_append_report     the markdown table: statesman.append vs pgq.insert_event (and the
#                         bare INSERT), from the append part's TPS, CPU and WAL of workload `pgq`
#   pgq_bench             the backlog drain and the commit → consumer latency; one progress
#                         line per step on stderr
#   pgq_report            their markdown section (stdout)
#
# It uses what scripts/bench defines (DIR, PORT, CLIENTS, RUNS, VARS, PAYLOAD, psql_q, stats,
# fmt_int, fmt_cell, ratio; TPS, CPU, WAL for the append rows) and wait_for from
# scripts/bench-delivery.sh. The latency needs track_commit_timestamp = on: when the cluster
# runs without it (the delivery part turns it on), pgq_bench turns it on and restarts.
#
# How the drain gets batches of 1,000 events. A PgQ batch is the events committed between two
# ticks, whatever the consumer asks for. So the backlog is appended by one session, 1,000
# events per transaction, each followed by pgq.ticker() on the queue, with no pgqd running;
# the queue's ticker_max_count is 1, so that each call ticks (with 1,000 the first call would
# not: the ticker counts new events by the event sequence's last value, which does not move
# for a queue's first event). Every batch then holds exactly 1,000 events (checked). Ticks taken while the consumer drains would each take in everything committed
# before them, and pgqd ticks on its own clock, so its batches would follow the append rate.
#
# Environment (shared with scripts/bench-delivery.sh, so that both sides get the same sizes):
#   BENCH_DRAIN_RECORDS    events in the backlog (default 1000000; rounded up to 1,000s)
#   BENCH_DRAIN_RUNS       drains of it, each by a fresh consumer, for each kind (default 3)
#   BENCH_LATENCY_RATE     events/s in the latency windows (default 1000)
#   BENCH_LATENCY_SECONDS  length of each latency window (default 20)
#   BENCH_LATENCY_WINDOWS  windows per setting, as statesman's (default 3; LAT_WINDOWS of
#                          scripts/bench-delivery.sh, whose windows_median gives the medians)
# and BENCH_PGQ_POLL_MS, how long the latency consumer sleeps when next_batch has nothing for
# it (default 10): PgQ has no wake-up, a consumer polls.

PGQ_DRAIN_RECORDS=${BENCH_DRAIN_RECORDS:-1000000}
PGQ_DRAIN_RUNS=${BENCH_DRAIN_RUNS:-3}
PGQ_LAT_RATE=${BENCH_LATENCY_RATE:-1000}
PGQ_LAT_SECS=${BENCH_LATENCY_SECONDS:-20}
PGQ_POLL_MS=${BENCH_PGQ_POLL_MS:-10}
for v in PGQ_DRAIN_RECORDS PGQ_DRAIN_RUNS PGQ_LAT_RATE PGQ_LAT_SECS PGQ_POLL_MS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { say "bench: BENCH_DRAIN_*, BENCH_LATENCY_* and BENCH_PGQ_POLL_MS must be whole numbers >= 1"; exit 2; }
done
PGQ_BATCH=1000            # events per tick in the drain's backlog
PGQ_CATCH_UP_TIMEOUT=300  # seconds the consumer may trail the writers before the bench gives up

# Results, filled in by pgq_bench.
PGQ_TRUNCATE=""
PGQ_DRAIN_N=0 PGQ_DRAIN_BATCHES=0 PGQ_LOAD_RATE=0 PGQ_EVENT_BYTES=0
PGQ_READ_RATES=() PGQ_TABLE_RATES=()
declare -A PGQ_LAT=()     # PGQ_LAT[label]="n p50 p95 p99 max tx_latency_ms achieved_tps ticks tail_max"
PGQD_PIDFILE=""

# ---- the append workload ----

pgq_setup() {
  if [ "$(psql_q -c "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pgq')")" != t ] ||
     ! command -v pgqd >/dev/null; then
    say "bench: PgQ is not installed: the PgQ baselines need the Debian packages postgresql-15-pgq3 and pgqd"
    exit 1
  fi
  psql_q >/dev/null <<'SQL'
CREATE EXTENSION IF NOT EXISTS pgq;
SELECT pgq.create_queue('bench');
SELECT pgq.register_consumer('bench', 'bench_consumer');
SQL
  # The same variables and the same payload expression as the bare INSERT and the append;
  # PgQ takes its event data as text. ev_type carries the address.
  cat >"$DIR/pgq.sql" <<SQL
$VARS
SELECT pgq.insert_event('bench', 'acct/' || :id, ($PAYLOAD)::text);
SQL
  [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR/pgq.sql"
  # The queue's parent event table; TRUNCATE on it empties its rotation tables too.
  # shellcheck disable=SC2034  # scripts/bench truncates it before each append run
  PGQ_TRUNCATE=$(psql_q -c "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = 'bench'")
}

# The append rows against PgQ. Each statesman run is paired with the PgQ run of the same round
# (the loop runs baseline, pgq, statesman, baseline, pgq, statesman, …).
pgq_append_report() {
  local c sync s p sm smin smax pm pmin pmax per rat_raw pb sc pc
  echo
  echo "### Append vs PgQ \`pgq.insert_event\`"
  echo
  echo "- PgQ $(psql_q -c "SELECT pgq.version()"), queue \`bench\` with one registered consumer and no ticker running (an insert does not wait for one); the same pgbench settings, runs and resets as the table above, in turn with them (baseline, PgQ, statesman in each round; a statesman run is paired with the PgQ run of its round); \`TRUNCATE\` of the queue's event tables before each run"
  echo "- workload: \`SELECT pgq.insert_event('bench', 'acct/' || :id, (<payload>)::text)\`, the same payload expression as the other two (PgQ stores event data as text)"
  echo
  echo "| measurement | clients | synchronous_commit | statesman: median (min–max) | PgQ \`insert_event\`: median (min–max) | statesman ÷ PgQ: median of paired runs (each pair) | ratio of medians | target | met | PgQ ÷ bare INSERT, paired |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for c in "${APPEND_CLIENTS[@]}"; do
    for sync in on off; do
      read -r -a s <<<"${TPS[$c/$sync/statesman]}"
      read -r -a p <<<"${TPS[$c/$sync/pgq]}"
      read -r sm smin smax <<<"$(stats "${s[@]}")"
      read -r pm pmin pmax <<<"$(stats "${p[@]}")"
      read -r rat_raw per <<<"$(paired_ratio "$c/$sync/statesman" "$c/$sync/pgq")"
      read -r pb _ <<<"$(paired_ratio "$c/$sync/pgq" "$c/$sync/baseline")"
      echo "| append, tx/s | $c | $sync | $(fmt_cell "$sm" "$smin" "$smax") | $(fmt_cell "$pm" "$pmin" "$pmax") | $(printf '%.2f' "$rat_raw")× ($per) | $(ratio "$sm" "$pm")× | ≥ 1.00× | $(verdict "$rat_raw" 1.0) | $(printf '%.2f' "$pb")× |"
    done
  done
  for c in "${APPEND_CLIENTS[@]}"; do
    for sync in on off; do
      read -r -a s <<<"${CPU[$c/$sync/statesman]}"
      read -r -a p <<<"${CPU[$c/$sync/pgq]}"
      read -r -a sc <<<"$(stats "${s[@]}")"
      read -r -a pc <<<"$(stats "${p[@]}")"
      echo "| CPU per transaction (server and pgbench), µs, median (min–max) | $c | $sync | $(fmt_cell "${sc[@]}") | $(fmt_cell "${pc[@]}") | — | — | informational | — | — |"
    done
  done
  read -r -a s <<<"${WAL[statesman]}"
  read -r -a p <<<"${WAL[pgq]}"
  echo "| WAL per transaction, bytes (median of all runs) | all | on and off | $(fmt_int "$(stats "${s[@]}" | cut -d' ' -f1)") | $(fmt_int "$(stats "${p[@]}" | cut -d' ' -f1)") | — | — | informational | — | — |"
}

# ---- pgqd ----

# pgqd_start LABEL [TICKER_PERIOD]: runs pgqd as a daemon against this cluster's database
# (its config, log and pidfile in $DIR); without TICKER_PERIOD, pgqd's default (1 s).
pgqd_start() {
  local label=$1 period=${2:-} ini="$DIR/pgqd-$1.ini" i
  {
    echo "[pgqd]"
    echo "logfile = $DIR/pgqd-$label.log"
    echo "pidfile = $DIR/pgqd.pid"
    echo "base_connstr = host=$DIR port=$PORT user=postgres"
    echo "initial_database = $PGDATABASE"
    echo "database_list = $PGDATABASE"
    [ -n "$period" ] && echo "ticker_period = $period"
  } >"$ini"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$ini"
  pgq_trap_exit
  PGQD_PIDFILE="$DIR/pgqd.pid"
  as_pg pgqd -q -d "$ini" || { say "bench: pgqd did not start:"; cat "$DIR/pgqd-$label.log" >&2 2>/dev/null; exit 1; }
  for ((i = 0; i < 100; i++)); do
    [ -s "$PGQD_PIDFILE" ] && grep -q 'pgq version ok' "$DIR/pgqd-$label.log" 2>/dev/null && return 0
    sleep 0.1
  done
  say "bench: pgqd did not connect to the cluster within 10 s:"; cat "$DIR/pgqd-$label.log" >&2 2>/dev/null; exit 1
}

# Stops the pgqd this script started (by the pid in its pidfile), waiting for it to exit.
pgqd_stop() {
  local pid i
  [ -n "$PGQD_PIDFILE" ] && [ -s "$PGQD_PIDFILE" ] || return 0
  pid=$(cat "$PGQD_PIDFILE")
  kill -INT "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || { PGQD_PIDFILE=""; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$PGQD_PIDFILE"
  PGQD_PIDFILE=""
}

# Puts pgqd_stop in front of the EXIT trap that scripts/bench set (which stops the cluster),
# once: pgqd would otherwise outlive a bench that stops on an error.
PGQ_TRAPPED=""
# shellcheck disable=SC2120  # set -- below takes the trap's words, not arguments
pgq_trap_exit() {
  [ -n "$PGQ_TRAPPED" ] && return 0
  local old
  old=$(trap -p EXIT)
  if [ -n "$old" ]; then
    eval "set -- $old"     # trap -- 'command' EXIT
    # shellcheck disable=SC2064  # the old command is expanded now, on purpose
    trap "pgqd_stop; $3" EXIT
  else
    trap pgqd_stop EXIT
  fi
  PGQ_TRAPPED=1
}

# ---- the drain ----

# pgq_consume_script FILE QUEUE CONSUMER BATCHES MODE: a psql script that takes BATCHES
# batches, one transaction each (next_batch, get_batch_events, finish_batch), and ends with a
# line "total min_batch max_batch done" (done: next_batch had nothing more). MODE `read`
# renders every event row to text and counts it, as a client receiving it would (the
# counterpart of the read_feed drain); MODE `table:NAME` inserts each event into NAME, a
# table of the `table` sink's shape, as a JSON object (the counterpart of the `table` sink).
pgq_consume_script() {
  local file=$1 queue=$2 consumer=$3 batches=$4 mode=$5 i
  {
    echo "\\set total 0"
    echo "\\set minb 1000000000"
    echo "\\set maxb 0"
    for ((i = 0; i < batches; i++)); do
      echo "BEGIN;"
      echo "SELECT pgq.next_batch('$queue', '$consumer') AS batch \\gset"
      case $mode in
        read)
          echo "SELECT :total + count(*) AS total, least(:minb, count(*)) AS minb, greatest(:maxb, count(*)) AS maxb,"
          echo "       sum(octet_length(e::text)) AS bytes FROM pgq.get_batch_events(:batch) e \\gset" ;;
        table:*)
          echo "WITH i AS (INSERT INTO ${mode#table:} (message_id, global_position, message)"
          echo "  SELECT e.ev_id::text, e.ev_id, jsonb_build_object('id', e.ev_id, 'type', e.ev_type, 'time', e.ev_time,"
          echo "                                                     'txid', e.ev_txid, 'data', e.ev_data::jsonb)"
          echo "  FROM pgq.get_batch_events(:batch) e RETURNING 1)"
          echo "SELECT :total + count(*) AS total, least(:minb, count(*)) AS minb, greatest(:maxb, count(*)) AS maxb FROM i \\gset" ;;
      esac
      echo "SELECT pgq.finish_batch(:batch) AS finished \\gset"
      echo "COMMIT;"
    done
    echo "SELECT :total, :minb, :maxb, pgq.next_batch('$queue', '$consumer') IS NULL;"
  } >"$file"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$file"
  return 0
}

# pgq_drain_run R MODE: one drain of the backlog by consumer MODE_R; prints events/s.
pgq_drain_run() {
  local r=$1 mode=$2 consumer="$2_$1" target="" t0 t1 total minb maxb finished rate secs
  if [ "$mode" = table ]; then
    target="bench.pgq_drain_$r"
    psql_q -c "CREATE TABLE $target (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                                     message jsonb NOT NULL, published_at timestamptz NOT NULL DEFAULT now())" >/dev/null
  fi
  pgq_consume_script "$DIR/pgq-$consumer.sql" bench_drain "$consumer" "$PGQ_DRAIN_BATCHES" "$mode${target:+:$target}"
  psql_q -c "CHECKPOINT" >/dev/null
  t0=$(date +%s.%N)
  read -r total minb maxb finished <<<"$(as_pg env PGOPTIONS="-c synchronous_commit=off" \
    psql -X -q -t -A -F ' ' -v ON_ERROR_STOP=1 -f "$DIR/pgq-$consumer.sql")"
  t1=$(date +%s.%N)
  if [ "$total" != "$PGQ_DRAIN_N" ] || [ "$minb" != "$PGQ_BATCH" ] || [ "$maxb" != "$PGQ_BATCH" ] || [ "$finished" != t ]; then
    say "bench: PgQ drain $consumer took $total events (batches of $minb–$maxb; nothing left: $finished), not $PGQ_DRAIN_N in batches of $PGQ_BATCH"
    exit 1
  fi
  if [ -n "$target" ]; then
    total=$(psql_q -c "SELECT count(*) FROM $target")
    [ "$total" = "$PGQ_DRAIN_N" ] || { say "bench: PgQ drain $consumer left $total rows in $target, not $PGQ_DRAIN_N"; exit 1; }
  fi
  rate=$(awk -v n="$PGQ_DRAIN_N" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  if [ "$mode" = read ]; then PGQ_READ_RATES+=("$rate"); else PGQ_TABLE_RATES+=("$rate"); fi
  say "  [PgQ drain $r/$PGQ_DRAIN_RUNS, $mode] $(fmt_int "$PGQ_DRAIN_N") events in $secs s = $(fmt_int "$rate") events/s"
  [ -n "$target" ] && psql_q -c "DROP TABLE $target" >/dev/null
  return 0
}

pgq_drain_bench() {
  local r ticks pid done_batches i
  PGQ_DRAIN_BATCHES=$(((PGQ_DRAIN_RECORDS + PGQ_BATCH - 1) / PGQ_BATCH))
  PGQ_DRAIN_N=$((PGQ_DRAIN_BATCHES * PGQ_BATCH))
  # A queue of its own; every consumer registered before the backlog, so each one drains all
  # of it (one fresh consumer per run, as statesman's drains use a fresh outbox per run).
  {
    echo "SELECT pgq.create_queue('bench_drain');"
    echo "SELECT pgq.set_queue_config('bench_drain', 'ticker_max_count', '1');"
    for ((r = 1; r <= PGQ_DRAIN_RUNS; r++)); do
      echo "SELECT pgq.register_consumer('bench_drain', 'read_$r');"
      echo "SELECT pgq.register_consumer('bench_drain', 'table_$r');"
    done
  } | psql_q >/dev/null
  # One session (a second would let a tick take in part of another's transaction): 1,000
  # events per transaction, the same ~108-byte payload as the other backlogs, then a tick.
  cat >"$DIR/pgq-backlog.sql" <<SQL
\\set a random(0, 9999)
SELECT count(pgq.insert_event('bench_drain', 'acct/' || ((:a::int + i * 37) % 10000),
  jsonb_build_object('account', (:a::int + i * 37) % 10000, 'amount', (random() * 1000000)::int, 'currency', 'EUR',
                     'client', 1, 'nonce', (random() * 1e12)::bigint, 'note', 'bench')::text))
  FROM generate_series(1, $PGQ_BATCH) i;
SELECT pgq.ticker('bench_drain');
SQL
  [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR/pgq-backlog.sql"
  say "bench: PgQ drain: appending a backlog of $(fmt_int "$PGQ_DRAIN_N") events (one session, $PGQ_BATCH per transaction, each followed by pgq.ticker(), synchronous_commit off)"
  as_pg env PGOPTIONS="-c synchronous_commit=off" \
    pgbench -n -M prepared -c 1 -j 1 -t "$PGQ_DRAIN_BATCHES" -f "$DIR/pgq-backlog.sql" >"$DIR/pgq-backlog.log" 2>&1 &
  pid=$!
  i=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5
    i=$((i + 1))
    if [ $((i % 10)) -eq 0 ] && kill -0 "$pid" 2>/dev/null; then
      done_batches=$(psql_q -c "SELECT count(*) - 1 FROM pgq.tick t JOIN pgq.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'bench_drain'")
      say "  PgQ backlog: $(fmt_int $((done_batches * PGQ_BATCH))) of $(fmt_int "$PGQ_DRAIN_N") events"
    fi
  done
  wait "$pid" || { say "bench: appending the PgQ backlog failed:"; cat "$DIR/pgq-backlog.log" >&2; exit 1; }
  PGQ_LOAD_RATE=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$DIR/pgq-backlog.log" |
                  awk -v b="$PGQ_BATCH" '{ printf "%.0f", $1 * b }')
  # One tick from create_queue, then one per transaction of the backlog.
  ticks=$(psql_q -c "SELECT count(*) FROM pgq.tick t JOIN pgq.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'bench_drain'")
  [ "$ticks" -eq $((PGQ_DRAIN_BATCHES + 1)) ] || {
    say "bench: the PgQ backlog has $((ticks - 1)) ticks after its first, not $PGQ_DRAIN_BATCHES"; exit 1; }
  PGQ_EVENT_BYTES=$(psql_q -c "SELECT round(avg(octet_length(e::text)))
    FROM (SELECT * FROM $(psql_q -c "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = 'bench_drain'") LIMIT 1000) e")
  say "  PgQ backlog: $(fmt_int "$PGQ_DRAIN_N") events in $PGQ_DRAIN_BATCHES ticks of $PGQ_BATCH ($(fmt_int "$PGQ_LOAD_RATE") events/s); VACUUM ANALYZE"
  psql_q -c "VACUUM ANALYZE" >/dev/null
  for ((r = 1; r <= PGQ_DRAIN_RUNS; r++)); do
    pgq_drain_run "$r" read
    pgq_drain_run "$r" table
  done
  psql_q -c "SELECT pgq.drop_queue('bench_drain', true)" >/dev/null
}

# ---- commit → consumer latency ----

# The consumer: one session, inside the server (no client round trips, like statesman's
# dispatcher), polling next_batch; each batch inserted into bench.pgq_live (the `table`
# sink's shape) and finished in one transaction (synchronous_commit off, as the dispatcher's
# pages). It sleeps PGQ_POLL_MS when there is no batch, and stops when bench.pgq_ctl says so.
pgq_consumer_script() {
  cat >"$DIR/pgq-consumer.sql" <<SQL
DO \$\$
DECLARE
    b bigint;
BEGIN
    LOOP
        b := pgq.next_batch('bench_live', 'live');
        IF b IS NOT NULL THEN
            INSERT INTO bench.pgq_live (message_id, global_position, message)
            SELECT e.ev_id::text, e.ev_id, jsonb_build_object('id', e.ev_id, 'type', e.ev_type, 'time', e.ev_time,
                                                             'txid', e.ev_txid, 'data', e.ev_data::jsonb)
            FROM pgq.get_batch_events(b) e;
            PERFORM pgq.finish_batch(b);
            COMMIT;
            CONTINUE;
        END IF;
        COMMIT;
        EXIT WHEN (SELECT stop FROM bench.pgq_ctl);
        PERFORM pg_sleep($PGQ_POLL_MS / 1000.0);
        COMMIT;    -- the next poll starts a transaction of its own
    END LOOP;
END
\$\$;
SQL
  [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR/pgq-consumer.sql"
}

# Until every event appended so far is in bench.pgq_live.
pgq_wait_caught_up() {
  wait_for "SELECT (SELECT count(*) FROM $PGQ_LIVE_TABLE) = (SELECT count(*) FROM bench.pgq_live)" \
           "$PGQ_CATCH_UP_TIMEOUT" "the PgQ consumer to take every event"
}

# pgq_live_window LABEL: pgbench at PGQ_LAT_RATE/s (synchronous_commit on) while pgqd ticks
# and the consumer runs; then the latency of the events of the window's first PGQ_LAT_SECS.
# The appends go on for PGQ_TAIL_SECS more, unmeasured: at its defaults PgQ ticks for fewer
# than ticker_max_count (500) new events only once they are ticker_max_lag (3 s) old, so the
# last events before the appends stop wait up to 3 s, which a constant stream never sees. The
# latency is that of the stream; the tail's worst wait is reported apart.
PGQ_TAIL_SECS=5
pgq_live_window() {
  local label=$1 id0 id1 w0 out tps txlat row ticks0 ticks1 n p50 p95 p99 max tail first last
  pgq_wait_caught_up
  read -r id0 w0 <<<"$(psql_q -F ' ' -c "SELECT COALESCE(max(global_position), 0), clock_timestamp() FROM bench.pgq_live")"
  ticks0=$(psql_q -c "SELECT count(*) FROM pgq.tick t JOIN pgq.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'bench_live'")
  out=$(as_pg env PGOPTIONS="-c synchronous_commit=on" \
        pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -R "$PGQ_LAT_RATE" -T $((PGQ_LAT_SECS + PGQ_TAIL_SECS)) \
                -f "$DIR/pgq-live.sql" 2>&1) || {
    say "bench: pgbench failed (PgQ, $label):"; say "$out"; exit 1; }
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")
  txlat=$(awk '/^latency average = / { l = $4 } /^rate limit schedule lag: avg / { g = $6 }
               END { if (l != "") printf "%.2f", l - g }' <<<"$out")
  pgq_wait_caught_up
  ticks1=$(psql_q -c "SELECT count(*) FROM pgq.tick t JOIN pgq.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = 'bench_live'")
  id1=$(psql_q -c "SELECT max(global_position) FROM bench.pgq_live")
  # Per event: from ev_time (now() of the appending transaction: insert_event is its only
  # statement) to the commit of the consumer transaction that inserted it.
  row=$(psql_q -F ' ' -c "
    WITH x AS (
      SELECT (d.message->>'time')::timestamptz AS t,
             (d.message->>'time')::timestamptz < '$w0'::timestamptz + interval '$PGQ_LAT_SECS seconds' AS measured,
             extract(epoch FROM pg_xact_commit_timestamp(d.xmin) - (d.message->>'time')::timestamptz) * 1000 AS ms
      FROM bench.pgq_live d WHERE d.global_position > $id0 AND d.global_position <= $id1)
    SELECT count(*) FILTER (WHERE measured),
           round((percentile_cont(0.50) WITHIN GROUP (ORDER BY ms) FILTER (WHERE measured))::numeric, 1),
           round((percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) FILTER (WHERE measured))::numeric, 1),
           round((percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) FILTER (WHERE measured))::numeric, 1),
           round((max(ms) FILTER (WHERE measured))::numeric, 1),
           round((max(ms) FILTER (WHERE NOT measured))::numeric, 1),
           round(extract(epoch FROM min(t) - '$w0'::timestamptz)::numeric, 2),
           round(extract(epoch FROM max(t) - '$w0'::timestamptz)::numeric, 2)
    FROM x")
  read -r n p50 p95 p99 max tail first last <<<"$row"
  if [ "$n" -eq 0 ] || [ -z "$p50" ]; then say "bench: no PgQ events consumed in the $label window"; exit 1; fi
  PGQ_LAT[$label]="$n $p50 $p95 $p99 $max ${txlat:-?} ${tps:-0} $((ticks1 - ticks0)) ${tail:-?}"
  say "  PgQ commit→consumer latency, $label: $(fmt_int "$n") events in $PGQ_LAT_SECS s at $(fmt_int "$tps")/s, $((ticks1 - ticks0)) ticks; p50 $p50 ms, p95 $p95 ms, p99 $p99 ms, max $max ms (events from $first s to $last s after the start; the unmeasured tail: max ${tail:-?} ms; pgbench: a transaction took ${txlat:-?} ms on average)"
}

# pgq_latency_setting LABEL TICKER_PERIOD MAX_COUNT: pgqd and the queue's ticker settings, a
# consumer, a warm-up, the window; then consumer and pgqd stopped.
pgq_latency_setting() {
  local label=$1 period=$2 max_count=$3 cpid
  psql_q -c "SELECT pgq.set_queue_config('bench_live', 'ticker_max_count', '$max_count')" \
         -c "UPDATE bench.pgq_ctl SET stop = false" >/dev/null
  pgqd_start "$label" "$period"
  as_pg env PGOPTIONS="-c synchronous_commit=off" \
    psql -X -q -v ON_ERROR_STOP=1 -f "$DIR/pgq-consumer.sql" >"$DIR/pgq-consumer-$label.log" 2>&1 &
  cpid=$!
  # Unmeasured: connections, plans, the first ticks.
  as_pg pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -R "$PGQ_LAT_RATE" -T 3 -f "$DIR/pgq-live.sql" >/dev/null 2>&1 || true
  kill -0 "$cpid" 2>/dev/null || { say "bench: the PgQ consumer stopped:"; cat "$DIR/pgq-consumer-$label.log" >&2; exit 1; }
  local k
  for ((k = 1; k <= LAT_WINDOWS; k++)); do pgq_live_window "$label/$k"; done
  windows_median PGQ_LAT "$label" "$LAT_WINDOWS"
  psql_q -c "UPDATE bench.pgq_ctl SET stop = true" >/dev/null
  wait "$cpid" || { say "bench: the PgQ consumer failed:"; cat "$DIR/pgq-consumer-$label.log" >&2; exit 1; }
  pgqd_stop
}

pgq_latency_bench() {
  if [ "$(psql_q -c "SHOW track_commit_timestamp")" != on ]; then
    say "bench: PgQ latency: restarting the cluster with track_commit_timestamp = on"
    psql_q -c "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
    as_pg pg_ctl -D "$DIR/data" -l "$DIR/server.log" -w -t 60 restart >/dev/null
  fi
  psql_q >/dev/null <<'SQL'
SELECT pgq.create_queue('bench_live');
SELECT pgq.register_consumer('bench_live', 'live');
CREATE TABLE bench.pgq_live (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                             message jsonb NOT NULL, published_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE bench.pgq_ctl (stop boolean NOT NULL);
INSERT INTO bench.pgq_ctl VALUES (false);
SQL
  PGQ_LIVE_TABLE=$(psql_q -c "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = 'bench_live'")
  cat >"$DIR/pgq-live.sql" <<SQL
$VARS
SELECT pgq.insert_event('bench_live', 'acct/' || :id, ($PAYLOAD)::text);
SQL
  [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR/pgq-live.sql"
  pgq_consumer_script
  # pgqd's defaults: ticker_period 1 s; the queue's: ticker_max_count 500, ticker_max_lag 3 s.
  pgq_latency_setting "pgqd defaults" "" 500
  # Its fastest: pgqd runs the ticker every 10 ms, and the queue ticks for a single event.
  pgq_latency_setting "pgqd fastest" 0.01 1
  psql_q -c "SELECT pgq.drop_queue('bench_live', true)" -c "DROP TABLE bench.pgq_live, bench.pgq_ctl" >/dev/null
}

pgq_bench() {
  pgq_drain_bench
  pgq_latency_bench
}

# pgq_list 12345 23456 → "12,345 · 23,456"
pgq_list() {
  local x out=""
  for x in "$@"; do
    [[ $x =~ ^[0-9]+$ ]] && x=$(fmt_int "$x")
    out="${out:+$out · }$x"
  done
  echo "$out"
}

pgq_report() {
  local med lo hi label n p50 p95 p99 max txlat tps ticks tail s met sp50 sp95 sp99 smax runs
  echo
  echo "### PgQ: drain and commit → consumer latency"
  echo
  echo "- PgQ $(psql_q -c "SELECT pgq.version()") on the same cluster, after the parts above."
  echo "- drain: a backlog of $(fmt_int "$PGQ_DRAIN_N") events (the same ~108-byte payload as text, ≈ $PGQ_EVENT_BYTES bytes per event row as text) appended by one session, $PGQ_BATCH events per transaction, each followed by \`pgq.ticker()\` on the queue (no pgqd; \`ticker_max_count\` 1, so that each call ticks), so that every batch holds exactly $PGQ_BATCH events (checked: $(fmt_int "$PGQ_DRAIN_BATCHES") ticks, and each batch's size); $(fmt_int "$PGQ_LOAD_RATE") events/s. \`VACUUM ANALYZE\`, then $PGQ_DRAIN_RUNS times two drains, each by a fresh consumer registered before the backlog: per batch one transaction of \`next_batch\`, \`get_batch_events\`, \`finish_batch\` from a psql script (\`synchronous_commit\` off), with"
  echo "  *read*: each event row rendered to text and counted (as a client receiving it; the counterpart of the \`read_feed\` drain) and *table*: each event inserted as a JSON object into a fresh table of the \`table\` sink's shape (the counterpart of the \`table\` sink). Rate = events / wall-clock time of the psql script."
  echo "- latency: $LAT_WINDOWS windows per setting (each percentile the median over them, each window's p50 and p99 in the notes) of pgbench \`-R $PGQ_LAT_RATE -c $CLIENTS -T $((PGQ_LAT_SECS + PGQ_TAIL_SECS))\` of \`pgq.insert_event\` (one per transaction, \`synchronous_commit\` on), a consumer inside the server (a \`DO\` loop: \`next_batch\`; the batch inserted into a table of the \`table\` sink's shape and finished in one transaction, \`synchronous_commit\` off; ${PGQ_POLL_MS} ms sleep when there is no batch), after 3 s of unmeasured events; with pgqd at its defaults (\`ticker_period\` 1 s; the queue's \`ticker_max_count\` 500, \`ticker_max_lag\` 3 s) and at its fastest (\`ticker_period\` 0.01 s, \`ticker_max_count\` 1)."
  echo "  Per event of the first $PGQ_LAT_SECS s: the commit of the consumer transaction that inserted it (\`pg_xact_commit_timestamp\`) − the event's \`ev_time\` (\`now()\` of its appending transaction, whose only statement is the insert), as statesman's latency is measured from \`occurred_at\`."
  echo "  The last $PGQ_TAIL_SECS s of appends are not measured: at its defaults PgQ ticks for fewer than 500 new events only when they are 3 s old (\`ticker_max_lag\`), so the events just before the appends stop wait up to 3 s, which a constant stream never sees (their worst wait is in the notes). statesman's windows have no such tail: their latency counts every record."
  echo
  echo "| measurement | PgQ: result | statesman | target | met | notes |"
  echo "|---|---|---|---|---|---|"
  # statesman's counterparts, when the parts that measure them ran: the read_feed drains and
  # the drains to the `table` sink of the delivery part's backlog (scripts/bench-delivery.sh).
  s="—" met="—"
  read -r med lo hi <<<"$(stats "${PGQ_READ_RATES[@]}")"
  if [ "${#READ_RATES[@]}" -gt 0 ]; then
    read -r -a runs <<<"$(stats "${READ_RATES[@]}")"
    s="$(fmt_cell "${runs[@]}") (\`read_feed\`, $(fmt_int "${DRAIN_N:-0}") records)"
    met=$(verdict "${runs[0]}" "$med")
  fi
  echo "| drain of $(fmt_int "$PGQ_DRAIN_N") events in batches of $PGQ_BATCH, *read*, events/s, median (min–max) of $PGQ_DRAIN_RUNS | $(fmt_cell "$med" "$lo" "$hi") | $s | \`read_feed\` ≥ PgQ | $met | runs: $(pgq_list "${PGQ_READ_RATES[@]}") |"
  s="—"
  # shellcheck disable=SC2153  # DRAIN_RATES and DRAIN_N come from scripts/bench-delivery.sh
  if declare -p DRAIN_RATES >/dev/null 2>&1 && [ "${#DRAIN_RATES[@]}" -gt 0 ]; then
    read -r med lo hi <<<"$(stats "${DRAIN_RATES[@]}")"
    s="$(fmt_cell "$med" "$lo" "$hi") (\`table\` sink, $(fmt_int "${DRAIN_N:-0}") records)"
  fi
  read -r med lo hi <<<"$(stats "${PGQ_TABLE_RATES[@]}")"
  echo "| drain of $(fmt_int "$PGQ_DRAIN_N") events in batches of $PGQ_BATCH, *table*, events/s, median (min–max) of $PGQ_DRAIN_RUNS | $(fmt_cell "$med" "$lo" "$hi") | $s | informational | — | runs: $(pgq_list "${PGQ_TABLE_RATES[@]}") |"
  for label in "pgqd defaults" "pgqd fastest"; do
    read -r n p50 p95 p99 max txlat tps ticks tail <<<"${PGQ_LAT[$label]}"
    # statesman's counterpart: as it runs by default (hints on), below PgQ at every percentile
    # is "met"; at PgQ's defaults, statesman with hints off (it polls, like PgQ) is shown too.
    if [ -n "${LAT[hints on]:-}" ]; then
      read -r _ sp50 sp95 sp99 smax _ <<<"${LAT[hints on]}"
      met=$(awk -v a="$sp50" -v b="$sp95" -v c="$sp99" -v x="$p50" -v y="$p95" -v z="$p99" \
            'BEGIN { print (a < x && b < y && c < z) ? "yes" : "**no**" }')
      s="hints on: $sp50 / $sp95 / $sp99 ($smax)"
      if [ "$label" = "pgqd defaults" ] && [ -n "${LAT[hints off]:-}" ]; then
        read -r _ sp50 sp95 sp99 smax _ <<<"${LAT[hints off]}"
        s="$s; hints off: $sp50 / $sp95 / $sp99 ($smax), $(awk -v a="$sp50" -v b="$sp99" -v x="$p50" -v z="$p99" \
            'BEGIN { printf "%s PgQ at p50, %s at p99", (a < x) ? "below" : "not below", (b < z) ? "below" : "not below" }')"
      fi
    else
      met="—"; s="—"
    fi
    echo "| commit → consumer latency at $(fmt_int "$PGQ_LAT_RATE") events/s, $label, ms: p50 / p95 / p99 (max), median of $LAT_WINDOWS windows | $p50 / $p95 / $p99 ($max) | $s | statesman below PgQ | $met | windows (p50/p99): $(windows_list PGQ_LAT "$label" "$LAT_WINDOWS"); $(fmt_int "$n") events of the first $PGQ_LAT_SECS s of the windows at $(fmt_int "$tps")/s, $ticks ticks; the last $PGQ_TAIL_SECS s of appends, unmeasured: max $tail ms; an insert transaction took $txlat ms on average (pgbench) |"
  done
}

# The delivery part of `make bench` (sourced by scripts/bench, not run on its own): the rows of
# docs/design.md §9 that belong to the background worker, the dispatcher and the `table` sink,
# measured on the bench's cluster after the append runs.
#
#   delivery_bench    measures; one progress line per step on stderr
#   delivery_report   prints the markdown section (stdout)
#
# It uses what scripts/bench defines: DIR, CLIENTS, psql_q, stats, fmt_int, fmt_cell, and the
# append script "$DIR/statesman.sql". It restarts the cluster once, with statesman.enabled =
# on (the append runs measure the append alone, the worker off) and track_commit_timestamp =
# on (the moment a sink row's transaction committed is that row's delivery time).
#
# Environment:
#   BENCH_DRAIN_RECORDS    backlog for the drain (default 1000000; rounded up to a whole
#                          number of 100-record transactions per client)
#   BENCH_DRAIN_RUNS       drains of that backlog, each into a fresh outbox and table (default 3)
#   BENCH_LATENCY_RATE     appends/s for the latency windows (default 1000)
#   BENCH_LATENCY_SECONDS  length of each latency window, hints on and off (default 20)
#   BENCH_LATENCY_WINDOWS  windows per setting; each percentile is the median over them (default 3)
#   BENCH_LEASE_RATE       appends/s for the lease window (default 3000)
#   BENCH_LEASE_SECONDS    length of the lease window (default 15)
#   BENCH_SINK_DRAIN_RUNS  drains of the same backlog to the `redis` sink and to the `postgres`
#                          sink, each (default: BENCH_DRAIN_RUNS)
#
# For the `redis` and `postgres` sinks it starts a redis-server and a second PostgreSQL
# cluster (the remote) on loopback; delivery_cleanup stops them.

DRAIN_RECORDS=${BENCH_DRAIN_RECORDS:-1000000}
DRAIN_RUNS=${BENCH_DRAIN_RUNS:-3}
LAT_RATE=${BENCH_LATENCY_RATE:-1000}
LAT_SECS=${BENCH_LATENCY_SECONDS:-20}
LEASE_RATE=${BENCH_LEASE_RATE:-3000}
LEASE_SECS=${BENCH_LEASE_SECONDS:-15}
SINK_RUNS=${BENCH_SINK_DRAIN_RUNS:-$DRAIN_RUNS}
LAT_WINDOWS=${BENCH_LATENCY_WINDOWS:-3}
for v in DRAIN_RECORDS DRAIN_RUNS LAT_RATE LAT_SECS LEASE_RATE LEASE_SECS SINK_RUNS LAT_WINDOWS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { say "bench: the delivery settings (BENCH_DRAIN_*, BENCH_LATENCY_*, BENCH_LEASE_*) must be whole numbers >= 1"; exit 2; }
done
DRAIN_BATCH=100          # records per backlog transaction
CATCH_UP_TIMEOUT=300     # seconds delivery may trail the writers before the bench gives up

# Results, filled in by delivery_bench.
declare -A LAT=()         # LAT[label]="n p50 p95 p99 max pub_p50 pub_p99 tx_latency_ms achieved_tps sync"
DRAIN_RATES=() DRAIN_E2E=() DRAIN_START=() DRAIN_HWM=() DRAIN_ANON=() DRAIN_PIDS=()
declare -A SINK_RATES=() SINK_E2E=()  # [redis|postgres]="rate rate …"
REDIS_DIR="" REDIS_PORT="" REMOTE_DIR="" REMOTE_PORT="" XADD_RATES=() XADD_BYTES=0
DRAIN_N=0 LEASE_TRIPS=0 LEASE_WINDOW=0 LEASE_PIDS="" LEASE_BEFORE="" LEASE_AFTER=""
READ_RATES=() READ_MSG_BYTES=0   # the read_feed drains of the backlog
READ_PAGE=1000                   # records per read_feed page
READ_PART_PAGES=200              # pages of each step of the read breakdown
READ_PART_RUNS=3
declare -A READ_PARTS=()         # [step]="rate rate …", the read breakdown
READ_PART_STEPS=(positions rows message message_text read_feed)

# windows_median TABLE LABEL W: TABLE[LABEL] (an associative array of space-separated figures,
# count first) from TABLE[LABEL/1] … TABLE[LABEL/W]: the count summed, every other number the
# median over the windows, anything else taken from the first window.
windows_median() {
  local -n tbl=$1
  local label=$2 w=$3 k f nf col out=() a first
  read -r -a first <<<"${tbl[$label/1]}"
  nf=${#first[@]}
  for ((f = 0; f < nf; f++)); do
    col=()
    for ((k = 1; k <= w; k++)); do read -r -a a <<<"${tbl[$label/$k]}"; col+=("${a[$f]}"); done
    if [ "$f" -eq 0 ]; then
      out+=("$(printf '%s\n' "${col[@]}" | awk '{ s += $1 } END { print s }')")
    elif [[ ${col[*]} =~ ^[0-9.\ ]+$ ]]; then
      out+=("$(stats "${col[@]}" | cut -d' ' -f1)")
    else
      out+=("${col[0]}")
    fi
  done
  tbl[$label]="${out[*]}"
}

# windows_list TABLE LABEL W: "p50/p99 · p50/p99 · …" of the windows (fields 2 and 4).
windows_list() {
  local -n tbl=$1
  local label=$2 w=$3 k a out=()
  for ((k = 1; k <= w; k++)); do read -r -a a <<<"${tbl[$label/$k]}"; out+=("${a[1]}/${a[3]}"); done
  local IFS='·'
  printf '%s' "${out[*]}" | sed 's/·/ · /g'
}

# Waits until the condition (a query returning t) holds, polling every 100 ms; fails after $2 s.
wait_for() {
  local query=$1 timeout=$2 what=$3 i
  for ((i = 0; i < timeout * 10; i++)); do
    [ "$(psql_q -c "$query")" = t ] && return 0
    sleep 0.1
  done
  say "bench: timed out after $timeout s waiting for $what"
  tail -n 20 "$DIR/server.log" >&2
  exit 1
}

# Until every committed record has a position and the outbox's cursor is at the head.
wait_caught_up() {
  wait_for "SELECT NOT EXISTS (SELECT FROM statesman.history h WHERE h.global_position IS NULL)
                AND (SELECT cursor_position IS NOT DISTINCT FROM head_position
                     FROM statesman.outbox_status WHERE outbox_id = '$1')" "$CATCH_UP_TIMEOUT" \
           "outbox $1 to deliver everything"
}

head_pos() { psql_q -c "SELECT COALESCE(statesman.head_position(), 0)"; }
# "round_trips leader_pid epoch_seconds" of outbox `live`, now.
lease_now() {
  psql_q -F ' ' -c "SELECT lease_round_trips, leader_pid, extract(epoch FROM clock_timestamp())
                    FROM statesman.outbox_status WHERE outbox_id = 'live'"
}

# live_window LABEL RATE SECONDS SYNC: appends at RATE/s for SECONDS (pgbench -R, CLIENTS
# clients, synchronous_commit=SYNC) while outbox `live` delivers into bench.live; then the
# commit→sink latency of the window's records.
live_window() {
  local label=$1 rate=$2 secs=$3 sync=$4 pos0 pos1 out tps txlat row
  wait_caught_up live
  pos0=$(head_pos)
  LEASE_BEFORE=$(lease_now)
  out=$(as_pg env PGOPTIONS="-c synchronous_commit=$sync" \
        pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -R "$rate" -T "$secs" -f "$DIR/statesman.sql" 2>&1) || {
    say "bench: pgbench failed ($label):"; say "$out"; exit 1; }
  LEASE_AFTER=$(lease_now)
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")
  # With -R, pgbench's latency counts from each transaction's scheduled start: take the
  # schedule lag off to get the time a transaction took.
  txlat=$(awk '/^latency average = / { l = $4 } /^rate limit schedule lag: avg / { g = $6 }
               END { if (l != "") printf "%.2f", l - g }' <<<"$out")
  wait_caught_up live
  pos1=$(head_pos)
  # Per record: from its append (occurred_at = clock_timestamp() inside the appending
  # transaction, just before its commit) to the commit of the sink transaction that inserted it
  # (pg_xact_commit_timestamp of the sink row's xmin); also to the sink row's published_at,
  # the start of that transaction.
  row=$(psql_q -F ' ' -c "
    SELECT count(*),
           round(percentile_cont(0.50) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(max(ms)::numeric, 1),
           round(percentile_cont(0.50) WITHIN GROUP (ORDER BY pub_ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY pub_ms)::numeric, 1)
    FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(d.xmin) - h.occurred_at) * 1000 AS ms,
                 extract(epoch FROM d.published_at - h.occurred_at) * 1000 AS pub_ms
          FROM bench.live d JOIN statesman.history h ON h.global_position = d.global_position
          WHERE d.global_position > $pos0 AND d.global_position <= $pos1) x")
  read -r n p50 p95 p99 max pp50 pp99 <<<"$row"
  if [ "$n" -eq 0 ] || [ -z "$p50" ]; then say "bench: no records delivered in the $label window"; exit 1; fi
  LAT[$label]="$n $p50 $p95 $p99 $max $pp50 $pp99 ${txlat:-?} ${tps:-0} $sync"
  say "  commit→sink latency, $label: $(fmt_int "$n") records at $(fmt_int "$tps")/s; p50 $p50 ms, p95 $p95 ms, p99 $p99 ms, max $max ms (pgbench: a transaction took ${txlat:-?} ms on average)"
}

# Reads the dispatcher's /proc status from inside the server while it drains: one session,
# polling every 100 ms, so the measurement adds no process start-ups to the machine's load.
drain_run() {
  local r=$1 total=$2 target=$3 row
  psql_q -c "CHECKPOINT" >/dev/null
  psql_q 2> >(sed -u 's/^NOTICE:  //' >&2) >/dev/null <<SQL
SELECT statesman.create_outbox('drain_$r', 'table', '{"table": "bench.drain_$r"}');
DO \$\$
DECLARE
    t0 timestamptz := clock_timestamp();   -- create_outbox has just committed
    last_note timestamptz := clock_timestamp();
    last_pos bigint := $((target - total));   -- the head before the backlog
    pos bigint;
    pid integer;
    st text;
    pids integer[] := '{}';
    hwm bigint := 0; anon bigint := 0; rss bigint := 0; shmem bigint := 0;
    kb bigint;
BEGIN
    LOOP
        SELECT s.cursor_position, s.leader_pid INTO pos, pid
        FROM statesman.outbox_status s WHERE s.outbox_id = 'drain_$r';
        IF pid IS NOT NULL THEN
            IF NOT pid = ANY (pids) THEN pids := pids || pid; END IF;
            BEGIN
                st := pg_read_file('/proc/' || pid || '/status');
            EXCEPTION WHEN OTHERS THEN
                st := NULL;    -- it has just exited
            END;
            IF st IS NOT NULL THEN
                kb := (regexp_match(st, 'VmHWM:\\s+(\\d+) kB'))[1]::bigint;    hwm := greatest(hwm, kb);
                kb := (regexp_match(st, 'VmRSS:\\s+(\\d+) kB'))[1]::bigint;    rss := greatest(rss, kb);
                kb := (regexp_match(st, 'RssAnon:\\s+(\\d+) kB'))[1]::bigint;  anon := greatest(anon, kb);
                kb := (regexp_match(st, 'RssShmem:\\s+(\\d+) kB'))[1]::bigint; shmem := greatest(shmem, kb);
            END IF;
        END IF;
        EXIT WHEN pos >= $target;
        IF clock_timestamp() - t0 > interval '$CATCH_UP_TIMEOUT seconds' THEN
            RAISE EXCEPTION 'drain run $r: the cursor is at % of $target after $CATCH_UP_TIMEOUT s', pos;
        END IF;
        IF clock_timestamp() - last_note >= interval '2 seconds' THEN
            RAISE NOTICE '  drain run $r/$DRAIN_RUNS: cursor % records past the start, % records/s in the last % s; dispatcher RSS % MB (private % MB)',
                COALESCE(pos - $((target - total)), 0),
                round((COALESCE(pos, last_pos) - last_pos) / extract(epoch FROM clock_timestamp() - last_note)),
                round(extract(epoch FROM clock_timestamp() - last_note)::numeric, 1),
                round(rss / 1024.0, 1), round(anon / 1024.0, 1);
            last_note := clock_timestamp();
            last_pos := COALESCE(pos, last_pos);
        END IF;
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
    INSERT INTO bench.drain_runs (run, created_at, hwm_kb, rss_kb, anon_kb, shmem_kb, pids)
    VALUES ($r, t0, hwm, rss, anon, shmem, pids);
END
\$\$;
SQL
  # The drain: from the start of the first page's transaction (published_at = now()) to the
  # commit of the last page's; and from create_outbox's commit, the dispatcher's start included.
  row=$(psql_q -F ' ' -c "
    WITH d AS (SELECT count(*) AS n, min(published_at) AS first_start,
                      max(pg_xact_commit_timestamp(xmin)) AS last_commit FROM bench.drain_$r)
    SELECT d.n, s.published_total,
           round(d.n / extract(epoch FROM d.last_commit - d.first_start)),
           round(d.n / extract(epoch FROM d.last_commit - r.created_at)),
           round(extract(epoch FROM d.first_start - r.created_at)::numeric, 2),
           round(extract(epoch FROM d.last_commit - d.first_start)::numeric, 2),
           r.hwm_kb, r.rss_kb, r.anon_kb, r.shmem_kb, cardinality(r.pids)
    FROM d, bench.drain_runs r, statesman.outbox_status s
    WHERE r.run = $r AND s.outbox_id = 'drain_$r'")
  read -r n published rate e2e start secs hwm _ anon shmem npids <<<"$row"
  if [ "$n" -ne "$total" ] || [ "$published" -ne "$total" ]; then
    say "bench: drain run $r delivered $n rows (published_total $published) of $total"; exit 1
  fi
  DRAIN_RATES+=("$rate"); DRAIN_E2E+=("$e2e"); DRAIN_START+=("$start")
  DRAIN_HWM+=("$hwm"); DRAIN_ANON+=("$anon"); DRAIN_PIDS+=("$npids")
  say "  [drain $r/$DRAIN_RUNS] $(fmt_int "$n") records in $secs s = $(fmt_int "$rate") records/s (first page $start s after create_outbox; $(fmt_int "$e2e") records/s counting that); dispatcher peak RSS $(awk -v k="$hwm" 'BEGIN { printf "%.0f", k / 1024 }') MB, of it shared memory ≤ $(awk -v k="$shmem" 'BEGIN { printf "%.0f", k / 1024 }') MB, private ≤ $(awk -v k="$anon" 'BEGIN { printf "%.1f", k / 1024 }') MB"
  psql_q -c "SELECT statesman.drop_outbox('drain_$r')" -c "DROP TABLE bench.drain_$r" >/dev/null
}

# Stops what delivery_bench started besides the bench's own cluster.
delivery_cleanup() {
  [ -n "$REDIS_PORT" ] && redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1
  [ -n "$REMOTE_DIR" ] && stop_cluster "$REMOTE_DIR"
  [ -n "$REMOTE_DIR" ] && rm -rf "$REMOTE_DIR"
  [ -n "$REDIS_DIR" ] && rm -rf "$REDIS_DIR"
  return 0
}

redis_q() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
remote_q() { as_pg psql -X -q -t -A -v ON_ERROR_STOP=1 -h "$REMOTE_DIR" -p "$REMOTE_PORT" -d postgres "$@"; }

# The servers the `redis` and `postgres` sinks deliver to, on loopback: a redis-server with
# its defaults except snapshots (off, so that no fork lands inside a measurement), and a second
# PostgreSQL cluster with the bench's fsync and synchronous_commit (on).
start_sink_servers() {
  REDIS_DIR=$(scratch_dir bench-redis)
  REDIS_PORT=$(free_port 56400)
  as_pg redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$REDIS_DIR" --save '' --appendonly no \
    --daemonize yes --logfile "$REDIS_DIR/redis.log" --pidfile "$REDIS_DIR/redis.pid"
  local i
  for ((i = 0; i < 50; i++)); do redis_q ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
  redis_q ping | grep -q PONG || { say "bench: redis-server did not start"; cat "$REDIS_DIR/redis.log" >&2; exit 1; }
  REMOTE_DIR=$(scratch_dir bench-remote)
  REMOTE_PORT=$(free_port $((PORT + 1)))
  start_cluster "$REMOTE_DIR" "$REMOTE_PORT" "statesman.enabled = off" "shared_buffers = 1GB" \
    "max_wal_size = 8GB" "checkpoint_timeout = 30min"
  say "bench: sinks: redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on 127.0.0.1:$REDIS_PORT; remote PostgreSQL on 127.0.0.1:$REMOTE_PORT"
}

# redis-benchmark's own XADD rate on the same server, pipelined 1,000 deep (the sink's page
# size), with a field of the size of the bench's messages: the sink side's limit.
xadd_limit() {
  local r out
  # The average message of the backlog as text, measured by the read_feed drains before.
  XADD_BYTES=$READ_MSG_BYTES
  [[ $XADD_BYTES =~ ^[1-9][0-9]*$ ]] || { say "bench: no message size for redis-benchmark (got '$XADD_BYTES')"; exit 1; }
  local value
  value=$(head -c "$XADD_BYTES" /dev/zero | tr '\0' 'x')
  for ((r = 1; r <= SINK_RUNS; r++)); do
    out=$(redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -n "$DRAIN_N" -c 1 -P 1000 -q \
            XADD bench:xadd '*' messageId "bench/acct/1#1" message "$value" 2>&1 | tr '\r' '\n' | grep -m1 'requests per second')
    XADD_RATES+=("$(sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' <<<"$out" | cut -d. -f1)")
    redis_q del bench:xadd >/dev/null
    say "  [redis-benchmark $r/$SINK_RUNS] XADD of $(fmt_int "$DRAIN_N") $XADD_BYTES-byte entries, 1 connection, pipelined 1,000 deep: $(fmt_int "${XADD_RATES[-1]}") requests/s"
  done
}

# sink_drain_run SINK R TOTAL TARGET: a fresh outbox to SINK drains the backlog; the rate is
# TOTAL / (when its cursor reached the head − when it first moved), both polled every 100 ms
# inside the server; the sink's contents are checked afterwards.
sink_drain_run() {
  local sink=$1 r=$2 total=$3 target=$4 options row n rate e2e secs
  case $sink in
    redis) options="{\"port\": $REDIS_PORT, \"key_prefix\": \"bench\", \"stream\": \"drain_$r\"}" ;;
    postgres) options="{\"conninfo\": \"host=127.0.0.1 port=$REMOTE_PORT dbname=postgres user=postgres\", \"table\": \"bench.drain_$r\"}" ;;
  esac
  psql_q -c "CHECKPOINT" >/dev/null
  psql_q 2> >(sed -u 's/^NOTICE:  //' >&2) >/dev/null <<SQL
SELECT statesman.create_outbox('sdrain_${sink}_$r', '$sink', '$options');
DO \$\$
DECLARE
    t0 timestamptz := clock_timestamp();
    t_first timestamptz;
    last_note timestamptz := clock_timestamp();
    last_pos bigint := $((target - total));
    pos bigint;
    err text;
BEGIN
    LOOP
        SELECT s.cursor_position, s.last_error INTO pos, err
        FROM statesman.outbox_status s WHERE s.outbox_id = 'sdrain_${sink}_$r';
        IF t_first IS NULL AND pos > $((target - total)) THEN t_first := clock_timestamp(); END IF;
        EXIT WHEN pos >= $target;
        IF clock_timestamp() - t0 > interval '$CATCH_UP_TIMEOUT seconds' THEN
            RAISE EXCEPTION '$sink drain run $r: the cursor is at % of $target after $CATCH_UP_TIMEOUT s (last error: %)', pos, err;
        END IF;
        IF clock_timestamp() - last_note >= interval '2 seconds' THEN
            RAISE NOTICE '  $sink drain run $r/$SINK_RUNS: cursor % records past the start, % records/s in the last % s',
                COALESCE(pos - $((target - total)), 0),
                round((COALESCE(pos, last_pos) - last_pos) / extract(epoch FROM clock_timestamp() - last_note)),
                round(extract(epoch FROM clock_timestamp() - last_note)::numeric, 1);
            last_note := clock_timestamp();
            last_pos := COALESCE(pos, last_pos);
        END IF;
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
    INSERT INTO bench.sink_runs (sink, run, created_at, first_at, done_at)
    VALUES ('$sink', $r, t0, t_first, clock_timestamp());
END
\$\$;
SQL
  row=$(psql_q -F ' ' -c "
    SELECT s.published_total + s.deduplicated_total,
           round($total / extract(epoch FROM r.done_at - r.first_at)),
           round($total / extract(epoch FROM r.done_at - r.created_at)),
           round(extract(epoch FROM r.done_at - r.first_at)::numeric, 2)
    FROM bench.sink_runs r, statesman.outbox_status s
    WHERE r.sink = '$sink' AND r.run = $r AND s.outbox_id = 'sdrain_${sink}_$r'")
  read -r n rate e2e secs <<<"$row"
  local stored
  case $sink in
    redis) stored=$(redis_q xlen "bench:drain_$r") ;;
    postgres) stored=$(remote_q -c "SELECT count(*) FROM bench.drain_$r") ;;
  esac
  if [ "$n" -ne "$total" ] || [ "$stored" -ne "$total" ]; then
    say "bench: $sink drain run $r: the outbox counted $n, the sink holds $stored, of $total"; exit 1
  fi
  SINK_RATES[$sink]+="$rate " SINK_E2E[$sink]+="$e2e "
  say "  [$sink drain $r/$SINK_RUNS] $(fmt_int "$total") records in $secs s = $(fmt_int "$rate") records/s ($(fmt_int "$e2e") records/s counted from create_outbox); the sink holds $(fmt_int "$stored")"
  psql_q -c "SELECT statesman.drop_outbox('sdrain_${sink}_$r')" >/dev/null
  case $sink in
    redis) redis_q del "bench:drain_$r" >/dev/null ;;
    postgres) remote_q -c "DROP TABLE bench.drain_$r" >/dev/null ;;
  esac
}

sink_drains() {
  local total=$1 target=$2 sink r
  start_sink_servers
  psql_q -c "CREATE TABLE IF NOT EXISTS bench.sink_runs (sink text, run int, created_at timestamptz,
               first_at timestamptz, done_at timestamptz, PRIMARY KEY (sink, run))" \
         -c "TRUNCATE bench.sink_runs" \
         -c "SELECT statesman.create_outbox('sdrain_probe', 'redis', '{}', enabled => false)" >/dev/null
  xadd_limit
  psql_q -c "SELECT statesman.drop_outbox('sdrain_probe')" >/dev/null
  for sink in redis postgres; do
    for ((r = 1; r <= SINK_RUNS; r++)); do
      sink_drain_run "$sink" "$r" "$total" "$target"
    done
  done
}

# read_script FILE PAGES QUERY: a psql script that runs QUERY (a page after :after, whose
# first two columns are named after and total) PAGES + 1 times, carrying :after and :total from
# page to page, one statement (its own transaction) per page, and prints :total at the end.
read_script() {
  local file=$1 pages=$2 query=$3 i
  {
    echo "\\set after 0"
    echo "\\set total 0"
    for ((i = 0; i <= pages; i++)); do echo "$query \\gset"; done
    echo "SELECT :total;"
  } >"$file"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$file"
  return 0
}

# timed_script FILE → "records seconds rate"
timed_script() {
  local t0 t1 n
  t0=$(date +%s.%N)
  n=$(psql_q -f "$1")
  t1=$(date +%s.%N)
  awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d %.2f %.0f", n, b - a, n / (b - a) }'
}

# The read_feed drain of the backlog (TOTAL records, sequenced), DRAIN_RUNS times: one session,
# one page per statement, each page's messages rendered to text as a client receives them.
read_drains() {
  local total=$1 r n secs rate
  read_script "$DIR/read-drain.sql" $((total / READ_PAGE + 1)) \
    "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message::text)) AS bytes FROM statesman.read_feed(:after, $READ_PAGE)"
  for ((r = 1; r <= DRAIN_RUNS; r++)); do
    read -r n secs rate <<<"$(timed_script "$DIR/read-drain.sql")"
    [ "$n" -eq "$total" ] || { say "bench: read_feed drained $n of $total records"; exit 1; }
    READ_RATES+=("$rate")
    say "  [read_feed $r/$DRAIN_RUNS] $(fmt_int "$n") records in pages of $READ_PAGE in $secs s = $(fmt_int "$rate") records/s"
  done
  READ_MSG_BYTES=$(psql_q -c "SELECT round(avg(octet_length(message::text))) FROM statesman.read_feed(NULL, $READ_PAGE)")
}

# Where a read_feed page's time goes: the first READ_PART_PAGES pages of the backlog read by
# ever larger parts of what read_feed does, READ_PART_RUNS times each, in turn:
#   positions     the index scan alone: positions only, in order, a page at a time
#   rows          the same pages' history rows, rendered to text
#   message       read_feed's own query as plain SQL (the roots join, the message id, the
#                 message built by statesman._message as jsonb), the message rendered to text
#   message_text  the same with statesman._message_text (the JSON text written directly, as
#                 for the sinks outside the database) instead of jsonb rendered to text
#   read_feed     read_feed itself (PL/pgSQL, its checks, the set it returns)
read_breakdown() {
  local total=$1 store epoch from msg args step r n secs rate
  # A smaller backlog (BENCH_DRAIN_RECORDS) gets fewer pages: each step reads pages that exist.
  [ $((total / READ_PAGE - 1)) -lt "$READ_PART_PAGES" ] && READ_PART_PAGES=$((total / READ_PAGE - 1))
  read -r store epoch <<<"$(psql_q -F ' ' -c "SELECT COALESCE(store_name, current_database()), epoch FROM statesman.store")"
  from="FROM statesman.history h LEFT JOIN statesman.roots r ON r.root = h.root WHERE h.global_position > :after ORDER BY h.global_position LIMIT $READ_PAGE"
  args="'$store', '$epoch'::uuid, h.address, h.root, h.path, h.partition, h.revision, h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version, h.source, COALESCE(h.fingerprint, r.fingerprint), COALESCE(h.content_type, r.content_type), h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error"
  msg="SELECT h.global_position, '$store/' || h.address || '#' || h.revision AS message_id, h.address, h.revision"
  read_script "$DIR/read-positions.sql" "$READ_PART_PAGES" \
    "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total FROM (SELECT h.global_position FROM statesman.history h WHERE h.global_position > :after ORDER BY h.global_position LIMIT $READ_PAGE) f"
  read_script "$DIR/read-rows.sql" "$READ_PART_PAGES" \
    "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(f::text)) AS bytes FROM (SELECT h.* FROM statesman.history h WHERE h.global_position > :after ORDER BY h.global_position LIMIT $READ_PAGE) f"
  read_script "$DIR/read-message.sql" "$READ_PART_PAGES" \
    "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message::text)) AS bytes FROM ($msg, statesman._message($args) AS message $from) f"
  read_script "$DIR/read-message_text.sql" "$READ_PART_PAGES" \
    "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message)) AS bytes FROM ($msg, statesman._message_text($args) AS message $from) f"
  read_script "$DIR/read-read_feed.sql" "$READ_PART_PAGES" \
    "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message::text)) AS bytes FROM statesman.read_feed(:after, $READ_PAGE) f"
  for ((r = 1; r <= READ_PART_RUNS; r++)); do
    for step in "${READ_PART_STEPS[@]}"; do
      read -r n secs rate <<<"$(timed_script "$DIR/read-$step.sql")"
      [ "$n" -eq $(((READ_PART_PAGES + 1) * READ_PAGE)) ] || { say "bench: the read breakdown's $step step read $n records"; exit 1; }
      READ_PARTS[$step]+="$rate "
      say "  [read breakdown $r/$READ_PART_RUNS] $(printf '%-12s' "$step") $(fmt_int "$n") records in $secs s = $(fmt_int "$rate") records/s"
    done
  done
}

delivery_bench() {
  say "bench: delivery: restarting the cluster with the worker on (statesman.enabled) and track_commit_timestamp"
  psql_q -c "ALTER SYSTEM SET statesman.enabled = on" -c "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
  as_pg pg_ctl -D "$DIR/data" -l "$DIR/server.log" -w -t 60 restart >/dev/null
  psql_q -c "TRUNCATE statesman.history" -c "CREATE TABLE IF NOT EXISTS bench.drain_runs (
      run int PRIMARY KEY, created_at timestamptz, hwm_kb bigint, rss_kb bigint, anon_kb bigint,
      shmem_kb bigint, pids int[])" -c "TRUNCATE bench.drain_runs" >/dev/null
  wait_for "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'statesman database worker'
                           AND datname = current_database())" 30 "the database worker"

  # ---- commit → sink latency, and the lease, with one live outbox ----
  # The sink table has the shape the `table` sink creates.
  psql_q -c "CREATE TABLE bench.live (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                                      message jsonb NOT NULL, published_at timestamptz NOT NULL DEFAULT now())" \
         -c "SELECT statesman.create_outbox('live', 'table', '{\"table\": \"bench.live\"}')" >/dev/null
  wait_for "SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'live'" 30 "the dispatcher of outbox live"
  # An unmeasured warm-up: connections, plans, the dispatcher's first pages. (A failure shows
  # in the first measured window.)
  as_pg pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -R "$LAT_RATE" -T 3 -f "$DIR/statesman.sql" >/dev/null 2>&1 || true

  local k
  for ((k = 1; k <= LAT_WINDOWS; k++)); do live_window "hints on/$k" "$LAT_RATE" "$LAT_SECS" on; done
  windows_median LAT "hints on" "$LAT_WINDOWS"

  psql_q -c "ALTER SYSTEM SET statesman.hints = off" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1   # the workers reload at their next wake-up: SIGHUP sets their latch
  [ "$(psql_q -c "SHOW statesman.hints")" = off ] || { say "bench: statesman.hints did not turn off"; exit 1; }
  for ((k = 1; k <= LAT_WINDOWS; k++)); do live_window "hints off/$k" "$LAT_RATE" "$LAT_SECS" on; done
  windows_median LAT "hints off" "$LAT_WINDOWS"
  psql_q -c "ALTER SYSTEM RESET statesman.hints" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1

  # Lease traffic while appending at LEASE_RATE/s (synchronous_commit off for pgbench's
  # sessions, so that two clients can reach the rate on a slow disk): from just before pgbench
  # starts to just after it ends.
  live_window "lease window" "$LEASE_RATE" "$LEASE_SECS" off
  local trips0 trips1 t0 t1 pid0 pid1
  read -r trips0 pid0 t0 <<<"$LEASE_BEFORE"
  read -r trips1 pid1 t1 <<<"$LEASE_AFTER"
  LEASE_TRIPS=$((trips1 - trips0))
  LEASE_WINDOW=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  LEASE_PIDS="$pid0 $pid1"
  say "  lease: $LEASE_TRIPS round trips in $LEASE_WINDOW s of appending (leader pid $pid0 → $pid1)"

  psql_q -c "SELECT statesman.drop_outbox('live')" -c "DROP TABLE bench.live" -c "TRUNCATE statesman.history" >/dev/null

  # ---- the drain of a backlog ----
  local per_client total id0 pid appended target
  per_client=$(((DRAIN_RECORDS + CLIENTS * DRAIN_BATCH - 1) / (CLIENTS * DRAIN_BATCH)))
  total=$((per_client * CLIENTS * DRAIN_BATCH))
  DRAIN_N=$total
  # Each client appends to its own 5,000 addresses (no waits on another client's address
  # locks), DRAIN_BATCH records per transaction, the same ~108-byte payload as the append runs.
  cat >"$DIR/backlog.sql" <<SQL
\\set a random(0, 4999)
SELECT count(*) FROM generate_series(1, $DRAIN_BATCH) i
  CROSS JOIN LATERAL statesman.append('bench', 'acct/' || (:client_id::int * 5000 + (:a::int + i * 37) % 5000),
    jsonb_build_object('account', (:a::int + i * 37) % 5000, 'amount', (random() * 1000000)::int, 'currency', 'EUR',
                       'client', :client_id::int, 'nonce', (random() * 1e12)::bigint, 'note', 'bench')) a;
SQL
  [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR/backlog.sql"
  id0=$(psql_q -c "SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence('statesman.history', 'id')), 0)")
  say "bench: drain: appending a backlog of $(fmt_int "$total") records ($CLIENTS clients, $DRAIN_BATCH per transaction, synchronous_commit off)"
  as_pg env PGOPTIONS="-c synchronous_commit=off" \
    pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -t "$per_client" -f "$DIR/backlog.sql" >"$DIR/backlog.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    appended=$(psql_q -c "SELECT pg_sequence_last_value(pg_get_serial_sequence('statesman.history', 'id')) - $id0")
    kill -0 "$pid" 2>/dev/null && say "  backlog: $(fmt_int "$appended") of $(fmt_int "$total") appended"
  done
  wait "$pid" || { say "bench: appending the backlog failed:"; cat "$DIR/backlog.log" >&2; exit 1; }
  # Every record sequenced (the database worker does it as they commit; this finishes the job).
  while [ "$(psql_q -c "SELECT EXISTS (SELECT FROM statesman.history WHERE global_position IS NULL)")" = t ]; do
    psql_q -c "SELECT statesman.sequence_feed(100000)" >/dev/null
    sleep 0.1
  done
  read -r appended target <<<"$(psql_q -F ' ' -c "SELECT count(*), max(global_position) FROM statesman.history")"
  [ "$appended" -eq "$total" ] || { say "bench: the backlog holds $appended records, not $total"; exit 1; }
  say "  backlog: $(fmt_int "$total") records, all sequenced (head $target); VACUUM ANALYZE"
  psql_q -c "VACUUM ANALYZE statesman.history" -c "CHECKPOINT" >/dev/null
  read_drains "$total"
  read_breakdown "$total"
  for ((r = 1; r <= DRAIN_RUNS; r++)); do
    drain_run "$r" "$total" "$target"
  done
  sink_drains "$total" "$target"
}

delivery_report() {
  local hwm anon e2e met n p50 p95 p99 max pp50 pp99 txlat tps sync per5 label
  echo
  echo "### Delivery: the worker, the dispatcher and the \`table\` sink"
  echo
  echo "- the same cluster, restarted for this part with \`statesman.enabled = on\` (the append runs run with it off) and \`track_commit_timestamp = on\`; \`statesman.naptime = 1s\`; outboxes with the default options (pages of 1,000 records, \`poll_interval\` 1 s, \`lease_ttl\` 30 s, renewal every 10 s)"
  echo "- drain: a backlog of $(fmt_int "$DRAIN_N") records appended by $CLIENTS pgbench clients ($DRAIN_BATCH per transaction, the same ~108-byte payload) with no outbox, all sequenced (checked), \`VACUUM ANALYZE\`; then $DRAIN_RUNS times: \`CHECKPOINT\`, \`create_outbox('drain_N', 'table', '{\"table\": \"bench.drain_N\"}')\` (a fresh outbox, cursor and sink table each run), wait until its cursor is at the head (polled every 100 ms), check the sink holds every record, drop outbox and table."
  echo "  Rate = records / (commit of the last page − start of the first page's transaction: the earliest \`published_at\`); the dispatcher's start (up to the 1 s supervision interval of the database worker) is shown apart."
  echo "- \`redis\` and \`postgres\` sinks: the same backlog, $SINK_RUNS times each to a fresh outbox (default options, pages of 1,000) and a fresh stream / remote table: a redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on loopback (defaults, snapshots off, no AOF: the durability redis gives by default), and a second PostgreSQL cluster on this machine (\`fsync\` and \`synchronous_commit\` on, \`shared_buffers\` 1 GB). Rate = records / (when the cursor reached the head − when it first moved), polled every 100 ms; afterwards \`XLEN\` / \`count(*)\` must equal the backlog."
  echo "- dispatcher memory: its \`/proc/<pid>/status\` read every 100 ms during each drain (pid = \`outbox_status.leader_pid\`; one dispatcher process per run, so its \`VmHWM\` is that drain's peak). \`VmHWM\` counts the pages of \`shared_buffers\` the process touched (\`RssShmem\`), which belong to the server, not to the dispatcher; its own memory is \`RssAnon\`."
  echo "- latency: $LAT_WINDOWS windows of pgbench \`-R $LAT_RATE -c $CLIENTS -T $LAT_SECS\` appending (one append per transaction, \`synchronous_commit\` on) into an outbox whose dispatcher was running and caught up, with \`statesman.hints\` on, then as many with it off (\`ALTER SYSTEM\` + \`pg_reload_conf()\`); each percentile is the median over the windows, each window's p50 and p99 are in the notes. Per record: the commit of the sink transaction that inserted it (\`pg_xact_commit_timestamp\` of the sink row) − the record's \`occurred_at\`."
  echo "  A record's commit time is not stored; \`occurred_at\` is \`clock_timestamp()\` at the append, inside its single-statement transaction, so it precedes the commit by the rest of that transaction, its WAL flush included (the average time an append transaction took, from pgbench, is in the table): the figures overstate the latency by up to that much."
  echo "- lease: \`outbox_status.lease_round_trips\` before and after a window of pgbench \`-R $LEASE_RATE -c $CLIENTS -T $LEASE_SECS\` (\`synchronous_commit\` off for its sessions, so that $CLIENTS clients reach the rate on this disk), scaled to 5 s."
  echo
  echo "| measurement | result | target | met | notes |"
  echo "|---|---|---|---|---|"
  local med lo hi
  read -r med lo hi <<<"$(stats "${READ_RATES[@]}")"
  echo "| \`read_feed(after, $READ_PAGE)\` drain of the same $(fmt_int "$DRAIN_N")-record backlog, records/s, median (min–max) of $DRAIN_RUNS runs | $(fmt_cell "$med" "$lo" "$hi") | ≥ PgQ's drain (its table below) | $(if [ "${#PGQ_READ_RATES[@]}" -gt 0 ]; then verdict "$med" "$(stats "${PGQ_READ_RATES[@]}" | cut -d' ' -f1)"; else echo —; fi) | runs: $(printf '%s\n' "${READ_RATES[@]}" | while read -r x; do fmt_int "$x"; done | paste -sd ' ' | sed 's/ / · /g'); one session, one page per statement, each message rendered to text (≈ $READ_MSG_BYTES bytes) and counted; where the time goes: the table after this one |"
  read -r med lo hi <<<"$(stats "${DRAIN_RATES[@]}")"
  met=$(awk -v r="$med" 'BEGIN { print (r >= 100000) ? "yes" : "**no**" }')
  read -r e2e _ _ <<<"$(stats "${DRAIN_E2E[@]}")"
  echo "| drain of a $(fmt_int "$DRAIN_N")-record backlog to the \`table\` sink, records/s, median (min–max) of $DRAIN_RUNS runs | $(fmt_cell "$med" "$lo" "$hi") | ≥ 100,000 | $met | runs: $(printf '%s\n' "${DRAIN_RATES[@]}" | while read -r x; do fmt_int "$x"; done | paste -sd ' ' | sed 's/ / · /g'); counted from \`create_outbox\` (dispatcher start included, first page after $(printf '%s\n' "${DRAIN_START[@]}" | paste -sd ' ' | sed 's/ / · /g') s): median $(fmt_int "$e2e") records/s |"
  local sink xmed xlo xhi
  read -r xmed xlo xhi <<<"$(stats "${XADD_RATES[@]}")"
  for sink in redis postgres; do
    read -r -a runs <<<"${SINK_RATES[$sink]}"
    read -r med lo hi <<<"$(stats "${runs[@]}")"
    read -r -a e2es <<<"${SINK_E2E[$sink]}"
    read -r e2e _ _ <<<"$(stats "${e2es[@]}")"
    if [ "$sink" = redis ]; then
      met=$(awk -v r="$med" 'BEGIN { print (r >= 100000) ? "yes" : "**no**" }')
      echo "| drain of the same backlog to the \`redis\` sink, records/s, median (min–max) of $SINK_RUNS runs | $(fmt_cell "$med" "$lo" "$hi") | ≥ 100,000 | $met | runs: $(printf '%s\n' "${runs[@]}" | while read -r x; do fmt_int "$x"; done | paste -sd ' ' | sed 's/ / · /g'); counted from \`create_outbox\`: median $(fmt_int "$e2e") records/s; $(awk -v a="$med" -v b="$xmed" 'BEGIN { printf "%.2f", a / b }')× of redis-benchmark's XADD below |"
      echo "| redis-benchmark XADD, requests/s, median (min–max) of $SINK_RUNS runs: the sink side's limit | $(fmt_cell "$xmed" "$xlo" "$xhi") | informational | — | \`redis-benchmark -n $(fmt_int "$DRAIN_N") -c 1 -P 1000 XADD bench:xadd '*' messageId … message <$XADD_BYTES bytes>\` against the same redis-server |"
    else
      echo "| drain of the same backlog to the \`postgres\` sink (a second cluster on this machine), records/s, median (min–max) of $SINK_RUNS runs | $(fmt_cell "$med" "$lo" "$hi") | informational | — | runs: $(printf '%s\n' "${runs[@]}" | while read -r x; do fmt_int "$x"; done | paste -sd ' ' | sed 's/ / · /g'); counted from \`create_outbox\`: median $(fmt_int "$e2e") records/s |"
    fi
  done
  hwm=$(printf '%s\n' "${DRAIN_HWM[@]}" | sort -g | tail -1)
  anon=$(printf '%s\n' "${DRAIN_ANON[@]}" | sort -g | tail -1)
  met=$(awk -v k="$anon" 'BEGIN { print (k < 65536) ? "yes" : "**no**" }')
  echo "| dispatcher memory while draining, MB: private (\`RssAnon\`, highest sample) / peak RSS (\`VmHWM\`, shared buffers included), highest of the runs | $(awk -v k="$anon" 'BEGIN { printf "%.1f", k / 1024 }') / $(awk -v k="$hwm" 'BEGIN { printf "%.0f", k / 1024 }') | < 64 MB | $met (private) | per run \`VmHWM\`: $(printf '%s\n' "${DRAIN_HWM[@]}" | awk '{ printf "%s%.0f", (NR > 1 ? " · " : ""), $1 / 1024 }') MB; dispatcher processes per run: $(printf '%s\n' "${DRAIN_PIDS[@]}" | paste -sd ' ' | sed 's/ / · /g') |"
  for label in "hints on" "hints off" "lease window"; do
    read -r n p50 p95 p99 max pp50 pp99 txlat tps sync <<<"${LAT[$label]}"
    case $label in
      "hints on")
        met=$(awk -v a="$p50" -v b="$p99" 'BEGIN { print (a <= 5 && b <= 15) ? "yes" : "**no**" }')
        echo "| commit → sink latency at $(fmt_int "$LAT_RATE") appends/s, hints on, ms: p50 / p95 / p99 (max), median of $LAT_WINDOWS windows | $p50 / $p95 / $p99 ($max) | p50 ≤ 5, p99 ≤ 15 | $met | windows (p50/p99): $(windows_list LAT "hints on" "$LAT_WINDOWS"); $(fmt_int "$n") records at $(fmt_int "$tps")/s; an append transaction took $txlat ms on average (pgbench); to the sink transaction's start (\`published_at\`): p50 $pp50, p99 $pp99 |" ;;
      "hints off")
        echo "| commit → sink latency at $(fmt_int "$LAT_RATE") appends/s, hints off, ms: p50 / p95 / p99 (max), median of $LAT_WINDOWS windows | $p50 / $p95 / $p99 ($max) | informational | — | windows (p50/p99): $(windows_list LAT "hints off" "$LAT_WINDOWS"); $(fmt_int "$n") records at $(fmt_int "$tps")/s; an append transaction took $txlat ms on average; to \`published_at\`: p50 $pp50, p99 $pp99 |" ;;
      "lease window")
        per5=$(awk -v n="$LEASE_TRIPS" -v s="$LEASE_WINDOW" 'BEGIN { printf "%.1f", n * 5 / s }')
        met=$(awk -v x="$per5" 'BEGIN { print (x <= 10) ? "yes" : "**no**" }')
        echo "| lease round trips per 5 s at $(fmt_int "$LEASE_RATE") appends/s | $per5 | ≤ 10 | $met | $LEASE_TRIPS in $LEASE_WINDOW s at $(fmt_int "$tps") appends/s achieved; leader pid before/after: ${LEASE_PIDS/ / \/ } |"
        echo "| commit → sink latency in that window (hints on, \`synchronous_commit\` off), ms: p50 / p95 / p99 (max) | $p50 / $p95 / $p99 ($max) | informational | — | $(fmt_int "$n") records |" ;;
    esac
  done
  read_breakdown_report
}

# The read breakdown (read_breakdown) as a table: each step's rate, its cost per record, and
# what it adds to the step before.
read_breakdown_report() {
  local step med lo hi us prev="" what msg_us="" runs
  echo
  echo "#### Where a \`read_feed\` page's time goes"
  echo
  echo "The first $(fmt_int $((READ_PART_PAGES + 1))) pages of $READ_PAGE records of the same backlog, read $READ_PART_RUNS times by each step in turn (one session, one page per statement, \`after\` carried from page to page, everything rendered to text and counted inside the server):"
  echo
  echo "| step | records/s, median (min–max) | µs per record | added by this step, µs per record |"
  echo "|---|---|---|---|"
  for step in "${READ_PART_STEPS[@]}"; do
    case $step in
      positions) what="the index scan of \`history_global_position\` alone: positions only" ;;
      rows) what="+ the history rows (heap fetch), rendered to text" ;;
      message) what="read_feed's query as plain SQL: + the roots join, the message id, \`_message\` (jsonb) rendered to text (instead of the row)" ;;
      message_text) what="the same with \`_message_text\` (JSON text written directly, what the sinks outside the database send) instead of jsonb rendered to text" ;;
      read_feed) what="\`read_feed\` itself: + PL/pgSQL, its checks (the head it reads up to; \`sequence_feed\` only when a page is short), the result set it materializes" ;;
    esac
    read -r -a runs <<<"${READ_PARTS[$step]}"
    read -r med lo hi <<<"$(stats "${runs[@]}")"
    us=$(awk -v r="$med" 'BEGIN { printf "%.2f", 1e6 / r }')
    if [ -z "$prev" ]; then
      echo "| $what | $(fmt_cell "$med" "$lo" "$hi") | $us | $us |"
    elif [ "$step" = read_feed ]; then
      echo "| $what | $(fmt_cell "$med" "$lo" "$hi") | $us | $(awk -v a="$us" -v b="$msg_us" 'BEGIN { printf "%+.2f", a - b }') (over the \`message\` step) |"
    else
      echo "| $what | $(fmt_cell "$med" "$lo" "$hi") | $us | $(awk -v a="$us" -v b="$prev" 'BEGIN { printf "%+.2f", a - b }') (over the step before) |"
    fi
    [ "$step" = message ] && msg_us=$us
    [ "$step" = message_text ] || prev=$us
  done
}

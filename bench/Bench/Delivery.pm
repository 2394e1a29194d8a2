# The delivery part: the rows that belong to the background worker, the dispatcher and the
# sinks, measured on the bench's cluster after the append runs. It restarts the cluster once,
# with statesman.enabled = on (the append part's worker-off breakdown leaves it off) and
# track_commit_timestamp = on (the moment a sink row's transaction committed is that row's
# delivery time).
#
#   measure($b, $R)   commit → sink latency (hints on, off), the lease, the read_feed drains and
#                     their breakdown, the drains to the `table`, `redis` and `postgres` sinks,
#                     redis-benchmark's XADD; one progress line per step
#   report($b, $R)    the section "Delivery" and its read breakdown
#   summary($b, $R)   its rows of the summary table
#
# For the `redis` and `postgres` sinks it starts a redis-server (Statesman::Redis) and a second
# PostgreSQL cluster (the remote) on loopback; both are stopped at exit.
#
# Results in $R->{delivery}: n (the backlog), read_rates, drain_rates, insert_rates (the same
# rows inserted by SQL), drain_e2e, drain_start,
# drain_hwm, drain_anon, drain_pids (one value per run), sink_rates{redis|postgres},
# sink_e2e{…}, xadd_rates, xadd_bytes, read_msg_bytes, read_parts{step}, lease{trips, window,
# pids}; and $R->{lat}{label} = [n, p50, p95, p99, max, pub_p50, pub_p99, tx_latency_ms,
# achieved_tps, sync] per window ("hints on/1" …) and, from windows_median, per setting.
package Bench::Delivery;

use strict;
use warnings;
use utf8;

use Bench::Drain;
use Bench::Format qw(stats med fmt_int fmt_cell rate_cell ratio verdict dot_list num);
use Exporter 'import';
use IPC::Run;
use List::Util qw(max);
use Statesman::Redis;
use Time::HiRes qw(time usleep);

our @EXPORT_OK = qw(windows_median windows_list lat_cell wait_caught_up head_pos);

our $DRAIN_BATCH     = 100;     # records per backlog transaction
our $CATCH_UP        = 300;     # seconds delivery may trail the writers before the bench gives up
our $READ_PAGE       = 1000;    # records per read_feed page
our $READ_PART_PAGES = 200;     # pages of each step of the read breakdown
our $READ_PART_RUNS  = 3;
our @READ_PART_STEPS = qw(positions rows message message_text read_feed);

# ---- windows ----

# $tbl->{$label} from $tbl->{"$label/1"} … $tbl->{"$label/$w"} (arrays of figures, count
# first): the count summed, every other number the median over the windows, anything else
# taken from the first window.
sub windows_median
{
	my ($tbl, $label, $w) = @_;
	my @first = @{ $tbl->{"$label/1"} };
	my @out;
	for my $f (0 .. $#first)
	{
		my @col = map { $tbl->{"$label/$_"}[$f] } 1 .. $w;
		if ($f == 0) { my $sum = 0; $sum += $_ for @col; push @out, num($sum); }
		elsif ("@col" =~ /^[0-9. ]+$/) { push @out, med(@col); }
		else { push @out, $col[0]; }
	}
	$tbl->{$label} = \@out;
	return;
}

# "p50/p99 · p50/p99 · …" of the windows.
sub windows_list
{
	my ($tbl, $label, $w) = @_;
	return dot_list(map { $tbl->{"$label/$_"}[1] . '/' . $tbl->{"$label/$_"}[3] } 1 .. $w);
}

# "p50 / p99 (p99 min–max)" of a latency setting: its medians, the range of its windows' p99.
sub lat_cell
{
	my ($tbl, $label, $w) = @_;
	my (undef, $lo, $hi) = stats(map { $tbl->{"$label/$_"}[3] } 1 .. $w);
	return "$tbl->{$label}[1] / $tbl->{$label}[3] (p99 $lo–$hi)";
}

# ---- helpers ----

# Until every committed record has a position and the outbox's cursor is at the head.
sub wait_caught_up
{
	my ($b, $outbox) = @_;
	$b->wait_for("SELECT (SELECT COALESCE(unsequenced_records, 0) = 0 FROM statesman.feed_status)
                AND (SELECT cursor_position IS NOT DISTINCT FROM head_position
                     FROM statesman.outbox_status WHERE outbox_id = '$outbox')", $CATCH_UP,
		"outbox $outbox to deliver everything");
	return;
}

sub head_pos { return $_[0]->q('SELECT COALESCE(statesman.head_position(), 0)'); }

# [round_trips, leader_pid, epoch_seconds] of outbox `live`, now.
sub lease_now
{
	my ($b) = @_;
	return [ $b->row("SELECT lease_round_trips, leader_pid, extract(epoch FROM clock_timestamp())
                    FROM statesman.outbox_status WHERE outbox_id = 'live'") ];
}

# Appends at $rate/s for $secs (pgbench -R, BENCH_CLIENTS clients, synchronous_commit $sync)
# while outbox `live` delivers into bench.live; then the commit→sink latency of the window's
# records.
sub live_window
{
	my ($b, $R, $label, $rate, $secs, $sync) = @_;
	my $s = $b->s;
	wait_caught_up($b, 'live');
	my $pos0 = head_pos($b);
	$R->{delivery}{lease_before} = lease_now($b);
	my $r = $b->pgbench(file => $R->{script}{statesman}, clients => $s->{clients}, rate => $rate,
		secs => $secs, sync => $sync, what => $label);
	$R->{delivery}{lease_after} = lease_now($b);
	# With -R, pgbench's latency counts from each transaction's scheduled start: the schedule
	# lag is taken off to get the time a transaction took (parse_pgbench).
	wait_caught_up($b, 'live');
	my $pos1 = head_pos($b);
	# Per record: from its append (occurred_at = clock_timestamp() inside the appending
	# transaction, just before its commit) to the commit of the sink transaction that inserted
	# it (pg_xact_commit_timestamp of the sink row's xmin); also to the sink row's
	# published_at, the start of that transaction.
	my @row = $b->row("
    SELECT count(*),
           round(percentile_cont(0.50) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(max(ms)::numeric, 1),
           round(percentile_cont(0.50) WITHIN GROUP (ORDER BY pub_ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY pub_ms)::numeric, 1)
    FROM (SELECT extract(epoch FROM pg_xact_commit_timestamp(d.xmin) - h.occurred_at) * 1000 AS ms,
                 extract(epoch FROM d.published_at - h.occurred_at) * 1000 AS pub_ms
          FROM bench.live d JOIN statesman.history h
            ON h.address = d.message->>'address' AND h.revision = (d.message->>'revision')::bigint
          WHERE d.global_position > $pos0 AND d.global_position <= $pos1) x");
	my ($n, $p50, $p95, $p99, $max) = @row;
	$b->fail("bench: no records delivered in the $label window") if $n == 0 || $p50 eq '';
	my $txlat = $r->{txlat} // '?';
	my $tps   = $r->{tps} // 0;
	$R->{lat}{$label} = [ @row, $txlat, $tps, $sync ];
	$b->say("  commit→sink latency, $label: " . fmt_int($n) . ' records at ' . fmt_int($tps)
		  . "/s; p50 $p50 ms, p95 $p95 ms, p99 $p99 ms, max $max ms (pgbench: a transaction took $txlat ms on average)");
	return;
}

# ---- the drains ----

# One drain of the backlog to the `table` sink. The dispatcher's /proc status is read from
# inside the server while it drains: one session, polling every 100 ms, so the measurement adds
# no process start-ups to the machine's load.
sub drain_run
{
	my ($b, $R, $r, $total, $target) = @_;
	my $s     = $b->s;
	my $D     = $R->{delivery};
	my $start = $target - $total;    # the head before the backlog
	$b->q('CHECKPOINT');
	$b->q(<<"SQL", notices => 1);
SELECT statesman.create_outbox('drain_$r', 'table', '{"table": "bench.drain_$r"}');
DO \$\$
DECLARE
    t0 timestamptz := clock_timestamp();   -- create_outbox has just committed
    last_note timestamptz := clock_timestamp();
    last_pos bigint := $start;   -- the head before the backlog
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
        IF clock_timestamp() - t0 > interval '$CATCH_UP seconds' THEN
            RAISE EXCEPTION 'drain run $r: the cursor is at % of $target after $CATCH_UP s', pos;
        END IF;
        IF clock_timestamp() - last_note >= interval '2 seconds' THEN
            RAISE NOTICE '  drain run $r/$s->{drain_runs}: cursor % records past the start, % records/s in the last % s; dispatcher RSS % MB (private % MB)',
                COALESCE(pos - $start, 0),
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
	# commit of the last page's; and from create_outbox's commit, the dispatcher's start
	# included.
	my ($n, $published, $rate, $e2e, $first, $secs, $hwm, undef, $anon, $shmem, $npids) = $b->row("
    WITH d AS (SELECT count(*) AS n, min(published_at) AS first_start,
                      max(pg_xact_commit_timestamp(xmin)) AS last_commit FROM bench.drain_$r)
    SELECT d.n, s.published_total,
           round(d.n / extract(epoch FROM d.last_commit - d.first_start)),
           round(d.n / extract(epoch FROM d.last_commit - r.created_at)),
           round(extract(epoch FROM d.first_start - r.created_at)::numeric, 2),
           round(extract(epoch FROM d.last_commit - d.first_start)::numeric, 2),
           r.hwm_kb, r.rss_kb, r.anon_kb, r.shmem_kb, cardinality(r.pids)
    FROM d, bench.drain_runs r, statesman.outbox_status s
    WHERE r.run = $r AND s.outbox_id = 'drain_$r'");
	$b->fail("bench: drain run $r delivered $n rows (published_total $published) of $total")
	  if $n != $total || $published != $total;
	push @{ $D->{drain_rates} }, $rate;
	push @{ $D->{drain_e2e} },   $e2e;
	push @{ $D->{drain_start} }, $first;
	push @{ $D->{drain_hwm} },   $hwm;
	push @{ $D->{drain_anon} },  $anon;
	push @{ $D->{drain_pids} },  $npids;
	$b->say("  [drain $r/$s->{drain_runs}] " . fmt_int($n) . " records in $secs s = " . fmt_int($rate)
		  . " records/s (first page $first s after create_outbox; " . fmt_int($e2e)
		  . ' records/s counting that); dispatcher peak RSS ' . sprintf('%.0f', $hwm / 1024)
		  . ' MB, of it shared memory ≤ ' . sprintf('%.0f', $shmem / 1024) . ' MB, private ≤ '
		  . sprintf('%.1f', $anon / 1024) . ' MB');
	insert_run($b, $R, $r, $total);
	$b->q("SELECT statesman.drop_outbox('drain_$r');\nDROP TABLE bench.drain_$r");
	return;
}

# What this machine gives the sink's inserts alone: the rows drain run $r delivered, inserted by
# SQL into a fresh table of the same shape in pages of 1,000 (each its own transaction, from an
# index on their positions, built first and not counted), nothing read from the ledger or
# built. Rate = rows / (commit of the last page − start of the first), as the drain's.
sub insert_run
{
	my ($b, $R, $r, $total) = @_;
	my $D = $R->{delivery};
	$b->q(<<"SQL");
CREATE INDEX drain_${r}_position ON bench.drain_$r (global_position);
CREATE TABLE bench.insert_$r (LIKE bench.drain_$r INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE bench.insert_$r ADD PRIMARY KEY (message_id);
CHECKPOINT;
DO \$\$
DECLARE
    after bigint := -1;
    last bigint;
BEGIN
    LOOP
        WITH page AS (
            INSERT INTO bench.insert_$r (message_id, global_position, message)
            SELECT message_id, global_position, message FROM bench.drain_$r
            WHERE global_position > after ORDER BY global_position LIMIT $READ_PAGE
            RETURNING global_position)
        SELECT max(global_position) INTO last FROM page;
        EXIT WHEN last IS NULL;
        after := last;
        COMMIT;
    END LOOP;
END
\$\$;
SQL
	my ($n, $rate, $secs) = $b->row("
    SELECT count(*), round(count(*) / extract(epoch FROM max(pg_xact_commit_timestamp(xmin)) - min(published_at))),
           round(extract(epoch FROM max(pg_xact_commit_timestamp(xmin)) - min(published_at))::numeric, 2)
    FROM bench.insert_$r");
	$b->fail("bench: insert run $r inserted $n rows of $total") if $n != $total;
	push @{ $D->{insert_rates} }, $rate;
	$b->say("  [insert $r] the same " . fmt_int($n) . " rows inserted by SQL in pages of $READ_PAGE in $secs s = "
		  . fmt_int($rate) . ' rows/s');
	$b->q("DROP TABLE bench.insert_$r");
	return;
}

# The servers the `redis` and `postgres` sinks deliver to, on loopback: a redis-server with its
# defaults except snapshots (off, so that no fork lands inside a measurement), and a second
# PostgreSQL cluster with the bench's fsync and synchronous_commit (on).
sub start_sink_servers
{
	my ($b, $R) = @_;
	my $D = $R->{delivery};
	$D->{redis} = Statesman::Redis->start_volatile;
	$D->{remote} = $b->start_cluster('remote', 'statesman.enabled = off', 'shared_buffers = 1GB',
		'max_wal_size = 8GB', 'checkpoint_timeout = 30min');
	$D->{redis_version} = redis_version();
	$b->say("bench: sinks: redis-server $D->{redis_version} on 127.0.0.1:" . $D->{redis}->port
		  . '; remote PostgreSQL on 127.0.0.1:' . $D->{remote}->port);
	return;
}

sub redis_version
{
	my $v = `redis-server --version`;
	return $v =~ /v=(\S+)/ ? $1 : '';
}

# redis-benchmark's own XADD rate on the same server, pipelined 1,000 deep (the sink's page
# size), with a field of the size of the bench's messages: the sink side's limit.
sub xadd_limit
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $D = $R->{delivery};
	# The average message of the backlog as text, measured by the read_feed drains before.
	my $bytes = $D->{read_msg_bytes} // '';
	$b->fail("bench: no message size for redis-benchmark (got '$bytes')") unless $bytes =~ /^[1-9][0-9]*$/;
	$D->{xadd_bytes} = $bytes;
	my $value = 'x' x $bytes;
	for my $r (1 .. $s->{sink_runs})
	{
		my $out = '';
		IPC::Run::run([ 'redis-benchmark', '-h', '127.0.0.1', '-p', $D->{redis}->port, '-n', $D->{n},
				'-c', '1', '-P', '1000', '-q', 'XADD', 'bench:xadd', '*', 'messageId', 'bench/acct/1#1',
				'message', $value ], '<', \'', '>&', \$out);
		my ($line) = grep { /requests per second/ } split /[\r\n]/, $out;
		my ($rate) = ($line // '') =~ /: ([0-9.]*) requests per second/;
		$rate = defined $rate ? int($rate) : '';
		push @{ $D->{xadd_rates} }, $rate;
		$D->{redis}->command('DEL', 'bench:xadd');
		$b->say("  [redis-benchmark $r/$s->{sink_runs}] XADD of " . fmt_int($D->{n})
			  . " $bytes-byte entries, 1 connection, pipelined 1,000 deep: " . fmt_int($rate) . ' requests/s');
	}
	return;
}

# A fresh outbox to $sink drains the backlog; the rate is $total / (when its cursor reached the
# head − when it first moved), both polled every 100 ms inside the server; the sink's contents
# are checked afterwards.
sub sink_drain_run
{
	my ($b, $R, $sink, $r, $total, $target) = @_;
	my $s     = $b->s;
	my $D     = $R->{delivery};
	my $start = $target - $total;
	my $options =
	  $sink eq 'redis'
	  ? '{"port": ' . $D->{redis}->port . ', "key_prefix": "bench", "stream": "drain_' . $r . '"}'
	  : '{"conninfo": "host=127.0.0.1 port=' . $D->{remote}->port
	  . ' dbname=postgres user=postgres", "table": "bench.drain_' . $r . '"}';
	my $d = Bench::Drain::run($b, name => "$sink drain run $r/$s->{sink_runs}", outbox => "sdrain_${sink}_$r",
		sink => $sink, options => $options, start => $start, target => $target, total => $total,
		catch_up => $CATCH_UP, progress => 1);
	my ($n, $rate, $e2e, $secs) = @$d{qw(counted rate e2e secs)};
	my $stored =
	  $sink eq 'redis'
	  ? $D->{redis}->command('XLEN', "bench:drain_$r")
	  : $b->q("SELECT count(*) FROM bench.drain_$r", node => $D->{remote});
	$b->fail("bench: $sink drain run $r: the outbox counted $n, the sink holds $stored, of $total")
	  if $n != $total || $stored != $total;
	push @{ $D->{sink_rates}{$sink} }, $rate;
	push @{ $D->{sink_e2e}{$sink} },   $e2e;
	$b->say("  [$sink drain $r/$s->{sink_runs}] " . fmt_int($total) . " records in $secs s = " . fmt_int($rate)
		  . ' records/s (' . fmt_int($e2e) . ' records/s counted from create_outbox); the sink holds ' . fmt_int($stored));
	$b->q("SELECT statesman.drop_outbox('sdrain_${sink}_$r')");
	if ($sink eq 'redis') { $D->{redis}->command('DEL', "bench:drain_$r"); }
	else { $b->q("DROP TABLE bench.drain_$r", node => $D->{remote}); }
	return;
}

sub sink_drains
{
	my ($b, $R, $total, $target) = @_;
	start_sink_servers($b, $R);
	$b->q("SELECT statesman.create_outbox('sdrain_probe', 'redis', '{}', enabled => false)");
	xadd_limit($b, $R);
	$b->q("SELECT statesman.drop_outbox('sdrain_probe')");
	for my $sink (qw(redis postgres))
	{
		sink_drain_run($b, $R, $sink, $_, $total, $target) for 1 .. $b->s->{sink_runs};
	}
	return;
}

# A psql script that runs $query (a page after :after, whose first two columns are named after
# and total) $pages + 1 times, carrying :after and :total from page to page, one statement
# (its own transaction) per page, and prints :total at the end.
sub read_script
{
	my ($b, $name, $pages, $query) = @_;
	return $b->file($name, "\\set after 0\n\\set total 0\n" . ("$query \\gset\n" x ($pages + 1)) . "SELECT :total;\n");
}

# The script of a read_feed drain of $total records from the start of the feed: one page of
# READ_PAGE per statement, each message rendered to text as a client receives it (with $render
# false: the rows only counted, read_feed building every message all the same); it prints the
# records read. Also Bench::PgQ's drains paired with PgQ's.
sub read_drain_script
{
	my ($b, $name, $total, $render) = @_;
	$render //= 1;
	return read_script($b, $name, int($total / $READ_PAGE) + 1,
		    "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total"
		  . ($render ? ', sum(octet_length(message::text)) AS bytes' : '')
		  . " FROM statesman.read_feed(:after, $READ_PAGE)");
}

# The same drain of $table, a plain table of read_feed's rows with a unique index on
# global_position (Bench::PgQ::store_messages): the same pages, read by that index, each message
# rendered to text the same way. What a reader that had nothing to do but hand out messages
# already built would cost.
sub stored_drain_script
{
	my ($b, $name, $total, $table) = @_;
	return read_script($b, $name, int($total / $READ_PAGE) + 1,
		"SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message::text)) AS bytes FROM (SELECT * FROM $table WHERE global_position > :after ORDER BY global_position LIMIT $READ_PAGE) f");
}

# Runs a script; (records, seconds "%.2f", rate "%.0f").
sub timed_script
{
	my ($b, $file) = @_;
	my $t0 = time;
	my $n  = $b->q(undef, file => $file);
	my $t1 = time;
	return (sprintf('%d', $n), sprintf('%.2f', $t1 - $t0), sprintf('%.0f', $n / ($t1 - $t0)));
}

# The read_feed drain of the backlog ($total records, sequenced), BENCH_DRAIN_RUNS times: one
# session, one page per statement, each page's messages rendered to text as a client receives
# them.
sub read_drains
{
	my ($b, $R, $total) = @_;
	my $s = $b->s;
	my $D = $R->{delivery};
	my $file = read_drain_script($b, 'read-drain.sql', $total);
	for my $r (1 .. $s->{drain_runs})
	{
		my ($n, $secs, $rate) = timed_script($b, $file);
		$b->fail("bench: read_feed drained $n of $total records") unless $n == $total;
		push @{ $D->{read_rates} }, $rate;
		$b->say("  [read_feed $r/$s->{drain_runs}] " . fmt_int($n) . " records in pages of $READ_PAGE in $secs s = " . fmt_int($rate) . ' records/s');
	}
	$D->{read_msg_bytes} = $b->q("SELECT round(avg(octet_length(message::text))) FROM statesman.read_feed(NULL, $READ_PAGE)");
	return;
}

# Where a read_feed page's time goes: the first READ_PART_PAGES pages of the backlog read by
# ever larger parts of what read_feed does, READ_PART_RUNS times each, in turn:
#   positions     the index scan alone: positions only, in order, a page at a time
#   rows          the same pages' history rows, rendered to text
#   message       read_feed's own query as plain SQL (the roots join, the message id, the
#                 message built by statesman._message as jsonb), the message rendered to text
#   message_text  the same with statesman._message_text (the JSON text written directly, as
#                 for the sinks outside the database) instead of jsonb rendered to text
#   read_feed     read_feed itself (in C: its checks, the head it reads up to, the result set it materializes)
sub read_breakdown
{
	my ($b, $R, $total) = @_;
	my $D = $R->{delivery};
	# A smaller backlog (BENCH_DRAIN_RECORDS) gets fewer pages: each step reads pages that exist.
	my $pages = $READ_PART_PAGES;
	$pages = int($total / $READ_PAGE) - 1 if int($total / $READ_PAGE) - 1 < $pages;
	$D->{read_part_pages} = $pages;
	my ($store, $epoch) = $b->row('SELECT COALESCE(store_name, current_database()), epoch FROM statesman.store');
	my $from = "FROM statesman._feed_page(:after, NULL, $READ_PAGE, NULL) h LEFT JOIN statesman.roots r ON r.root = h.root";
	my $args = "'$store', '$epoch'::uuid, h.address, h.root, h.path, h.partition, h.revision, h.global_position, h.occurred_at, h.operation, h.status, h.value_type, h.schema_version, h.source, COALESCE(h.fingerprint, r.fingerprint), COALESCE(h.content_type, r.content_type), h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error";
	my $msg = "SELECT h.global_position, '$store/' || h.address || '#' || h.revision AS message_id, h.address, h.revision";
	my %query = (
		positions => "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total FROM (SELECT h.global_position FROM statesman._feed_page(:after, NULL, $READ_PAGE, NULL) h) f",
		rows => "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(f::text)) AS bytes FROM (SELECT h.* FROM statesman._feed_page(:after, NULL, $READ_PAGE, NULL) h) f",
		message => "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message::text)) AS bytes FROM ($msg, statesman._message($args) AS message $from) f",
		message_text => "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message)) AS bytes FROM ($msg, statesman._message_text($args) AS message $from) f",
		read_feed => "SELECT COALESCE(max(global_position), :after) AS after, :total + count(*) AS total, sum(octet_length(message::text)) AS bytes FROM statesman.read_feed(:after, $READ_PAGE) f");
	my %file = map { $_ => read_script($b, "read-$_.sql", $pages, $query{$_}) } @READ_PART_STEPS;
	for my $r (1 .. $READ_PART_RUNS)
	{
		for my $step (@READ_PART_STEPS)
		{
			my ($n, $secs, $rate) = timed_script($b, $file{$step});
			$b->fail("bench: the read breakdown's $step step read $n records") unless $n == ($pages + 1) * $READ_PAGE;
			push @{ $D->{read_parts}{$step} }, $rate;
			$b->say(sprintf('  [read breakdown %d/%d] %-12s %s records in %s s = %s records/s',
					$r, $READ_PART_RUNS, $step, fmt_int($n), $secs, fmt_int($rate)));
		}
	}
	return;
}

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $D = $R->{delivery} = {};
	$b->say('bench: delivery: restarting the cluster with the worker on (statesman.enabled) and track_commit_timestamp');
	$b->q("ALTER SYSTEM SET statesman.enabled = on;\nALTER SYSTEM SET track_commit_timestamp = on");
	$b->restart;
	$b->q("TRUNCATE statesman.history;
CREATE TABLE IF NOT EXISTS bench.drain_runs (
      run int PRIMARY KEY, created_at timestamptz, hwm_kb bigint, rss_kb bigint, anon_kb bigint,
      shmem_kb bigint, pids int[]);
TRUNCATE bench.drain_runs");
	$b->wait_for("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'statesman database worker'
                           AND datname = current_database())", 30, 'the database worker');

	# ---- commit → sink latency, and the lease, with one live outbox ----
	# The sink table has the shape the `table` sink creates.
	$b->q(q{CREATE TABLE bench.live (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                                      message jsonb NOT NULL, published_at timestamptz NOT NULL DEFAULT now());
SELECT statesman.create_outbox('live', 'table', '{"table": "bench.live"}')});
	$b->wait_for("SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'live'", 30,
		'the dispatcher of outbox live');
	# An unmeasured warm-up: connections, plans, the dispatcher's first pages. (A failure shows
	# in the first measured window.)
	$b->pgbench(file => $R->{script}{statesman}, clients => $s->{clients}, rate => $s->{lat_rate},
		secs => 3, tolerate => 1);

	live_window($b, $R, "hints on/$_", $s->{lat_rate}, $s->{lat_secs}, 'on') for 1 .. $s->{lat_windows};
	windows_median($R->{lat}, 'hints on', $s->{lat_windows});

	$b->q("ALTER SYSTEM SET statesman.hints = off;\nSELECT pg_reload_conf()");
	sleep 1;    # the workers reload at their next wake-up: SIGHUP sets their latch
	$b->fail('bench: statesman.hints did not turn off') unless $b->q('SHOW statesman.hints') eq 'off';
	live_window($b, $R, "hints off/$_", $s->{lat_rate}, $s->{lat_secs}, 'on') for 1 .. $s->{lat_windows};
	windows_median($R->{lat}, 'hints off', $s->{lat_windows});
	$b->q("ALTER SYSTEM RESET statesman.hints;\nSELECT pg_reload_conf()");
	sleep 1;

	# Lease traffic while appending at BENCH_LEASE_RATE (synchronous_commit off for pgbench's
	# sessions, so that two clients can reach the rate on a slow disk): from just before
	# pgbench starts to just after it ends.
	live_window($b, $R, 'lease window', $s->{lease_rate}, $s->{lease_secs}, 'off');
	my ($trips0, $pid0, $t0) = @{ $D->{lease_before} };
	my ($trips1, $pid1, $t1) = @{ $D->{lease_after} };
	$D->{lease_trips}  = $trips1 - $trips0;
	$D->{lease_window} = sprintf('%.1f', $t1 - $t0);
	$D->{lease_pids}   = "$pid0 / $pid1";
	$b->say("  lease: $D->{lease_trips} round trips in $D->{lease_window} s of appending (leader pid $pid0 → $pid1)");

	$b->q("SELECT statesman.drop_outbox('live');\nDROP TABLE bench.live;\nTRUNCATE statesman.history");

	# ---- the drain of a backlog ----
	my $c          = $s->{clients};
	my $per_client = int(($s->{drain_records} + $c * $DRAIN_BATCH - 1) / ($c * $DRAIN_BATCH));
	my $total      = $per_client * $c * $DRAIN_BATCH;
	$D->{n} = $total;
	# Each client appends to its own 5,000 addresses (no waits on another client's address
	# locks), DRAIN_BATCH records per transaction, the same ~108-byte payload as the append runs.
	my $file = $b->file('backlog.sql', <<"SQL");
\\set a random(0, 4999)
SELECT count(*) FROM generate_series(1, $DRAIN_BATCH) i
  CROSS JOIN LATERAL statesman.append('bench', 'acct/' || (:client_id::int * 5000 + (:a::int + i * 37) % 5000),
    jsonb_build_object('account', (:a::int + i * 37) % 5000, 'amount', (random() * 1000000)::int, 'currency', 'EUR',
                       'client', :client_id::int, 'nonce', (random() * 1e12)::bigint, 'note', 'bench')) a;
SQL
	my $id0 = $b->q("SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence('statesman.history', 'id')), 0)");
	$b->say('bench: drain: appending a backlog of ' . fmt_int($total) . " records ($c clients, $DRAIN_BATCH per transaction, synchronous_commit off)");
	my $p = $b->pgbench_start($b->dir . '/backlog.log', file => $file, clients => $c,
		transactions => $per_client, sync => 'off');
	while ($b->running($p))
	{
		# Sleeps 5 s, waking every 100 ms to notice pgbench's end.
		for (1 .. 50) { last unless $b->running($p); usleep(100_000); }
		my $appended = $b->q("SELECT pg_sequence_last_value(pg_get_serial_sequence('statesman.history', 'id')) - $id0");
		$b->say('  backlog: ' . fmt_int($appended) . ' of ' . fmt_int($total) . ' appended') if $b->running($p);
	}
	$b->pgbench_wait($p)
	  or $b->fail("bench: appending the backlog failed:\n" . PostgreSQL::Test::Utils::slurp_file($p->{log}));
	# Every record sequenced (the database worker does it as they commit; this finishes the job).
	while ($b->q('SELECT COALESCE(unsequenced_records, 0) > 0 FROM statesman.feed_status') eq 't')
	{
		$b->q('SELECT statesman.sequence_feed(100000)');
		usleep(100_000);
	}
	my ($appended, $target) = $b->row('SELECT count(*), statesman.head_position() FROM statesman.history');
	$b->fail("bench: the backlog holds $appended records, not $total") unless $appended == $total;
	$b->say('  backlog: ' . fmt_int($total) . " records, all sequenced (head $target); VACUUM ANALYZE");
	$b->q("VACUUM ANALYZE statesman.history;\nCHECKPOINT");
	read_drains($b, $R, $total);
	read_breakdown($b, $R, $total);
	drain_run($b, $R, $_, $total, $target) for 1 .. $s->{drain_runs};
	sink_drains($b, $R, $total, $target);
	return;
}

# ---- the report ----

our $TABLE_TARGET = 150000;    # records/s of the drain to the `table` sink (docs/design.md §9)
our $SINK_TARGET  = 100000;    # records/s of the drains to `redis` and `postgres`

# The `redis` drain's verdict: at least $SINK_TARGET records/s and at least half of
# redis-benchmark's XADD in the same run (medians).
sub redis_verdict
{
	my ($D) = @_;
	my $r = med(@{ $D->{sink_rates}{redis} });
	my $x = med(@{ $D->{xadd_rates} });
	return ($r >= $SINK_TARGET && $r >= $x / 2) ? 'yes' : '**no**';
}

sub summary
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $D = $R->{delivery};
	my $P = $R->{pgq};
	my $L = $R->{lat};
	my $w = $s->{lat_windows};
	my $N = fmt_int($D->{n});
	my @o;
	if ($P && @{ $P->{read_rates} // [] })
	{
		my ($rat, $how, $rates) = Bench::PgQ::read_feed_vs_pgq($R);
		push @o, "| 2 | drain of $N records, pages of $READ_PAGE: `read_feed` vs PgQ `next_batch`/`get_batch_events`/`finish_batch` (rows rendered to text), records/s ($how) | "
		  . rate_cell(@$rates) . ' | ' . rate_cell(@{ $P->{read_rates} }) . ' | '
		  . sprintf('%.2f', $rat) . '× | ≥ 1.00× | ' . verdict($rat, 1) . ' |';
		if (my ($st, $st_per, $rf, $rf_per, $st_rates) = Bench::PgQ::stored_vs_pgq($R))
		{
			push @o, "| 2 | reference: the same drain of the same messages already built, in a plain table (read_feed's rows copied, read by a unique index on the position, rendered to text the same way), vs PgQ's drain, records/s (paired runs: $st_per; `read_feed` ÷ this drain: "
			  . sprintf('%.2f', $rf) . "×, pairs $rf_per) | "
			  . rate_cell(@$st_rates) . ' | ' . rate_cell(@{ $P->{read_rates} }) . ' | '
			  . sprintf('%.2f', $st) . '× | — | — |';
		}
		if (my ($un, $un_per, $un_rates, $rf_us, $pq_us) = Bench::PgQ::unrendered_vs_pgq($R))
		{
			push @o, "| 2 | reference: the same two drains with the rows counted only, not rendered to text (`read_feed` still builds every message), records/s (paired runs: $un_per; rendering adds $rf_us µs a record to `read_feed`'s drain and $pq_us µs an event to PgQ's) | "
			  . rate_cell(@$un_rates) . ' | ' . rate_cell(@{ $P->{count_rates} }) . ' | '
			  . sprintf('%.2f', $un) . '× | — | — |';
		}
		push @o,
		  "| 2 | drain of $N records to the `table` sink vs PgQ's batches inserted into a table of the same shape, records/s | "
		  . rate_cell(@{ $D->{drain_rates} }) . ' | ' . rate_cell(@{ $P->{table_rates} }) . ' | '
		  . ratio(med(@{ $D->{drain_rates} }), med(@{ $P->{table_rates} })) . '× | ≥ 150,000/s | '
		  . verdict(med(@{ $D->{drain_rates} }), $TABLE_TARGET) . ' |';
	}
	else
	{
		push @o, "| 2 | drain of $N records, pages of $READ_PAGE, `read_feed`, records/s | "
		  . rate_cell(@{ $D->{read_rates} }) . " | — | — | ≥ PgQ's drain | — |",
		  "| 2 | drain of $N records to the `table` sink, records/s | " . rate_cell(@{ $D->{drain_rates} })
		  . ' | — | — | ≥ 150,000/s | ' . verdict(med(@{ $D->{drain_rates} }), $TABLE_TARGET) . ' |';
	}
	my $rs = $D->{sink_rates}{redis};
	push @o, "| 2 | drain of $N records to the `redis` sink vs `redis-benchmark` XADD (pipelined 1,000 deep), records/s | "
	  . rate_cell(@$rs) . ' | ' . rate_cell(@{ $D->{xadd_rates} }) . ' | '
	  . ratio(med(@$rs), med(@{ $D->{xadd_rates} })) . '× | ≥ 100,000/s and ≥ 0.50× | '
	  . redis_verdict($D) . ' |',
	  "| 2 | drain of $N records to the `postgres` sink (a second cluster on this machine), records/s | "
	  . rate_cell(@{ $D->{sink_rates}{postgres} }) . ' | — | — | ≥ 100,000/s | '
	  . verdict(med(@{ $D->{sink_rates}{postgres} }), $SINK_TARGET) . ' |';
	my $lat_s = lat_cell($L, 'hints on', $w);
	my (undef, $sp50, undef, $sp99) = @{ $L->{'hints on'} };
	my $Q = $R->{pgq_lat};
	my $rate = fmt_int($s->{lat_rate});
	if ($Q && $Q->{'pgqd fastest'})
	{
		my (undef, $bp50, undef, $bp99) = @{ $Q->{'pgqd fastest'} };
		my $ok = ($sp50 <= 5 && $sp99 <= 15 && $sp50 < $bp50 && $sp99 < $bp99) ? 'yes' : '**no**';
		push @o, "| 3 | commit → sink latency at $rate/s, ms, p50 / p99: statesman (hints on, the default) vs PgQ with pgqd at its fastest | $lat_s | "
		  . lat_cell($Q, 'pgqd fastest', $w) . ' | ' . ratio($sp50, $bp50) . '× / ' . ratio($sp99, $bp99)
		  . "× | p50 ≤ 5, p99 ≤ 15, below PgQ | $ok |";
		(undef, $bp50, undef, $bp99) = @{ $Q->{'pgqd defaults'} };
		$ok = ($sp50 < $bp50 && $sp99 < $bp99) ? 'yes' : '**no**';
		push @o, "| 3 | the same, statesman (hints on) vs PgQ with pgqd at its defaults | $lat_s | "
		  . lat_cell($Q, 'pgqd defaults', $w) . ' | ' . ratio($sp50, $bp50) . '× / ' . ratio($sp99, $bp99)
		  . "× | below PgQ | $ok |";
		(undef, $sp50, undef, $sp99) = @{ $L->{'hints off'} };
		push @o, '| 3 | the same, statesman with hints off (each dispatcher polls once per `poll_interval`, 1 s) vs PgQ with pgqd at its defaults (a tick per second or per 500 events) | '
		  . lat_cell($L, 'hints off', $w) . ' | ' . lat_cell($Q, 'pgqd defaults', $w) . ' | '
		  . ratio($sp50, $bp50) . '× / ' . ratio($sp99, $bp99) . '× | informational: both poll | — |';
	}
	else
	{
		my $ok = ($sp50 <= 5 && $sp99 <= 15) ? 'yes' : '**no**';
		push @o, "| 3 | commit → sink latency at $rate/s, ms, p50 / p99, hints on | $lat_s | — | — | p50 ≤ 5, p99 ≤ 15 | $ok |",
		  '| 3 | the same, hints off | ' . lat_cell($L, 'hints off', $w) . ' | — | — | informational | — |';
	}
	my $anon = max(@{ $D->{drain_anon} });
	push @o, "| — | dispatcher's private memory (`RssAnon`) while draining $N records, MB, highest of the runs | "
	  . sprintf('%.1f', $anon / 1024) . ' | — | — | < 64 MB | ' . verdict($anon, 65535, 'le') . ' |';
	my $per5 = sprintf('%.1f', $D->{lease_trips} * 5 / $D->{lease_window});
	push @o, '| — | lease round trips per 5 s at ' . fmt_int($s->{lease_rate}) . " appends/s | $per5 | — | — | ≤ 10 | "
	  . verdict($per5, 10, 'le') . ' |';
	return @o;
}

sub _runs { return dot_list(map { fmt_int($_) } @_); }

sub report
{
	my ($b, $R) = @_;
	my $s  = $b->s;
	my $D  = $R->{delivery};
	my $L  = $R->{lat};
	my $w  = $s->{lat_windows};
	my $N  = fmt_int($D->{n});
	my $c  = $s->{clients};
	my $rv = $D->{redis_version} // redis_version();
	my @o;
	push @o, '', '### Delivery: the worker, the dispatcher and the `table` sink', '',
	  '- the same cluster, restarted for this part with `statesman.enabled = on` (the append part\'s breakdown turned it off) and `track_commit_timestamp = on`; `statesman.naptime = 1s`; outboxes with the default options (pages of 1,000 records, `poll_interval` 1 s, `lease_ttl` 30 s, renewal every 10 s)',
	  "- drain: a backlog of $N records appended by $c pgbench clients ($DRAIN_BATCH per transaction, the same ~108-byte payload) with no outbox, all sequenced (checked), `VACUUM ANALYZE`; then $s->{drain_runs} times: `CHECKPOINT`, `create_outbox('drain_N', 'table', '{\"table\": \"bench.drain_N\"}')` (a fresh outbox, cursor and sink table each run), wait until its cursor is at the head (polled every 100 ms), check the sink holds every record, drop outbox and table.",
	  '  Rate = records / (commit of the last page − start of the first page\'s transaction: the earliest `published_at`); the dispatcher\'s start (up to the 1 s supervision interval of the database worker) is shown apart.',
	  "- `redis` and `postgres` sinks: the same backlog, $s->{sink_runs} times each to a fresh outbox (default options, pages of 1,000) and a fresh stream / remote table: a redis-server $rv on loopback (defaults, snapshots off, no AOF: the durability redis gives by default), and a second PostgreSQL cluster on this machine (`fsync` and `synchronous_commit` on, `shared_buffers` 1 GB). Rate = records / (when the cursor reached the head − when it first moved), polled every 100 ms; afterwards `XLEN` / `count(*)` must equal the backlog.",
	  '- dispatcher memory: its `/proc/<pid>/status` read every 100 ms during each drain (pid = `outbox_status.leader_pid`; one dispatcher process per run, so its `VmHWM` is that drain\'s peak). `VmHWM` counts the pages of `shared_buffers` the process touched (`RssShmem`), which belong to the server, not to the dispatcher; its own memory is `RssAnon`.',
	  "- latency: $w windows of pgbench `-R $s->{lat_rate} -c $c -T $s->{lat_secs}` appending (one append per transaction, `synchronous_commit` on) into an outbox whose dispatcher was running and caught up, with `statesman.hints` on, then as many with it off (`ALTER SYSTEM` + `pg_reload_conf()`); each percentile is the median over the windows, each window's p50 and p99 are in the notes. Per record: the commit of the sink transaction that inserted it (`pg_xact_commit_timestamp` of the sink row) − the record's `occurred_at`.",
	  '  A record\'s commit time is not stored; `occurred_at` is `clock_timestamp()` at the append, inside its single-statement transaction, so it precedes the commit by the rest of that transaction, its WAL flush included (the average time an append transaction took, from pgbench, is in the table): the figures overstate the latency by up to that much.',
	  "- lease: `outbox_status.lease_round_trips` before and after a window of pgbench `-R $s->{lease_rate} -c $c -T $s->{lease_secs}` (`synchronous_commit` off for its sessions, so that $c clients reach the rate on this disk), scaled to 5 s.",
	  '', '| measurement | result | target | met | notes |', '|---|---|---|---|---|';
	my @m = stats(@{ $D->{read_rates} });
	my $P = $R->{pgq};
	my ($read_rat) = Bench::PgQ::read_feed_vs_pgq($R);
	my $read_met = defined $read_rat ? verdict($read_rat, 1) : '—';
	push @o, "| `read_feed(after, $READ_PAGE)` drain of the same $N-record backlog, records/s, median (min–max) of $s->{drain_runs} runs | "
	  . fmt_cell(@m) . " | ≥ PgQ's drain (its table below) | $read_met | runs: " . _runs(@{ $D->{read_rates} })
	  . "; one session, one page per statement, each message rendered to text (≈ $D->{read_msg_bytes} bytes) and counted; where the time goes: the table after this one |";
	@m = stats(@{ $D->{drain_rates} });
	my ($e2e) = stats(@{ $D->{drain_e2e} });
	push @o, "| drain of a $N-record backlog to the `table` sink, records/s, median (min–max) of $s->{drain_runs} runs | "
	  . fmt_cell(@m) . ' | ≥ 150,000 | ' . verdict($m[0], $TABLE_TARGET) . ' | runs: ' . _runs(@{ $D->{drain_rates} })
	  . '; counted from `create_outbox` (dispatcher start included, first page after ' . dot_list(@{ $D->{drain_start} })
	  . ' s): median ' . fmt_int($e2e) . ' records/s'
	  . (@{ $D->{insert_rates} // [] }
		? '; the same rows inserted by SQL into a fresh table of the same shape, pages of '
		  . "$READ_PAGE, nothing read or built (this machine's limit for the sink's inserts): "
		  . rate_cell(@{ $D->{insert_rates} }) . ' rows/s, the drain '
		  . ratio(med(@{ $D->{drain_rates} }), med(@{ $D->{insert_rates} })) . '× that'
		: '')
	  . ' |';
	my @x = stats(@{ $D->{xadd_rates} });
	for my $sink (qw(redis postgres))
	{
		my @runs = @{ $D->{sink_rates}{$sink} };
		@m = stats(@runs);
		($e2e) = stats(@{ $D->{sink_e2e}{$sink} });
		if ($sink eq 'redis')
		{
			push @o, "| drain of the same backlog to the `redis` sink, records/s, median (min–max) of $s->{sink_runs} runs | "
			  . fmt_cell(@m) . ' | ≥ 100,000 and ≥ 0.50× of XADD | ' . redis_verdict($D) . ' | runs: ' . _runs(@runs)
			  . '; counted from `create_outbox`: median ' . fmt_int($e2e) . ' records/s; '
			  . sprintf('%.2f', $m[0] / $x[0]) . '× of redis-benchmark\'s XADD below |',
			  "| redis-benchmark XADD, requests/s, median (min–max) of $s->{sink_runs} runs: the sink side's limit | "
			  . fmt_cell(@x) . " | informational | — | `redis-benchmark -n $N -c 1 -P 1000 XADD bench:xadd '*' messageId … message <$D->{xadd_bytes} bytes>` against the same redis-server |";
		}
		else
		{
			push @o, "| drain of the same backlog to the `postgres` sink (a second cluster on this machine), records/s, median (min–max) of $s->{sink_runs} runs | "
			  . fmt_cell(@m) . ' | ≥ 100,000 | ' . verdict($m[0], $SINK_TARGET) . ' | runs: ' . _runs(@runs) . '; counted from `create_outbox`: median '
			  . fmt_int($e2e) . ' records/s |';
		}
	}
	my $hwm  = max(@{ $D->{drain_hwm} });
	my $anon = max(@{ $D->{drain_anon} });
	push @o, '| dispatcher memory while draining, MB: private (`RssAnon`, highest sample) / peak RSS (`VmHWM`, shared buffers included), highest of the runs | '
	  . sprintf('%.1f', $anon / 1024) . ' / ' . sprintf('%.0f', $hwm / 1024) . ' | < 64 MB | '
	  . ($anon < 65536 ? 'yes' : '**no**') . ' (private) | per run `VmHWM`: '
	  . dot_list(map { sprintf('%.0f', $_ / 1024) } @{ $D->{drain_hwm} }) . ' MB; dispatcher processes per run: '
	  . dot_list(@{ $D->{drain_pids} }) . ' |';
	my $rate = fmt_int($s->{lat_rate});
	for my $label ('hints on', 'hints off', 'lease window')
	{
		my ($n, $p50, $p95, $p99, $max, $pp50, $pp99, $txlat, $tps) = @{ $L->{$label} };
		if ($label eq 'hints on')
		{
			my $met = ($p50 <= 5 && $p99 <= 15) ? 'yes' : '**no**';
			push @o, "| commit → sink latency at $rate appends/s, hints on, ms: p50 / p95 / p99 (max), median of $w windows | $p50 / $p95 / $p99 ($max) | p50 ≤ 5, p99 ≤ 15 | $met | windows (p50/p99): "
			  . windows_list($L, 'hints on', $w) . '; ' . fmt_int($n) . ' records at ' . fmt_int($tps)
			  . "/s; an append transaction took $txlat ms on average (pgbench); to the sink transaction's start (`published_at`): p50 $pp50, p99 $pp99 |";
		}
		elsif ($label eq 'hints off')
		{
			push @o, "| commit → sink latency at $rate appends/s, hints off, ms: p50 / p95 / p99 (max), median of $w windows | $p50 / $p95 / $p99 ($max) | informational | — | windows (p50/p99): "
			  . windows_list($L, 'hints off', $w) . '; ' . fmt_int($n) . ' records at ' . fmt_int($tps)
			  . "/s; an append transaction took $txlat ms on average; to `published_at`: p50 $pp50, p99 $pp99 |";
		}
		else
		{
			my $per5 = sprintf('%.1f', $D->{lease_trips} * 5 / $D->{lease_window});
			push @o, '| lease round trips per 5 s at ' . fmt_int($s->{lease_rate}) . " appends/s | $per5 | ≤ 10 | "
			  . ($per5 <= 10 ? 'yes' : '**no**') . " | $D->{lease_trips} in $D->{lease_window} s at " . fmt_int($tps)
			  . " appends/s achieved; leader pid before/after: $D->{lease_pids} |",
			  "| commit → sink latency in that window (hints on, `synchronous_commit` off), ms: p50 / p95 / p99 (max) | $p50 / $p95 / $p99 ($max) | informational | — | "
			  . fmt_int($n) . ' records |';
		}
	}
	push @o, read_breakdown_report($b, $R);
	return @o;
}

# The read breakdown as a table: each step's rate, its cost per record, and what it adds to the
# step before.
sub read_breakdown_report
{
	my ($b, $R) = @_;
	my $D = $R->{delivery};
	my %what = (
		positions    => 'the page read alone (`statesman._feed_page`: the ticks, then the rows they hold): positions only',
		rows         => '+ the history rows (heap fetch), rendered to text',
		message      => "read_feed's query as plain SQL: + the roots join, the message id, `_message` (jsonb) rendered to text (instead of the row)",
		message_text => 'the same with `_message_text` (JSON text written directly, what the sinks outside the database send) instead of jsonb rendered to text',
		read_feed    => '`read_feed` itself (in C): + its checks (the head it reads up to; `sequence_feed` only when a page is short), the result set it materializes');
	my @o = ('', '#### Where a `read_feed` page\'s time goes', '',
		'The first ' . fmt_int($D->{read_part_pages} + 1)
		  . " pages of $READ_PAGE records of the same backlog, read $READ_PART_RUNS times by each step in turn (one session, one page per statement, `after` carried from page to page, everything rendered to text and counted inside the server):",
		'', '| step | records/s, median (min–max) | µs per record | added by this step, µs per record |',
		'|---|---|---|---|');
	my ($prev, $msg_us);
	for my $step (@READ_PART_STEPS)
	{
		my @m  = stats(@{ $D->{read_parts}{$step} });
		my $us = sprintf('%.2f', 1e6 / $m[0]);
		my $cell = "| $what{$step} | " . fmt_cell(@m) . " | $us | ";
		if (!defined $prev) { push @o, "$cell$us |"; }
		elsif ($step eq 'read_feed') { push @o, $cell . sprintf('%+.2f', $us - $msg_us) . ' (over the `message` step) |'; }
		else { push @o, $cell . sprintf('%+.2f', $us - $prev) . ' (over the step before) |'; }
		$msg_us = $us if $step eq 'message';
		$prev = $us unless $step eq 'message_text';
	}
	return @o;
}

1;

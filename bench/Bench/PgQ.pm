# The PgQ baselines: PgQ (Debian's postgresql-15-pgq3, with the pgqd ticker) is the established
# lossless queue inside PostgreSQL, measured on the bench's own cluster with the same payload,
# the same clients and the same way of measuring as statesman's figures.
#
#   setup($b, $R)          CREATE EXTENSION pgq, the queue `bench` with one consumer, and the
#                          append workload pgq.sql; $R->{pgq_truncate}, the event tables the
#                          append part empties before each run
#   pgqd_start, pgqd_stop  pgqd as a daemon (the append part's worker-on rounds run it at its
#                          defaults; Bench::Append reports the append against PgQ)
#   measure($b, $R)        the backlog drain and the commit → consumer latency
#   report($b, $R)         their section
#   summary($b, $R)        its rows of the summary table when the delivery part did not run
#
# How the drain gets batches of 1,000 events. A PgQ batch is the events committed between two
# ticks, whatever the consumer asks for. So the backlog is appended by one session, 1,000
# events per transaction, each followed by pgq.ticker() on the queue, with no pgqd running;
# the queue's ticker_max_count is 1, so that each call ticks (with 1,000 the first call would
# not: the ticker counts new events by the event sequence's last value, which does not move
# for a queue's first event). Every batch then holds exactly 1,000 events (checked). Ticks
# taken while the consumer drains would each take in everything committed before them, and
# pgqd ticks on its own clock, so its batches would follow the append rate.
#
# The latency needs track_commit_timestamp = on: when the cluster runs without it (the delivery
# part turns it on), measure turns it on and restarts.
package Bench::PgQ;

use strict;
use warnings;
use utf8;

use Bench::Append;
use Bench::Delivery qw(windows_median windows_list lat_cell);
use Bench::Format qw(stats fmt_int fmt_cell rate_cell ratio verdict med int_list);
use IPC::Run;
use Time::HiRes qw(time usleep);

our $BATCH           = 1000;    # events per tick in the drain's backlog
our $CATCH_UP        = 300;     # seconds the consumer may trail the writers before the bench gives up
our $TAIL_SECS       = 5;       # unmeasured appends at the end of a latency window (see live_window)
our @pgqd;                      # pidfiles of the pgqd this program started
our $STORED          = 'bench.read_stored';    # the feed's messages as a plain table (store_messages)

# ---- the append workload ----

sub setup
{
	my ($b, $R) = @_;
	my $avail = $b->q("SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pgq')");
	my $pgqd  = grep { -x "$_/pgqd" } split /:/, $ENV{PATH};
	$b->fail('bench: PgQ is not installed: the PgQ baselines need the Debian packages postgresql-15-pgq3 and pgqd')
	  unless $avail eq 't' && $pgqd;
	$b->q(<<'SQL');
CREATE EXTENSION IF NOT EXISTS pgq;
SELECT pgq.create_queue('bench');
SELECT pgq.register_consumer('bench', 'bench_consumer');
SQL
	# The same variables and the same payload expression as the bare INSERT and the append;
	# PgQ takes its event data as text. ev_type carries the address.
	$R->{script}{pgq} = $b->file('pgq.sql', Bench::Append::vars($b->s)
		  . "\nSELECT pgq.insert_event('bench', 'acct/' || :id, ($Bench::Append::PAYLOAD)::text);\n");
	# The queue's parent event table; TRUNCATE on it empties its rotation tables too.
	$R->{pgq_truncate} = $b->q("SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = 'bench'");
	return;
}

# ---- pgqd ----

# Runs pgqd as a daemon against the bench's database (its config, log and pidfile in the
# scratch directory); without $period, pgqd's default ticker_period (1 s).
sub pgqd_start
{
	my ($b, $label, $period) = @_;
	my $dir = $b->dir;
	my $log = "$dir/pgqd-$label.log";
	my $ini = $b->file("pgqd-$label.ini",
		"[pgqd]\nlogfile = $log\npidfile = $dir/pgqd.pid\n"
		  . "base_connstr = host=$ENV{PGHOST} port=$ENV{PGPORT} user=postgres\n"
		  . "initial_database = $ENV{PGDATABASE}\ndatabase_list = $ENV{PGDATABASE}\n"
		  . (defined $period ? "ticker_period = $period\n" : ''));
	push @pgqd, "$dir/pgqd.pid";
	my $slurp = sub { -e $log ? PostgreSQL::Test::Utils::slurp_file($log) : '' };
	IPC::Run::run([ 'pgqd', '-q', '-d', $ini ], '<', \'', '>', \my $out, '2>&1')
	  or $b->fail("bench: pgqd did not start:\n" . $slurp->());
	for (1 .. 100)
	{
		return if -s "$dir/pgqd.pid" && $slurp->() =~ /pgq version ok/;
		usleep(100_000);
	}
	$b->fail("bench: pgqd did not connect to the cluster within 10 s:\n" . $slurp->());
}

# Stops the pgqd this program started (by the pid in its pidfile), waiting for it to exit.
sub pgqd_stop
{
	while (my $pidfile = pop @pgqd)
	{
		next unless -s $pidfile;
		open my $fh, '<', $pidfile or next;
		my $pid = <$fh>;
		close $fh;
		chomp $pid;
		next unless $pid =~ /^[0-9]+$/;
		kill 'INT', $pid;
		my $gone;
		for (1 .. 100)
		{
			$gone = !kill(0, $pid) and last;
			usleep(100_000);
		}
		unless ($gone)
		{
			kill 'KILL', $pid;
			unlink $pidfile;
		}
	}
	return;
}

END { pgqd_stop(); }

# ---- the drain ----

# A psql script that takes $batches batches, one transaction each (next_batch,
# get_batch_events, finish_batch), and ends with a line "total|min_batch|max_batch|done"
# (done: next_batch had nothing more). Mode `read` renders every event row to text and counts
# it, as a client receiving it would (the counterpart of the read_feed drain); mode `count`
# only counts the rows, which shows what rendering them costs; mode `table` inserts each event
# into $target, a table of the `table` sink's shape, as a JSON object (the counterpart of the
# `table` sink).
sub consume_script
{
	my ($b, $name, $queue, $consumer, $batches, $mode, $target) = @_;
	my $one = "BEGIN;\nSELECT pgq.next_batch('$queue', '$consumer') AS batch \\gset\n";
	if ($mode eq 'read' || $mode eq 'count')
	{
		$one .= "SELECT :total + count(*) AS total, least(:minb, count(*)) AS minb, greatest(:maxb, count(*)) AS maxb"
		  . ($mode eq 'read' ? ",\n       sum(octet_length(e::text)) AS bytes" : '')
		  . " FROM pgq.get_batch_events(:batch) e \\gset\n";
	}
	else
	{
		$one .= "WITH i AS (INSERT INTO $target (message_id, global_position, message)\n"
		  . "  SELECT e.ev_id::text, e.ev_id, jsonb_build_object('id', e.ev_id, 'type', e.ev_type, 'time', e.ev_time,\n"
		  . "                                                     'txid', e.ev_txid, 'data', e.ev_data::jsonb)\n"
		  . "  FROM pgq.get_batch_events(:batch) e RETURNING 1)\n"
		  . "SELECT :total + count(*) AS total, least(:minb, count(*)) AS minb, greatest(:maxb, count(*)) AS maxb FROM i \\gset\n";
	}
	$one .= "SELECT pgq.finish_batch(:batch) AS finished \\gset\nCOMMIT;\n";
	return $b->file($name,
		"\\set total 0\n\\set minb 1000000000\n\\set maxb 0\n" . ($one x $batches)
		  . "SELECT :total, :minb, :maxb, pgq.next_batch('$queue', '$consumer') IS NULL;\n");
}

# One drain of the backlog by consumer MODE_R.
sub drain_run
{
	my ($b, $R, $r, $mode) = @_;
	my $s        = $b->s;
	my $P        = $R->{pgq};
	my $consumer = "${mode}_$r";
	my $target   = '';
	if ($mode eq 'table')
	{
		$target = "bench.pgq_drain_$r";
		$b->q("CREATE TABLE $target (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                                     message jsonb NOT NULL, published_at timestamptz NOT NULL DEFAULT now())");
	}
	my $file = consume_script($b, "pgq-$consumer.sql", 'bench_drain', $consumer, $P->{batches}, $mode, $target);
	$b->q('CHECKPOINT');
	my $t0 = time;
	my ($total, $minb, $maxb, $finished) =
	  $b->row(undef, file => $file, options => '-c synchronous_commit=off');
	my $t1 = time;
	if ($total ne $P->{n} || $minb ne $BATCH || $maxb ne $BATCH || $finished ne 't')
	{
		$b->fail("bench: PgQ drain $consumer took $total events (batches of $minb–$maxb; nothing left: $finished), not $P->{n} in batches of $BATCH");
	}
	if ($target)
	{
		$total = $b->q("SELECT count(*) FROM $target");
		$b->fail("bench: PgQ drain $consumer left $total rows in $target, not $P->{n}") unless $total eq $P->{n};
	}
	my $rate = sprintf('%.0f', $P->{n} / ($t1 - $t0));
	my $secs = sprintf('%.2f', $t1 - $t0);
	push @{ $P->{"${mode}_rates"} }, $rate;
	$b->say("  [PgQ drain $r/$s->{drain_runs}, $mode] " . fmt_int($P->{n}) . " events in $secs s = " . fmt_int($rate) . ' events/s');
	$b->q("DROP TABLE $target") if $target;
	return;
}

# When the delivery part's backlog is still the feed's whole content: the read_feed drain
# script of Bench::Delivery for it, so that each PgQ drain is paired with a read_feed drain of
# the same size run right before it, in the same cluster (the delivery part's own drains ran
# before the broker parts, minutes earlier, and on this kind of machine the two rates move with
# the hour). Otherwise undef: PgQ's drains stand alone.
sub paired_script
{
	my ($b, $R) = @_;
	my $n = $R->{delivery} ? $R->{delivery}{n} : undef;
	return undef unless $n;
	my $held = $b->q('SELECT count(*) FROM statesman.history');
	if ($held != $n)
	{
		$b->say("  PgQ drain: the feed holds $held records, not the delivery part's " . fmt_int($n) . ': no read_feed drain paired with it');
		return undef;
	}
	store_messages($b, $n);
	return {
		read_feed       => Bench::Delivery::read_drain_script($b, 'read-drain-paired.sql', $n),
		stored          => Bench::Delivery::stored_drain_script($b, 'stored-drain-paired.sql', $n, $STORED),
		read_feed_count => Bench::Delivery::read_drain_script($b, 'read-count-paired.sql', $n, 0)
	};
}

# The feed's messages, as read_feed returns them, copied into a plain table with a unique index
# on global_position: the reference drain paired with PgQ's (Bench::Delivery::stored_drain_script).
sub store_messages
{
	my ($b, $n) = @_;
	$b->q(<<"SQL");
CREATE TABLE $STORED AS SELECT * FROM statesman.read_feed(0, 0) WITH NO DATA;
DO \$\$
DECLARE
    a bigint := 0;
    k int;
BEGIN
    LOOP
        WITH page AS (INSERT INTO $STORED SELECT * FROM statesman.read_feed(a, 50000) RETURNING global_position)
        SELECT count(*), COALESCE(max(global_position), a) INTO k, a FROM page;
        EXIT WHEN k = 0;
    END LOOP;
END
\$\$;
CREATE UNIQUE INDEX ON $STORED (global_position);
VACUUM ANALYZE $STORED;
SQL
	my $got = $b->q("SELECT count(*) FROM $STORED");
	$b->fail("bench: $STORED holds $got of the feed's $n messages") unless $got == $n;
	$b->say('  the feed\'s ' . fmt_int($n) . " messages copied into $STORED (read_feed's rows, a unique index on the position)");
	return;
}

# The read_feed drain, the stored messages' drain and the read_feed drain without rendering,
# paired with PgQ's drains (read, count) of run $r.
sub paired_read_feed
{
	my ($b, $R, $files, $r) = @_;
	my $s = $b->s;
	my $n = $R->{delivery}{n};
	for my $kind (qw(read_feed stored read_feed_count))
	{
		$b->q('CHECKPOINT');
		my ($got, $secs, $rate) = Bench::Delivery::timed_script($b, $files->{$kind});
		$b->fail("bench: the paired $kind drain read $got of $n records") unless $got == $n;
		push @{ $R->{pgq}{"paired_$kind"} }, $rate;
		$b->say("  [$kind paired with PgQ drain $r/$s->{drain_runs}] " . fmt_int($n) . " records in $secs s = " . fmt_int($rate) . ' records/s');
	}
	return;
}

# read_feed's drain against PgQ's: (ratio, how it was taken, statesman's rates) from the paired
# drains when they ran (the median of each pair's ratio), else from the delivery part's drains
# and PgQ's (the ratio of their medians); empty when either side did not run.
sub read_feed_vs_pgq
{
	my ($R) = @_;
	my $P = $R->{pgq};
	return () unless $P && @{ $P->{read_rates} // [] };
	if (@{ $P->{paired_read_feed} // [] })
	{
		my ($r, $per) = Bench::Format::paired_ratio($P->{paired_read_feed}, $P->{read_rates});
		return ($r, "paired runs: $per", $P->{paired_read_feed});
	}
	my $D = $R->{delivery};
	return () unless $D && @{ $D->{read_rates} // [] };
	return (med(@{ $D->{read_rates} }) / med(@{ $P->{read_rates} }), 'ratio of medians, separate parts', $D->{read_rates});
}

# The stored messages' drain against PgQ's and read_feed's against it, each the median of the
# paired runs' ratios: (stored ÷ PgQ, its pairs, read_feed ÷ stored, its pairs, stored's rates);
# empty when they did not run.
sub stored_vs_pgq
{
	my ($R) = @_;
	my $P = $R->{pgq};
	return () unless $P && @{ $P->{paired_stored} // [] };
	my ($s, $s_per) = Bench::Format::paired_ratio($P->{paired_stored},    $P->{read_rates});
	my ($f, $f_per) = Bench::Format::paired_ratio($P->{paired_read_feed}, $P->{paired_stored});
	return ($s, $s_per, $f, $f_per, $P->{paired_stored});
}

# The drains without rendering (rows counted only), paired: (read_feed ÷ PgQ, its pairs,
# read_feed's rates, what rendering the rows to text adds per record in µs for read_feed and for
# PgQ, each the median over the runs of 1e6/rendered rate − 1e6/unrendered rate); empty when
# they did not run.
sub unrendered_vs_pgq
{
	my ($R) = @_;
	my $P = $R->{pgq};
	return () unless $P && @{ $P->{paired_read_feed_count} // [] } && @{ $P->{count_rates} // [] };
	my ($r, $per) = Bench::Format::paired_ratio($P->{paired_read_feed_count}, $P->{count_rates});
	my $cost = sub {
		my ($with, $without) = @_;
		return sprintf('%.2f', med(map { 1e6 / $with->[$_] - 1e6 / $without->[$_] } 0 .. $#$without));
	};
	return ($r, $per, $P->{paired_read_feed_count},
		$cost->($P->{paired_read_feed}, $P->{paired_read_feed_count}),
		$cost->($P->{read_rates}, $P->{count_rates}));
}

sub ticks
{
	my ($b, $queue) = @_;
	return $b->q("SELECT count(*) FROM pgq.tick t JOIN pgq.queue q ON q.queue_id = t.tick_queue WHERE q.queue_name = '$queue'");
}

sub drain_measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $P = $R->{pgq} //= {};
	$P->{batches} = int(($s->{drain_records} + $BATCH - 1) / $BATCH);
	$P->{n}       = $P->{batches} * $BATCH;
	# A queue of its own; every consumer registered before the backlog, so each one drains all
	# of it (one fresh consumer per run, as statesman's drains use a fresh outbox per run).
	$b->q(join('',
			"SELECT pgq.create_queue('bench_drain');\n",
			"SELECT pgq.set_queue_config('bench_drain', 'ticker_max_count', '1');\n",
			map { "SELECT pgq.register_consumer('bench_drain', '${_}');\n" }
			  map { ("read_$_", "count_$_", "table_$_") } 1 .. $s->{drain_runs}));
	# One session (a second would let a tick take in part of another's transaction): 1,000
	# events per transaction, the same ~108-byte payload as the other backlogs, then a tick.
	my $file = $b->file('pgq-backlog.sql', <<"SQL");
\\set a random(0, 9999)
SELECT count(pgq.insert_event('bench_drain', 'acct/' || ((:a::int + i * 37) % 10000),
  jsonb_build_object('account', (:a::int + i * 37) % 10000, 'amount', (random() * 1000000)::int, 'currency', 'EUR',
                     'client', 1, 'nonce', (random() * 1e12)::bigint, 'note', 'bench')::text))
  FROM generate_series(1, $BATCH) i;
SELECT pgq.ticker('bench_drain');
SQL
	$b->say('bench: PgQ drain: appending a backlog of ' . fmt_int($P->{n}) . " events (one session, $BATCH per transaction, each followed by pgq.ticker(), synchronous_commit off)");
	my $p = $b->pgbench_start($b->dir . '/pgq-backlog.log',
		file => $file, clients => 1, transactions => $P->{batches}, sync => 'off');
	my $i = 0;
	while ($b->running($p))
	{
		usleep(500_000);
		$i++;
		if ($i % 10 == 0 && $b->running($p))
		{
			my $done = ticks($b, 'bench_drain') - 1;
			$b->say('  PgQ backlog: ' . fmt_int($done * $BATCH) . ' of ' . fmt_int($P->{n}) . ' events');
		}
	}
	my $res = $b->pgbench_wait($p)
	  or $b->fail("bench: appending the PgQ backlog failed:\n" . PostgreSQL::Test::Utils::slurp_file($p->{log}));
	$P->{load_rate} = sprintf('%.0f', $res->{tps} * $BATCH);
	# One tick from create_queue, then one per transaction of the backlog.
	my $ticks = ticks($b, 'bench_drain');
	$b->fail('bench: the PgQ backlog has ' . ($ticks - 1) . " ticks after its first, not $P->{batches}")
	  unless $ticks == $P->{batches} + 1;
	my $table = $b->q("SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = 'bench_drain'");
	$P->{event_bytes} = $b->q("SELECT round(avg(octet_length(e::text)))
    FROM (SELECT * FROM $table LIMIT 1000) e");
	$b->say('  PgQ backlog: ' . fmt_int($P->{n}) . " events in $P->{batches} ticks of $BATCH (" . fmt_int($P->{load_rate}) . ' events/s); VACUUM ANALYZE');
	$b->q('VACUUM ANALYZE');
	my $pair = paired_script($b, $R);
	for my $r (1 .. $s->{drain_runs})
	{
		paired_read_feed($b, $R, $pair, $r) if $pair;
		drain_run($b, $R, $r, 'read');
		drain_run($b, $R, $r, 'count');
		drain_run($b, $R, $r, 'table');
	}
	$b->q("SELECT pgq.drop_queue('bench_drain', true)");
	$b->q("DROP TABLE IF EXISTS $STORED");
	return;
}

# ---- commit → consumer latency ----

# The consumer: one session, inside the server (no client round trips, like statesman's
# dispatcher), polling next_batch; each batch inserted into bench.pgq_live (the `table` sink's
# shape) and finished in one transaction (synchronous_commit off, as the dispatcher's pages).
# It sleeps BENCH_PGQ_POLL_MS when there is no batch, and stops when bench.pgq_ctl says so.
sub consumer_script
{
	my ($b) = @_;
	my $poll = $b->s->{pgq_poll_ms};
	return $b->file('pgq-consumer.sql', <<"SQL");
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
        PERFORM pg_sleep($poll / 1000.0);
        COMMIT;    -- the next poll starts a transaction of its own
    END LOOP;
END
\$\$;
SQL
}

# Until every event appended so far is in bench.pgq_live.
sub wait_caught_up
{
	my ($b, $R) = @_;
	$b->wait_for("SELECT (SELECT count(*) FROM $R->{pgq}{live_table}) = (SELECT count(*) FROM bench.pgq_live)",
		$CATCH_UP, 'the PgQ consumer to take every event');
	return;
}

# pgbench at BENCH_LATENCY_RATE (synchronous_commit on) while pgqd ticks and the consumer
# runs; then the latency of the events of the window's first BENCH_LATENCY_SECONDS. The
# appends go on for $TAIL_SECS more, unmeasured: at its defaults PgQ ticks for fewer than
# ticker_max_count (500) new events only once they are ticker_max_lag (3 s) old, so the last
# events before the appends stop wait up to 3 s, which a constant stream never sees. The
# latency is that of the stream; the tail's worst wait is reported apart.
sub live_window
{
	my ($b, $R, $label) = @_;
	my $s = $b->s;
	wait_caught_up($b, $R);
	my ($id0, $w0) = $b->row('SELECT COALESCE(max(global_position), 0), clock_timestamp() FROM bench.pgq_live');
	my $ticks0 = ticks($b, 'bench_live');
	my $r = $b->pgbench(
		file    => $R->{pgq}{live_script},
		clients => $s->{clients},
		rate    => $s->{lat_rate},
		secs    => $s->{lat_secs} + $TAIL_SECS,
		sync    => 'on',
		what    => "PgQ, $label");
	wait_caught_up($b, $R);
	my $ticks1 = ticks($b, 'bench_live');
	my $id1 = $b->q('SELECT max(global_position) FROM bench.pgq_live');
	# Per event: from ev_time (now() of the appending transaction: insert_event is its only
	# statement) to the commit of the consumer transaction that inserted it.
	my ($n, $p50, $p95, $p99, $max, $tail, $first, $last) = $b->row("
    WITH x AS (
      SELECT (d.message->>'time')::timestamptz AS t,
             (d.message->>'time')::timestamptz < '$w0'::timestamptz + interval '$s->{lat_secs} seconds' AS measured,
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
    FROM x");
	$b->fail("bench: no PgQ events consumed in the $label window") if $n == 0 || $p50 eq '';
	$tail = '?' if $tail eq '';
	my $txlat = $r->{txlat} // '?';
	my $tps   = $r->{tps} // 0;
	my $ticks = $ticks1 - $ticks0;
	$R->{pgq_lat}{$label} = [ $n, $p50, $p95, $p99, $max, $txlat, $tps, $ticks, $tail ];
	$b->say("  PgQ commit→consumer latency, $label: " . fmt_int($n) . " events in $s->{lat_secs} s at " . fmt_int($tps) . "/s, $ticks ticks; p50 $p50 ms, p95 $p95 ms, p99 $p99 ms, max $max ms (events from $first s to $last s after the start; the unmeasured tail: max $tail ms; pgbench: a transaction took $txlat ms on average)");
	return;
}

# pgqd and the queue's ticker settings, a consumer, a warm-up, the windows; then consumer and
# pgqd stopped.
sub latency_setting
{
	my ($b, $R, $label, $period, $max_count) = @_;
	my $s = $b->s;
	$b->q("SELECT pgq.set_queue_config('bench_live', 'ticker_max_count', '$max_count');\nUPDATE bench.pgq_ctl SET stop = false");
	pgqd_start($b, $label, $period);
	my $clog = $b->dir . "/pgq-consumer-$label.log";
	my $consumer = $b->spawn($clog, '-c synchronous_commit=off',
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $R->{pgq}{consumer_script});
	# Unmeasured: connections, plans, the first ticks.
	$b->pgbench(file => $R->{pgq}{live_script}, clients => $s->{clients}, rate => $s->{lat_rate},
		secs => 3, tolerate => 1);
	$b->fail("bench: the PgQ consumer stopped:\n" . PostgreSQL::Test::Utils::slurp_file($clog))
	  unless $b->running($consumer);
	live_window($b, $R, "$label/$_") for 1 .. $s->{lat_windows};
	windows_median($R->{pgq_lat}, $label, $s->{lat_windows});
	$b->q('UPDATE bench.pgq_ctl SET stop = true');
	$b->reap($consumer)
	  or $b->fail("bench: the PgQ consumer failed:\n" . PostgreSQL::Test::Utils::slurp_file($clog));
	pgqd_stop();
	return;
}

sub latency_measure
{
	my ($b, $R) = @_;
	if ($b->q('SHOW track_commit_timestamp') ne 'on')
	{
		$b->say('bench: PgQ latency: restarting the cluster with track_commit_timestamp = on');
		$b->q('ALTER SYSTEM SET track_commit_timestamp = on');
		$b->restart;
	}
	$b->q(<<'SQL');
SELECT pgq.create_queue('bench_live');
SELECT pgq.register_consumer('bench_live', 'live');
CREATE TABLE bench.pgq_live (message_id text PRIMARY KEY, global_position bigint NOT NULL,
                             message jsonb NOT NULL, published_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE bench.pgq_ctl (stop boolean NOT NULL);
INSERT INTO bench.pgq_ctl VALUES (false);
SQL
	my $P = $R->{pgq} //= {};
	$P->{live_table} = $b->q("SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = 'bench_live'");
	$P->{live_script} = $b->file('pgq-live.sql', Bench::Append::vars($b->s)
		  . "\nSELECT pgq.insert_event('bench_live', 'acct/' || :id, ($Bench::Append::PAYLOAD)::text);\n");
	$P->{consumer_script} = consumer_script($b);
	# pgqd's defaults: ticker_period 1 s; the queue's: ticker_max_count 500, ticker_max_lag 3 s.
	latency_setting($b, $R, 'pgqd defaults', undef, 500);
	# Its fastest: pgqd runs the ticker every 10 ms, and the queue ticks for a single event.
	latency_setting($b, $R, 'pgqd fastest', '0.01', 1);
	$b->q("SELECT pgq.drop_queue('bench_live', true);\nDROP TABLE bench.pgq_live, bench.pgq_ctl");
	return;
}

sub measure
{
	my ($b, $R) = @_;
	drain_measure($b, $R);
	latency_measure($b, $R);
	return;
}

# ---- the report ----

# The PgQ rows of the summary when the delivery part did not run (BENCH_ONLY=pgq): its
# figures, statesman's counterparts not measured.
sub summary
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $P = $R->{pgq} //= {};
	my $L = $R->{pgq_lat};
	return (
		'| 2 | PgQ\'s drain of ' . fmt_int($P->{n}) . " events in batches of $BATCH (rows rendered to text), events/s | — | "
		  . rate_cell(@{ $P->{read_rates} }) . ' | — | — | — |',
		'| 2 | PgQ\'s drain of ' . fmt_int($P->{n}) . " events in batches of $BATCH, rows counted only (not rendered), events/s | — | "
		  . rate_cell(@{ $P->{count_rates} }) . ' | — | — | — |',
		'| 2 | PgQ\'s drain of ' . fmt_int($P->{n}) . ' events into a table of the `table` sink\'s shape, events/s | — | '
		  . rate_cell(@{ $P->{table_rates} }) . ' | — | — | — |',
		'| 3 | PgQ\'s commit → consumer latency at ' . fmt_int($s->{lat_rate}) . '/s, ms, p50 / p99, pgqd at its fastest | — | '
		  . lat_cell($L, 'pgqd fastest', $s->{lat_windows}) . ' | — | — | — |',
		'| 3 | the same, pgqd at its defaults | — | ' . lat_cell($L, 'pgqd defaults', $s->{lat_windows}) . ' | — | — | — |');
}

sub report
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $P = $R->{pgq} //= {};
	my @o;
	my $w = $s->{lat_windows};
	push @o, '', '### PgQ: drain and commit → consumer latency', '',
	  '- PgQ ' . $b->q('SELECT pgq.version()') . ' on the same cluster, after the parts above.',
	  '- drain: a backlog of ' . fmt_int($P->{n})
	  . " events (the same ~108-byte payload as text, ≈ $P->{event_bytes} bytes per event row as text) appended by one session, $BATCH events per transaction, each followed by `pgq.ticker()` on the queue (no pgqd; `ticker_max_count` 1, so that each call ticks), so that every batch holds exactly $BATCH events (checked: "
	  . fmt_int($P->{batches}) . ' ticks, and each batch\'s size); ' . fmt_int($P->{load_rate})
	  . " events/s. `VACUUM ANALYZE`, then $s->{drain_runs} times three drains, each by a fresh consumer registered before the backlog: per batch one transaction of `next_batch`, `get_batch_events`, `finish_batch` from a psql script (`synchronous_commit` off), with",
	  '  *read*: each event row rendered to text and counted (as a client receiving it; the counterpart of the `read_feed` drain); *count*: the rows counted only, not rendered (what the drain costs without the rows\' text; the counterpart of the `read_feed` drain counted only); and *table*: each event inserted as a JSON object into a fresh table of the `table` sink\'s shape (the counterpart of the `table` sink). Rate = events / wall-clock time of the psql script.',
	  "- latency: $w windows per setting (each percentile the median over them, each window's p50 and p99 in the notes) of pgbench `-R $s->{lat_rate} -c $s->{clients} -T "
	  . ($s->{lat_secs} + $TAIL_SECS)
	  . "` of `pgq.insert_event` (one per transaction, `synchronous_commit` on), a consumer inside the server (a `DO` loop: `next_batch`; the batch inserted into a table of the `table` sink's shape and finished in one transaction, `synchronous_commit` off; $s->{pgq_poll_ms} ms sleep when there is no batch), after 3 s of unmeasured events; with pgqd at its defaults (`ticker_period` 1 s; the queue's `ticker_max_count` 500, `ticker_max_lag` 3 s) and at its fastest (`ticker_period` 0.01 s, `ticker_max_count` 1).",
	  "  Per event of the first $s->{lat_secs} s: the commit of the consumer transaction that inserted it (`pg_xact_commit_timestamp`) − the event's `ev_time` (`now()` of its appending transaction, whose only statement is the insert), as statesman's latency is measured from `occurred_at`.",
	  "  The last $TAIL_SECS s of appends are not measured: at its defaults PgQ ticks for fewer than 500 new events only when they are 3 s old (`ticker_max_lag`), so the events just before the appends stop wait up to 3 s, which a constant stream never sees (their worst wait is in the notes). statesman's windows have no such tail: their latency counts every record.",
	  '',
	  '| measurement | PgQ: result | statesman | target | met | notes |',
	  '|---|---|---|---|---|---|';
	# statesman's counterparts, when the parts that measure them ran: the read_feed drains and
	# the drains to the `table` sink of the delivery part's backlog.
	my $D = $R->{delivery};
	my ($st, $met) = ('—', '—');
	my @m = stats(@{ $P->{read_rates} });
	if (my ($rat, $how, $rates) = read_feed_vs_pgq($R))
	{
		$st  = fmt_cell(stats(@$rates)) . ' (`read_feed`, ' . fmt_int($D->{n} // 0) . ' records): ' . sprintf('%.2f', $rat) . "× PgQ ($how)";
		$met = verdict($rat, 1);
	}
	push @o, '| drain of ' . fmt_int($P->{n}) . " events in batches of $BATCH, *read*, events/s, median (min–max) of $s->{drain_runs} | "
	  . fmt_cell(@m) . " | $st | `read_feed` ≥ PgQ | $met | runs: " . int_list(@{ $P->{read_rates} }) . ' |';
	if (@{ $P->{count_rates} // [] })
	{
		my ($cst, $note) = ('—', '');
		if (my ($rat, $per, $rates, $rf_us, $pq_us) = unrendered_vs_pgq($R))
		{
			$cst = rate_cell(@$rates) . ' (`read_feed`, counted only): ' . sprintf('%.2f', $rat) . "× PgQ (paired runs: $per)";
			$note = "; rendering to text adds $rf_us µs a record to `read_feed`'s drain (its message ≈ "
			  . ($D->{read_msg_bytes} // '?') . " bytes) and $pq_us µs an event to PgQ's (its row ≈ $P->{event_bytes} bytes)";
		}
		push @o, '| drain of ' . fmt_int($P->{n}) . " events in batches of $BATCH, *count* (rows not rendered), events/s, median (min–max) of $s->{drain_runs} | "
		  . rate_cell(@{ $P->{count_rates} }) . " | $cst | informational | — | runs: " . int_list(@{ $P->{count_rates} }) . "$note |";
	}
	$st = '—';
	if ($D && @{ $D->{drain_rates} // [] })
	{
		$st = rate_cell(@{ $D->{drain_rates} }) . ' (`table` sink, ' . fmt_int($D->{n} // 0) . ' records)';
	}
	push @o, '| drain of ' . fmt_int($P->{n}) . " events in batches of $BATCH, *table*, events/s, median (min–max) of $s->{drain_runs} | "
	  . rate_cell(@{ $P->{table_rates} }) . " | $st | informational | — | runs: " . int_list(@{ $P->{table_rates} }) . ' |';
	my $SL = $R->{lat} // {};
	for my $label ('pgqd defaults', 'pgqd fastest')
	{
		my ($n, $p50, $p95, $p99, $max, $txlat, $tps, $ticks, $tail) = @{ $R->{pgq_lat}{$label} };
		# statesman's counterpart: as it runs by default (hints on), below PgQ at every
		# percentile is "met"; at PgQ's defaults, statesman with hints off (it polls, like PgQ)
		# is shown too.
		if ($SL->{'hints on'})
		{
			my (undef, $sp50, $sp95, $sp99, $smax) = @{ $SL->{'hints on'} };
			$met = ($sp50 < $p50 && $sp95 < $p95 && $sp99 < $p99) ? 'yes' : '**no**';
			$st = "hints on: $sp50 / $sp95 / $sp99 ($smax)";
			if ($label eq 'pgqd defaults' && $SL->{'hints off'})
			{
				my (undef, $hp50, $hp95, $hp99, $hmax) = @{ $SL->{'hints off'} };
				$st .= "; hints off: $hp50 / $hp95 / $hp99 ($hmax), "
				  . ($hp50 < $p50 ? 'below' : 'not below') . ' PgQ at p50, '
				  . ($hp99 < $p99 ? 'below' : 'not below') . ' at p99';
			}
		}
		else
		{
			($met, $st) = ('—', '—');
		}
		push @o, '| commit → consumer latency at ' . fmt_int($s->{lat_rate})
		  . " events/s, $label, ms: p50 / p95 / p99 (max), median of $w windows | $p50 / $p95 / $p99 ($max) | $st | statesman below PgQ | $met | windows (p50/p99): "
		  . windows_list($R->{pgq_lat}, $label, $w) . '; ' . fmt_int($n)
		  . " events of the first $s->{lat_secs} s of the windows at " . fmt_int($tps)
		  . "/s, $ticks ticks; the last $TAIL_SECS s of appends, unmeasured: max $tail ms; an insert transaction took $txlat ms on average (pgbench) |";
	}
	return @o;
}

1;

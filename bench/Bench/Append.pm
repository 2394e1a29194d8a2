# The append part: throughput of statesman.append() against a bare single-row INSERT of the
# same payload into an indexed table and against PgQ's pgq.insert_event, same cluster, same
# settings, same clients, in turn in each round, with synchronous_commit on and off.
#
# The headline runs as statesman is deployed: the background worker on (it sequences the
# records while they are appended) and pgqd ticking PgQ's queue. A round is done only when its
# records are in the feed: after pgbench, the bench waits until statesman.feed_status shows
# nothing waiting (statesman) or until a tick covers every event (PgQ, pgq.get_queue_info's
# ev_new = 0); that wait's length is the round's lag at its end, and the WAL per record is
# counted from before the round to the end of that wait, so it includes what the sequencer
# (or pgqd's ticker) wrote for the round. Then, as a breakdown, the same rounds with the worker
# off and no ticker (BENCH_WORKER_OFF_RUNS, 0 skips them), and sequence_feed() of the backlog
# their last statesman run left.
#
# Only statesman's public interface is used (append, feed_status, head_position,
# sequence_feed): the state is reset between runs by DROP and CREATE EXTENSION, so the bench
# works with any layout of the extension's tables.
#
#   Bench::Append::setup($b, $R)     the schema, the pgbench scripts (statesman, baseline)
#   Bench::Append::measure($b, $R)   the runs; one progress line per run
#   Bench::Append::report($b, $R)    the sections "Append, worker on" and "worker off (breakdown)"
#   Bench::Append::summary($b, $R)   its rows of the summary table
#
# $R->{A}{$mode} (mode `on` or `off`): tps{"clients/sync/workload"}, cpu{…} (µs per record),
# wal{…} (WAL bytes per record), lag{…} (ms from pgbench's end until the round's records were
# in the feed; `on` only), waiting{…} (records not yet in the feed at the first look),
# first{…} (ms from pgbench's end to that first look): one value per run, in run order (run i
# of one workload and run i of another are of the same round); others{"clients/sync"}: other
# processes' CPU % per run.
package Bench::Append;

use strict;
use warnings;
use utf8;

use Bench::Format qw(stats fmt_int fmt_cell rate_cell ratio verdict paired_ratio med dot_list);
use Time::HiRes qw(time);

our @WORKLOADS = qw(baseline pgq statesman);    # in turn, statesman last: its records are the backlog
our $SETTLE_TIMEOUT = 300;    # seconds a round's records may take to reach the feed before the bench gives up
our $SETTLE_POLL_MS = 10;     # how often the end-of-round wait looks

# The same payload on both sides: a JSON object of about 100 bytes with random fields, built by
# the same expression from the same pgbench variables.
our $PAYLOAD =
  "jsonb_build_object('account', :id::int, 'amount', :amount::int, 'currency', 'EUR', 'client', :client_id::int, 'nonce', :nonce::bigint, 'note', 'bench')";

sub vars
{
	my ($s) = @_;
	return "\\set id random(1, $s->{addresses})\n"
	  . "\\set amount random(1, 1000000)\n"
	  . "\\set nonce random(1, 1000000000000)\n"
	  . "\\set rev random(1, 1000000000)";
}

sub setup
{
	my ($b, $R) = @_;
	my $s = $b->s;
	$b->q(<<'SQL');
CREATE EXTENSION statesman;
CREATE SCHEMA bench;
-- The baseline: what an application would write without statesman. A surrogate key plus an
-- index on (address, revision), like a ledger keyed by (address, revision) with one more
-- index.
CREATE TABLE bench.bare (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address     text NOT NULL,
    revision    bigint NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload     jsonb NOT NULL
);
CREATE INDEX bare_address_revision ON bench.bare (address, revision);
SQL
	my $vars = vars($s);
	$R->{script}{baseline} = $b->file('baseline.sql', "$vars\n"
		  . "INSERT INTO bench.bare (address, revision, payload) VALUES ('bench/acct/' || :id, :rev::bigint, $PAYLOAD);\n");
	$R->{script}{statesman} = $b->file('statesman.sql',
		"$vars\nSELECT statesman.append('bench', 'acct/' || :id, $PAYLOAD);\n");
	$R->{payload_bytes} = $b->q(
		"SELECT octet_length(jsonb_build_object('account', $s->{addresses}, 'amount', 500000,
  'currency', 'EUR', 'client', 1, 'nonce', 500000000000::bigint, 'note', 'bench')::text)");
	return;
}

# ---- the worker ----

sub worker_sql
{
	return "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'statesman database worker'
                          AND datname = current_database())";
}

# statesman.enabled on or off (a reload), and until the database worker is there or gone.
sub set_worker
{
	my ($b, $R, $on) = @_;
	my $v = $on ? 'on' : 'off';
	$b->q("ALTER SYSTEM SET statesman.enabled = $v;\nSELECT pg_reload_conf()");
	$b->wait_for($on ? worker_sql() : 'SELECT NOT (' . worker_sql() . ')', 30,
		"the database worker to " . ($on ? 'start' : 'stop'));
	$R->{worker} = $on;
	return;
}

# A fresh statesman: DROP and CREATE EXTENSION (its tables empty, whatever they are). With the
# worker on, the old database worker is gone before the CREATE and the new one is there after it.
sub recreate_statesman
{
	my ($b, $R) = @_;
	$b->q('DROP EXTENSION statesman');
	$b->wait_for('SELECT NOT (' . worker_sql() . ')', 30, 'the database worker to stop after DROP EXTENSION')
	  if $R->{worker};
	$b->q('CREATE EXTENSION statesman');
	$R->{statesman_dirty} = 0;
	return;
}

# Every measured run starts from the same state: all three sides empty (the bare table and
# PgQ's event tables truncated, statesman re-created once a run has appended to it), a fresh
# checkpoint (so full-page writes fall on each run alike), no leftover dead tuples; with the
# worker on, the database worker running.
sub reset_tables
{
	my ($b, $R) = @_;
	recreate_statesman($b, $R) if $R->{statesman_dirty};
	$b->q("TRUNCATE bench.bare, $R->{pgq_truncate};\nCHECKPOINT");
	$b->wait_for(worker_sql(), 30, 'the database worker') if $R->{worker};
	return;
}

# One run of workload $w: [tx/s, transactions].
sub run_pgbench
{
	my ($b, $R, $w, $sync, $secs, $c) = @_;
	$R->{statesman_dirty} = 1 if $w eq 'statesman';
	my $r = $b->pgbench(
		file         => $R->{script}{$w},
		clients      => $c,
		secs         => $secs,
		sync         => $sync,
		what         => "$w, synchronous_commit=$sync",
		check_failed => 1);
	return ($r->{tps}, $r->{ntx});
}

# After a run: until its records are in the feed. statesman with the worker on: until
# statesman.feed_status has no record waiting for a position; PgQ with pgqd: until a tick has
# taken in every event (pgq.get_queue_info's ev_new, events after the last tick, is 0);
# otherwise nothing to wait for. One psql session looks at once, then every $SETTLE_POLL_MS ms
# inside the server. Returns (seconds from $t_end to the first look, records waiting then,
# seconds from $t_end until nothing waited, the WAL insert position then).
sub settle
{
	my ($b, $R, $w, $mode, $t_end) = @_;
	my ($waiting, $done) = ('0', 'true');
	if ($mode eq 'on' && $w eq 'statesman')
	{
		$waiting = '(SELECT COALESCE(unsequenced_records, 0) FROM statesman.feed_status)';
		$done    = "$waiting = 0";
	}
	elsif ($mode eq 'on' && $w eq 'pgq')
	{
		$waiting = "(SELECT greatest(ev_new, 0) FROM pgq.get_queue_info('bench'))";
		$done    = "$waiting = 0";
	}
	my $poll = $SETTLE_POLL_MS / 1000;
	my ($t_first, $n_first, $t_done, $lsn) = $b->row(<<"SQL");
SELECT extract(epoch FROM clock_timestamp()) AS t_first, $waiting AS n_first \\gset
DO \$\$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    LOOP
        EXIT WHEN $done;
        IF clock_timestamp() - t0 > interval '$SETTLE_TIMEOUT seconds' THEN
            RAISE EXCEPTION 'the $w run''s records are not in the feed $SETTLE_TIMEOUT s after its end: % waiting', $waiting;
        END IF;
        COMMIT;
        PERFORM pg_sleep($poll);
    END LOOP;
END
\$\$;
SELECT :t_first, :n_first, extract(epoch FROM clock_timestamp()), pg_current_wal_insert_lsn();
SQL
	return ($t_first - $t_end, $n_first, $t_done - $t_end, $lsn);
}

# The WAL flushes so far (pg_stat_wal, the cluster's every process): (count, milliseconds spent
# in them; track_wal_io_timing is on in the bench's cluster).
sub flushes
{
	my ($b) = @_;
	return $b->row('SELECT wal_sync, wal_sync_time FROM pg_stat_wal');
}

# The order of the workloads in round $r of mode $mode. With the worker on, each round starts
# one place further along @WORKLOADS, so that no workload always runs right after another's
# DROP EXTENSION or TRUNCATE, or always last in its round. With the worker off, statesman runs
# last in every round: its last run's records are the backlog of sequence_feed.
sub round_order
{
	my ($mode, $r) = @_;
	return @WORKLOADS if $mode ne 'on';
	my $k = ($r - 1) % @WORKLOADS;
	return (@WORKLOADS[ $k .. $#WORKLOADS ], @WORKLOADS[ 0 .. $k - 1 ]);
}

# The rounds of one mode: `on` (the worker on, pgqd ticking) or `off` (neither), $runs per cell.
sub rounds
{
	my ($b, $R, $mode, $runs) = @_;
	my $s     = $b->s;
	my $A     = $R->{A}{$mode} = {};
	my @ac    = @{ $s->{append_clients} };
	my $total = @ac * 2 * 3 * $runs;
	$b->say("bench: append, worker $mode" . ($mode eq 'on' ? ' and pgqd ticking' : ', no ticker')
		  . ": @ac clients, $s->{secs} s per run, $runs run(s) per cell ($total measured runs), payload $R->{payload_bytes} bytes");
	if ($s->{warmup} > 0)
	{
		for my $w (@WORKLOADS)
		{
			reset_tables($b, $R);
			my ($t) = run_pgbench($b, $R, $w, 'on', $s->{warmup}, $ac[0]);
			settle($b, $R, $w, $mode, time);
			$b->say("  warm-up  $w: " . fmt_int($t) . ' tx/s (not counted)');
		}
	}
	my $n = 0;
	for my $c (@ac)
	{
		for my $sync (qw(on off))
		{
			for my $r (1 .. $runs)
			{
				for my $w (round_order($mode, $r))
				{
					reset_tables($b, $R);
					my $lsn0 = $b->q('SELECT pg_current_wal_insert_lsn()');
					if ($mode eq 'on' && $w eq 'statesman')
					{
						my $h = $b->q('SELECT COALESCE(statesman.head_position(), 0)');
						$b->fail("bench: a fresh statesman has head position $h") unless $h == 0;
					}
					my @f0 = flushes($b);
					my $s0 = $b->snapshot;
					my ($t, $ntx) = run_pgbench($b, $R, $w, $sync, $s->{secs}, $c);
					my $t_end = time;
					my $s1    = $b->snapshot;
					my ($first, $nwait, $lag, $lsn1) = settle($b, $R, $w, $mode, $t_end);
					my $s2 = $b->snapshot;
					my @f1 = flushes($b);
					if ($mode eq 'on' && $w eq 'statesman')
					{
						# Every record has a position: ntx distinct positive positions.
						my $h = $b->q('SELECT COALESCE(statesman.head_position(), 0)');
						$b->fail("bench: after the run's $ntx appends the head position is $h") if $h < $ntx;
					}
					my $o   = $b->others_pct($s0, $s1);
					my $wal = $b->q("SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / GREATEST($ntx, 1))");
					my $cpu = $b->cpu_per_tx($s0, $s2, $ntx);
					my $k   = "$c/$sync/$w";
					push @{ $A->{cpu}{$k} },     $cpu;
					push @{ $A->{tps}{$k} },     $t;
					push @{ $A->{wal}{$k} },     $wal;
					push @{ $A->{lag}{$k} },     sprintf('%.0f', $lag * 1000);
					push @{ $A->{first}{$k} },   sprintf('%.0f', $first * 1000);
					push @{ $A->{waiting}{$k} }, $nwait;
					push @{ $A->{others}{"$c/$sync"} }, $o;
					my ($nf, $fms) = ($f1[0] - $f0[0], $f1[1] - $f0[1]);
					push @{ $A->{flushes}{$k} },  sprintf('%.3f', $nf / ($ntx > 0 ? $ntx : 1));
					push @{ $A->{flush_ms}{$k} }, sprintf('%.3f', $nf > 0 ? $fms / $nf : 0);
					# The run's time outside the WAL flushes, per transaction: pgbench's elapsed
					# time (transactions / tx/s) less the time a flush was under way. The flushes
					# are counted up to the end of settle (a pgbench backend reports its counts
					# when it exits, after pgbench has returned), so the few of that wait count
					# too.
					push @{ $A->{outside}{$k} }, sprintf('%.1f', $t > 0 ? (($ntx / $t) * 1000 - $fms) / ($ntx > 0 ? $ntx : 1) * 1000 : 0);
					$n++;
					my $feed = ($mode eq 'on' && $w ne 'baseline')
					  ? sprintf('   in the feed %.0f ms after the end (%s waiting then)', $lag * 1000, fmt_int($nwait))
					  : '';
					$b->say(sprintf('  [%s %d/%d] %s clients  synchronous_commit=%s  run %d/%d  %-9s %7s tx/s   %s µs CPU/record   %s WAL bytes/record   %s WAL flushes/record of %s ms%s   (other processes: %s%% CPU)',
							$mode, $n, $total, $c, $sync, $r, $runs, $w, fmt_int($t), $cpu, $wal,
							$A->{flushes}{$k}[-1], $A->{flush_ms}{$k}[-1], $feed, $o));
				}
			}
		}
	}
	return;
}

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	# Both sync settings really reach the sessions pgbench opens.
	for my $sync (qw(on off))
	{
		my $got = $b->q('SHOW synchronous_commit', options => "-c synchronous_commit=$sync");
		$b->fail("bench: PGOPTIONS did not set synchronous_commit=$sync (got $got)") unless $got eq $sync;
	}

	# The headline: the worker on, pgqd ticking (its defaults).
	$R->{statesman_dirty} = 1;
	set_worker($b, $R, 1);
	Bench::PgQ::pgqd_start($b, 'append');
	rounds($b, $R, 'on', $s->{runs});
	Bench::PgQ::pgqd_stop();

	# The breakdown: the append alone, the worker off, no ticker.
	set_worker($b, $R, 0);
	return if $s->{worker_off_runs} == 0;
	rounds($b, $R, 'off', $s->{worker_off_runs});

	# The backlog: the last statesman run's records, committed and not yet sequenced (the
	# baseline's rows are dropped first so that nothing else competes for the cache).
	$b->q("TRUNCATE bench.bare, $R->{pgq_truncate};\nVACUUM ANALYZE;\nCHECKPOINT");
	my $waiting = 'SELECT COALESCE(unsequenced_records, 0) FROM statesman.feed_status';
	my $backlog = $b->q($waiting);
	$R->{backlog} = $backlog;
	# sequence_feed(): one call per transaction, as a sequencing worker would make them.
	my $file = $b->file('sequence.sql',
		join('', map { "SELECT statesman.sequence_feed($s->{seq_batch});\n" }
			  0 .. int($backlog / $s->{seq_batch}) + 1));
	my $t0 = time;
	$b->q(undef, file => $file);
	my $t1 = time;
	my $left = $b->q($waiting);
	$b->fail("bench: sequence_feed left $left records unsequenced") unless $left == 0;
	$R->{seq_rate} = sprintf('%.0f', $backlog / ($t1 - $t0));
	my $secs = sprintf('%.2f', $t1 - $t0);
	$b->say("  sequence_feed($s->{seq_batch}): " . fmt_int($backlog) . " records in $secs s = " . fmt_int($R->{seq_rate}) . ' records/s');
	return;
}

# ---- the report ----

sub _target { return $_[0] eq 'on' ? '0.90' : '0.75'; }
our $WAL_TARGET = 1.25;

my %NAME = (baseline => 'bare INSERT', pgq => 'PgQ `insert_event`', statesman => 'statesman');

# The paired ratio of workload $x over $y in cell $cell of mode $mode for figure $f:
# (median, "each · pair").
sub _paired
{
	my ($A, $f, $cell, $x, $y) = @_;
	return paired_ratio($A->{$f}{"$cell/$x"}, $A->{$f}{"$cell/$y"});
}

# Every pair of statesman's WAL per record over the bare INSERT's, all cells.
sub _wal_pairs
{
	my ($b, $A) = @_;
	my @r;
	for my $c (@{ $b->s->{append_clients} })
	{
		for my $sync (qw(on off))
		{
			my ($st, $ba) = ($A->{wal}{"$c/$sync/statesman"}, $A->{wal}{"$c/$sync/baseline"});
			push @r, map { $st->[$_] / $ba->[$_] } 0 .. $#$st;
		}
	}
	return @r;
}

sub _all
{
	my ($b, $A, $f, $w) = @_;
	return map { my $c = $_; map { @{ $A->{$f}{"$c/$_/$w"} } } qw(on off) } @{ $b->s->{append_clients} };
}

sub summary
{
	my ($b, $R) = @_;
	my $A = $R->{A}{on};
	my @rows;
	for my $c (@{ $b->s->{append_clients} })
	{
		for my $sync (qw(on off))
		{
			my $st = $A->{tps}{"$c/$sync/statesman"};
			for my $base (qw(baseline pgq))
			{
				my $ba = $A->{tps}{"$c/$sync/$base"};
				my ($rat) = paired_ratio($st, $ba);
				my $target = $base eq 'baseline' ? _target($sync) : '1.00';
				my $what = $base eq 'baseline' ? 'bare single-row INSERT' : 'PgQ `insert_event` with pgqd ticking';
				push @rows,
				  "| 1 | append tx/s, worker on, $c clients, `synchronous_commit` $sync, vs $what | "
				  . rate_cell(@$st) . ' | ' . rate_cell(@$ba) . ' | ' . sprintf('%.2f', $rat)
				  . "× (paired runs) | ≥ ${target}× | " . verdict($rat, $target) . ' |';
			}
		}
	}
	my @wr  = _wal_pairs($b, $A);
	my $wrm = med(map { sprintf('%.6f', $_) } @wr);
	push @rows,
	  '| 1 | WAL bytes per appended record, sequencing included (worker on), vs the bare INSERT\'s per row, every run | '
	  . rate_cell(_all($b, $A, 'wal', 'statesman')) . ' | ' . rate_cell(_all($b, $A, 'wal', 'baseline')) . ' | '
	  . sprintf('%.2f', $wrm) . "× (paired runs) | ≤ ${WAL_TARGET}× | " . verdict($wrm, $WAL_TARGET, 'le') . ' |';
	my @lag = _all($b, $A, 'lag', 'statesman');
	push @rows,
	  '| 1 | the last appended record in the feed after the round\'s end (the sequencer\'s lag), ms, every worker-on run; baseline: PgQ, until a tick took in its last event | '
	  . rate_cell(@lag) . ' | ' . rate_cell(_all($b, $A, 'lag', 'pgq')) . ' | — | informational | — |';
	return @rows;
}

# The tx/s table of mode $mode against baseline $base.
sub _tps_table
{
	my ($b, $R, $mode, $base) = @_;
	my $A  = $R->{A}{$mode};
	my @ac = @{ $b->s->{append_clients} };
	my $bn = $NAME{$base} . ($base eq 'pgq' && $mode eq 'on' ? ' with pgqd' : '');
	my $last = $base eq 'baseline' ? "other processes' CPU, per run" : 'PgQ ÷ bare INSERT, paired';
	my @o = ("| measurement | clients | synchronous_commit | statesman: median (min–max) | $bn: median (min–max) | statesman ÷ $NAME{$base}: median of paired runs (each pair) | ratio of medians | target | met | $last |",
		'|---|---|---|---|---|---|---|---|---|---|');
	for my $c (@ac)
	{
		for my $sync (qw(on off))
		{
			my $st = $A->{tps}{"$c/$sync/statesman"};
			my $ba = $A->{tps}{"$c/$sync/$base"};
			my @sm = stats(@$st);
			my @bm = stats(@$ba);
			# Each statesman run is paired with the baseline run of its round: the ratio of a
			# pair is immune to slow drift of the machine (a shared disk's flush rate, a
			# neighbour's load), so the verdict uses the median of the paired ratios.
			my ($rat, $per) = paired_ratio($st, $ba);
			my $target = $base eq 'baseline' ? _target($sync) : '1.00';
			my $tail = $base eq 'baseline'
			  ? dot_list(map { "$_%" } @{ $A->{others}{"$c/$sync"} })
			  : sprintf('%.2f', (_paired($A, 'tps', "$c/$sync", 'pgq', 'baseline'))[0]) . '×';
			my $met = $mode eq 'on' ? verdict($rat, $target) : 'informational';
			push @o,
			  "| append, tx/s | $c | $sync | " . fmt_cell(@sm) . ' | ' . fmt_cell(@bm) . ' | '
			  . sprintf('%.2f', $rat) . "× ($per) | " . ratio($sm[0], $bm[0]) . '× | '
			  . ($mode eq 'on' ? "≥ ${target}×" : "(≥ ${target}× with the worker on)") . " | $met | $tail |";
		}
	}
	return @o;
}

# WAL and CPU per record of mode $mode, per cell, for the three workloads.
sub _per_record_table
{
	my ($b, $R, $mode) = @_;
	my $A  = $R->{A}{$mode};
	my $on = $mode eq 'on';
	my @o  = (
		'| clients | synchronous_commit | WAL bytes per record: statesman' . ($on ? ', sequencing included' : '')
		  . ' | PgQ' . ($on ? ', pgqd\'s ticks included' : '') . ' | bare INSERT | statesman ÷ bare INSERT, paired (each pair) | target | met | statesman ÷ PgQ, paired | CPU µs per record: statesman / PgQ / bare INSERT, medians |',
		'|---|---|---|---|---|---|---|---|---|---|');
	for my $c (@{ $b->s->{append_clients} })
	{
		for my $sync (qw(on off))
		{
			my $k = "$c/$sync";
			my ($r, $per) = _paired($A, 'wal', $k, 'statesman', 'baseline');
			my ($rq) = _paired($A, 'wal', $k, 'statesman', 'pgq');
			push @o, "| $c | $sync | " . rate_cell(@{ $A->{wal}{"$k/statesman"} }) . ' | '
			  . rate_cell(@{ $A->{wal}{"$k/pgq"} }) . ' | ' . rate_cell(@{ $A->{wal}{"$k/baseline"} }) . ' | '
			  . sprintf('%.2f', $r) . "× ($per) | " . ($on ? "≤ ${WAL_TARGET}× | " . verdict($r, $WAL_TARGET, 'le') : '— | informational')
			  . ' | ' . sprintf('%.2f', $rq) . '× | '
			  . join(' / ', map { fmt_int(med(@{ $A->{cpu}{"$k/$_"} })) } qw(statesman pgq baseline)) . ' |';
		}
	}
	return @o;
}

# The WAL flushes of mode $mode's runs: how many a record, how long each took, and the time of a
# transaction outside them. With few clients at synchronous_commit on a transaction mostly waits
# for its commit's flush, so a run's tx/s follows how fast the disk flushed during it; the time
# outside the flushes is the part the workload itself decides.
sub _flush_table
{
	my ($b, $R, $mode) = @_;
	my $A  = $R->{A}{$mode};
	my @o  = (
		'| clients | synchronous_commit | WAL flushes per record: statesman / PgQ / bare INSERT, medians | ms per flush, each run: statesman | PgQ | bare INSERT | µs per transaction outside the flushes, each run: statesman | PgQ | bare INSERT | statesman ÷ bare INSERT of that time, paired (each pair) |',
		'|---|---|---|---|---|---|---|---|---|---|---|');
	for my $c (@{ $b->s->{append_clients} })
	{
		for my $sync (qw(on off))
		{
			my $k = "$c/$sync";
			my ($r, $per) = _paired($A, 'outside', $k, 'statesman', 'baseline');
			push @o, "| $c | $sync | "
			  . join(' / ', map { med(@{ $A->{flushes}{"$k/$_"} }) } qw(statesman pgq baseline)) . ' | '
			  . join(' | ', map { dot_list(@{ $A->{flush_ms}{"$k/$_"} }) } qw(statesman pgq baseline)) . ' | '
			  . join(' | ', map { dot_list(@{ $A->{outside}{"$k/$_"} }) } qw(statesman pgq baseline)) . ' | '
			  . sprintf('%.2f', $r) . "× ($per) |";
		}
	}
	return @o;
}

# When the worker-on rounds' records were in the feed.
sub _feed_table
{
	my ($b, $R) = @_;
	my $A = $R->{A}{on};
	my @o = ('| clients | synchronous_commit | statesman: the last record had its position, ms after the round\'s end, median (min–max) | statesman: records waiting at the first look, median (max); the first look, ms after the end | PgQ: a tick had taken in the last event, ms after the end, median (min–max) | PgQ: events after the last tick at the first look, median (max) |',
		'|---|---|---|---|---|---|');
	for my $c (@{ $b->s->{append_clients} })
	{
		for my $sync (qw(on off))
		{
			my $k = "$c/$sync";
			my @ws = stats(@{ $A->{waiting}{"$k/statesman"} });
			my @wp = stats(@{ $A->{waiting}{"$k/pgq"} });
			push @o, "| $c | $sync | " . rate_cell(@{ $A->{lag}{"$k/statesman"} }) . ' | '
			  . fmt_int($ws[0]) . ' (' . fmt_int($ws[2]) . '); ' . fmt_int(med(@{ $A->{first}{"$k/statesman"} })) . ' | '
			  . rate_cell(@{ $A->{lag}{"$k/pgq"} }) . ' | ' . fmt_int($wp[0]) . ' (' . fmt_int($wp[2]) . ') |';
		}
	}
	return @o;
}

sub report
{
	my ($b, $R) = @_;
	my $s  = $b->s;
	my @ac = @{ $s->{append_clients} };
	my $pgq_version = $b->q('SELECT pgq.version()');
	my @o;
	push @o, '', '### Append, worker on (the headline)', '',
	  "- pgbench: `-n -M prepared -c N -j N -T $s->{secs}` with N = @ac clients, $s->{runs} run(s) per cell, in rounds of the three workloads (a statesman run is paired with the bare INSERT run and the PgQ run of its round), the first round bare INSERT, PgQ, statesman and each next one starting one workload further on (PgQ, statesman, bare INSERT; then statesman, bare INSERT, PgQ), $s->{warmup} s warm-up of each first; `synchronous_commit` per session via `PGOPTIONS='-c synchronous_commit=on|off'`",
	  "- as deployed: statesman's background worker on (`statesman.enabled = on`; it sequences the records while they are appended; no outbox), and pgqd running with its defaults (`ticker_period` 1 s; the queue's `ticker_max_count` 500, `ticker_max_lag` 3 s), both for every run of these rounds",
	  "- workloads: payload a $R->{payload_bytes}-byte JSON object (random fields), addresses drawn at random from "
	  . fmt_int($s->{addresses}) . ';',
	  '  bare INSERT `INSERT INTO bench.bare (address, revision, payload) VALUES (…)` (identity PK + index on (address, revision));',
	  "  PgQ $pgq_version `SELECT pgq.insert_event('bench', 'acct/' || :id, (<payload>)::text)` (queue `bench`, one registered consumer; PgQ stores event data as text);",
	  "  statesman `SELECT statesman.append('bench', 'acct/' || :id, <payload>)`",
	  "- before every run: the bare table and the queue's event tables truncated, statesman re-created after a run that appended to it (`DROP EXTENSION` + `CREATE EXTENSION`, the database worker restarted), `CHECKPOINT`; checkpoints triggered by WAL volume or time during the whole run: $R->{checkpoints}",
	  "- a run is done when its records are in the feed: after pgbench, one session looks at once and then every $SETTLE_POLL_MS ms until `statesman.feed_status` shows no record waiting for a position (statesman) or `pgq.get_queue_info('bench')` shows no event after the last tick (PgQ); the tx/s is pgbench's, the time from pgbench's end to that moment is in the last table",
	  '- WAL per record: `pg_current_wal_insert_lsn()` before the run and at that moment, over the records appended (one per transaction): statesman\'s includes what the sequencer wrote for the run, PgQ\'s what pgqd\'s ticks wrote, the bare INSERT\'s is its own (read right after pgbench). CPU per record: this cluster (its workers included) and pgbench, over the same window (pgqd\'s own process is not counted; its session in the server is)',
	  '', '#### Append tx/s vs bare INSERT, worker on', '', _tps_table($b, $R, 'on', 'baseline'),
	  '', '#### Append tx/s vs PgQ `insert_event` with pgqd, worker on', '', _tps_table($b, $R, 'on', 'pgq'),
	  '', '#### WAL and CPU per record, sequencing included, worker on', '', _per_record_table($b, $R, 'on'),
	  '', '#### WAL flushes, worker on', '',
	  '- from `pg_stat_wal` (`track_wal_io_timing` on) before and after each run, every process of the cluster: flushes per record, the mean time of a flush, and the run\'s time outside the flushes per transaction (pgbench\'s elapsed time less the time flushes took, over its transactions): at `synchronous_commit` on with few clients a run\'s tx/s follows how fast the disk flushed during it, and this time is the part the workload itself decides (informational, no target)',
	  '', _flush_table($b, $R, 'on'),
	  '', '#### When the records were in the feed, worker on', '', _feed_table($b, $R);
	return @o unless $R->{A}{off};
	push @o, '', '### Append, worker off (breakdown)', '',
	  "- the append alone, not the headline: the same rounds ($s->{worker_off_runs} run(s) per cell, BENCH_WORKER_OFF_RUNS) after the worker-on ones, each in the order bare INSERT, PgQ, statesman, with `statesman.enabled = off` (nothing sequences the records while the writers run) and no pgqd (PgQ's queue `bench` has no ticker: an insert does not wait for one); the WAL per record is the run's own (no sequencing, no ticks); the last statesman run's records are the backlog of `sequence_feed` below",
	  '', '#### Append tx/s vs bare INSERT, worker off (breakdown)', '', _tps_table($b, $R, 'off', 'baseline'),
	  '', '#### Append tx/s vs PgQ `insert_event`, no ticker, worker off (breakdown)', '', _tps_table($b, $R, 'off', 'pgq'),
	  '', '#### WAL and CPU per record, worker off (breakdown)', '', _per_record_table($b, $R, 'off'),
	  '', "- `sequence_feed($s->{seq_batch})` of the " . fmt_int($R->{backlog})
	  . '-record backlog the last worker-off statesman run left, one call per transaction in one session until `feed_status` shows nothing waiting: '
	  . fmt_int($R->{seq_rate}) . ' records/s (informational)';
	return @o;
}

1;

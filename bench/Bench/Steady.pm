# The steady state: appends at a constant rate for minutes while one outbox delivers them to
# the `table` sink, to show that nothing grows that should not: delivery lag, the dispatcher's
# memory, the hot bookkeeping tables (cursors, outbox_state, leases) and the indexes.
#
#   measure($b, $R)   one progress line per sample
#   report($b, $R)    its section
#   summary($b, $R)   its rows of the summary table
#
# It needs the background worker on and track_commit_timestamp on, as the delivery part leaves
# the cluster; when either is off it turns them on and restarts the cluster.
#
# Results in $R->{steady}: samples ([elapsed, head, cursor, lag_records, lag_ms, pid,
# vmrss_kb, anon_kb] each), size_start / size_end ({rel => [heap, index, dead, autovacuums]}),
# rows ({rel => rows at the end}), lat ([n, p50, p95, p99, max]), thirds (["p50/p99", …]),
# tps, txlat, sched_lag, pids.
package Bench::Steady;

use strict;
use warnings;
use utf8;

use Bench::Delivery qw(wait_caught_up head_pos);
use Bench::Format qw(stats fmt_int verdict median_max dot_list);
use Time::HiRes qw(time usleep);

# The relations whose size is sampled: the two that grow with the records, and the hot small
# tables the dispatcher rewrites with every page or lease renewal.
our @RELS = qw(statesman.history statesman.delivered statesman.cursors statesman.outbox_state statesman.leases);

# {rel => [heap, index, dead, autovacuums]} of each relation.
sub sizes
{
	my ($b) = @_;
	my @lines = split /\n/, $b->q(join(";\n", map { "SELECT pg_relation_size('$_') + COALESCE(pg_total_relation_size(reltoastrelid), 0), pg_indexes_size('$_'),
                 COALESCE(s.n_dead_tup, 0), COALESCE(s.autovacuum_count, 0)
          FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = '$_'::regclass" } @RELS));
	my %sz;
	@sz{@RELS} = map { [ split /\|/ ] } @lines;
	return \%sz;
}

# (vmrss, anon) kB of a process, (0, 0) when it is gone.
sub proc_mem
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or return (0, 0);
	my ($r, $a) = (0, 0);
	while (<$fh>)
	{
		$r = $1 if /^VmRSS:\s+(\d+)/;
		$a = $1 if /^RssAnon:\s+(\d+)/;
	}
	close $fh;
	return ($r, $a);
}

sub mb { return sprintf('%.1f', $_[0] / 1048576); }

# "123 kB" below 1 MB, "12.3 MB" above.
sub size
{
	my ($x) = @_;
	return $x < 1048576 ? sprintf('%d kB', $x / 1024) : sprintf('%.1f MB', $x / 1048576);
}

# One sample (appended to the samples) and its progress line.
sub sample
{
	my ($b, $R, $t0) = @_;
	my $s = $b->s;
	my $S = $R->{steady};
	# The lag: committed records not delivered yet, those still waiting for a position (which
	# outbox_status does not count: its head is the highest position) and head − cursor; and
	# the age of the oldest of them (0 when there are none).
	my ($now, $head, $cursor, $lag, $lag_ms, $pid) = $b->row("
    SELECT extract(epoch FROM clock_timestamp()), COALESCE(s.head_position, 0), COALESCE(s.cursor_position, 0),
           s.lag_records + u.n,
           round((COALESCE(greatest(extract(epoch FROM clock_timestamp() - least(u.oldest, nxt.occurred_at)), 0), 0)
                  * 1000)::numeric, 1),
           COALESCE(s.leader_pid, (SELECT pid FROM pg_stat_activity WHERE backend_type = 'statesman dispatcher'
                                   AND datname = current_database() LIMIT 1), 0)
    FROM statesman.outbox_status s
    CROSS JOIN LATERAL (SELECT COALESCE(f.unsequenced_records, 0) AS n, NULL::timestamptz AS oldest
                        FROM statesman.feed_status f) u
    LEFT JOIN LATERAL (SELECT statesman._next_occurred_at(COALESCE(s.cursor_position, 0)) AS occurred_at) nxt ON true
    WHERE s.outbox_id = 'steady'");
	my ($rss, $anon) = proc_mem($pid);
	my $elapsed = sprintf('%.0f', $now - $t0);
	push @{ $S->{samples} }, [ $elapsed, $head, $cursor, $lag, $lag_ms, $pid, $rss, $anon ];
	push @{ $S->{pids} }, $pid unless grep { $_ eq $pid } @{ $S->{pids} };
	my $z = sizes($b);
	my $grown = $head - $S->{head0};
	my $rate = sprintf('%.0f', $elapsed > 0 ? $grown / $elapsed : 0);
	$b->say(sprintf('  steady %4s/%s s: ', $elapsed, $s->{steady_secs}) . 'head +' . fmt_int($grown)
		  . ' (' . fmt_int($rate) . '/s), lag ' . fmt_int($lag) . " records / $lag_ms ms; dispatcher $pid RSS "
		  . sprintf('%.1f MB (private %.1f MB)', $rss / 1024, $anon / 1024)
		  . '; history ' . mb($z->{'statesman.history'}[0]) . '+' . mb($z->{'statesman.history'}[1])
		  . ' MB, delivered ' . mb($z->{'statesman.delivered'}[0]) . '+' . mb($z->{'statesman.delivered'}[1])
		  . ' MB (heap+indexes); cursors ' . int($z->{'statesman.cursors'}[0] / 1024)
		  . ' kB, outbox_state ' . int($z->{'statesman.outbox_state'}[0] / 1024)
		  . ' kB, leases ' . int($z->{'statesman.leases'}[0] / 1024) . ' kB');
	return;
}

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $S = $R->{steady} = { samples => [], pids => [] };
	if ($b->q('SHOW statesman.enabled') ne 'on' || $b->q('SHOW track_commit_timestamp') ne 'on')
	{
		$b->say('bench: steady state: restarting the cluster with the worker on (statesman.enabled) and track_commit_timestamp');
		$b->q("ALTER SYSTEM SET statesman.enabled = on;\nALTER SYSTEM SET track_commit_timestamp = on");
		$b->restart;
		$b->wait_for("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'statesman database worker'
                             AND datname = current_database())", 30, 'the database worker');
	}
	$b->fail('bench: steady state: another outbox exists; it would share the machine')
	  unless $b->q('SELECT count(*) FROM statesman.outboxes') == 0;
	# From empty ledger and sink tables; the small tables vacuumed, so that their start is clean.
	$b->q("TRUNCATE statesman.history, statesman.delivered;\nVACUUM ANALYZE statesman.cursors, statesman.outbox_state, statesman.leases");
	$b->q("SELECT statesman.create_outbox('steady', 'table')");    # into statesman.delivered
	$b->wait_for("SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'steady'", 30,
		'the dispatcher of outbox steady');
	# Unmeasured: connections, plans, the dispatcher's first pages.
	my %load = (file => $R->{script}{statesman}, clients => $s->{clients}, rate => $s->{steady_rate},
		sync => $s->{steady_sync});
	$b->pgbench(%load, secs => 3, tolerate => 1);
	wait_caught_up($b, 'steady');
	$b->q('CHECKPOINT');

	$S->{head0} = head_pos($b);
	$b->say("bench: steady state: $s->{steady_secs} s at " . fmt_int($s->{steady_rate})
		  . " appends/s ($s->{clients} clients, synchronous_commit $s->{steady_sync}) into outbox steady (table sink, statesman.delivered); a sample every $s->{steady_sample} s");
	$S->{size_start} = sizes($b);
	my $t0 = time;
	sample($b, $R, $t0);
	my $p = $b->pgbench_start($b->dir . '/steady-pgbench.log', %load, secs => $s->{steady_secs});
	my $next = $s->{steady_sample};
	# Samples while the appends run; the last one is taken when they end, below.
	while ($next < $s->{steady_secs} && $b->running($p))
	{
		# Sleep to the next multiple of the sample interval, a second at most at a time, to
		# notice pgbench's end.
		while ($b->running($p))
		{
			my $left = $t0 + $next - time;
			last if $left <= 0;
			usleep(1e6 * ($left > 1 ? 1 : $left));
		}
		last unless $b->running($p);
		sample($b, $R, $t0);
		$next += $s->{steady_sample};
	}
	my $r = $b->pgbench_wait($p)
	  or $b->fail("bench: pgbench failed (steady state):\n" . PostgreSQL::Test::Utils::slurp_file($p->{log}));
	$b->fail("bench: failed transactions (steady state):\n$r->{out}") if $r->{failed};
	# The last sample: as the appends end, before delivery catches up.
	sample($b, $R, $t0);
	$S->{size_end}  = sizes($b);
	$S->{tps}       = $r->{tps};
	$S->{txlat}     = $r->{txlat} // '';
	$S->{sched_lag} = $r->{sched_lag} // '';
	wait_caught_up($b, 'steady');
	my $pos1 = head_pos($b);
	# Per record of the run: append (occurred_at) → commit of the sink transaction that
	# inserted it, as in the latency windows of the delivery part.
	my $ms = "extract(epoch FROM pg_xact_commit_timestamp(d.xmin) - h.occurred_at) * 1000";
	my $rows = "FROM statesman.delivered d JOIN statesman.history h
            ON h.address = d.message->>'address' AND h.revision = (d.message->>'revision')::bigint
          WHERE d.global_position > $S->{head0} AND d.global_position <= $pos1";
	$S->{lat} = [ $b->row("
    SELECT count(*),
           round(percentile_cont(0.50) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(max(ms)::numeric, 1)
    FROM (SELECT $ms AS ms
          $rows) x") ];
	# The same per third of the run (records in position order): "p50/p99" of each third, so
	# that the report can give the median of three with its min and max, and show a trend.
	$S->{thirds} = [ map { s/\|/\//r } split /\n/, $b->q("
    SELECT round(percentile_cont(0.50) WITHIN GROUP (ORDER BY ms)::numeric, 1),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1)
    FROM (SELECT ntile(3) OVER (ORDER BY d.global_position) AS third,
                 $ms AS ms
          $rows) x
    GROUP BY third ORDER BY third") ];
	$S->{rows}{$_} = $b->q("SELECT count(*) FROM $_") for @RELS;
	my (undef, $p50, $p95, $p99, $max) = @{ $S->{lat} };
	$b->say('  steady: ' . fmt_int($S->{lat}[0]) . ' records at ' . fmt_int($S->{tps})
		  . " appends/s; commit→sink latency p50 / p95 / p99 (max) $p50 / $p95 / $p99 ($max) ms");
	$b->q("SELECT statesman.drop_outbox('steady')");
	return;
}

# "median (min–max)" of the p99s of the run's thirds.
sub thirds_p99
{
	my ($S) = @_;
	my ($m, $lo, $hi) = stats(map { (split m{/})[1] } @{ $S->{thirds} });
	return "$m ($lo–$hi)";
}

sub summary
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $S = $R->{steady};
	my $anon0 = $S->{samples}[0][7];
	my $anon1 = $S->{samples}[-1][7];
	my ($lagr, $lagr_max) = median_max(map { $_->[3] } @{ $S->{samples} });
	my ($lags, $lags_max) = median_max(map { $_->[4] } @{ $S->{samples} });
	my ($h1, $i1) = @{ $S->{size_end}{'statesman.history'} };
	my $n = $S->{rows}{'statesman.history'};
	my $hot = 0;
	$hot += $S->{size_end}{$_}[0] + $S->{size_end}{$_}[1] for qw(statesman.cursors statesman.outbox_state statesman.leases);
	my $head = "steady state, $s->{steady_secs} s at " . fmt_int($s->{steady_rate}) . ' appends/s to the `table` sink';
	return (
		"| 4 | $head: lag over the " . scalar(@{ $S->{samples} }) . ' samples, records / ms, median (max) | '
		  . fmt_int($lagr) . ' (' . fmt_int($lagr_max) . ") / $lags ($lags_max) | — | — | informational | — |",
		'| 4 | the same: commit → sink latency p99 per third of the run, ms | ' . thirds_p99($S) . ' | — | — | informational | — |',
		'| 4 | the same: dispatcher\'s private memory (`RssAnon`) at start → end, MB | '
		  . sprintf('%.1f → %.1f', $anon0 / 1024, $anon1 / 1024) . ' | — | — | no growth (≤ 1 MB) | '
		  . verdict($anon1 - $anon0, 1024, 'le') . ' |',
		'| 4 | the same: `statesman.history` heap + indexes per record at the end, bytes (bloat) | '
		  . sprintf('%.0f', $n > 0 ? ($h1 + $i1) / $n : 0) . ' | — | — | informational | — |',
		'| 4 | the same: the hot bookkeeping tables (cursors, outbox_state, leases), heap + indexes at the end | '
		  . size($hot) . ' | — | — | bounded | ' . verdict($hot, 1048576, 'le') . ' |');
}

sub report
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $S = $R->{steady};
	my ($n, $p50, $p95, $p99, $max) = @{ $S->{lat} };
	my ($lagr, $lagr_max) = median_max(map { $_->[3] } @{ $S->{samples} });
	my ($lags, $lags_max) = median_max(map { $_->[4] } @{ $S->{samples} });
	my ($rss0, $anon0) = @{ $S->{samples}[0] }[ 6, 7 ];
	my ($rss1, $anon1) = @{ $S->{samples}[-1] }[ 6, 7 ];
	my $growth = $anon1 - $anon0;
	my $met = $growth <= 1024 ? 'yes' : '**no**';
	(my $sched = $S->{sched_lag}) =~ s{ }{ / };
	my @o;
	push @o, '', "### Steady state: $s->{steady_secs} s at " . fmt_int($s->{steady_rate}) . ' appends/s, delivered to the `table` sink', '',
	  '- the same cluster (worker on, `track_commit_timestamp` on), `statesman.history` and `statesman.delivered` emptied, `statesman.cursors`, `outbox_state` and `leases` vacuumed; one outbox `steady` (`table` sink into `statesman.delivered`, default options), its dispatcher leading and caught up after 3 s of unmeasured appends; autovacuum at PostgreSQL\'s defaults',
	  "- pgbench `-R $s->{steady_rate} -c $s->{clients} -T $s->{steady_secs}` of the append part's statesman script (one append per transaction, `synchronous_commit` $s->{steady_sync}): "
	  . fmt_int($S->{tps}) . " appends/s achieved; an append transaction took $S->{txlat} ms on average; pgbench's schedule lag avg / max: $sched ms",
	  "- a sample every $s->{steady_sample} s (" . scalar(@{ $S->{samples} })
	  . ' samples, from the start to the end of the appends): the lag (committed records not delivered yet: those still without a position, plus head − cursor from `outbox_status`; and the age of the oldest of them), the dispatcher\'s `/proc/<pid>/status` (pid = `outbox_status.leader_pid`; dispatcher pids seen: '
	  . join(' ', @{ $S->{pids} }) . '), and the relations\' sizes. `VmRSS` counts the pages of `shared_buffers` the dispatcher touched (with normal pages), which belong to the server; its own memory is `RssAnon`.',
	  '- latency per record: the commit of the sink transaction that inserted it − its `occurred_at`, over all ' . fmt_int($n) . ' records of the run',
	  '', '| measurement | result | notes |', '|---|---|---|',
	  "| commit → sink latency, ms: p50 / p95 / p99 (max) | $p50 / $p95 / $p99 ($max) | every record of the run |",
	  '| commit → sink latency per third of the run, ms: p99 median (min–max) | ' . thirds_p99($S) . ' | p50/p99 of each third: ' . dot_list(@{ $S->{thirds} }) . ' |',
	  '| lag in the samples, records: median (max) | ' . fmt_int($lagr) . ' (' . fmt_int($lagr_max) . ') | committed, not delivered yet (without a position, or past the cursor) |',
	  "| lag in the samples, ms: median (max) | $lags ($lags_max) | age of the oldest of them |",
	  '| dispatcher memory, MB: private (`RssAnon`) at start → end | ' . sprintf('%.1f → %.1f', $anon0 / 1024, $anon1 / 1024)
	  . ' | growth ' . sprintf('%+.1f', $growth / 1024) . " MB; no growth (≤ 1 MB): $met |",
	  '| dispatcher memory, MB: `VmRSS` at start → end | ' . sprintf('%.1f → %.1f', $rss0 / 1024, $rss1 / 1024) . ' | shared buffers included when not in huge pages |',
	  '', '| relation | heap at start | heap at end | indexes at start | indexes at end | rows at end | bytes per row at end (heap + indexes) | dead tuples at end | autovacuums during the run |',
	  '|---|---|---|---|---|---|---|---|---|';
	for my $rel (@RELS)
	{
		my ($h0, $i0, undef, $av0) = @{ $S->{size_start}{$rel} };
		my ($h1, $i1, $dead, $av1) = @{ $S->{size_end}{$rel} };
		my $rows = $S->{rows}{$rel};
		my $per = sprintf('%.0f', $rows > 0 ? ($h1 + $i1) / $rows : 0);
		push @o, "| `$rel` | " . size($h0) . ' | ' . size($h1) . ' | ' . size($i0) . ' | ' . size($i1) . ' | '
		  . fmt_int($rows) . ' | ' . fmt_int($per) . ' | ' . fmt_int($dead) . ' | ' . ($av1 - $av0) . ' |';
	}
	push @o, '', 'Samples (elapsed s, head, cursor, lag records, lag ms, dispatcher pid, VmRSS kB, RssAnon kB):', '', '```',
	  (map { join(' ', @$_) } @{ $S->{samples} }), '```';
	return @o;
}

1;

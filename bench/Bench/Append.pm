# The append part: throughput of statesman.append() against a bare single-row INSERT of the
# same payload into an indexed table and against PgQ's pgq.insert_event, same cluster, same
# settings, same clients, in turn in each round, with synchronous_commit on and off; then
# sequence_feed() of the backlog the append runs left. The background worker is off.
#
#   Bench::Append::setup($b, $R)     the schema, the pgbench scripts (statesman, baseline)
#   Bench::Append::measure($b, $R)   the runs; one progress line per run
#   Bench::Append::report($b, $R)    the section "Append vs bare INSERT"
#   Bench::Append::summary($b, $R)   its rows of the summary table
#
# $R->{tps}{"clients/sync/workload"}, $R->{cpu}{…}: one value per run, in run order (run i of
# one workload and run i of another are of the same round); $R->{wal}{workload}: WAL bytes per
# transaction of every run; $R->{others}{"clients/sync"}: other processes' CPU % per run.
package Bench::Append;

use strict;
use warnings;
use utf8;

use Bench::Format qw(stats fmt_int fmt_cell rate_cell ratio verdict paired_ratio med dot_list);
use Time::HiRes qw(time);

our @WORKLOADS = qw(baseline pgq statesman);    # in turn, statesman last: its records are the backlog

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
-- index on (address, revision), like statesman.history's primary key (address, revision)
-- plus its partial index on id for records that wait for a feed position.
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

# Every measured run starts from the same state: all three tables empty, a fresh checkpoint
# (so full-page writes fall on each run alike), no leftover dead tuples.
sub reset_tables
{
	my ($b, $R) = @_;
	$b->q("TRUNCATE bench.bare, statesman.history, $R->{pgq_truncate};\nCHECKPOINT");
	return;
}

# One run of workload $w: [tx/s, transactions].
sub run_pgbench
{
	my ($b, $R, $w, $sync, $secs, $c) = @_;
	my $r = $b->pgbench(
		file         => $R->{script}{$w},
		clients      => $c,
		secs         => $secs,
		sync         => $sync,
		what         => "$w, synchronous_commit=$sync",
		check_failed => 1);
	return ($r->{tps}, $r->{ntx});
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
	my @ac    = @{ $s->{append_clients} };
	my $total = @ac * 2 * 3 * $s->{runs};
	$b->say("bench: append: @ac clients, $s->{secs} s per run, $s->{runs} run(s) per cell ($total measured runs), payload $R->{payload_bytes} bytes");
	if ($s->{warmup} > 0)
	{
		for my $w (@WORKLOADS)
		{
			reset_tables($b, $R);
			my ($t) = run_pgbench($b, $R, $w, 'on', $s->{warmup}, $ac[0]);
			$b->say("  warm-up  $w: " . fmt_int($t) . ' tx/s (not counted)');
		}
	}
	my $n = 0;
	for my $c (@ac)
	{
		for my $sync (qw(on off))
		{
			for my $r (1 .. $s->{runs})
			{
				for my $w (@WORKLOADS)
				{
					reset_tables($b, $R);
					my $lsn0 = $b->q('SELECT pg_current_wal_lsn()');
					my $s0   = $b->snapshot;
					my ($t, $ntx) = run_pgbench($b, $R, $w, $sync, $s->{secs}, $c);
					my $s1   = $b->snapshot;
					my $o    = $b->others_pct($s0, $s1);
					my $lsn1 = $b->q('SELECT pg_current_wal_lsn()');
					my $wal  = $b->q("SELECT round(pg_wal_lsn_diff('$lsn1', '$lsn0') / GREATEST($ntx, 1))");
					my $cpu  = $b->cpu_per_tx($s0, $s1, $ntx);
					push @{ $R->{cpu}{"$c/$sync/$w"} }, $cpu;
					push @{ $R->{tps}{"$c/$sync/$w"} }, $t;
					push @{ $R->{wal}{$w} }, $wal;
					push @{ $R->{others}{"$c/$sync"} }, $o;
					$n++;
					$b->say(sprintf('  [%d/%d] %s clients  synchronous_commit=%s  run %d/%d  %-9s %7s tx/s   %s µs CPU/tx   %s WAL bytes/tx   (other processes: %s%% CPU)',
							$n, $total, $c, $sync, $r, $s->{runs}, $w, fmt_int($t), $cpu, $wal, $o));
				}
			}
		}
	}

	# The backlog: the last statesman run's records, committed and not yet sequenced (the
	# baseline's rows are dropped first so that nothing else competes for the cache).
	$b->q("TRUNCATE bench.bare, $R->{pgq_truncate};\nVACUUM ANALYZE statesman.history;\nCHECKPOINT");
	my $backlog = $b->q('SELECT count(*) FROM statesman.history WHERE global_position IS NULL');
	$R->{backlog} = $backlog;
	# sequence_feed(): one call per transaction, as a sequencing worker would make them.
	my $file = $b->file('sequence.sql',
		join('', map { "SELECT statesman.sequence_feed($s->{seq_batch});\n" }
			  0 .. int($backlog / $s->{seq_batch}) + 1));
	my $t0 = time;
	$b->q(undef, file => $file);
	my $t1 = time;
	my $left = $b->q('SELECT count(*) FROM statesman.history WHERE global_position IS NULL');
	$b->fail("bench: sequence_feed left $left records unsequenced") unless $left == 0;
	$R->{seq_rate} = sprintf('%.0f', $backlog / ($t1 - $t0));
	my $secs = sprintf('%.2f', $t1 - $t0);
	$b->say("  sequence_feed($s->{seq_batch}): " . fmt_int($backlog) . " records in $secs s = " . fmt_int($R->{seq_rate}) . ' records/s');
	return;
}

sub _target { return $_[0] eq 'on' ? '0.90' : '0.75'; }

sub summary
{
	my ($b, $R) = @_;
	my @rows;
	for my $c (@{ $b->s->{append_clients} })
	{
		for my $sync (qw(on off))
		{
			my $st = $R->{tps}{"$c/$sync/statesman"};
			my $ba = $R->{tps}{"$c/$sync/baseline"};
			my ($rat) = paired_ratio($st, $ba);
			my $target = _target($sync);
			push @rows,
			  "| 1 | append tx/s, $c clients, `synchronous_commit` $sync, vs bare single-row INSERT | "
			  . rate_cell(@$st) . ' | ' . rate_cell(@$ba) . ' | ' . sprintf('%.2f', $rat)
			  . "× (paired runs) | ≥ ${target}× | " . verdict($rat, $target) . ' |';
			my $pq = $R->{tps}{"$c/$sync/pgq"};
			($rat) = paired_ratio($st, $pq);
			push @rows,
			  "| 1 | append tx/s, $c clients, `synchronous_commit` $sync, vs PgQ `insert_event` | "
			  . rate_cell(@$st) . ' | ' . rate_cell(@$pq) . ' | ' . sprintf('%.2f', $rat)
			  . '× (paired runs) | ≥ 1.00× | ' . verdict($rat, 1.0) . ' |';
		}
	}
	return @rows;
}

sub report
{
	my ($b, $R) = @_;
	my $s  = $b->s;
	my @ac = @{ $s->{append_clients} };
	my @o;
	push @o, '', '### Append vs bare INSERT', '',
	  "- pgbench: `-n -M prepared -c N -j N -T $s->{secs}` with N = @ac clients, $s->{runs} run(s) per cell, in turn baseline/PgQ/statesman, $s->{warmup} s warm-up of each first; synchronous_commit per session via `PGOPTIONS='-c synchronous_commit=on|off'`",
	  "- workloads: payload a $R->{payload_bytes}-byte JSON object (random fields), addresses drawn at random from "
	  . fmt_int($s->{addresses}) . ';',
	  '  baseline `INSERT INTO bench.bare (address, revision, payload) VALUES (…)` (identity PK + index on (address, revision));',
	  "  statesman `SELECT statesman.append('bench', 'acct/' || :id, <payload>)`",
	  "- before every run: `TRUNCATE bench.bare, statesman.history` + `CHECKPOINT`; checkpoints triggered by WAL volume or time during the whole run: $R->{checkpoints}",
	  '',
	  "| measurement | clients | synchronous_commit | statesman: median (min–max) | bare INSERT: median (min–max) | ratio: median of paired runs (each pair) | ratio of medians | target | met | other processes' CPU, per run |",
	  '|---|---|---|---|---|---|---|---|---|---|';
	for my $c (@ac)
	{
		for my $sync (qw(on off))
		{
			my $st = $R->{tps}{"$c/$sync/statesman"};
			my $ba = $R->{tps}{"$c/$sync/baseline"};
			my @sm = stats(@$st);
			my @bm = stats(@$ba);
			# Each statesman run is paired with the baseline run of its round: the ratio of a
			# pair is immune to slow drift of the machine (a shared disk's flush rate, a
			# neighbour's load), so the verdict uses the median of the paired ratios.
			my ($rat, $per) = paired_ratio($st, $ba);
			my $target = _target($sync);
			push @o,
			  "| append, tx/s | $c | $sync | " . fmt_cell(@sm) . ' | ' . fmt_cell(@bm) . ' | '
			  . sprintf('%.2f', $rat) . "× ($per) | " . ratio($sm[0], $bm[0]) . "× | ≥ ${target}× | "
			  . verdict($rat, $target) . ' | '
			  . dot_list(map { "$_%" } @{ $R->{others}{"$c/$sync"} }) . ' |';
		}
	}
	for my $c (@ac)
	{
		for my $sync (qw(on off))
		{
			push @o,
			  "| CPU per transaction (server and pgbench), µs, median (min–max) | $c | $sync | "
			  . fmt_cell(stats(@{ $R->{cpu}{"$c/$sync/statesman"} })) . ' | '
			  . fmt_cell(stats(@{ $R->{cpu}{"$c/$sync/baseline"} }))
			  . ' | — | — | informational | — | — |';
		}
	}
	push @o,
	  '| WAL per transaction, bytes (median of all runs) | all | on and off | '
	  . fmt_int(med(@{ $R->{wal}{statesman} })) . ' | ' . fmt_int(med(@{ $R->{wal}{baseline} }))
	  . ' | — | — | informational | — | — |',
	  "| `sequence_feed($s->{seq_batch})` of a " . fmt_int($R->{backlog})
	  . '-record backlog (the last statesman run\'s), records/s | — | — | ' . fmt_int($R->{seq_rate})
	  . ' | — | — | — | informational | — | — |';
	return @o;
}

1;

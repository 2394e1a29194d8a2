# The capture part: INSERT and UPDATE throughput into a captured table (statesman.capture_table:
# its row trigger appends a record per row change in the writing transaction) against the same
# statements into the same table uncaptured, same cluster, same clients, in turn in each round,
# with synchronous_commit on and off and the background worker on (it sequences the captured
# records while they are written). A round of the captured table is done when its records are
# in the feed (statesman.feed_status shows nothing waiting).
#
# The two tables have the same shape and the same rows (BENCH addresses of them, preloaded): an
# INSERT writes a new key from the workload's own sequence, an UPDATE changes one random row's
# balance and note (a put of the row).
#
#   Bench::Capture::measure($b, $R)   the runs; one progress line per run
#   Bench::Capture::report($b, $R)    the section "Capturing a table"
#   Bench::Capture::summary($b, $R)   its rows of the summary table
#
# $R->{C}{tps}{"op/sync/side"} (side plain or captured): one value per run, in run order.
package Bench::Capture;

use strict;
use warnings;
use utf8;

use Bench::Format qw(fmt_int fmt_cell rate_cell paired_ratio verdict stats);

our $TARGET = 0.8;
my @OPS = qw(insert update);

sub _script
{
	my ($b, $s, $op, $side) = @_;
	my $t = "bench.cap_$side";
	my $sql =
	  $op eq 'insert'
	  ? "\\set amount random(1, 1000000)\nINSERT INTO $t (id, balance, note) VALUES (nextval('bench.cap_${side}_ids'), :amount, 'bench ' || :client_id);\n"
	  : "\\set id random(1, $s->{addresses})\n\\set amount random(1, 1000000)\nUPDATE $t SET balance = :amount, note = 'bench ' || :client_id WHERE id = :id;\n";
	return $b->file("capture_${op}_$side.sql", $sql);
}

sub _settle
{
	my ($b) = @_;
	$b->wait_for('SELECT COALESCE(unsequenced_records, 0) = 0 FROM statesman.feed_status', 300,
		"the captured records to reach the feed");
	return;
}

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $n = $s->{addresses};
	my $C = $R->{C} = { tps => {} };
	my $ddl = "SET client_min_messages = warning;\n";
	for my $side (qw(plain captured))
	{
		$ddl .= "DROP TABLE IF EXISTS bench.cap_$side;\nDROP SEQUENCE IF EXISTS bench.cap_${side}_ids;\n"
		  . "CREATE TABLE bench.cap_$side (id bigint PRIMARY KEY, balance integer NOT NULL, note text, "
		  . "updated_at timestamptz NOT NULL DEFAULT now());\n"
		  . "INSERT INTO bench.cap_$side (id, balance, note) SELECT i, i, 'initial' FROM generate_series(1, $n) i;\n"
		  . "CREATE SEQUENCE bench.cap_${side}_ids START " . ($n + 1) . ";\n";
	}
	$ddl .= "SELECT statesman.capture_table('bench.cap_captured', 'captured');\nVACUUM ANALYZE bench.cap_plain;\nVACUUM ANALYZE bench.cap_captured";
	$b->q($ddl);
	Bench::Append::set_worker($b, $R, 1);
	for my $sync (qw(on off))
	{
		for my $op (@OPS)
		{
			my %file = map { $_ => _script($b, $s, $op, $_) } qw(plain captured);
			if ($s->{warmup} > 0)
			{
				$b->pgbench(file => $file{$_}, clients => $s->{clients}, secs => $s->{warmup}, sync => $sync,
					tolerate => 1)
				  for qw(plain captured);
				_settle($b);
			}
			for my $run (1 .. $s->{runs})
			{
				for my $side (qw(plain captured))
				{
					$b->q('CHECKPOINT');
					my $r = $b->pgbench(file => $file{$side}, clients => $s->{clients}, secs => $s->{secs},
						sync => $sync, what => "capture $op $side", check_failed => 1);
					_settle($b) if $side eq 'captured';
					push @{ $C->{tps}{"$op/$sync/$side"} }, $r->{tps};
					$b->say(sprintf('  capture %-6s sync=%-3s %-8s run %d: %s tps', $op, $sync, $side, $run,
						fmt_int($r->{tps})));
				}
			}
			my ($m, $each) = paired_ratio($C->{tps}{"$op/$sync/captured"}, $C->{tps}{"$op/$sync/plain"});
			$b->say(sprintf('  capture %-6s sync=%-3s captured ÷ uncaptured = %.2f (%s)', $op, $sync, $m, $each));
		}
	}
	Bench::Append::set_worker($b, $R, 0);
	$b->q("SELECT statesman.release_table('bench.cap_captured');\nDROP TABLE bench.cap_plain, bench.cap_captured");
	return;
}

sub _rows
{
	my ($b, $R, $summary) = @_;
	my $s = $b->s;
	my $C = $R->{C} or return ();
	my @o;
	for my $op (@OPS)
	{
		for my $sync (qw(on off))
		{
			my $cap   = $C->{tps}{"$op/$sync/captured"};
			my $plain = $C->{tps}{"$op/$sync/plain"};
			my ($m, $each) = paired_ratio($cap, $plain);
			$m = sprintf('%.2f', $m);
			my $what = uc($op) . " into a captured table vs uncaptured, $s->{clients} clients, synchronous_commit $sync, tps";
			push @o,
			  $summary
			  ? "| 3 | $what | " . rate_cell(@$cap) . ' | ' . rate_cell(@$plain) . " | ${m}× | ≥ $TARGET× | " . verdict($m, $TARGET) . ' |'
			  : '| ' . uc($op) . " | $sync | " . rate_cell(@$plain) . ' | ' . rate_cell(@$cap) . " | $m ($each) | " . verdict($m, $TARGET) . ' |';
		}
	}
	return @o;
}

sub summary { return _rows($_[0], $_[1], 1); }

sub report
{
	my ($b, $R) = @_;
	my $s = $b->s;
	return () unless $R->{C};
	return ('', '### Capturing a table', '',
		"- two tables of the same shape (`id bigint PRIMARY KEY, balance integer, note text, updated_at timestamptz`), each preloaded with "
		  . fmt_int($s->{addresses})
		  . " rows; one captured (`statesman.capture_table`, root `captured`: a record per row change, appended by the row trigger in the writing transaction), the other not. INSERT: a new key from the table's own sequence; UPDATE: balance and note of a random row. pgbench, $s->{clients} clients, $s->{secs} s per run, $s->{runs} runs in turn (uncaptured, then captured) after a $s->{warmup} s warm-up of each, the background worker on; a captured run ends when its records are in the feed.",
		'',
		'| statement | synchronous_commit | uncaptured tps: median (min–max) | captured tps: median (min–max) | captured ÷ uncaptured: median (each pair) | ≥ 0.8× |',
		'|---|---|---|---|---|---|',
		_rows($b, $R, 0));
}

1;

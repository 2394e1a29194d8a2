# An immediate shutdown in the middle of delivery (docs/design.md §4 "The delivery
# promise", §6 `table`; docs/operations.md "Crashes").
#
# Four writers append to root `crash` (autocommit, one append per
# transaction, 40 addresses each so revisions grow) while two outboxes
# deliver the feed to the `table` sink: `small` (batch_size 10, so a page is
# nearly always under way) into public.sink_small and `big` (batch_size 1000)
# into statesman.delivered.  Once records flow, the server is stopped with
# `pg_ctl -m immediate` (every process gets SIGQUIT: no shutdown checkpoint,
# the dispatchers' asynchronous commits may not have reached the WAL), twice.
#
# After each crash the server comes back with statesman.enabled = off, so
# what recovery left can be looked at before any worker touches it:
#   - every append a writer saw commit is in the ledger;
#   - each sink holds exactly the records at or below its outbox's cursor
#     (rows and cursor are one transaction: a page lost in the crash is lost
#     whole);
#   - every (position, record) that a reader was handed by read_feed before the
#     crash still holds: no position read is given to another record;
# then the workers are switched on and, once they caught up:
#   - each sink holds every record of the ledger exactly once (message ids
#     compared, each at its feed position), nothing deduplicated or skipped.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node wait_until start_writer acked sink_vs_cursor);
use Test::More;

my $n_writers   = 4;
my $per_writer  = 20_000;    # more than a round can take: the crash cuts it
my $n_addresses = 40;
my $rounds      = 2;
my @outboxes    = ([ 'small', 'public.sink_small' ], [ 'big', 'statesman.delivered' ]);

my $node = statesman_node('immediate', "max_connections = 40\n");

sub query { return $node->safe_psql('postgres', $_[0]); }

query(
	q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('small', root => 'crash', batch_size => 10,
	    sink_options => '{"table": "public.sink_small"}');
	SELECT statesman.create_outbox('big', root => 'crash', batch_size => 1000);
});
ok(defined wait_until($node, q{SELECT count(*) = 2 FROM statesman.outbox_status WHERE state = 'leading'}, 30),
	'both outboxes have a leading dispatcher')
  or BAIL_OUT('no dispatchers');

my %cursor_before;    # the last cursor seen before a crash, per outbox
my $total_acked = 0;
for my $round (1 .. $rounds)
{
	my $sink_rows_at_start = query('SELECT count(*) FROM public.sink_small');
	my @writers = map { start_writer($node, 'crash', "r$round-w$_", $per_writer, $n_addresses) } 1 .. $n_writers;

	# Let records flow and pages be delivered for a while.
	my $t0 = time;
	my $delivered;
	# A reader outside the dispatchers reads the feed as it goes: every (position, record)
	# it is handed must still hold after the crash (the ticker commits asynchronously; the
	# feed hands on only positions whose ticks are flushed).
	my %seen;
	my $seen_after = query(q{SELECT COALESCE(statesman.head_position(), 0)});
	while (1)
	{
		$delivered = query('SELECT count(*) FROM public.sink_small') - $sink_rows_at_start;
		for my $row (split /\n/,
			query("SELECT global_position, message_id FROM statesman.read_feed($seen_after, 1000, 'crash')"))
		{
			my ($pos, $id) = split /\|/, $row;
			$seen{$pos} = $id;
			$seen_after = $pos if $pos > $seen_after;
		}
		last if $delivered >= 1500 || time - $t0 > 20;
		usleep(100_000);
	}
	%cursor_before = map {
		$_->[0] => query("SELECT COALESCE(statesman.cursor_position('$_->[0]'), 0)")
	} @outboxes;
	my ($head, $unsequenced) = split /\|/, query(
		q{SELECT COALESCE(head_position, 0), unsequenced_records FROM statesman.feed_status});

	$node->stop('immediate');
	my $t_crash = time;
	# A writer ends on the lost connection.
	for my $w (@writers)
	{
		$w->{in} = '';
		eval { $w->{h}->finish; 1 } or diag("writer: $@");
	}
	my @acked = map { acked($_) } @writers;
	my $running = grep { acked($_) < $per_writer } @writers;
	$total_acked += @acked;
	is($running, $n_writers, "round $round: every writer was still appending at the crash");
	cmp_ok($delivered, '>', 0, "round $round: delivery was under way at the crash");
	note sprintf(
		'round %d: crash %.1f s after the writers started, %d appends acknowledged, '
		  . 'head %d (%d committed records not sequenced yet), sink_small had %d new rows, '
		  . 'cursors last seen small=%d big=%d',
		$round, $t_crash - $t0, scalar(@acked), $head, $unsequenced, $delivered,
		$cursor_before{small}, $cursor_before{big});

	# Recovery, with the workers off: what did the crash leave?
	$node->append_conf('postgresql.conf', "statesman.enabled = off\n");
	$node->start;
	my $tmp = "$PostgreSQL::Test::Utils::tmp_check/acked_$round.txt";
	PostgreSQL::Test::Utils::append_to_file($tmp, join("\n", @acked) . "\n");
	query(qq{CREATE TABLE acked_$round (id text PRIMARY KEY)});
	query(qq{COPY acked_$round FROM '$tmp'});
	is(query(qq{SELECT count(*) FROM acked_$round a WHERE NOT EXISTS (
	                SELECT FROM statesman.history h
	                WHERE current_database() || '/' || h.address || '#' || h.revision = a.id)}),
		'0', "round $round: every acknowledged append survived the crash");
	my ($recovered_head, $recovered_unsequenced) = split /\|/, query(
		q{SELECT COALESCE(head_position, 0), unsequenced_records FROM statesman.feed_status});
	note sprintf('round %d: recovered with head %d and %d committed records without a position',
		$round, $recovered_head, $recovered_unsequenced);
	my $seen_file = "$PostgreSQL::Test::Utils::tmp_check/seen_$round.txt";
	PostgreSQL::Test::Utils::append_to_file($seen_file, join('', map { "$_\t$seen{$_}\n" } keys %seen));
	query(qq{CREATE TABLE seen_$round (pos bigint PRIMARY KEY, id text NOT NULL)});
	query(qq{COPY seen_$round FROM '$seen_file'});
	cmp_ok(scalar(keys %seen), '>', 0, "round $round: a reader was handed records before the crash");
	is(query(qq{SELECT count(*) FROM seen_$round s
	            LEFT JOIN statesman.read_feed((SELECT min(pos) - 1 FROM seen_$round), 1000000, 'crash') f
	              ON f.global_position = s.pos
	            WHERE f.message_id IS DISTINCT FROM s.id}),
		'0', "round $round: every position a reader was handed before the crash (" . scalar(keys %seen)
		  . ") names the same record after it");
	for my $o (@outboxes)
	{
		my ($name, $table) = @$o;
		my ($cursor, $rows, $distinct, $stray, $missing) = sink_vs_cursor($node, 'crash', $name, $table);
		is_deeply([ $distinct, $stray, $missing ], [ $rows, 0, 0 ],
			"round $round: after recovery, $table holds exactly the records up to "
			  . "outbox $name\'s cursor ($cursor), once each");
		note sprintf('round %d: outbox %s recovered at cursor %d, %d positions below the head '
			  . '(cursor last seen before the crash: %d)',
			$round, $name, $cursor, $recovered_head - $cursor, $cursor_before{$name});
	}

	# Workers on: delivery resumes from the cursors.
	$node->append_conf('postgresql.conf', "statesman.enabled = on\n");
	$node->reload;
	my $took = wait_until($node, q{SELECT statesman.head_position() IS NOT NULL
		     AND count(*) = 2 AND bool_and(cursor_position = statesman.head_position())
		  FROM statesman.outbox_status}, 60);
	ok(defined $took, "round $round: both outboxes caught up after the restart");
	note sprintf('round %d: caught up %.1f s after the workers were switched on', $round, $took // -1);
}

# Every record of the ledger exactly once in each sink, at its position.
my $ledger = query(q{SELECT count(*) FROM statesman.history WHERE root = 'crash'});
cmp_ok($ledger, '>=', $total_acked, "the ledger holds at least the $total_acked acknowledged appends");
for my $o (@outboxes)
{
	my ($name, $table) = @$o;
	my ($cursor, $rows, $distinct, $stray, $missing) = sink_vs_cursor($node, 'crash', $name, $table);
	is_deeply([ $rows, $distinct, $stray, $missing ], [ $ledger, $ledger, 0, 0 ],
		"$table holds all $ledger records exactly once, each at its position");
	my ($published, $dedup, $skipped, $parked) = split /\|/,
	  query("SELECT published_total, deduplicated_total, skipped_total, parked "
		  . "FROM statesman.outbox_status WHERE outbox_id = '$name'");
	is_deeply([ $published, $dedup, $skipped, $parked ], [ $ledger, 0, 0, 0 ],
		"outbox $name: published_total = $ledger, nothing deduplicated, skipped or parked");
}
note sprintf('%d records in the ledger after %d immediate shutdowns (%d acknowledged by the writers)',
	$ledger, $rounds, $total_acked);

$node->stop;
done_testing();

# An immediate shutdown in the middle of delivery (SPEC §4 "The delivery
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
# then the workers are switched on and, once they caught up:
#   - each sink holds every record of the ledger exactly once (message ids
#     compared, each at its feed position), nothing deduplicated or skipped.

use strict;
use warnings;

use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $n_writers   = 4;
my $per_writer  = 20_000;    # more than a round can take: the crash cuts it
my $n_addresses = 40;
my $rounds      = 2;
my @outboxes    = ([ 'small', 'public.sink_small' ], [ 'big', 'statesman.delivered' ]);

my $node = PostgreSQL::Test::Cluster->new('immediate');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'statesman'
statesman.naptime = '1s'
max_worker_processes = 16
max_connections = 40
});
$node->start;

sub query { return $node->safe_psql('postgres', $_[0]); }

# Polls $sql until it returns 't'; the seconds it took, or undef after $limit s.
sub wait_until
{
	my ($sql, $limit) = @_;
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		return time - $t0 if query($sql) eq 't';
		usleep(100_000);
	}
	diag("gave up after ${limit}s waiting for: $sql");
	return undef;
}

query(
	q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('small', root => 'crash', batch_size => 10,
	    sink_options => '{"table": "public.sink_small"}');
	SELECT statesman.create_outbox('big', root => 'crash', batch_size => 1000);
});
ok(defined wait_until(q{SELECT count(*) = 2 FROM statesman.outbox_status WHERE state = 'leading'}, 30),
	'both outboxes have a leading dispatcher')
  or BAIL_OUT('no dispatchers');

# Starts one writer: a psql that runs $per_writer autocommit appends and
# prints the message id of each one that committed.
sub start_writer
{
	my ($round, $w) = @_;
	my $tag = "r$round-w$w";
	my $sql = '';
	for my $i (1 .. $per_writer)
	{
		my $path = sprintf('%s/k%d', $tag, $i % $n_addresses);
		$sql .=
		    "SELECT current_database() || '/' || a.address || '#' || a.revision "
		  . "FROM statesman.append('crash', '$path', '{\"i\": $i}') a;\n";
	}
	my $base = "$PostgreSQL::Test::Utils::tmp_check/writer_" . $tag;
	PostgreSQL::Test::Utils::append_to_file("$base.sql", $sql);
	my %h = (out => "$base.out", err => "$base.err");
	# Output goes to files: nothing to pump, nothing lost when the server goes away.
	$h{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', "$base.sql" ],
		'>', $h{out}, '2>', $h{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default * 2));
	return \%h;
}

sub acked
{
	my ($h) = @_;
	return grep { /#\d+$/ } split /\n/, PostgreSQL::Test::Utils::slurp_file($h->{out});
}

# For each outbox: [cursor, rows in the sink, distinct ids in the sink, rows
# of the sink that are not ledger records at or below the cursor, ledger
# records of the root at or below the cursor that are not in the sink].
# Reads the tables directly: read_feed() would sequence.
sub sink_vs_cursor
{
	my ($outbox, $table) = @_;
	return split /\|/, query(
		qq{
		WITH c AS (SELECT COALESCE(statesman.cursor_position('$outbox'), 0) AS pos),
		     mine AS (SELECT current_database() || '/' || h.address || '#' || h.revision AS id,
		                     h.global_position
		              FROM statesman.history h, c
		              WHERE h.root = 'crash' AND h.global_position <= c.pos)
		SELECT (SELECT pos FROM c),
		       (SELECT count(*) FROM $table),
		       (SELECT count(DISTINCT message_id) FROM $table),
		       (SELECT count(*) FROM $table t WHERE NOT EXISTS
		           (SELECT FROM mine m WHERE m.id = t.message_id AND m.global_position = t.global_position)),
		       (SELECT count(*) FROM mine m WHERE NOT EXISTS
		           (SELECT FROM $table t WHERE t.message_id = m.id))});
}

my %cursor_before;    # the last cursor seen before a crash, per outbox
my $total_acked = 0;
for my $round (1 .. $rounds)
{
	my $sink_rows_at_start = query('SELECT count(*) FROM public.sink_small');
	my @writers = map { start_writer($round, $_) } 1 .. $n_writers;

	# Let records flow and pages be delivered for a while.
	my $t0 = time;
	my $delivered;
	while (1)
	{
		$delivered = query('SELECT count(*) FROM public.sink_small') - $sink_rows_at_start;
		last if $delivered >= 1500 || time - $t0 > 20;
		usleep(100_000);
	}
	%cursor_before = map {
		$_->[0] => query("SELECT COALESCE(statesman.cursor_position('$_->[0]'), 0)")
	} @outboxes;
	my ($head, $unsequenced) = split /\|/, query(
		q{SELECT COALESCE(max(global_position), 0), count(*) FILTER (WHERE global_position IS NULL)
		  FROM statesman.history});

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
		q{SELECT COALESCE(max(global_position), 0), count(*) FILTER (WHERE global_position IS NULL)
		  FROM statesman.history});
	note sprintf('round %d: recovered with head %d and %d committed records without a position',
		$round, $recovered_head, $recovered_unsequenced);
	for my $o (@outboxes)
	{
		my ($name, $table) = @$o;
		my ($cursor, $rows, $distinct, $stray, $missing) = sink_vs_cursor($name, $table);
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
	my $took = wait_until(
		q{SELECT statesman.head_position() IS NOT NULL
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
	my ($cursor, $rows, $distinct, $stray, $missing) = sink_vs_cursor($name, $table);
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

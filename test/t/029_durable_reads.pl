# Ticks commit asynchronously; readers flush before they hand on a position
# (docs/feed.md "Durability: no flush per tick"). Here the WAL stays in shared memory as long as
# it can: every session at synchronous_commit = off (the writers too), large wal_buffers, no
# background writer, and the WAL writer stopped (SIGSTOP). Writers append while the database
# worker ticks and a reader reads the feed with read_feed inside a transaction block (so that it
# never ticks itself: it serves the worker's ticks only). Then the WAL writer is killed
# (SIGKILL): the server crashes and recovers from the WAL that reached the kernel, three times.
# After each recovery every (position, record) the reader was handed must still hold: read_feed
# wrote and flushed the WAL holding those ticks, and the records, before it returned them. (What
# the writers were told about their own appends is not checked: at synchronous_commit = off a
# crash may take back acknowledged commits, which is PostgreSQL's promise, not the feed's.)

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node start_writer);
use Test::More;

my $node = statesman_node('durable_reads',
	"synchronous_commit = off\nwal_buffers = '64MB'\nbgwriter_lru_maxpages = 0\n"
	  . "checkpoint_timeout = '1h'\nmax_wal_size = '4GB'\nrestart_after_crash = on\nmax_connections = 40\n");
sub query { return $node->safe_psql('postgres', $_[0]); }
query('CREATE EXTENSION statesman');

for my $round (1 .. 3)
{
	# The reader reads only the database worker's ticks: wait for the worker (after a crash the
	# launcher starts it again within its naptime).
	ok($node->poll_query_until('postgres',
			q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'statesman database worker'}),
		"round $round: the database worker runs");
	my $walwriter = query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'});
	kill 'STOP', $walwriter or die "cannot stop the WAL writer $walwriter: $!";
	my @writers = map { start_writer($node, 'dur', "r$round-w$_", 20_000, 50) } 1 .. 3;
	my %seen;
	my $after = query('SELECT COALESCE(statesman.head_position(), 0)');
	my $t0 = time;
	my $reads = 0;
	while (time - $t0 < 1.5 || (!%seen && time - $t0 < 15))
	{
		for my $row (split /\n/,
			query("BEGIN; SELECT global_position, message_id FROM statesman.read_feed($after, 500, 'dur'); COMMIT;"))
		{
			my ($pos, $id) = split /\|/, $row;
			$seen{$pos} = $id;
			$after = $pos if $pos > $after;
		}
		$reads++;
	}
	kill 'KILL', $walwriter;
	for my $w (@writers)
	{
		eval { $w->{h}->finish; 1 } or note("writer: $@");
	}
	ok($node->poll_query_until('postgres',
			qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'walwriter' AND pid <> $walwriter}),
		"round $round: the server crashed and recovered");
	my $file = "$PostgreSQL::Test::Utils::tmp_check/durable_seen_$round.txt";
	PostgreSQL::Test::Utils::append_to_file($file, join('', map { "$_\t$seen{$_}\n" } keys %seen));
	query(qq{CREATE TABLE seen_$round (pos bigint PRIMARY KEY, id text NOT NULL)});
	query(qq{COPY seen_$round FROM '$file'});
	cmp_ok(scalar(keys %seen), '>', 0, "round $round: the reader was handed records ($reads reads)");
	my ($lost, $moved) = split /\|/, query(
		qq{SELECT count(*) FILTER (WHERE f.message_id IS NULL), count(*) FILTER (WHERE f.message_id <> s.id)
		   FROM seen_$round s
		   LEFT JOIN statesman.read_feed((SELECT min(pos) - 1 FROM seen_$round), 10000000, 'dur') f
		     ON f.global_position = s.pos});
	is("$lost/$moved", '0/0',
		"round $round: after the crash every position the reader was handed (" . scalar(keys %seen)
		  . ") still names the same record (none lost, none given to another record)");
}

$node->stop;
done_testing();

# An exactly-once consumer of a Redis stream, under kill -9 (docs/design.md §7; the
# `redis` sink's "At least once for consumers" in docs/sinks.md;
# examples/exactly_once_consumer).
#
# A `redis` outbox delivers 5,000 records of root `pay` (payload
# {"amount": n}, 20 accounts) to the stream example:payments of a real
# redis-server. The example consumer (built here from
# examples/exactly_once_consumer into the test's temp dir) reads the stream
# and adds each amount to a balance kept in a second database of the same
# cluster (`consumer`, with the extension installed for mark_applied). It is
# killed with SIGKILL again and again in the middle of the stream, and
# started again each time, until it has caught up:
#   - without --guard (consumer `naive`: each balance change commits on its
#     own, the read position is saved every 50 entries) the kills make it
#     read entries again and add their amounts twice: the balance is too
#     high, and by how many applications is printed;
#   - with --guard (consumer `example`: mark_applied, the balance change and
#     the read position in one transaction per entry) the balance is exactly
#     the sum of the ledger's amounts, every record applied once, and
#     applied_position is the last position;
#   - read once more from the start of the stream (--from 0), the guarded
#     consumer recognises every entry as applied and changes nothing.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node);
use IPC::Run;
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Redis;
use Test::More;
use Time::HiRes qw(time usleep);

my $n_records  = 5000;
my $n_accounts = 20;
my $max_kills  = 12;     # per mode; then the consumer runs to the end
my $ack_every  = 50;     # the unguarded consumer's position saves
my $key        = 'example:payments';
my $t_begin    = time;

# The example's source: next to the test's folder in the repository (or
# STATESMAN_SOURCE_DIR, when the tests run from a copy elsewhere).
my ($source) =
  grep { -f "$_/consumer.cpp" }
  map  { "$_/examples/exactly_once_consumer" }
  grep { defined } ($ENV{STATESMAN_SOURCE_DIR}, "$FindBin::RealBin/../..");
BAIL_OUT('examples/exactly_once_consumer not found: run the test from the repository, '
	  . 'or set STATESMAN_SOURCE_DIR to its root')
  unless $source;

# Built into the temp dir: nothing is left in the source tree.
my $build = PostgreSQL::Test::Utils::tempdir('consumer');
my ($make_out, $make_err) = ('', '');
IPC::Run::run([ 'make', '-s', '-C', $source, "BUILD=$build" ], '>', \$make_out, '2>', \$make_err);
my $consumer = "$build/consumer";
ok(-x $consumer, 'the example consumer builds (make -C examples/exactly_once_consumer BUILD=…)')
  or BAIL_OUT("make failed:\n$make_out$make_err");
note sprintf('built in %.1f s', time - $t_begin);

my $redis = Statesman::Redis->start;
my $port  = $redis->port;

my $node = statesman_node('consumer', "log_statement = none\n");

sub query    { return $node->safe_psql('postgres', $_[0]); }
sub consumed { return $node->safe_psql('consumer', $_[0]); }

query(
	qq{
	CREATE EXTENSION statesman;
	CREATE DATABASE consumer;
	SELECT statesman.create_outbox('payments', 'redis',
	    '{"port": $port, "key_prefix": "example", "stream": "payments"}', root => 'pay');
});
consumed('CREATE EXTENSION statesman');

# 5,000 records in 10 transactions; amounts from 1 to 997.
for my $t (0 .. 9)
{
	my ($first, $last) = ($t * 500 + 1, ($t + 1) * 500);
	query(
		qq{SELECT count(*) FROM generate_series($first, $last) i, LATERAL
		   statesman.append('pay', 'acct/' || (i % $n_accounts),
		                    jsonb_build_object('amount', (i * 7919) % 997 + 1)) a});
}
ok( $node->poll_query_until(
		'postgres', q{SELECT (SELECT unsequenced_records FROM statesman.feed_status) = 0
		                 AND cursor_position = head_position
		              FROM statesman.outbox_status WHERE outbox_id = 'payments'}),
	'the outbox delivered them')
  or BAIL_OUT('no delivery');
my ($n_ledger, $sum, $last_pos, $store, $epoch) = split /\|/, query(
	q{SELECT count(*), sum((convert_from(h.payload, 'UTF8')::jsonb ->> 'amount')::bigint),
	         max(statesman._position_of(h)), s.store, s.epoch
	  FROM statesman.history h CROSS JOIN statesman.store_info() s
	  WHERE h.root = 'pay' GROUP BY s.store, s.epoch});
is($n_ledger, $n_records,
	"the ledger holds $n_records records (amounts add up to $sum), the last at position $last_pos");
is($redis->command('XLEN', $key), $n_records, "the stream $key holds $n_records entries");

my $consumer_db = $node->connstr('consumer');

# Starts the consumer; its stdout (one line per entry) and stderr go to files.
sub start_consumer
{
	my ($base, @args) = @_;
	my $pid = fork // die "cannot fork: $!";
	if ($pid == 0)
	{
		open STDIN,  '<', '/dev/null';
		open STDOUT, '>', "$base.out";
		open STDERR, '>', "$base.err";
		exec($consumer, '--db', $consumer_db, '--redis-port', $port, '--stream', $key,
			'--exit-when-idle', '--verbose', @args)
		  or POSIX::_exit(127);
	}
	return $pid;
}

# Entries a run has handled so far (the lines it printed after each commit).
sub handled
{
	my ($base) = @_;
	return 0 unless -e "$base.out";
	return scalar(() = slurp_file("$base.out") =~ /^(?:applied|skipped) /mg);
}

# The stream position a consumer has saved (0 before its first save).
sub saved_position
{
	my ($name) = @_;
	return consumed(
		qq{SELECT COALESCE((SELECT split_part(last_id, '-', 1)::bigint FROM example.read_positions
		                    WHERE consumer = '$name' AND stream = '$key'), 0)});
}

# Runs a consumer over the stream, killing it with SIGKILL after a random
# number (100 to 399) of entries of each run, $max_kills times, then lets
# it run to the end. Returns the figures.
sub run_with_kills
{
	my ($name, @args) = @_;
	my %f = (kills => 0, mid_stream => 0, runs => 0, lines => 0);
	while (1)
	{
		my $base = "$build/$name-" . ++$f{runs};
		my $pid = start_consumer($base, '--consumer', $name, @args);
		my $status;
		if ($f{kills} < $max_kills)
		{
			my $target   = 100 + int(rand(300));
			my $deadline = time + 60;
			while (time < $deadline)
			{
				if (waitpid($pid, WNOHANG) == $pid)
				{
					$status = $?;
					last;
				}
				last if handled($base) >= $target;
				usleep(2_000);
			}
			if (!defined $status)
			{
				kill 'KILL', $pid;
				waitpid($pid, 0);
				$f{lines} += handled($base);
				if (POSIX::WIFSIGNALED($?) && POSIX::WTERMSIG($?) == 9)
				{
					$f{kills}++;
					$f{mid_stream}++ if saved_position($name) < $last_pos;
				}
				next;
			}
		}
		else
		{
			waitpid($pid, 0);
			$status = $?;
		}
		$f{lines} += handled($base);
		$f{status} = $status;
		$f{stderr} = slurp_file("$base.err");
		last;
	}
	@f{qw(balance applications)} = split /\|/, consumed(
		qq{SELECT COALESCE(sum(balance), 0), COALESCE(sum(applications), 0)
		   FROM example.balances WHERE consumer = '$name'});
	$f{position} = saved_position($name);
	return \%f;
}

# ---------------------------------------------------------------------------
# Without the guard: ack every 50.
# ---------------------------------------------------------------------------
my $naive = run_with_kills('naive', '--ack-every', $ack_every);
is($naive->{status}, 0, 'unguarded: the last run ends by itself, caught up')
  or diag($naive->{stderr});
is($naive->{position}, $last_pos, "unguarded: its saved position is the stream's last entry ($last_pos-0)");
cmp_ok($naive->{mid_stream}, '>=', 3,
	"unguarded: killed $naive->{kills} times, $naive->{mid_stream} of them in the middle of the stream");
my $twice = $naive->{applications} - $n_records;
cmp_ok($twice, '>', 0, "unguarded: the kills made it count $twice records twice");
cmp_ok($naive->{balance}, '>', $sum,
	'unguarded: the balance is off by ' . ($naive->{balance} - $sum)
	  . " (it is $naive->{balance}, the records add up to $sum)");
note sprintf('unguarded: %d runs, %d kills (%d mid-stream), %d entries handled, %d applications '
	  . 'for %d records: %d counted twice; balance %d, expected %d',
	$naive->{runs}, $naive->{kills}, $naive->{mid_stream}, $naive->{lines}, $naive->{applications},
	$n_records, $twice, $naive->{balance}, $sum);

# ---------------------------------------------------------------------------
# With the guard: one transaction per entry.
# ---------------------------------------------------------------------------
my $guarded = run_with_kills('example', '--guard');
is($guarded->{status}, 0, 'guarded: the last run ends by itself, caught up')
  or diag($guarded->{stderr});
cmp_ok($guarded->{mid_stream}, '>=', 3,
	"guarded: killed $guarded->{kills} times, $guarded->{mid_stream} of them in the middle of the stream");
is($guarded->{balance}, $sum, "guarded: the balance is exactly the sum of the amounts ($sum)");
is($guarded->{applications}, $n_records, "guarded: each of the $n_records records was applied once");
is($guarded->{position}, $last_pos, "guarded: its saved position is the stream's last entry ($last_pos-0)");
is( consumed(qq{SELECT epoch || '|' || position FROM statesman.applied_position('example', '$store')}),
	"$epoch|$last_pos",
	"guarded: applied_position('example', '$store') is the store's epoch and the last position");
note sprintf('guarded: %d runs, %d kills (%d mid-stream), %d entries handled; balance %d, expected %d',
	$guarded->{runs}, $guarded->{kills}, $guarded->{mid_stream}, $guarded->{lines}, $guarded->{balance}, $sum);

# ---------------------------------------------------------------------------
# The guard itself: the whole stream read again.
# ---------------------------------------------------------------------------
my $base = "$build/example-replay";
my $pid  = start_consumer($base, '--consumer', 'example', '--guard', '--from', '0');
waitpid($pid, 0);
is($?, 0, 'replay: the guarded consumer reads the whole stream again from the start')
  or diag(slurp_file("$base.err"));
my $out = slurp_file("$base.out");
my $skipped = () = $out =~ /^skipped /mg;
my $applied = () = $out =~ /^applied /mg;
is_deeply([ $skipped, $applied ], [ $n_records, 0 ],
	"replay: all $n_records entries are recognised as applied (mark_applied returned false), none applied");
is( consumed(q{SELECT sum(balance) || '|' || sum(applications) FROM example.balances WHERE consumer = 'example'}),
	"$sum|$n_records", 'replay: the balance is unchanged');

note sprintf('wall time: %.1f s', time - $t_begin);
$node->stop;
$redis->stop;
done_testing();

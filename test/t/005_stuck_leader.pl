# A leader that is alive but stuck never blocks its outbox for much longer than
# lease_ttl + poll_interval (docs/design.md §4 "Lease").
#
# The dispatcher of outbox `stuck` blocks on a lock that another session holds
# on its sink table, so it stops renewing its lease. Once the lease row is older
# than lease_ttl the database worker's watchdog terminates the stuck leader, and
# a new dispatcher takes the lease. When the lock goes, the record that was
# pending is delivered exactly once, and nothing else was held up meanwhile.

use strict;
use warnings;

use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $ttl  = 3;    # seconds: lease_ttl of the stuck outbox
my $poll = 1;    # seconds: its poll_interval

my $node = PostgreSQL::Test::Cluster->new('stuck');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'statesman'
statesman.naptime = '1s'
max_worker_processes = 12
});
$node->start;

sub query { return $node->safe_psql('postgres', $_[0]); }

sub wait_for
{
	my ($sql, $what) = @_;
	ok($node->poll_query_until('postgres', $sql), $what)
	  or BAIL_OUT("gave up waiting: $what");
}

query(
	qq{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('stuck', root => 'stuck',
	    sink_options => '{"table":"public.sink_stuck"}', poll_interval => '$poll s',
	    lease_ttl => '$ttl s', lease_renew_interval => '1 s', max_retry_delay => '2 s');
	SELECT statesman.create_outbox('other', root => 'other',
	    sink_options => '{"table":"public.sink_other"}', poll_interval => '$poll s');
});
wait_for(q{SELECT count(*) = 2 FROM statesman.outbox_status WHERE state = 'leading'},
	'both outboxes have a leader');
query(q{SELECT statesman.append('stuck', 'warm-up', '{}')});
wait_for(q{SELECT count(*) = 1 FROM public.sink_stuck}, 'the warm-up record is delivered');
my $first_leader = query(q{SELECT leader_pid FROM statesman.outbox_status WHERE outbox_id = 'stuck'});

# A session locks the sink table, then a record arrives: the leader blocks in its page.
my ($in, $out, $err) = ('', '', '');
my $locker = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', '-' ],
	'<', \$in, '>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$in .= "BEGIN;\nLOCK TABLE public.sink_stuck IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n";
$locker->pump until $out =~ /locked/;
query(q{SELECT statesman.append('stuck', 'pending', '{"n": 1}')});
wait_for(
	qq{SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $first_leader},
	'the leader is blocked on the sink table');
my $t_blocked = time;

# Meanwhile another outbox is not held up.
query(q{SELECT statesman.append('other', 'meanwhile', '{}')});
wait_for(q{SELECT count(*) = 1 FROM public.sink_other}, 'the other outbox delivers meanwhile');

# The watchdog terminates the stuck leader once its lease row is older than lease_ttl.
wait_for(qq{SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $first_leader)},
	'the stuck leader is terminated');
my $stuck_for = time - $t_blocked;
note sprintf('stuck leader terminated %.2f s after it blocked (lease_ttl %d s)', $stuck_for, $ttl);
# The last renewal happened at most 1 s (lease_renew_interval) before the block, and the
# watchdog looks once a second: so at most lease_ttl + poll_interval, plus 1 s of slack
# for a loaded 2-core machine.
cmp_ok($stuck_for, '<=', $ttl + $poll + 1, 'within lease_ttl + poll_interval (+1 s slack)');
cmp_ok($stuck_for, '>=', $ttl - 1.5, 'not before its lease could have expired');
like(slurp_file($node->logfile), qr/outbox "stuck": the lease holder \(pid $first_leader\) has not renewed/,
	'the log names the terminated holder');

# A new dispatcher takes the lease (it blocks on the lock too, until the lock goes).
wait_for(
	qq{SELECT leader_pid IS NOT NULL AND leader_pid <> $first_leader
	   FROM statesman.outbox_status WHERE outbox_id = 'stuck'},
	'a new dispatcher holds the lease');

$in .= "COMMIT;\n\\q\n";
$locker->finish;
wait_for(q{SELECT count(*) = 2 FROM public.sink_stuck}, 'the pending record is delivered after the lock goes');
is(query(q{SELECT count(DISTINCT message_id) FROM public.sink_stuck}), '2', 'each record exactly once');
wait_for(
	q{SELECT cursor_position = head_position FROM statesman.outbox_status WHERE outbox_id = 'stuck'},
	'the cursor reaches the head');

$node->stop;
done_testing();

# A SIGTERM ends a dispatcher through its exit work (docs/operations.md, "What ending a
# process does"): before the process is gone, its lease row is released and its outbox_state
# row no longer names it, and the log shows a clean stop, not a FATAL.
#
#   leading   the leader is terminated while it idles between polls.
#   blocked   the leader is terminated while a statement of its page waits for a lock that
#             another session holds (the statement is cancelled; the page is rolled back and
#             delivered once, later).
#   standby   a standby waiting out a long poll_interval is terminated: it exits at once.
#
# In the first two, the database worker is stopped (SIGSTOP) around the SIGTERM, so that no new
# dispatcher can start and overwrite the rows before they are read: what they show is the old
# dispatcher's own exit work. Then it continues, and a new dispatcher takes over at once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin";
use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Statesman::Node qw(statesman_node wait_until wait_for outbox_status);
use Statesman::Session;

my $node = statesman_node('dispatcher_exit');
sub query { return $node->safe_psql('postgres', $_[0]); }

query(
	q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('quit', root => 'quit',
	    sink_options => '{"table":"public.sink_quit"}', poll_interval => '1 s', lease_ttl => '30 s');
});
wait_for($node, q{SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'quit'},
	'the outbox has a leader');
query(q{SELECT statesman.append('quit', 'warm-up', '{}')});
wait_for($node, q{SELECT count(*) = 1 FROM public.sink_quit}, 'the warm-up record is delivered');

my $session = Statesman::Session->open($node);

sub database_worker
{
	return query(
		q{SELECT pid FROM pg_stat_activity
		  WHERE backend_type = 'statesman database worker' AND datname = 'postgres'});
}

# Sends SIGTERM to $pid and returns the seconds until it is gone from pg_stat_activity.
sub terminate
{
	my ($pid) = @_;
	my $t0 = time;
	$session->run("SELECT pg_terminate_backend($pid)");
	usleep(5_000)
	  while $session->run("SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") ne '0'
	  && time < $t0 + 30;
	return time - $t0;
}

# The rows the exit work clears, as "holder_pid|dispatcher_pid|dispatcher_state" ('-' for NULL).
sub rows
{
	return $session->run(
		q{SELECT COALESCE(l.holder_pid::text, '-') || '|' || COALESCE(s.dispatcher_pid::text, '-') || '|'
		         || COALESCE(s.dispatcher_state, '-')
		  FROM statesman.leases l JOIN statesman.outbox_state s USING (outbox_id)
		  WHERE l.outbox_id = 'quit'});
}

# The log since $offset says that dispatcher $pid stopped cleanly.
sub clean_exit_logged
{
	my ($what, $offset, $pid, $leased) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my $line = $leased ? qr/outbox "quit": dispatcher stopped on request; lease released/
	                   : qr/outbox "quit": dispatcher stopped on request/;
	like($log, $line, "$what: the log shows the dispatcher's clean stop");
	unlike($log, qr/\[$pid\] FATAL: .*terminating background worker/,
		"$what: no FATAL 'terminating background worker' line");
	unlike($log, qr/"statesman dispatcher[^"]*" \(PID $pid\) exited with exit code [1-9]/,
		"$what: the dispatcher did not exit with an error");
}

###########################################################################
# leading: the leader is terminated between polls
###########################################################################
my $leader = outbox_status($node, 'quit', 'leader_pid');
like($leader, qr/^\d+$/, 'leading: the outbox has a leader pid');
is(rows(), "$leader|$leader|leading", 'leading: the lease row and outbox_state name the leader');
my $dbw = database_worker();
my $offset = -s $node->logfile;
kill 'STOP', $dbw;
my $took = terminate($leader);
my $after = rows();
kill 'CONT', $dbw;
note sprintf('leading: the leader exited %.3f s after SIGTERM', $took);
cmp_ok($took, '<', 2, 'leading: SIGTERM ends the leader within 2 s');
is($after, '-|-|-', 'leading: once it is gone, its lease row is released and outbox_state names no dispatcher');
clean_exit_logged('leading', $offset, $leader, 1);

my $since = wait_until($node,
	qq{SELECT COALESCE(leader_pid <> $leader, false) FROM statesman.outbox_status WHERE outbox_id = 'quit'}, 10);
ok(defined $since, 'leading: a new dispatcher takes the lease');
cmp_ok($since // 99, '<', 15, 'leading: without waiting for lease_ttl (30 s) to pass');
query(q{SELECT statesman.append('quit', 'after-leading', '{}')});
wait_for($node, q{SELECT count(*) = 2 FROM public.sink_quit}, 'leading: delivery goes on');

###########################################################################
# blocked: the leader is terminated while its page waits for a lock
###########################################################################
$leader = outbox_status($node, 'quit', 'leader_pid');
my ($in, $out, $err) = ('', '', '');
my $locker = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', '-' ],
	'<', \$in, '>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$in .= "BEGIN;\nLOCK TABLE public.sink_quit IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n";
$locker->pump until $out =~ /locked/;
query(q{SELECT statesman.append('quit', 'pending', '{}')});
wait_for($node, qq{SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $leader},
	'blocked: the leader waits for the sink table');
$dbw = database_worker();
$offset = -s $node->logfile;
kill 'STOP', $dbw;
$took = terminate($leader);
$after = rows();
kill 'CONT', $dbw;
note sprintf('blocked: the leader exited %.3f s after SIGTERM', $took);
cmp_ok($took, '<', 2, 'blocked: SIGTERM ends the leader within 2 s although it waits for a lock');
is($after, '-|-|-', 'blocked: its lease row is released and outbox_state names no dispatcher');
clean_exit_logged('blocked', $offset, $leader, 1);
wait_for($node,
	qq{SELECT COALESCE(leader_pid <> $leader, false) FROM statesman.outbox_status WHERE outbox_id = 'quit'},
	'blocked: a new dispatcher takes the lease');
$in .= "COMMIT;\n\\q\n";
$locker->finish;
wait_for($node, q{SELECT count(*) = 3 FROM public.sink_quit}, 'blocked: the pending record is delivered');
is(query(q{SELECT count(DISTINCT message_id) FROM public.sink_quit}), '3', 'blocked: each record once');

###########################################################################
# standby: a standby waiting out a long poll_interval is terminated
###########################################################################
# A session holds the outbox's lease in an open transaction (dispatch_once's lease), and the
# poll_interval is long: the dispatcher stands by, waiting 60 s between attempts.
query(q{SELECT statesman.alter_outbox('quit', poll_interval => '60 s')});
$leader = outbox_status($node, 'quit', 'leader_pid');
$dbw = database_worker();
kill 'STOP', $dbw;
terminate($leader);
my $holder = Statesman::Session->open($node);
$holder->run('BEGIN');
$holder->run(q{SELECT published FROM statesman.dispatch_once('quit')});
kill 'CONT', $dbw;
wait_for($node,
	q{SELECT dispatcher_state = 'standby' AND dispatcher_pid IS NOT NULL FROM statesman.outbox_state
	  WHERE outbox_id = 'quit'},
	'standby: a dispatcher stands by while a session holds the lease');
my $standby = query(q{SELECT dispatcher_pid FROM statesman.outbox_state WHERE outbox_id = 'quit'});
usleep(200_000);    # well inside its 60 s wait
$offset = -s $node->logfile;
kill 'STOP', $dbw;
$took = terminate($standby);
$after = rows();
kill 'CONT', $dbw;
note sprintf('standby: the standby exited %.3f s after SIGTERM', $took);
cmp_ok($took, '<', 2, 'standby: SIGTERM ends a standby within 2 s although its wait is 60 s');
like($after, qr/^(\d+|-)\|-\|-$/, 'standby: outbox_state names no dispatcher (the session still holds the lease)');
clean_exit_logged('standby', $offset, $standby, 0);
$holder->run('COMMIT');
$holder->close;
$session->close;

$node->stop;
done_testing();

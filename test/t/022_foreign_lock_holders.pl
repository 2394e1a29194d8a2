# A session that holds one of statesman's advisory-lock keys and is not one of its workers
# stops delivery for at most about lease_ttl + poll_interval: the database worker's watchdog
# terminates it and names it in the log (src/worker/database_worker.cpp, ExpireForeignHolders).
#
# A role with no grants at all takes, with pg_advisory_lock (open to PUBLIC):
#   1. the sequencer's key (1398033743, 0) and stays idle: before the fix no record was
#      sequenced again, ever; now records appended meanwhile are delivered within the bound.
#   2. the lease key of a paused outbox: before the fix the outbox stayed `leading` for good
#      after resume_outbox (the stuck-lease watchdog judged only transactions); now it delivers
#      within the bound after the resume.
#   3. the key of an address, outside any transaction: before, every append to that address
#      waited for as long as the session lasted; now it waits at most about the shortest lease_ttl.
# An application transaction that appended and stays open (it holds its address key) is left
# alone: it holds back only its own records.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use Statesman::Node qw(statesman_node wait_until wait_for hold_session);

my $ttl   = 3;    # seconds: lease_ttl of both outboxes
my $poll  = 1;    # seconds: their poll_interval
my $slack = 2;    # seconds on top, for a loaded machine

my $node = statesman_node('foreign');
sub query { return $node->safe_psql('postgres', $_[0]); }

query(
	qq{
	CREATE ROLE intruder LOGIN;
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('feed', root => 'feed',
	    sink_options => '{"table":"public.sink_feed"}', poll_interval => '$poll s',
	    lease_ttl => '$ttl s', max_retry_delay => '2 s');
	SELECT statesman.create_outbox('paused', root => 'paused',
	    sink_options => '{"table":"public.sink_paused"}', poll_interval => '$poll s',
	    lease_ttl => '$ttl s', max_retry_delay => '2 s');
});
wait_for($node, q{SELECT count(*) = 2 FROM statesman.outbox_status WHERE state = 'leading'},
	'both outboxes have a leader');

sub hold { return hold_session($node, @_); }

# An application's open transaction that appended (its address key stays held).
my ($writer, $writer_pid) = hold($node->safe_psql('postgres', 'SELECT current_user'),
	q{BEGIN; SELECT statesman.append('other', 'open', '{}');});

# 1. The sequencer's key.
my $log_offset = -s $node->logfile;
my ($seq, $seq_pid) = hold('intruder', 'SELECT pg_advisory_lock(1398033743, 0);');
query(q{SELECT statesman.append('feed', 'a', '{"n": 1}')});
my $t0 = time;
my $took = wait_until($node, q{SELECT count(*) = 1 FROM public.sink_feed}, 30);
ok(defined $took && $took <= $ttl + $poll + $slack,
	"a record appended while a role without grants holds the sequencer's key is delivered within lease_ttl + poll_interval (+${slack}s)"
) or diag('took ' . ($took // 'forever'));
note sprintf('sequencer key: delivered %.2f s after the append (lease_ttl %d s, poll_interval %d s)',
	$took // -1, $ttl, $poll);
is(query("SELECT count(*) FROM pg_stat_activity WHERE pid = $seq_pid"), '0',
	'the holder of the sequencer key was terminated');
my $log = slurp_file($node->logfile, $log_offset);
like($log, qr/statesman: terminating pid $seq_pid \(role "intruder", application_name "intruder-app", client [^)]*\): it held the sequencer's lock/,
	'the log names the terminated holder: pid, role, application_name');
$seq->{h}->kill_kill;

# 2. The lease key of a paused outbox.
query(q{SELECT statesman.pause_outbox('paused')});
wait_for($node, q{SELECT dispatcher_pid IS NULL FROM statesman.outbox_state WHERE outbox_id = 'paused'},
	'the paused outbox\'s dispatcher has stopped');
$log_offset = -s $node->logfile;
my ($lease, $lease_pid) = hold('intruder', q{SELECT pg_advisory_lock(1398033744, hashtext('paused'));});
query(q{SELECT statesman.resume_outbox('paused'); SELECT statesman.append('paused', 'b', '{"n": 2}')});
$took = wait_until($node, q{SELECT count(*) = 1 FROM public.sink_paused}, 30);
ok(defined $took && $took <= $ttl + $poll + $slack,
	"after resume_outbox, an outbox whose lease key a role without grants holds delivers within lease_ttl + poll_interval (+${slack}s)"
) or diag('took ' . ($took // 'forever'));
note sprintf('lease key: delivered %.2f s after the resume (lease_ttl %d s, poll_interval %d s)',
	$took // -1, $ttl, $poll);
isnt(query(q{SELECT leader_pid FROM statesman.outbox_status WHERE outbox_id = 'paused'}),
	$lease_pid, 'the intruder no longer leads the outbox');
$log = slurp_file($node->logfile, $log_offset);
like($log, qr/statesman: terminating pid $lease_pid \(role "intruder", application_name "intruder-app", client [^)]*\): it held the lease lock of outbox "paused"/,
	'the log names the terminated lease holder');
$lease->{h}->kill_kill;

# 3. An address's key, held outside any transaction (appends take it for their transaction
# only): appends to that address wait for at most about the shortest lease_ttl.
my $key = query(q{
	BEGIN;
	SELECT FROM statesman.append('feed', 'c', '{"n": 3}');
	SELECT (objid::bigint - CASE WHEN objid::bigint > 2147483647 THEN 4294967296 ELSE 0 END)
	  FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'
	   AND classid::bigint = statesman._lock_space('address') AND objsubid = 2;
	COMMIT;});
($key) = $key =~ /(-?\d+)\s*$/;
ok(defined $key, 'an append holds its address key for its transaction');
$log_offset = -s $node->logfile;
my ($addr, $addr_pid) = hold('intruder', "SELECT pg_advisory_lock(1398033742, $key);");
$t0 = time;
query(q{SET statement_timeout = '30s'; SELECT FROM statesman.append('feed', 'c', '{"n": 4}')});
$took = time - $t0;
ok($took <= $ttl + $poll + $slack,
	"an append to an address whose key a role without grants holds outside a transaction waits at most lease_ttl + poll_interval (+${slack}s)"
) or diag("took $took s");
note sprintf('address key: the append waited %.2f s (shortest lease_ttl %d s)', $took, $ttl);
$log = slurp_file($node->logfile, $log_offset);
like($log, qr/statesman: terminating pid $addr_pid \(role "intruder", application_name "intruder-app", client [^)]*\): it held an address's lock/,
	'the log names the terminated holder of the address key');
$addr->{h}->kill_kill;

# The open writer was never terminated, though it held its address key all along.
is(query("SELECT count(*) FROM pg_stat_activity WHERE pid = $writer_pid"), '1',
	'an open appending transaction is left alone');
$writer->{in} .= "COMMIT;\n\\q\n";
$writer->{h}->finish;

$node->stop;
done_testing();

# A captured table backfilled while the application writes (docs/capture.md "Backfilling").
#
# A 50,000-row table is captured; four pgbench clients update, delete and re-insert random rows
# while statesman.backfill_table copies every row into the feed in batches of their own
# transactions. Afterwards, for every key, the last record of its address is the row as it is
# (a put with the row's content), or a tombstone when the row is gone: no backfilled copy ever
# came after a newer change. A `table` sink downstream holds the same last records.
#
# Then a backfill of a second table is interrupted (its caller cancelled while a batch waits
# for a row another session holds) and called again: it resumes after the last committed
# batch, and every row is backfilled exactly once over the two calls. Last, a pg_dump /
# pg_restore of the database keeps capturing.

use strict;
use warnings;

use POSIX ();
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node wait_until wait_for outbox_status);
use Statesman::Session;
use Test::More;
use Time::HiRes qw(time usleep);

my $rows    = 50_000;
my $writers = 4;
my $batch   = 2000;

my $node = statesman_node('capture_backfill', "max_connections = 30\n");
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION statesman;
	CREATE TABLE accounts (id integer PRIMARY KEY, balance integer NOT NULL, note text);
	INSERT INTO accounts SELECT i, i, 'initial' FROM generate_series(1, $rows) i;
	SELECT statesman.capture_table('accounts');
	SELECT statesman.create_outbox('sink', sink_options => '{"table": "public.sink"}', root => 'accounts');
});

# The writers: one row per transaction (so they never deadlock with each other), random keys:
# 70% update, 20% delete, 10% insert (again) a key that may have been deleted.
my $dir    = PostgreSQL::Test::Utils::tempdir;
my $script = "$dir/capture_writer.sql";
PostgreSQL::Test::Utils::append_to_file(
	$script, <<"EOS");
\\set id random(1, $rows)
\\set what random(1, 100)
\\if :what <= 70
UPDATE accounts SET balance = balance + 1, note = 'client ' || :client_id WHERE id = :id;
\\elif :what <= 90
DELETE FROM accounts WHERE id = :id;
\\else
INSERT INTO accounts VALUES (:id, 0, 'again') ON CONFLICT (id) DO UPDATE SET note = 'again';
\\endif
EOS

sub start_pgbench
{
	my ($log, @args) = @_;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		open(STDOUT, '>', $log) or POSIX::_exit(126);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
		exec('pgbench', '-n', '-h', $node->host, '-p', $node->port, @args, 'postgres')
		  or POSIX::_exit(127);
	}
	return $pid;
}

my $pgbench_log = "$dir/capture_pgbench.log";
my $pgbench     = start_pgbench($pgbench_log, '-c', $writers, '-j', 2, '-T', 300, '-f', $script);
# The writers are writing before the backfill starts.
ok(wait_until($node, "SELECT count(*) > 200 FROM statesman.history WHERE root = 'accounts'", 60),
	'the writers write to the captured table');

my ($out, $err) = ('', '');
my $t0       = time;
my $backfill = IPC::Run::start(
	[
		'psql', '-XAt', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
		'-c', "SELECT statesman.backfill_table('accounts', $batch)"
	],
	'>', \$out, '2>', \$err);
my $backfill_ok = $backfill->finish;
my $took = time - $t0;
ok($backfill_ok, sprintf('backfill_table ended without an error (%.1f s)', $took)) or diag($err);
my ($returned) = $out =~ /^(\d+)$/m;
my $writes_during = $node->safe_psql('postgres',
	"SELECT count(*) FROM statesman.history WHERE root = 'accounts' AND metadata->>'op' <> 'backfill'");
# The writers must still be running when the backfill ended.
my $still_writing = waitpid($pgbench, POSIX::WNOHANG()) == 0;
ok($still_writing, 'the writers were still writing when the backfill ended');
kill 'TERM', $pgbench;    # not INT: ignored when the tests run as a background job
waitpid($pgbench, 0);

my @notices = $err =~ /NOTICE:  backfill of public\.accounts: batch (\d+)/g;
ok(@notices >= 5, 'progress: a NOTICE per batch seen (' . scalar(@notices) . ')');
is_deeply([ sort { $a <=> $b } @notices ], \@notices, 'the NOTICEs count the batches up');
my ($finished, $done, $batches) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT backfill_finished_at IS NOT NULL, backfilled_rows, backfill_batches FROM statesman.captured_tables");
is($finished, 't', 'captured_tables shows the backfill finished');
is($done, $returned, "backfill_table returned the rows it appended ($returned)");
my $backfilled = $node->safe_psql('postgres',
	"SELECT count(*) FROM statesman.history WHERE root = 'accounts' AND metadata->>'op' = 'backfill'");
is($backfilled, $returned, 'as many backfill records as it said');
cmp_ok($writes_during, '>', 1000, "the application wrote meanwhile ($writes_during changes)");

# Every key: the last record of its address is the row, or a tombstone for a deleted row.
my $check = q{
	WITH last AS (
		SELECT DISTINCT ON (h.address) h.address, h.operation, h.metadata->>'op' AS op,
		       convert_from(h.payload, 'UTF8')::jsonb AS payload
		FROM statesman.history h WHERE h.root = 'accounts'
		ORDER BY h.address, h.revision DESC)
	SELECT count(*) FILTER (WHERE a.id IS NOT NULL AND l.address IS NULL) AS row_without_record,
	       count(*) FILTER (WHERE a.id IS NOT NULL AND (l.operation <> 'put' OR l.payload <> to_jsonb(a))) AS stale,
	       count(*) FILTER (WHERE a.id IS NULL AND l.operation IS DISTINCT FROM 'delete') AS deleted_not_tombstone,
	       count(*) FILTER (WHERE a.id IS NULL) AS deleted,
	       count(*) FILTER (WHERE l.op = 'backfill') AS last_is_backfill
	FROM generate_series(1, } . $rows . q{) k
	LEFT JOIN accounts a ON a.id = k
	LEFT JOIN last l ON l.address = 'accounts/' || k
};
my ($missing, $stale, $not_tombstone, $deleted, $last_backfill) = split /\|/,
  $node->safe_psql('postgres', $check);
is($missing, 0, 'every row has a record');
is($stale, 0, 'for every row the last record of its address equals the row');
is($not_tombstone, 0, "every deleted row ($deleted) ends in a tombstone");
cmp_ok($deleted, '>', 100, 'rows were deleted while the backfill ran');
cmp_ok($last_backfill, '>', 1000, "the backfill's copy is the last record of the rows nobody changed since ($last_backfill)");

# Downstream: the table sink holds the same last record for every address.
my $head = $node->safe_psql('postgres', 'SELECT statesman.head_position()');
wait_for($node,
	"SELECT cursor_position >= statesman.head_position() AND statesman.head_position() >= $head FROM statesman.outbox_status WHERE outbox_id = 'sink'",
	'the table sink delivered everything');
my $sink = $node->safe_psql(
	'postgres', q{
	WITH last AS (
		SELECT DISTINCT ON (h.address) h.address, h.revision, h.operation
		FROM statesman.history h WHERE h.root = 'accounts' ORDER BY h.address, h.revision DESC),
	sunk AS (
		SELECT DISTINCT ON (s.message->>'address') s.message->>'address' AS address,
		       (s.message->>'revision')::bigint AS revision, s.message->>'operation' AS operation,
		       convert_from(decode(s.message->>'payload', 'base64'), 'UTF8')::jsonb AS payload
		FROM public.sink s ORDER BY s.message->>'address', s.global_position DESC)
	SELECT count(*) FILTER (WHERE s.address IS NULL OR s.revision <> l.revision OR s.operation <> l.operation),
	       count(*) FILTER (WHERE a.id IS NOT NULL AND s.payload IS DISTINCT FROM to_jsonb(a))
	FROM last l LEFT JOIN sunk s ON s.address = l.address
	LEFT JOIN accounts a ON l.address = 'accounts/' || a.id
});
is($sink, '0|0', 'the table sink holds the same last record of every address, each row as it is');

# Resumption: a backfill interrupted after a few batches continues after its last committed one.
$node->safe_psql(
	'postgres', q{
	CREATE TABLE ledger_lines (a text, b integer, v text, PRIMARY KEY (a, b));
	INSERT INTO ledger_lines SELECT 'k/' || (i % 7), i, md5(i::text) FROM generate_series(1, 20000) i;
	SELECT statesman.capture_table('ledger_lines', 'lines');
});
# A session holds one row in the middle of the table (key order) FOR UPDATE: the backfill's
# batches before it commit, the batch that reaches it waits for its lock, and the test cancels
# the caller then, however fast the machine runs the batches.
my $holder = Statesman::Session->open($node);
$holder->run("BEGIN");
$holder->run("SELECT FROM ledger_lines WHERE a = 'k/4' AND b = 10007 FOR UPDATE");
($out, $err) = ('', '');
my $first = IPC::Run::start(
	[
		'psql', '-XAt', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
		'-c', "SELECT statesman.backfill_table('ledger_lines', 500)"
	],
	'>', \$out, '2>', \$err);
wait_for($node,
	"SELECT backfill_batches >= 3 FROM statesman.captured_tables WHERE \"table\" = 'ledger_lines'::regclass",
	'the first backfill committed a few batches');
wait_for($node,
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'statesman backfill' AND wait_event_type = 'Lock'",
	'its batch waits for the held row');
$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT statesman.backfill_table(''ledger_lines''%'");
$first->finish;
like($err, qr/canceling statement due to user request/, 'the first backfill was cancelled');
wait_for($node,
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'statesman backfill'",
	'its worker stopped with it');
my ($after_key, $done_first, $unfinished) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT backfill_after_key, backfilled_rows, backfill_finished_at IS NULL FROM statesman.captured_tables WHERE \"table\" = 'ledger_lines'::regclass");
is($unfinished, 't', "the interrupted backfill's progress is kept (after key $after_key, $done_first rows)");
cmp_ok($done_first, '<', 20000, 'it stopped before the end');
$holder->run("ROLLBACK");
$holder->close;

my $second_err;
my $second = $node->psql('postgres', "SELECT statesman.backfill_table('ledger_lines', 500)",
	stdout => \$out, stderr => \$second_err);
is($second, 0, 'the second call ended without an error');
like($second_err, qr/resuming the backfill of public\.ledger_lines after key \Q$after_key\E/,
	'it says it resumes after that key');
is($out + $done_first, 20000, "it appended the rest ($out rows after $done_first)");
my $once = $node->safe_psql(
	'postgres', q{
	SELECT count(*) FILTER (WHERE n <> 1), count(*) FROM (
		SELECT l.a, l.b, (SELECT count(*) FROM statesman.history h
		                  WHERE h.root = 'lines' AND h.metadata->>'op' = 'backfill'
		                    AND h.address = 'lines/' || replace(l.a, '/', '%2F') || '/' || l.b) AS n
		FROM ledger_lines l) x
});
is($once, '0|20000', 'over both calls every row was backfilled exactly once');

# A dump and restore keeps capturing: the configuration is dumped with the extension (keyed by
# the table's name), the triggers with the table.
my $dump = "$dir/capture.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ], 'pg_dump of the database');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore into another database, without an error');
$node->safe_psql('restored', "INSERT INTO accounts VALUES ($rows + 1, 1, 'restored')");
is( $node->safe_psql(
		'restored',
		"SELECT count(*) FROM statesman.history WHERE address = 'accounts/' || ($rows + 1) AND metadata->>'op' = 'insert'"),
	'1',
	'the restored table is captured: its INSERT appends');

$node->stop;
done_testing();

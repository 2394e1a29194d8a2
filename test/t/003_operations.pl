# Operating the delivery workers (docs/design.md §2 "No prune loss", §4 "Registration",
# "Running it").
#
# One preloaded server (statesman.naptime = 1s) and, in turn:
#   1. pause_outbox stops an outbox's dispatcher and its delivery;
#      resume_outbox delivers everything appended meanwhile, exactly once.
#   2. alter_outbox(batch_size => ...) reaches the running dispatcher without
#      a restart: the sink's rows, grouped by the transaction that inserted
#      them (one page is one transaction), show pages of at most 7, then of
#      up to 500.
#   3. Retention waits for delivery: records an enabled outbox has not
#      delivered (its sink refuses them) are not pruned; once the sink takes
#      them, the database worker prunes.  A paused outbox holds nothing back.
#   4. A database worker or dispatcher that is killed is started again, and
#      delivery goes on.
#   5. statesman.enabled = off (ALTER SYSTEM + reload) stops the workers and
#      delivery; on again, delivery resumes and nothing is lost.
#   6. A database created after the server started is served within
#      statesman.naptime.
#   7. DROP EXTENSION statesman CASCADE there stops its workers, and the log
#      does not fill with errors about it afterwards.
# The load test of the lease and the worker-slot limit are in
# 004_load_and_slots.pl.

use strict;
use warnings;

use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $naptime   = 1;    # statesman.naptime below, in seconds
my $poll      = 1;    # every outbox's poll_interval (the default), in seconds
my $tolerance = 4;    # seconds allowed on top of an interval the contract names

my $node = PostgreSQL::Test::Cluster->new('operations');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'statesman'
statesman.naptime = '${naptime}s'
statesman.max_workers = 16
max_worker_processes = 20
max_connections = 40
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION statesman');

# One psql session for the checks and the small writes: polling through it
# costs no new connection each time.  Each statement runs on its own
# (autocommit); an error ends the test.
my %s = (in => '', out => '', err => '', n => 0);
$s{timer} = IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default);
$s{h} = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', '-' ],
	'<', \$s{in}, '>', \$s{out}, '2>', \$s{err}, $s{timer});

sub sql
{
	my ($query) = @_;
	my $mark = 'statement done ' . ++$s{n};
	$s{in} .= "$query\n;\n\\echo '$mark'\n";
	$s{timer}->start;
	eval {
		$s{h}->pump until $s{out} =~ /^\Q$mark\E$/m;
		1;
	} or die "psql session failed on: $query\nstderr: $s{err}\n$@";
	die "psql session reported: $s{err}\nfor: $query\n" if $s{err} =~ /ERROR|FATAL/;
	$s{err} = '';
	my $out = $s{out};
	$out =~ s/^\Q$mark\E\n//m;
	$s{out} = '';
	chomp $out;
	return $out;
}

# Polls $query until it returns $want; the seconds it took, or undef after
# $limit seconds.
sub wait_for
{
	my ($query, $want, $limit) = @_;
	my $start = time;
	my $got;
	while (1)
	{
		$got = sql($query);
		return time - $start if $got eq $want;
		last if time - $start > $limit;
		usleep(50_000);
	}
	diag("after ${limit}s, <$query> returned '$got', expected '$want'");
	return undef;
}

sub count_of
{
	my ($table) = @_;
	return sql("SELECT count(*) FROM $table");
}

sub status
{
	my ($outbox, $column) = @_;
	return sql(
		"SELECT $column FROM statesman.outbox_status WHERE outbox_id = '$outbox'");
}

# Appends $n records of root $root at paths "${prefix}1" .. "${prefix}$n",
# in one transaction.
sub append_n
{
	my ($root, $prefix, $n) = @_;
	return sql(
		    "SELECT count(*) FROM generate_series(1, $n) g, "
		  . "LATERAL statesman.append('$root', '$prefix' || g, jsonb_build_object('n', g)) a"
	);
}

# statesman's workers connected to $db (the launcher connects to none).
sub workers_in
{
	my ($db) = @_;
	return sql(
		    "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' "
		  . "AND backend_type IN ('statesman database worker', 'statesman dispatcher')"
	);
}

sub database_worker_pid
{
	my ($db) = @_;
	return sql(
		    "SELECT string_agg(pid::text, ',') FROM pg_stat_activity "
		  . "WHERE datname = '$db' AND backend_type = 'statesman database worker'");
}

sub log_position { return -s $node->logfile; }

sub error_lines
{
	my ($offset) = @_;
	return grep { /\bERROR:/ }
	  split /\n/, slurp_file($node->logfile, $offset);
}

sub sink_table
{
	my ($table) = @_;
	return qq('{"table": "public.$table"}');
}

###########################################################################
# 1. pause_outbox / resume_outbox
###########################################################################
sql(    "SELECT statesman.create_outbox('ops_pause', sink_options => "
	  . sink_table('sink_pause')
	  . ", root => 'pause')");
append_n('pause', 'p', 5);
ok(defined wait_for("SELECT count(*) FROM sink_pause", '5', 10 + $naptime),
	'pause: the running dispatcher delivers the first 5 records');

my $leader = status('ops_pause', 'leader_pid');
like($leader, qr/^\d+$/, 'pause: the outbox has a leading dispatcher');
is( sql(
		"SELECT backend_type || '|' || application_name FROM pg_stat_activity WHERE pid = $leader"
	),
	'statesman dispatcher|statesman dispatcher',
	'pause: the leader is a statesman dispatcher process');
my $cursor_before = status('ops_pause', 'cursor_position');

sql("SELECT statesman.pause_outbox('ops_pause')");
is(status('ops_pause', 'state'), 'paused', 'pause: state is paused at once');
my $took = wait_for("SELECT count(*) FROM pg_stat_activity WHERE pid = $leader",
	'0', $poll + $tolerance);
ok(defined $took, 'pause: the dispatcher process exits');
note sprintf('pause: the dispatcher exited %.2f s after pause_outbox', $took // -1);
is(workers_in('postgres') . '|' . sql(
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'statesman dispatcher'"),
	'1|0',
	'pause: no dispatcher runs (only the database worker)');
is(sql("SELECT dispatcher_pid IS NULL FROM statesman.outbox_state WHERE outbox_id = 'ops_pause'"),
	't', 'pause: the dispatcher noted that it stopped');

append_n('pause', 'q', 5);
# Nothing to poll for: the point is that nothing happens.  Three poll
# intervals, each of which would have delivered.
usleep(3 * $poll * 1_000_000);
is(count_of('sink_pause'), '5', 'pause: nothing appended while paused is delivered');
is(status('ops_pause', 'cursor_position'), $cursor_before, 'pause: the cursor stays');
is(status('ops_pause', 'state') . '|' . status('ops_pause', 'lag_records'),
	'paused|5', 'pause: the status view shows paused and 5 records of lag');
is(sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'statesman dispatcher'"),
	'0', 'pause: no dispatcher was started meanwhile');

sql("SELECT statesman.resume_outbox('ops_pause')");
$took = wait_for("SELECT count(*) FROM sink_pause", '10', $naptime + $poll + $tolerance);
ok(defined $took, 'resume: everything appended while paused arrives');
note sprintf('resume: delivered %.2f s after resume_outbox', $took // -1);
is( sql(
		"SELECT string_agg((message->>'path') || '#' || (message->>'revision'), ',' "
		  . "ORDER BY global_position) FROM sink_pause"),
	'p1#1,p2#1,p3#1,p4#1,p5#1,q1#1,q2#1,q3#1,q4#1,q5#1',
	'resume: the sink holds each record once, in feed order');
is( status('ops_pause', "published_total || '|' || deduplicated_total || '|' || skipped_total"),
	'10|0|0', 'resume: 10 published, none twice, none skipped');
ok(defined wait_for(
		"SELECT state || '|' || (leader_pid <> $leader)::int FROM statesman.outbox_status WHERE outbox_id = 'ops_pause'",
		'leading|1', $tolerance),
	'resume: a new dispatcher leads the outbox');

###########################################################################
# 2. A live alter_outbox(batch_size => ...)
###########################################################################
sql(    "SELECT statesman.create_outbox('ops_batch', sink_options => "
	  . sink_table('sink_batch')
	  . ", root => 'batch')");
append_n('batch', 'warm', 1);
ok(defined wait_for("SELECT count(*) FROM sink_batch", '1', 10 + $naptime),
	'batch: the dispatcher delivers the first record');
my $batch_pid = status('ops_batch', 'leader_pid');
like($batch_pid, qr/^\d+$/, 'batch: the outbox has a leading dispatcher');

# Each page of the table sink commits in a transaction of its own, so the
# sink rows of one page share their xmin.
sub pages_of
{
	my ($prefix) = @_;
	return sql(
		    "SELECT count(*) || '|' || max(n) || '|' || min(n) FROM (SELECT count(*) AS n FROM sink_batch "
		  . "WHERE message->>'path' LIKE '$prefix%' GROUP BY xmin::text) pages");
}

sql("SELECT statesman.alter_outbox('ops_batch', batch_size => 7)");
# The contract gives a running dispatcher one poll interval to see a change;
# it reports nothing to poll for, so wait that long (plus a margin).
usleep(($poll + 0.5) * 1_000_000);
append_n('batch', 'small', 100);
ok(defined wait_for("SELECT count(*) FROM sink_batch", '101', 10),
	'batch: 100 more records are delivered with batch_size 7');
my ($pages, $largest, $smallest) = split /\|/, pages_of('small');
note "batch_size 7: 100 records came in $pages pages of $smallest..$largest";
cmp_ok($largest, '<=', 7, 'batch: no page larger than 7');
cmp_ok($pages, '>=', 15, 'batch: at least 15 pages for 100 records');
is(status('ops_batch', 'leader_pid'), $batch_pid,
	'batch: the same dispatcher process (no restart)');

sql("SELECT statesman.alter_outbox('ops_batch', batch_size => 500)");
usleep(($poll + 0.5) * 1_000_000);
append_n('batch', 'large', 1200);
ok(defined wait_for("SELECT count(*) FROM sink_batch", '1301', 20),
	'batch: 1200 more records are delivered with batch_size 500');
($pages, $largest, $smallest) = split /\|/, pages_of('large');
note "batch_size 500: 1200 records came in $pages pages of $smallest..$largest";
is($largest, 500, 'batch: the largest page has 500 records');
is($pages,   3,   'batch: 1200 records in 3 pages');
is(status('ops_batch', 'leader_pid'), $batch_pid,
	'batch: still the same dispatcher process');
is(sql("SELECT count(DISTINCT message_id) FROM sink_batch"), '1301', 'batch: each record once');

###########################################################################
# 3. Retention waits for delivery (no prune loss)
###########################################################################
sql(q{
	SELECT statesman.declare_root('keep', max_revisions => 1);
	CREATE TABLE public.sink_keep (
		message_id      text PRIMARY KEY,
		global_position bigint NOT NULL,
		message         jsonb NOT NULL,
		published_at    timestamptz NOT NULL DEFAULT now());
	CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql
		AS $$BEGIN RAISE EXCEPTION 'the sink refuses %', NEW.message_id; END$$;
	CREATE TRIGGER refuse BEFORE INSERT ON public.sink_keep
		FOR EACH ROW EXECUTE FUNCTION public.refuse();
});
sql(    "SELECT statesman.create_outbox('ops_keep', sink_options => "
	  . sink_table('sink_keep')
	  . ", root => 'keep', min_retry_delay => '100 milliseconds', max_retry_delay => '1 second')"
);

sub revisions_of
{
	my ($path) = @_;
	return sql(
		"SELECT string_agg(revision::text, ',' ORDER BY revision) FROM statesman.history('keep', '$path')"
	);
}

for my $i (1 .. 3)
{
	sql("SELECT count(*) FROM statesman.append('keep', 'a', jsonb_build_object('v', $i))");
}
ok( defined wait_for(
		"SELECT attempts >= 2 AND last_error LIKE '%the sink refuses%' FROM statesman.outbox_status WHERE outbox_id = 'ops_keep'",
		't', 10 + $naptime),
	'retention: the outbox tries to deliver and its sink refuses');
# Two more passes of the database worker's deferred pruning (every second).
usleep(2_000_000);
is(revisions_of('a'), '1,2,3',
	'retention: max_revisions 1, yet all 3 undelivered revisions stay');
is(sql("SELECT count(*) FROM statesman.prune_pending WHERE address = 'keep/a'"),
	'1', 'retention: the address waits in prune_pending');
is(count_of('sink_keep'), '0', 'retention: nothing was delivered');
is(status('ops_keep', 'state'), 'backing_off', 'retention: the outbox is backing off');

sql('DROP TRIGGER refuse ON public.sink_keep');
ok(defined wait_for("SELECT count(*) FROM sink_keep", '3', $tolerance),
	'retention: once the sink accepts, the records are delivered');
is( sql(
		"SELECT string_agg(message->>'revision', ',' ORDER BY global_position) FROM sink_keep"),
	'1,2,3',
	'retention: the sink got all 3 revisions');
$took = wait_for(
	"SELECT string_agg(revision::text, ',') FROM statesman.history('keep', 'a')",
	'3', $tolerance);
ok(defined $took, 'retention: then the database worker prunes down to the newest revision');
note sprintf('retention: pruned %.2f s after delivery', $took // -1);
is(sql("SELECT count(*) FROM statesman.prune_pending WHERE address = 'keep/a'"),
	'0', 'retention: the address left prune_pending');

# The same situation, then the outbox is paused: a paused outbox does not
# hold pruning back.
sql(    'CREATE TRIGGER refuse BEFORE INSERT ON public.sink_keep '
	  . 'FOR EACH ROW EXECUTE FUNCTION public.refuse()');
for my $i (1 .. 3)
{
	sql("SELECT count(*) FROM statesman.append('keep', 'b', jsonb_build_object('v', $i))");
}
ok( defined wait_for(
		"SELECT attempts >= 2 AND last_error LIKE '%keep/b%' FROM statesman.outbox_status WHERE outbox_id = 'ops_keep'",
		't', 10),
	'retention: the sink refuses the new revisions');
usleep(1_500_000);
is(revisions_of('b'), '1,2,3', 'retention: undelivered, all 3 revisions stay');
sql("SELECT statesman.pause_outbox('ops_keep')");
$took = wait_for(
	"SELECT string_agg(revision::text, ',') FROM statesman.history('keep', 'b')",
	'3', $tolerance);
ok(defined $took, 'retention: with the outbox paused, pruning goes ahead');
note sprintf('retention: pruned %.2f s after pause_outbox', $took // -1);
is(count_of('sink_keep'), '3', 'retention: the paused outbox delivered nothing more');
sql("SELECT statesman.drop_outbox('ops_keep')");

###########################################################################
# 4. A worker that exits abnormally is started again
###########################################################################
my $dbw = database_worker_pid('postgres');
like($dbw, qr/^\d+$/, 'restart: one database worker serves the database');
sql("SELECT pg_terminate_backend($dbw)");
$took = wait_for(
	    "SELECT count(*) FROM pg_stat_activity WHERE datname = 'postgres' "
	  . "AND backend_type = 'statesman database worker' AND pid <> $dbw",
	'1', $naptime + $tolerance);
ok(defined $took, 'restart: a new database worker runs after the old one was terminated');
note sprintf('restart: new database worker %.2f s after termination', $took // -1);
is(sql("SELECT count(*) FROM pg_stat_activity WHERE pid = $dbw"), '0',
	'restart: the terminated database worker is gone');

my $disp = status('ops_pause', 'leader_pid');
like($disp, qr/^\d+$/, 'restart: ops_pause has a leader');
sql("SELECT pg_terminate_backend($disp)");
$took = wait_for(
	"SELECT COALESCE(leader_pid <> $disp, false) FROM statesman.outbox_status WHERE outbox_id = 'ops_pause'",
	't', $poll + $tolerance);
ok(defined $took, 'restart: a new dispatcher leads after the old one was terminated');
note sprintf('restart: new dispatcher leading %.2f s after termination', $took // -1);
append_n('pause', 'r', 3);
ok(defined wait_for("SELECT count(*) FROM sink_pause", '13', $tolerance),
	'restart: delivery goes on');
is( status('ops_pause', "published_total || '|' || deduplicated_total"),
	'13|0', 'restart: 13 published in all, none twice');

###########################################################################
# 5. statesman.enabled = off, then on again
###########################################################################
sql(    "SELECT statesman.create_outbox('ops_switch', sink_options => "
	  . sink_table('sink_switch')
	  . ", root => 'switch')");
append_n('switch', 'before', 2);
ok(defined wait_for("SELECT count(*) FROM sink_switch", '2', 10 + $naptime),
	'enabled: delivery runs while on');

sql('ALTER SYSTEM SET statesman.enabled = off');
sql('SELECT pg_reload_conf()');
$took = wait_for(
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('statesman database worker', 'statesman dispatcher')",
	'0', $poll + $tolerance);
ok(defined $took, 'enabled off: the database worker and every dispatcher exit');
note sprintf('enabled off: workers gone %.2f s after the reload', $took // -1);
append_n('switch', 'during', 5);
usleep(3 * $poll * 1_000_000);
is(count_of('sink_switch'), '2', 'enabled off: nothing new is delivered');
is( sql(
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('statesman database worker', 'statesman dispatcher')"
	),
	'0',
	'enabled off: no worker was started meanwhile');

sql('ALTER SYSTEM SET statesman.enabled = on');
sql('SELECT pg_reload_conf()');
$took = wait_for("SELECT count(*) FROM sink_switch", '7', $naptime + $poll + $tolerance + 2);
ok(defined $took, 'enabled on: the records appended meanwhile are delivered');
note sprintf('enabled on: delivered %.2f s after the reload', $took // -1);
is( sql(
		"SELECT string_agg(message->>'path', ',' ORDER BY global_position) FROM sink_switch"),
	'before1,before2,during1,during2,during3,during4,during5',
	'enabled on: every record once, in feed order');
is(status('ops_switch', "published_total || '|' || deduplicated_total"),
	'7|0', 'enabled on: 7 published, none twice');
like(database_worker_pid('postgres'), qr/^\d+$/, 'enabled on: the database worker is back');
sql('ALTER SYSTEM RESET statesman.enabled');
sql('SELECT pg_reload_conf()');

###########################################################################
# 6. A database created after the server started
###########################################################################
$node->safe_psql('postgres', 'CREATE DATABASE late');
my $created = time;
$node->safe_psql(
	'late', q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('late_box', sink_options => '{"table": "public.late_sink"}');
	SELECT count(*) FROM generate_series(1, 3) g,
		LATERAL statesman.append('late', 'l' || g, jsonb_build_object('n', g)) a;
});
my $appended = time;
my $late_count;
while (1)
{
	$late_count = $node->safe_psql('late', 'SELECT count(*) FROM public.late_sink');
	last if $late_count eq '3' || time - $appended > $naptime + $tolerance;
	usleep(50_000);
}
my $served = time;
is($late_count, '3', 'late database: its records arrive in its sink');
cmp_ok($served - $appended, '<=', $naptime + $tolerance,
	'late database: served within statesman.naptime (+ tolerance)');
note sprintf('late database: delivered %.2f s after the append, %.2f s after CREATE EXTENSION',
	$served - $appended, $served - $created);
like(database_worker_pid('late'), qr/^\d+$/, 'late database: a database worker serves it');

###########################################################################
# 7. DROP EXTENSION statesman CASCADE in a served database
###########################################################################
my $late_worker = database_worker_pid('late');
my $late_disp   = sql(
	"SELECT pid FROM pg_stat_activity WHERE datname = 'late' AND backend_type = 'statesman dispatcher'"
);
like($late_disp, qr/^\d+$/, 'drop extension: the late database has a dispatcher');
my $log_at_drop = log_position();
$node->safe_psql('late', 'DROP EXTENSION statesman CASCADE');
# The launcher still starts a database worker there every naptime; it finds no
# extension and exits at once.  Count only processes that stay.
my $staying =
	"SELECT count(*) FROM pg_stat_activity WHERE datname = 'late' AND ("
  . "backend_type = 'statesman dispatcher' OR pid IN ($late_worker, $late_disp) "
  . "OR (backend_type = 'statesman database worker' AND backend_start < now() - interval '1 second'))";
$took = wait_for($staying, '0', $poll + $tolerance);
ok(defined $took, 'drop extension: its database worker and dispatcher exit');
note sprintf('drop extension: workers gone %.2f s after the drop', $took // -1);
my @at_drop = error_lines($log_at_drop);
# A worker caught in the middle of a statement when the tables go may end with
# one ERROR; that is all it may do.
cmp_ok(scalar @at_drop, '<=', 2,
	'drop extension: at most one ERROR line per stopping worker')
  or diag(join("\n", @at_drop));
note 'drop extension: ERROR lines while the workers stopped: ' . scalar @at_drop;
note "  $_" for @at_drop;

my $log_after = log_position();
usleep(3 * $naptime * 1_000_000);    # three launcher passes
is(sql($staying), '0', 'drop extension: no statesman worker stays connected');
is(sql("SELECT count(*) FROM pg_stat_activity WHERE datname = 'late' AND backend_type = 'statesman dispatcher'"),
	'0', 'drop extension: no dispatcher was started there meanwhile');
my @later = error_lines($log_after);
is(scalar @later, 0, 'drop extension: no ERROR lines in the log afterwards')
  or diag(join("\n", @later));
my $lines_later =
  grep { /late|statesman/ } split /\n/, slurp_file($node->logfile, $log_after);
note "drop extension: $lines_later log lines about it in 3 s afterwards";
is($node->safe_psql('late', 'SELECT count(*) FROM public.late_sink'),
	'3', 'drop extension: the sink table keeps what was delivered');

# The other database is unaffected.
append_n('pause', 's', 2);
ok(defined wait_for("SELECT count(*) FROM sink_pause", '15', $tolerance),
	'drop extension: delivery in the other database goes on');

$s{in} .= "\\q\n";
$s{h}->finish;
$node->stop;
done_testing();

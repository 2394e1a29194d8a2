# The change feed under concurrent load (docs/design.md §3 F1-F3, §4 cursors).
#
# Eight pgbench clients append to a small set of addresses (so revisions
# grow): about one transaction in ten rolls back, one in five appends twice,
# and a few stay open for seconds.  Two more sessions hold a transaction open
# for several seconds from the start (one commits, one rolls back).  Every
# writing transaction inserts its token into the plain table "truth" in the
# same transaction as the append, so once the writers are done "truth" holds
# exactly the committed records.
#
# Meanwhile one reader drains the feed in autocommit: read_feed() after its
# stored cursor, then advance_cursor() to the last position read, in a loop
# until the writers are done and the feed stays empty past the cursor; a
# second consumer
# reads small pages at the same time, so sequencing is requested from
# two sessions at once.  Then: every committed record was read exactly once,
# nothing aborted was read, positions strictly increased, and each address's
# revisions came in increasing order.

use strict;
use warnings;

use POSIX ();
use Time::HiRes qw(time usleep);
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use Statesman::Session;
use PostgreSQL::Test::Utils;
use Test::More;

my $n_writers     = 8;
my $tx_per_writer = 2600;    # ~1.08 committed records per transaction
my $n_addresses   = 40;
my $page_size     = 1000;
my $min_records   = 20_000;
my $hold_seconds  = 6;       # the two long-open sessions
my $drain_quiet_seconds = 2;

my $node = PostgreSQL::Test::Cluster->new('concurrent_feed');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = 40\n");
$node->start;

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION statesman;
	CREATE SEQUENCE token_seq;
	CREATE TABLE truth (
		token    bigint PRIMARY KEY,
		address  text   NOT NULL,
		revision bigint NOT NULL
	);
});

# A psql session kept open across statements (test/t/Statesman/Session.pm).
sub open_session { return Statesman::Session->open($node); }
sub run_sql      { my ($s, $sql) = @_; return $s->run($sql); }
sub close_session { $_[0]->close; }

# The writers' script.  A transaction appends to one of the shared
# addresses, or (one in a thousand) to an address of its own client and then
# stays open for 1-2.5 s; one in five appends a second time, to the same or a
# higher-numbered address (ascending order, so writers never deadlock); one in
# ten rolls back.
sub append_sql
{
	my ($tok, $root, $path) = @_;
	return "INSERT INTO truth (token, address, revision) "
	  . "SELECT :$tok, a.address, a.revision FROM statesman.append('$root', $path, "
	  . "jsonb_build_object('token', :$tok, 'client', :client_id), "
	  . "correlation_id => CAST(:$tok AS text)) AS a;";
}
my $dir    = PostgreSQL::Test::Utils::tempdir;
my $script = "$dir/writer.sql";
PostgreSQL::Test::Utils::append_to_file(
	$script, <<"EOS");
\\set k random(1, $n_addresses)
\\set k2 least(:k + random(0, 2), $n_addresses)
\\set shape random(1, 1000)
\\set outcome random(1, 100)
\\set hold_ms random(1000, 2500)
BEGIN;
SELECT nextval('token_seq') AS tok \\gset
\\if :shape <= 1
@{[ append_sql('tok', 'slow', "format('c%s', :client_id)") ]}
SELECT pg_sleep(:hold_ms / 1000.0);
\\else
@{[ append_sql('tok', 'acct', "format('k%s', :k)") ]}
\\endif
\\if :shape > 800
SELECT nextval('token_seq') AS tok2 \\gset
@{[ append_sql('tok2', 'acct', "format('k%s', :k2)") ]}
\\endif
\\if :outcome <= 10
ROLLBACK;
\\else
COMMIT;
\\endif
EOS

# Two long-open transactions, older than every pgbench transaction.
my %holder;
for my $outcome (qw(COMMIT ROLLBACK))
{
	my $s = open_session();
	run_sql($s, 'BEGIN');
	run_sql($s,
		    "INSERT INTO truth (token, address, revision) "
		  . "SELECT t.token, a.address, a.revision "
		  . "FROM (SELECT nextval('token_seq') AS token) t, "
		  . "LATERAL statesman.append('acct', 'long/' || lower('$outcome'), "
		  . "jsonb_build_object('token', t.token), correlation_id => t.token::text) a");
	$holder{$outcome} = $s;
}

# A second consumer that only competes: small pages, read and advance in
# one autocommit statement, so two sessions keep asking for sequencing.
my $rival_script = "$dir/rival.sql";
PostgreSQL::Test::Utils::append_to_file(
	$rival_script, <<'EOS');
SELECT statesman.advance_cursor('rival', m) FROM (SELECT max(global_position) AS m FROM statesman.read_feed(statesman.cursor_position('rival'), 100)) AS page WHERE m IS NOT NULL;
EOS

# pgbench runs as a separate process; the reader polls for its exit.
sub start_pgbench
{
	my ($log, @args) = @_;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		open(STDOUT, '>', $log) or POSIX::_exit(126);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
		exec('pgbench', '-n', '-h', $node->host, '-p', $node->port, @args,
			'postgres')
		  or POSIX::_exit(127);
	}
	return $pid;
}

my $started     = time;
my $pgbench_log = "$dir/pgbench.log";
my $pgbench_pid = start_pgbench($pgbench_log,
	'-c', $n_writers, '-j', 2, '-t', $tx_per_writer, '-f', $script);
my $rival_log = "$dir/rival.log";
my $rival_pid = start_pgbench($rival_log, '-c', 1, '-T', 8, '-f', $rival_script);
my $pgbench_status;

sub writers_running
{
	if (!defined $pgbench_status)
	{
		my $r = waitpid($pgbench_pid, POSIX::WNOHANG());
		$pgbench_status = $? if $r == $pgbench_pid;
	}
	return 1 if !defined $pgbench_status;
	return 1 if %holder;
	return 0;
}

# The reader.
my $reader = open_session();
my @read;    # [position, address, revision, token, message position matches]
my ($pages, $full_pages, $advance_refused) = (0, 0, 0);
my $quiet_since;        # first empty page after the writers ended
my $read_while_held;    # records read while the long transactions were open
my $deadline = $started + 170;
while (1)
{
	# Long holders end after a while (or once the writers are done).
	if (%holder && (time - $started > $hold_seconds || defined $pgbench_status))
	{
		$read_while_held = scalar @read;
		for my $outcome (sort keys %holder)
		{
			run_sql($holder{$outcome}, $outcome);
			close_session($holder{$outcome});
		}
		%holder = ();
	}

	# Decided before the read, so that only pages read after the last commit
	# count towards the drain.
	my $running = writers_running();
	die "timed out while draining the feed" if time > $deadline;

	my $out = run_sql($reader,
		    "SELECT f.global_position, f.address, f.revision, "
		  . "f.message->>'correlationId', "
		  . "(f.message->>'globalPosition')::bigint = f.global_position "
		  . "FROM statesman.read_feed(statesman.cursor_position('reader'), $page_size) AS f");
	my @rows = map { [ split /\|/, $_, -1 ] } grep { length } split /\n/, $out;
	$pages++ if @rows;
	$full_pages++ if @rows == $page_size;
	push @read, @rows;

	if (@rows)
	{
		$quiet_since = undef;
		my $advanced = run_sql($reader,
			"SELECT statesman.advance_cursor('reader', $rows[-1][0])");
		$advance_refused++ if $advanced ne 't';
		usleep(5_000) if @rows < $page_size;
		next;
	}
	# Drained: every writer has ended and the feed has stayed empty past the
	# cursor for a while (F4 allows "within milliseconds"; another session
	# may be sequencing at the moment of one read).
	if (!$running)
	{
		$quiet_since //= time;
		last if time - $quiet_since >= $drain_quiet_seconds;
	}
	usleep(20_000);
}
my $elapsed = ($quiet_since // time) - $started;    # until the feed was drained
waitpid($rival_pid, 0);
my $rival_status = $?;

is($pgbench_status, 0, 'all writers finished without error')
  or diag(slurp_file($pgbench_log));
is($rival_status, 0, 'the competing consumer finished without error')
  or diag(slurp_file($rival_log));

# What is true after the writers finished.
my %truth;
for my $line (split /\n/,
	$node->safe_psql('postgres', 'SELECT token, address, revision FROM truth'))
{
	my ($token, $address, $revision) = split /\|/, $line;
	$truth{$token} = "$address#$revision";
}
my $committed = scalar keys %truth;
my $tokens_taken =
  $node->safe_psql('postgres', 'SELECT last_value FROM token_seq');
my $aborted = $tokens_taken - $committed;

cmp_ok($committed, '>=', $min_records, "at least $min_records committed records");
cmp_ok($aborted, '>', 0, 'some appending transactions rolled back');

# Exactly once, committed only.
my (%times_read, @not_committed, @wrong_record);
for my $r (@read)
{
	my ($pos, $address, $revision, $token) = @$r;
	$times_read{$token}++;
	if (!exists $truth{$token})
	{
		push @not_committed, $token;
	}
	elsif ($truth{$token} ne "$address#$revision")
	{
		push @wrong_record, "$token: read $address#$revision, committed $truth{$token}";
	}
}
my @missing = grep { !exists $times_read{$_} } sort { $a <=> $b } keys %truth;
my @twice   = grep { $times_read{$_} > 1 } sort { $a <=> $b } keys %times_read;
is(scalar @read, $committed, 'records read = records committed');
is(scalar @missing, 0, 'every committed record was read')
  or diag("never read (first 20): @missing[0 .. ($#missing < 19 ? $#missing : 19)]");
is(scalar @twice, 0, 'no record was read twice')
  or diag("read more than once (first 20): @twice[0 .. ($#twice < 19 ? $#twice : 19)]");
is(scalar @not_committed, 0, 'no record of an aborted transaction was read')
  or diag("not committed (first 20): @not_committed[0 .. ($#not_committed < 19 ? $#not_committed : 19)]");
is(scalar @wrong_record, 0, 'each record read is the address and revision its writer committed')
  or diag(join("\n", @wrong_record[0 .. ($#wrong_record < 19 ? $#wrong_record : 19)]));

# Order.
my ($pos_violations, $rev_violations, $msg_mismatch) = (0, 0, 0);
my (%last_rev, %rev_count);
my $prev_pos;
for my $r (@read)
{
	my ($pos, $address, $revision, $token, $msg_pos_ok) = @$r;
	$pos_violations++ if defined $prev_pos && $pos <= $prev_pos;
	$prev_pos = $pos;
	$rev_violations++
	  if exists $last_rev{$address} && $revision <= $last_rev{$address};
	$last_rev{$address} = $revision;
	$rev_count{$address}++;
	$msg_mismatch++ if $msg_pos_ok ne 't';
}
is($pos_violations, 0, 'positions strictly increase across the whole drain');
is($rev_violations, 0, "each address's revisions strictly increase in read order");
my @gappy = grep { $last_rev{$_} != $rev_count{$_} } sort keys %last_rev;
is(scalar @gappy, 0, "each address's committed revisions are 1..n")
  or diag("addresses with gaps (first 20): @gappy[0 .. ($#gappy < 19 ? $#gappy : 19)]");
is($msg_mismatch, 0, "each message's globalPosition is its feed position");

# The cursor.
my $last_read = @read ? $read[-1][0] : 'NULL';
is($advance_refused, 0, 'every advance_cursor to a new last position returned true');
my ($cursor, $head) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT statesman.cursor_position('reader'), statesman.head_position()");
is($cursor, $last_read, 'the stored cursor is the last position read');
is($head, $last_read, 'the head is the last position read');
is( $node->safe_psql('postgres',
		"SELECT statesman.advance_cursor('reader', $cursor)"),
	'f', 'advance_cursor to the stored position changes nothing');

# Read again from the start, in one session: the feed still holds exactly
# what the reader saw, at the same positions (nothing moved or appeared
# below a position once read).
my @again;
my $after = 'NULL';
while (1)
{
	my $out = run_sql($reader,
		    "SELECT global_position, message->>'correlationId' "
		  . "FROM statesman.read_feed($after, 5000)");
	my @rows = map { [ split /\|/ ] } grep { length } split /\n/, $out;
	last if !@rows;
	push @again, @rows;
	$after = $rows[-1][0];
}
close_session($reader);
my $first_difference;
for my $i (0 .. ($#again > $#read ? $#again : $#read))
{
	my $was = $i <= $#read  ? "$read[$i][0]:$read[$i][3]"   : 'nothing';
	my $now = $i <= $#again ? "$again[$i][0]:$again[$i][1]" : 'nothing';
	next if $was eq $now;
	$first_difference = "record $i: drained position:token $was, now $now";
	last;
}
is($first_difference, undef,
	'a second full read returns the same records at the same positions');

note sprintf(
	"%d writers, %d committed records (%d rolled back) over %d addresses; "
	  . "reader: %d non-empty pages (%d full), %d records read while two "
	  . "transactions were held open, %.1f s, %.0f records/s",
	$n_writers, $committed, $aborted, scalar keys %last_rev,
	$pages, $full_pages, $read_while_held // 0, $elapsed, $committed / $elapsed);
for my $log ($pgbench_log, $rival_log)
{
	note "pgbench: $_" for grep { /processed|^tps/ } split /\n/, slurp_file($log);
}

$node->stop;
done_testing();

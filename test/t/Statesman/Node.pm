# What the Perl TAP tests share: a cluster with statesman preloaded, polling a condition,
# an outbox's status, background writers whose acknowledged appends are counted, and
# sessions that stay open holding what they took.
#
#   use Statesman::Node qw(statesman_node wait_until wait_for outbox_status
#                          start_writer acked sink_vs_cursor hold_session session_holds);
package Statesman::Node;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT_OK =
  qw(statesman_node wait_until wait_for outbox_status start_writer acked sink_vs_cursor hold_session
  session_holds);

# A new cluster named $name with statesman preloaded (the launcher looks for databases every
# second; room for its workers), started. $extra: more postgresql.conf lines; %init: options
# for PostgreSQL::Test::Cluster::init (allows_streaming => 1, …).
sub statesman_node
{
	my ($name, $extra, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%init);
	$node->append_conf('postgresql.conf',
		    "shared_preload_libraries = 'statesman'\n"
		  . "statesman.naptime = '1s'\n"
		  . "max_worker_processes = 16\n"
		  . ($extra // ''));
	$node->start;
	return $node;
}

# Seconds until $sql returns t in database $db (default postgres) of $node, polled every
# 100 ms; undef (with a diag) when it did not within $limit seconds.
sub wait_until
{
	my ($node, $sql, $limit, $db) = @_;
	$db //= 'postgres';
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		return time - $t0 if $node->safe_psql($db, $sql) eq 't';
		usleep(100_000);
	}
	diag("gave up after ${limit}s waiting in $db for: $sql");
	return undef;
}

# poll_query_until as a test: passes when $sql returns t, else bails out.
sub wait_for
{
	my ($node, $sql, $what) = @_;
	ok($node->poll_query_until('postgres', $sql), $what)
	  or BAIL_OUT("gave up waiting: $what");
	return;
}

# Columns of one outbox's row in statesman.outbox_status (a list, or the first in scalar
# context).
sub outbox_status
{
	my ($node, $outbox, @columns) = @_;
	my @values = split /\|/,
	  $node->safe_psql('postgres',
		    "SELECT " . join(', ', map { "s.$_" } @columns)
		  . " FROM statesman.outbox_status s WHERE s.outbox_id = '$outbox'"), -1;
	return wantarray ? @values : $values[0];
}

# Starts a psql that appends $count records to root $root, one transaction each, paths
# "$tag/k0" … over $n_addresses addresses, and prints each acknowledged record's message id.
# Output goes to files: nothing to pump, nothing lost when the server goes away.
sub start_writer
{
	my ($node, $root, $tag, $count, $n_addresses) = @_;
	my $sql = '';
	for my $i (1 .. $count)
	{
		my $path = sprintf('%s/k%d', $tag, $i % $n_addresses);
		$sql .=
		    "SELECT current_database() || '/' || a.address || '#' || a.revision "
		  . "FROM statesman.append('$root', '$path', '{\"i\": $i}') a;\n";
	}
	# tmp_check is shared by the test files of one run: the test's name keeps each writer's
	# script its own (two tests with the same tag would otherwise run each other's appends).
	(my $test = $0) =~ s{.*/|\.pl$}{}g;
	my $base = "$PostgreSQL::Test::Utils::tmp_check/writer_${test}_$tag";
	open(my $fh, '>', "$base.sql") or die "cannot write $base.sql: $!";
	print $fh $sql;
	close($fh) or die "cannot write $base.sql: $!";
	my %h = (out => "$base.out", err => "$base.err");
	$h{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', "$base.sql" ],
		'>', $h{out}, '2>', $h{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default * 2));
	return \%h;
}

# A psql session of $node as $role that runs $sql and then stays open, idle, holding what $sql
# took (session-level advisory locks, an open transaction) until its handle is killed
# ($session->{h}->kill_kill). Returns ($session, its backend pid) once $sql has run; with
# $wait false, as soon as the session has started, while $sql may still wait (for a lock, say):
# then session_holds($session) tells when it has run.
sub hold_session
{
	my ($node, $role, $sql, $wait) = @_;
	$wait //= 1;
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-U', $role, '-d',
			$node->connstr('postgres') . " application_name=$role-app", '-f', '-'
		],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$s{in} .= "SELECT 'pid=' || pg_backend_pid();\n$sql\n\\echo held\n";
	$s{h}->pump until $s{out} =~ /pid=(\d+)/;
	my $pid = $1;
	$s{h}->pump until !$wait || $s{out} =~ /held/;
	return (\%s, $pid);
}

# Whether a session of hold_session has run its SQL (it is now holding what it took).
sub session_holds
{
	my ($s) = @_;
	$s->{h}->pump_nb;
	return $s->{out} =~ /held/ ? 1 : 0;
}

# The message ids a writer's psql printed: the appends whose commit it saw acknowledged.
sub acked
{
	my ($h) = @_;
	return grep { /#\d+$/ } split /\n/, PostgreSQL::Test::Utils::slurp_file($h->{out});
}

# Outbox $outbox's cursor against sink table $table, for the records of root $root: the
# cursor, the sink's rows, its distinct message ids, its rows that match no record at or
# below the cursor (by id and position), and the records at or below the cursor it lacks.
# Reads the tables directly (positions by statesman._position_of): read_feed() would sequence.
sub sink_vs_cursor
{
	my ($node, $root, $outbox, $table) = @_;
	return split /\|/, $node->safe_psql(
		'postgres', qq{
		WITH c AS (SELECT COALESCE(statesman.cursor_position('$outbox'), 0) AS pos),
		     mine AS (SELECT current_database() || '/' || h.address || '#' || h.revision AS id,
		                     statesman._position_of(h) AS global_position
		              FROM statesman.history h, c
		              WHERE h.root = '$root' AND statesman._position_of(h) <= c.pos)
		SELECT (SELECT pos FROM c),
		       (SELECT count(*) FROM $table),
		       (SELECT count(DISTINCT message_id) FROM $table),
		       (SELECT count(*) FROM $table t WHERE NOT EXISTS
		           (SELECT FROM mine m WHERE m.id = t.message_id AND m.global_position = t.global_position)),
		       (SELECT count(*) FROM mine m WHERE NOT EXISTS
		           (SELECT FROM $table t WHERE t.message_id = m.id))});
}

1;

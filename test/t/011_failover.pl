# Failover to a streaming standby in the middle of delivery (docs/design.md §4 "The
# delivery promise", §6 `table`; docs/operations.md "Replicas, dumps and
# copies").
#
# A primary with statesman preloaded streams to a hot standby (also
# preloaded).  Four writers append to root `fo` on the primary while outbox
# `fo` (batch_size 50) delivers to public.sink_fo.  Then the primary is shut
# down (fast: the standby receives all of its WAL) and the standby promoted.
#
#   - while in recovery the standby runs no database worker and no
#     dispatcher, its replicated sink agrees with its replicated cursor
#     (they are written by the same transactions), and read_feed() serves
#     the replicated feed there;
#   - after the promotion its own workers take over from the replicated
#     cursor; more records are appended there;
#   - in the end the promoted server's sink holds every record of its ledger
#     (those from before and after the promotion) exactly once, at its
#     position: the table sink is transactional, so failover adds no
#     duplicates at all.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node wait_until start_writer acked sink_vs_cursor);
use Test::More;

my $n_writers   = 4;
my $per_writer  = 20_000;    # more than the writers get to: the shutdown cuts them
my $n_addresses = 40;
my $after_promotion = 500;   # appends per writer on the promoted server

my $primary = statesman_node('primary', "max_connections = 40\n", allows_streaming => 1);
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('fo', root => 'fo', batch_size => 50,
	    sink_options => '{"table": "public.sink_fo"}');
});

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', "shared_preload_libraries = 'statesman'\n");
$standby->start;

sub query { my ($node, $sql) = @_; return $node->safe_psql('postgres', $sql); }

sub statesman_processes
{
	my ($node) = @_;
	return query($node,
		q{SELECT COALESCE(string_agg(backend_type, ',' ORDER BY backend_type), '')
		  FROM pg_stat_activity WHERE backend_type LIKE 'statesman%'});
}

ok(defined wait_until($primary,
		q{SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'fo'}, 30),
	'the primary delivers outbox fo');

# ---------------------------------------------------------------------------
# Records flow on the primary; it is shut down mid-delivery.
# ---------------------------------------------------------------------------
my @writers = map { start_writer($primary, 'fo', "before-w$_", $per_writer, $n_addresses) } 1 .. $n_writers;
my $t0 = time;
my $delivered = 0;
while (time - $t0 < 20)
{
	$delivered = query($primary, 'SELECT count(*) FROM public.sink_fo');
	last if $delivered >= 2000;
	usleep(100_000);
}
my ($lag_at_stop) = query($primary,
	q{SELECT COALESCE(statesman.head_position(), 0) - COALESCE(statesman.cursor_position('fo'), 0)});
$primary->stop('fast');
my $t_stopped = time;
# A writer ends on the lost connection.
for my $w (@writers)
{
	eval { $w->{h}->finish; 1 } or diag("writer: $@");
}
my @acked = map { acked($_) } @writers;
is(scalar(grep { acked($_) < $per_writer } @writers), $n_writers,
	'every writer was still appending when the primary stopped');
cmp_ok($delivered, '>', 0, 'delivery was under way when the primary stopped');
note sprintf('primary stopped %.1f s after the writers started: %d appends acknowledged, '
	  . '%d delivered, the cursor %d positions behind the head just before',
	$t_stopped - $t0, scalar(@acked), $delivered, $lag_at_stop);

# ---------------------------------------------------------------------------
# The standby, still in recovery: no workers; replicated sink = replicated cursor.
# ---------------------------------------------------------------------------
ok(defined wait_until($standby,
		q{SELECT pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()}, 30),
	'the standby replayed all the WAL it received');
is(query($standby, 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is(statesman_processes($standby), '',
	'a standby in recovery runs no statesman process: no launcher, database worker or dispatcher');
my ($cursor, $rows, $distinct, $stray, $missing) = sink_vs_cursor($standby, 'fo', 'fo', 'public.sink_fo');
is_deeply([ $distinct, $stray, $missing ], [ $rows, 0, 0 ],
	"on the standby the replicated sink holds exactly the records up to the replicated cursor ($cursor)");
note "standby before promotion: cursor $cursor, $rows rows in the sink";
# A consumer can read the replicated feed on the hot standby (it cannot
# sequence there: it serves what the primary sequenced).
my ($rf_rc, $rf_out, $rf_err) = $standby->psql('postgres',
	'SELECT count(*) FROM statesman.read_feed(NULL, 100000)');
is($rf_rc == 0 ? $rf_out : 'fails: ' . (split /\n/, $rf_err)[0],
	query($standby, 'SELECT count(*) FROM statesman.history h WHERE statesman._position_of(h) IS NOT NULL'),
	'read_feed() on the hot standby returns every replicated record that has a position');

# ---------------------------------------------------------------------------
# Promotion: the standby's own workers resume from the replicated cursor.
# ---------------------------------------------------------------------------
$standby->promote;
my $t_promoted = time;
my $took = wait_until($standby,
	q{SELECT state = 'leading' AND cursor_position = head_position
	  FROM statesman.outbox_status WHERE outbox_id = 'fo'}, 60);
ok(defined $took, 'after the promotion a dispatcher leads and catches up with the replicated feed');
note sprintf('promoted server caught up %.1f s after the promotion (statesman.naptime 1 s)', $took // -1);
like(statesman_processes($standby), qr/statesman database worker.*statesman dispatcher/,
	'the promoted server runs a database worker and a dispatcher');

my @after = map { start_writer($standby, 'fo', "after-w$_", $after_promotion, $n_addresses) } 1 .. $n_writers;
for my $w (@after) { $w->{h}->finish or diag("writer after promotion: $w->{err}"); }
my @acked_after = map { acked($_) } @after;
is(scalar(@acked_after), $n_writers * $after_promotion,
	'every append on the promoted server committed');
$took = wait_until($standby,
	q{SELECT cursor_position = head_position FROM statesman.outbox_status WHERE outbox_id = 'fo'}, 60);
ok(defined $took, 'the records appended after the promotion are delivered');
note sprintf('%d records appended on the promoted server; delivered %.2f s after the last commit',
	scalar(@acked_after), $took // -1);

# ---------------------------------------------------------------------------
# Nothing lost, nothing twice.
# ---------------------------------------------------------------------------
my $tmp = "$PostgreSQL::Test::Utils::tmp_check/acked.txt";
PostgreSQL::Test::Utils::append_to_file($tmp, join("\n", @acked, @acked_after) . "\n");
query($standby, 'CREATE TABLE acked (id text PRIMARY KEY)');
query($standby, "COPY acked FROM '$tmp'");
is(query($standby,
		q{SELECT count(*) FROM acked a WHERE NOT EXISTS (
		      SELECT FROM statesman.history h
		      WHERE current_database() || '/' || h.address || '#' || h.revision = a.id)}),
	'0', 'every append acknowledged by the old primary or the promoted server is in the ledger');
my $ledger = query($standby, q{SELECT count(*) FROM statesman.history WHERE root = 'fo'});
($cursor, $rows, $distinct, $stray, $missing) = sink_vs_cursor($standby, 'fo', 'fo', 'public.sink_fo');
is_deeply([ $rows, $distinct, $stray, $missing ], [ $ledger, $ledger, 0, 0 ],
	"the sink holds each of the $ledger records once, at its position (count = distinct = appended)");
is(query($standby,
		q{SELECT deduplicated_total || '/' || skipped_total || '/' || parked
		  FROM statesman.outbox_status WHERE outbox_id = 'fo'}),
	'0/0/0', 'nothing deduplicated, skipped or parked');
note sprintf('%d records in the ledger (%d acknowledged before the failover, %d after)',
	$ledger, scalar(@acked), scalar(@acked_after));

$standby->stop;
done_testing();

# pg_dump of one cluster restored into another (docs/feed.md "Restore, failover, upgrade"):
# the restored ticks carry the other cluster's transaction ids and snapshots, which mean nothing
# in the new one. The first tick after the restore sees it (each tick stores the cluster's
# system identifier) and starts a new chain:
#   - every position readable at dump time is kept, with the same record;
#   - records committed but not yet ticked at dump time (the sequencer lock was held while the
#     dump ran) get positions after the restored head, once each, in insert order;
#   - a record appended after the restore gets a position above them;
#   - the restored ticks are left as they were.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node wait_until);
use Statesman::Session;
use Test::More;

my $src = statesman_node('restore_src');
my $dst = statesman_node('restore_dst');
isnt($src->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	$dst->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	'two clusters with different system identifiers');

$src->safe_psql('postgres', q{
	CREATE EXTENSION statesman;
	SELECT count(*) FROM generate_series(1, 10) i,
	    LATERAL statesman.append('r', 'a' || (i % 4), jsonb_build_object('i', i)) a;
});
ok(defined wait_until($src, q{SELECT unsequenced_records = 0 FROM statesman.feed_status}, 30),
	'src: the worker ticked the first records');
my $head_at_dump = $src->safe_psql('postgres', 'SELECT statesman.head_position()');

# Hold the sequencer lock: three records commit, and no tick takes them before the dump.
my $holder = Statesman::Session->open($src);
$holder->run(q{SELECT pg_advisory_lock(statesman._lock_space('sequencer')::integer, 0)});
$src->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(1, 3) i, LATERAL statesman.append('r', 'late' || i, '{}') a});
is($src->safe_psql('postgres', 'SELECT unsequenced_records FROM statesman.feed_status'), '3',
	'src: three committed records have no position yet');
my $read_at_dump = $src->safe_psql('postgres',
	q{SELECT string_agg(global_position || ':' || address || '#' || revision, ',' ORDER BY global_position)
	  FROM statesman.read_feed(NULL, 1000)});
my $ticks_sql = q{SELECT string_agg(concat_ws('|', tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id),
                         ',' ORDER BY tick_id) FROM statesman.ticks};
my $ticks_at_dump = $src->safe_psql('postgres', $ticks_sql);
# Read now: once the holder lets go, src's worker ticks the three records (a tick the dump lacks).
my $last_tick_at_dump = $src->safe_psql('postgres', 'SELECT max(tick_id) FROM statesman.ticks');
my $dump = "$PostgreSQL::Test::Utils::tmp_check/other_cluster.dump";
command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('postgres'), '-f', $dump ], 'pg_dump -Fc of src');
$holder->run('SELECT pg_advisory_unlock_all()');
$holder->close;

$dst->safe_psql('postgres', 'CREATE DATABASE dst');
command_ok([ 'pg_restore', '--single-transaction', '-d', $dst->connstr('dst'), $dump ],
	'pg_restore --single-transaction into the other cluster');

ok(defined wait_until($dst, q{SELECT unsequenced_records = 0 FROM statesman.feed_status}, 30, 'dst'),
	'dst: the worker gave the records without a position theirs');
is($dst->safe_psql('dst', $ticks_sql . " WHERE tick_id <= $last_tick_at_dump"),
	$ticks_at_dump, 'dst: the restored ticks are as they were dumped');
is($dst->safe_psql('dst',
		qq{SELECT string_agg(global_position || ':' || address || '#' || revision, ',' ORDER BY global_position)
		   FROM statesman.read_feed(NULL, 1000) WHERE global_position <= $head_at_dump}),
	$read_at_dump, "dst: every position readable at dump time (up to $head_at_dump) names the same record");
is($dst->safe_psql('dst',
		qq{SELECT string_agg(address || '#' || revision, ',' ORDER BY global_position)
		   FROM statesman.read_feed($head_at_dump, 1000)}),
	'r/late1#1,r/late2#1,r/late3#1',
	'dst: the records not yet ticked at dump time follow the restored head, once each, in insert order');
is($dst->safe_psql('dst', q{SELECT count(*) FROM statesman.ticks WHERE system_id = statesman._system_id()
                             AND hi < lo}),
	'1', 'dst: a new chain of ticks starts (one anchor of this cluster)');

my $before = $dst->safe_psql('dst', 'SELECT statesman.head_position()');
$dst->safe_psql('dst', q{SELECT statesman.append('r', 'new', '{}')});
ok(defined wait_until($dst, qq{SELECT count(*) = 1 FROM statesman.read_feed($before, 100) WHERE address = 'r/new'}, 30, 'dst'),
	"dst: a record appended after the restore is read after the head ($before)");
is($dst->safe_psql('dst', q{SELECT count(*) || '/' || count(DISTINCT global_position) FROM statesman.read_feed(NULL, 1000)}),
	'14/14', 'dst: 14 records, 14 positions');

$src->stop;
$dst->stop;
done_testing();

# An outbox whose worker waits for a slot says so, and a new outbox does not wait for the
# launcher's next look.
#
#   1. statesman.max_workers = 2: the database worker and one dispatcher take both slots; the
#      second outbox is `idle` with last_error 'waiting for a worker slot:
#      statesman.max_workers=2 is reached (the dispatcher cannot start)' (before: NULL, no hint).
#      Once a slot is free it leads and the note is gone.
#   2. statesman.naptime = 10s: in a database the launcher has just looked at (no extension
#      there then), CREATE EXTENSION and create_outbox reach `leading` in well under a
#      naptime: the commit of create_outbox wakes the launcher (before: at its next look,
#      up to 10 s later).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use Statesman::Node qw(statesman_node wait_until wait_for outbox_status);

# 1. Waiting for a slot.
my $node = statesman_node('slots', "statesman.max_workers = 2\n");
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('first', sink_options => '{"table":"public.sink_first"}');
});
wait_for($node, q{SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'first'},
	'the first outbox leads');
$node->safe_psql('postgres',
	q{SELECT statesman.create_outbox('second', sink_options => '{"table":"public.sink_second"}')});
my $waiting = q{SELECT state = 'idle' AND last_error = 'waiting for a worker slot: statesman.max_workers=2 is reached (the dispatcher cannot start)'
                FROM statesman.outbox_status WHERE outbox_id = 'second'};
ok(defined wait_until($node, $waiting, 10), 'an outbox without a worker slot shows that it waits for one')
  or diag($node->safe_psql('postgres', q{SELECT state, last_error FROM statesman.outbox_status}));
$node->safe_psql('postgres', q{SELECT statesman.pause_outbox('first')});
ok( defined wait_until(
		$node,
		q{SELECT state = 'leading' AND last_error IS NULL FROM statesman.outbox_status WHERE outbox_id = 'second'},
		15),
	'once a slot is free, it leads and the note is gone');
$node->stop;

# 2. create_outbox wakes the launcher.
my $naptime = 10;
my $late = statesman_node('wake', "statesman.naptime = '${naptime}s'\n");
$late->safe_psql('postgres', 'CREATE DATABASE late');
# The launcher looks at every database as it starts: `late` has no extension, so its database
# worker exits at once, and the next look is a naptime away.
$late->restart;
ok( defined wait_until(
		$late, q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'statesman launcher'}, 10),
	'the launcher runs');
sleep 2;
is($late->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'statesman database worker'}),
	'0', 'no database worker runs (no database has the extension)');
my $t0 = time;
$late->safe_psql(
	'late', q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('new', sink_options => '{"table":"public.sink_new"}');
});
my $took = wait_until($late,
	q{SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'new'}, 20, 'late');
my $since_create = defined $took ? time - $t0 : undef;
ok(defined $since_create && $since_create < 3,
	"create_outbox in a database without a database worker leads in under 3 s (naptime ${naptime} s)")
  or diag('took ' . ($since_create // 'more than 20 s'));
note sprintf('create_outbox -> leading: %.2f s (statesman.naptime %d s)', $since_create // -1, $naptime);
$late->stop;

done_testing();

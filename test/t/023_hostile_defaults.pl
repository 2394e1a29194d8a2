# Database and role defaults cannot stop delivery: the workers set what they depend on
# themselves (src/worker/launcher.cpp, PinWorkerSettings), after the connection's defaults.
#
# The database gets default_transaction_isolation = 'repeatable read' and
# session_replication_role = 'replica'; the role the workers run as (the bootstrap superuser,
# also the extension's owner here) gets default_transaction_read_only = on, lock_timeout and
# search_path. Before the fix the database worker exited every few seconds (sequence_feed
# refuses REPEATABLE READ; nothing can be written read-only) and nothing was delivered; with
# replica the sink table's trigger would not fire.
#
# The test's own sessions keep ordinary settings through PGOPTIONS (a client setting outranks
# database and role defaults); one session without it shows that the defaults are in force.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_until);

my $node = statesman_node('hostile');
my $sane = '-c default_transaction_isolation=read\ committed -c default_transaction_read_only=off '
  . '-c session_replication_role=origin -c lock_timeout=0 -c search_path=public';
$ENV{PGOPTIONS} = $sane;
sub query { return $node->safe_psql('postgres', $_[0]); }

my $role = query('SELECT current_user');
query(
	q{
	CREATE EXTENSION statesman;
	CREATE TABLE public.fired (message_id text);
	SELECT statesman.create_outbox('hostile', root => 'hostile',
	    sink_options => '{"table":"public.sink_hostile"}', poll_interval => '1 s');
	CREATE FUNCTION public.note_fired() RETURNS trigger LANGUAGE plpgsql AS
	    $$ BEGIN INSERT INTO public.fired VALUES (NEW.message_id); RETURN NEW; END $$;
	CREATE TRIGGER fired AFTER INSERT ON public.sink_hostile
	    FOR EACH ROW EXECUTE FUNCTION public.note_fired();
});
query(
	qq{
	ALTER DATABASE postgres SET default_transaction_isolation = 'repeatable read';
	ALTER DATABASE postgres SET session_replication_role = 'replica';
	ALTER ROLE "$role" SET default_transaction_read_only = on;
	ALTER ROLE "$role" SET lock_timeout = '1ms';
	ALTER ROLE "$role" SET search_path = 'public';
});
# The workers connect afresh, under the new defaults.
$node->restart;

{
	local $ENV{PGOPTIONS} = '';
	is( $node->safe_psql(
			'postgres',
			'SELECT current_setting(\'transaction_isolation\') || \' \' || current_setting(\'transaction_read_only\') '
			  . '|| \' \' || current_setting(\'session_replication_role\')'),
		'repeatable read on replica',
		'a new session gets the hostile defaults');
}

my $log_offset = -s $node->logfile;
query(q{SELECT statesman.append('hostile', 'a', '{"n": 1}')});
my $took = wait_until($node, q{SELECT count(*) = 1 FROM public.sink_hostile}, 30);
ok(defined $took, 'the record is delivered under hostile database and role defaults');
note sprintf('delivered %.2f s after the append', $took // -1);
is(query(q{SELECT count(*) FROM public.fired}), '1', 'the sink table\'s trigger fired (session_replication_role origin)');
is(query(q{SELECT statesman._position_of(h) IS NOT NULL FROM statesman.history h WHERE root = 'hostile'}),
	't', 'the record was sequenced');
is( query(q{SELECT state FROM statesman.outbox_status WHERE outbox_id = 'hostile'}),
	'leading', 'the outbox is led by its dispatcher');

# The workers stay up: the database worker that started is the one still running.
my $pid = query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'statesman database worker'});
sleep 3;
my $pid_after = query(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'statesman database worker'});
ok($pid ne '' && $pid_after eq $pid, 'the database worker keeps running')
  or diag("database worker before: '$pid', after: '$pid_after'");
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/read-only transaction|READ COMMITTED isolation|lock timeout/,
	'no worker error caused by the defaults in the log');

$node->stop;
done_testing();

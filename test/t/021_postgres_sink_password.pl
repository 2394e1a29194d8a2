# The `postgres` sink's password rule (postgres_fdw's password_required): the sink
# connects with libpq as the server's operating-system user, whom the remote's
# trust (or peer, or a password file) lets in as any role, its superuser too.
# A role that is not a superuser and may call create_outbox must not get that:
#
#   refused   mallory (not a superuser, granted create_outbox/alter_outbox)
#             points an outbox at the remote's superuser without a password:
#             refused with 2F003, nothing stored.
#   unused    mallory gives a password, but the remote lets the superuser in
#             by trust without asking for it (PQconnectionUsedPassword is
#             false): every connection is refused and closed before it runs
#             anything; last_error names the rule, the cursor stays, nothing
#             is created remotely.
#   altered   an outbox a superuser created (trust, no password) delivers;
#             mallory cannot alter it without a password, and once she alters
#             it with one, its connections are refused as above.
#   demoted   an outbox of a superuser role delivers until that role loses
#             superuser: its next connection is refused.
#   scram     mallory's outbox with the remote role's right password, which the
#             remote asks for (scram-sha-256 and md5), delivers.
# Throughout: no password in any view, error or log line.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_until wait_for outbox_status);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $scram_password = 'Scram-Pw-8c1d';
my $md5_password   = 'Md5-Pw-2f9e';
my $fake_password  = 'Fake-Pw-7a33';

# ---------------------------------------------------------------------------
# The remote: sinker logs in with scram-sha-256, oldsinker with md5; everyone
# else (its superuser too) by trust, as the test clusters do.
# ---------------------------------------------------------------------------
my $remote = PostgreSQL::Test::Cluster->new('remote');
$remote->init;
my $hba      = $remote->data_dir . '/pg_hba.conf';
my $hba_text = slurp_file($hba);
open(my $fh, '>', $hba) or die "cannot write $hba: $!";
print $fh "local all sinker scram-sha-256\nlocal all oldsinker md5\n" . $hba_text;
close $fh;
$remote->start;
$remote->safe_psql('postgres', qq{CREATE ROLE sinker LOGIN PASSWORD '$scram_password'});
$remote->safe_psql('postgres',
	qq{SET password_encryption = 'md5'; CREATE ROLE oldsinker LOGIN PASSWORD '$md5_password'});
$remote->safe_psql('postgres', 'CREATE DATABASE remote OWNER sinker');
$remote->safe_psql('remote', 'GRANT CREATE ON SCHEMA public TO oldsinker');
my $superuser = $remote->safe_psql('postgres', 'SELECT current_user');
sub remote_query { return $remote->safe_psql('remote', $_[0]); }
$remote->connect_ok($remote->connstr('remote') . " user=$superuser", 'remote: its superuser gets in by trust');

sub conninfo
{
	my ($user, $password) = @_;
	return sprintf('host=%s port=%d dbname=remote user=%s%s',
		$remote->host, $remote->port, $user, defined $password ? " password=$password" : '');
}
sub options
{
	my ($conninfo, $table) = @_;
	return qq{'{"conninfo": "$conninfo", "table": "$table", "timeout_ms": 2000}'};
}

# ---------------------------------------------------------------------------
# The local cluster, with statesman and mallory.
# ---------------------------------------------------------------------------
my $node = statesman_node('password_rule', "log_statement = none\nlog_min_error_statement = panic\n");
sub query { return $node->safe_psql('postgres', $_[0]); }
query('CREATE EXTENSION statesman');
my $signature = 'text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, '
  . 'interval, integer, text, text, boolean';
query(qq{CREATE ROLE mallory LOGIN;
	GRANT EXECUTE ON FUNCTION statesman.create_outbox($signature) TO mallory;
	GRANT EXECUTE ON FUNCTION statesman.alter_outbox($signature) TO mallory;
	CREATE ROLE boss LOGIN SUPERUSER});
# What mallory (or another role) runs; returns (stdout, stderr).
sub as_role
{
	my ($role, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $role ]);
	return ($out, $err);
}
my $settings = q{poll_interval => '200 ms', lease_ttl => '6 s', min_retry_delay => '100 ms',
	max_retry_delay => '500 ms'};
sub remote_tables
{
	return remote_query(q{SELECT count(*) FROM pg_class WHERE relname IN ('refused', 'unused', 'altered')});
}

# ---------------------------------------------------------------------------
# refused: no password.
# ---------------------------------------------------------------------------
my ($out, $err) = as_role('mallory',
	"SELECT statesman.create_outbox('refused', 'postgres', " . options(conninfo($superuser), 'public.refused') . ")");
like($err, qr/ERROR:  2F003: sink "postgres": password is required/,
	'refused: mallory\'s outbox without a password is refused with 2F003');
like($err, qr/DETAIL:  Role "mallory" is not a superuser/, 'refused: ... naming the role');
is(query('SELECT count(*) FROM statesman.outboxes'), 0, 'refused: nothing was stored');

# ---------------------------------------------------------------------------
# unused: a password the remote never asks for.
# ---------------------------------------------------------------------------
query(q{SELECT statesman.append('unused', 'k' || i, '{}') FROM generate_series(1, 5) i});
($out, $err) = as_role('mallory',
	"SELECT statesman.create_outbox('unused', 'postgres', "
	  . options(conninfo($superuser, $fake_password), 'public.unused')
	  . ", root => 'unused', $settings)");
is($err, '', 'unused: mallory\'s outbox with a password is accepted at create_outbox');
wait_for($node, q{SELECT attempts >= 2 FROM statesman.outbox_status WHERE outbox_id = 'unused'},
	'unused: the outbox fails its attempts');
my ($state, $cursor, $error) = outbox_status($node, 'unused', qw(state cursor_position last_error));
like($error, qr/password is required \(SQLSTATE 2F003\): .*the server did not ask for the conninfo's password/,
	'unused: last_error names the rule');
note "unused: last_error: $error";
is($state,  'backing_off', 'unused: the outbox backs off');
is($cursor, '',            'unused: the cursor stays');
is(remote_tables(), 0, 'unused: nothing was created remotely');

# ---------------------------------------------------------------------------
# altered: a superuser's outbox that mallory alters.
# ---------------------------------------------------------------------------
query(q{SELECT statesman.append('altered', 'k' || i, '{}') FROM generate_series(1, 10) i});
query("SELECT statesman.create_outbox('altered', 'postgres', "
	  . options(conninfo($superuser), 'public.altered') . ", root => 'altered', $settings)");
wait_for($node,
	q{SELECT published_total = 10 AND cursor_position = head_position FROM statesman.outbox_status
	  WHERE outbox_id = 'altered'},
	'altered: the superuser\'s outbox delivers by trust, without a password');
my $delivered = query(q{SELECT cursor_position FROM statesman.outbox_status WHERE outbox_id = 'altered'});
($out, $err) = as_role('mallory', q{SELECT statesman.alter_outbox('altered', batch_size => 3)});
like($err, qr/ERROR:  2F003: sink "postgres": password is required/,
	'altered: mallory may not alter it without a password (2F003)');
is(query(q{SELECT batch_size = 1000 AND changed_by = current_user FROM statesman.outboxes WHERE outbox_id = 'altered'}),
	't', 'altered: ... nothing changed');
($out, $err) = as_role('mallory',
	"SELECT statesman.alter_outbox('altered', sink_options => "
	  . options(conninfo($superuser, $fake_password), 'public.altered') . ")");
is($err, '', 'altered: mallory alters it with a password');
# The dispatcher re-reads an outbox's settings once a poll interval (200 ms): records appended
# right away could still go out on the connection it already has.
sleep 2;
query(q{SELECT statesman.append('altered', 'late' || i, '{}') FROM generate_series(1, 3) i});
ok(defined wait_until($node,
	q{SELECT attempts >= 2 AND last_error LIKE '%password is required%' FROM statesman.outbox_status
	  WHERE outbox_id = 'altered'}, 60),
	'altered: its connections are refused from then on')
  or diag(query(q{SELECT s::text FROM statesman.outbox_status s WHERE outbox_id = 'altered'}) . "\n"
	  . query(q{SELECT sink_options::text || ' ' || changed_by FROM statesman.outboxes WHERE outbox_id = 'altered'}));
is(query(q{SELECT cursor_position FROM statesman.outbox_status WHERE outbox_id = 'altered'}),
	$delivered, 'altered: the cursor stays where the superuser\'s deliveries left it');
is(remote_query('SELECT count(*) FROM public.altered'), 10, 'altered: the remote table has no later row');

# ---------------------------------------------------------------------------
# demoted: a superuser role's outbox, until the role is no superuser.
# ---------------------------------------------------------------------------
query(q{SELECT statesman.append('demoted', 'k' || i, '{}') FROM generate_series(1, 4) i});
($out, $err) = as_role('boss',
	"SELECT statesman.create_outbox('demoted', 'postgres', " . options(conninfo($superuser), 'public.demoted')
	  . ", root => 'demoted', $settings)");
is($err, '', 'demoted: boss, a superuser, registers an outbox without a password');
wait_for($node,
	q{SELECT published_total = 4 FROM statesman.outbox_status WHERE outbox_id = 'demoted'},
	'demoted: it delivers');
query('ALTER ROLE boss NOSUPERUSER');
sleep 2;    # as above: the next settings read sees it
query(q{SELECT statesman.append('demoted', 'late', '{}')});
wait_for($node,
	q{SELECT attempts >= 1 AND last_error LIKE '%password is required%' AND published_total = 4
	  FROM statesman.outbox_status WHERE outbox_id = 'demoted'},
	'demoted: once boss is no superuser, the next connection is refused');
is(remote_query('SELECT count(*) FROM public.demoted'), 4, 'demoted: nothing more reached the remote');

# ---------------------------------------------------------------------------
# scram and md5: a password the remote asks for.
# ---------------------------------------------------------------------------
query(q{SELECT statesman.append('scram', 'k' || i, '{}') FROM generate_series(1, 20) i});
for my $case ([ 'scram', 'sinker', $scram_password ], [ 'md5', 'oldsinker', $md5_password ])
{
	my ($id, $user, $password) = @$case;
	($out, $err) = as_role('mallory',
		"SELECT statesman.create_outbox('$id', 'postgres', "
		  . options(conninfo($user, $password), "public.by_$id")
		  . ", root => 'scram', $settings)");
	is($err, '', "$id: mallory registers an outbox with $user\'s password");
	wait_for($node,
		qq{SELECT published_total = 20 AND cursor_position = head_position AND attempts = 0
		   FROM statesman.outbox_status WHERE outbox_id = '$id'},
		"$id: it delivers every record");
	is(remote_query("SELECT count(*) FROM public.by_$id"), 20, "$id: the remote table has each record");
}

# ---------------------------------------------------------------------------
# No password anywhere.
# ---------------------------------------------------------------------------
my $everything = query('SELECT s::text FROM statesman.outbox_status s') . "\n"
  . query(q{SELECT string_agg(last_error, ' ') FROM statesman.outbox_state});
unlike($everything, qr/\Q$fake_password\E|\Q$scram_password\E|\Q$md5_password\E/,
	'no password is in outbox_status or last_error');
my $log = slurp_file($node->logfile);
like($log, qr/password is required/, 'the server log has the refusals');
unlike($log, qr/\Q$fake_password\E|\Q$scram_password\E|\Q$md5_password\E/, '... and no password');

$node->stop;
$remote->stop;
done_testing();

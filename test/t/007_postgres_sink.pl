# Delivery to the `postgres` sink (docs/design.md §6 `postgres`): a table in a second,
# real PostgreSQL cluster, reached with libpq as a password-authenticated role.
#
#   options   create_outbox checks the sink options (a malformed conninfo is
#             refused with libpq's message, the password never echoed).
#   deliver   10,000 records reach the remote table sink.delivered, which the
#             sink creates (schema and table): each once, at its position,
#             with its message.
#   envx      an outbox of one root, with its own fingerprint, in pages of 3 over
#             records of two roots: each message carries the record's envelope,
#             else the outbox's, else the root's, as statesman._message builds it.
#   again     a second outbox over the same remote table publishes everything
#             again: all deduplicated, the remote table unchanged.
#   auth      a wrong password: the outbox backs off with libpq's message.
#   stopped   the remote cluster is down for several seconds: backing_off,
#             then everything is delivered once it is back, nothing lost.
#   frozen    the remote postmaster and the sink's backend are stopped with
#             SIGSTOP: each call times out, the leader keeps renewing its
#             lease, a SIGTERM ends it within a moment although it waits for
#             the remote; after SIGCONT everything is delivered.
#   plain     a page sent as plain INSERTs meets a message the remote table
#             holds already: sent again with ON CONFLICT in the same call, no
#             failure, the message counted as deduplicated.
# Throughout: the password appears in no error, no view and no log line.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Session;
use Test::More;
use Time::HiRes qw(time usleep);

my $password = q{Remote-Pw.5e'x};    # a quote inside, to test the quoting as well
my $wrong    = 'Wrong-Remote-Pw-4711';

# ---------------------------------------------------------------------------
# The remote cluster: the role `sinker` logs in with a password only.
# ---------------------------------------------------------------------------
my $remote = PostgreSQL::Test::Cluster->new('remote');
$remote->init;
my $hba = $remote->data_dir . '/pg_hba.conf';
my $hba_text = slurp_file($hba);
open(my $fh, '>', $hba) or die "cannot write $hba: $!";
print $fh "local all sinker scram-sha-256\nhost all sinker 127.0.0.1/32 scram-sha-256\n" . $hba_text;
close $fh;
$remote->start;
(my $sql_password = $password) =~ s/'/''/g;
$remote->safe_psql('postgres', qq{CREATE ROLE sinker LOGIN PASSWORD '$sql_password'});
$remote->safe_psql('postgres', 'CREATE DATABASE remote OWNER sinker');
sub remote_query { return $remote->safe_psql('remote', $_[0]); }

# libpq's keyword/value form: the value quoted, its quote escaped.
sub conninfo
{
	my ($pw) = @_;
	(my $quoted = $pw) =~ s/(['\\])/\\$1/g;
	return sprintf(q{host=%s port=%d dbname=remote user=sinker password='%s'},
		$remote->host, $remote->port, $quoted);
}
(my $quoted = $password) =~ s/(['\\])/\\$1/g;
$remote->connect_fails($remote->connstr('remote') . ' user=sinker password=nope',
	'remote: sinker cannot log in with another password',
	expected_stderr => qr/password authentication failed for user "sinker"/);
$remote->connect_ok($remote->connstr('remote') . " user=sinker password='$quoted'",
	'remote: sinker logs in with its password');

# ---------------------------------------------------------------------------
# The local cluster, with statesman.
# ---------------------------------------------------------------------------
# The test looks for the password in what statesman says. PostgreSQL's own
# statement logging would show the create_outbox calls that carry it.
my $node = statesman_node('postgres_sink', "log_statement = none\nlog_min_error_statement = panic\n");

sub query { return $node->safe_psql('postgres', $_[0]); }

# Sink options as a SQL literal (the conninfo has quotes: doubled).
my $json = JSON::PP->new->canonical;
sub sink_options
{
	my (%options) = @_;
	my $o = $json->encode({ conninfo => conninfo($password), %options });
	$o =~ s/'/''/g;
	return "'$o'";
}

# Compares the remote table with the feed of a root: returns (rows, problems).
sub compare_remote
{
	my ($table, $root) = @_;
	my (%feed, %remote, @problems);
	for (split /\n/, query(
		"SELECT message_id, global_position, message::text FROM statesman.read_feed(NULL, 1000000, '$root')"))
	{
		my ($id, $pos, $message) = split /\|/, $_, 3;
		$feed{$id} = [ $pos, $message ];
	}
	my $rows = 0;
	for (split /\n/, remote_query("SELECT message_id, global_position, message::text FROM $table"))
	{
		my ($id, $pos, $message) = split /\|/, $_, 3;
		$rows++;
		push(@problems, "message $id is there twice"), next if $remote{$id}++;
		my $want = $feed{$id} or push(@problems, "message $id is not in the feed"), next;
		push @problems, "message $id: global_position $pos, want $want->[0]" if $pos ne $want->[0];
		push @problems, "message $id: message differs from the feed" if $message ne $want->[1];
	}
	push @problems, map { "message $_ (position $feed{$_}[0]) is not in the remote table" }
	  grep { !$remote{$_} } sort keys %feed;
	return ($rows, \@problems);
}

sub no_problems
{
	my ($problems, $what) = @_;
	is(scalar @$problems, 0, $what)
	  or diag(join("\n", @$problems[ 0 .. ($#$problems < 9 ? $#$problems : 9) ]));
}

# How every error of this sink starts: the remote by host, port and database.
my $error_re = '^postgres sink: host=' . quotemeta($remote->host) . ' port=' . $remote->port . ' dbname=remote: ';

# ---------------------------------------------------------------------------
# 0. Options are checked at create_outbox.
# ---------------------------------------------------------------------------
query('CREATE EXTENSION statesman');
my @bad = (
	[ q{'{}'}, qr/sink "postgres": option "conninfo" is required/, 'no conninfo' ],
	[ q{'{"conninfo": "host=x password=Secret-In-Options dbname"}'},
		qr/option "conninfo" is not a valid connection string: missing "=" after "dbname" in connection info string/,
		'a malformed conninfo, with libpq\'s message' ],
	[ q{'{"conninfo": "host=x password=Secret-In-Options colour=blue"}'},
		qr/not a valid connection string: invalid connection option "\*{8}"/,
		'a conninfo with an unknown keyword (redacted: it could be a password run into a keyword)' ],
	[ q{'{"conninfo": "postgresql://u:Secret-In-Options@[::1/db"}'},
		qr/not a valid connection string: .*URI/, 'a malformed URI that libpq quotes' ],
	[ q{'{"conninfo": "host=x password=Secret-In-Options", "table": "delivered"}'},
		qr/option "table" must be a schema-qualified table name/, 'a table without a schema' ],
	[ q{'{"conninfo": "host=x password=Secret-In-Options", "table": "a.b.c"}'},
		qr/option "table" must be a schema-qualified table name/, 'a table name of three parts' ],
	[ q{'{"conninfo": "host=x", "password": "Secret-In-Options"}'},
		qr/unknown option "password".*The postgres sink takes "conninfo", "table", "timeout_ms"/s,
		'an unknown option, with the known ones listed' ],
	[ q{'{"conninfo": "host=x", "timeout_ms": 40000}'},
		qr/"timeout_ms" \(40000 ms\) must be shorter than lease_ttl/, 'timeout_ms not below lease_ttl' ],
	[ q{'{"conninfo": 5}'}, qr/option "conninfo" must be a string/, 'a conninfo that is not a string' ]);
for my $bad (@bad)
{
	my ($options, $re, $what) = @$bad;
	my ($rc, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT statesman.create_outbox('bad', 'postgres', $options)");
	like($err, qr/ERROR:  22023: .*$re/s, "create_outbox refuses $what (22023)");
	unlike($err, qr/Secret-In-Options/, '... without echoing the password') if $options =~ /Secret-In-Options/;
}
is(query('SELECT count(*) FROM statesman.outboxes'), 0, 'nothing was stored');
query(q{SELECT statesman.create_outbox('defaults', 'postgres', '{"conninfo": "dbname=x"}', enabled => false)});
is(query(q{SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'defaults'}),
	'{"table": "statesman.delivered", "conninfo": "dbname=x"}',
	'the stored options have their defaults filled in');
query(q{SELECT statesman.drop_outbox('defaults')});

# ---------------------------------------------------------------------------
# 1. Delivery: every record once, at its position, into a table the sink creates.
# ---------------------------------------------------------------------------
my $main_options = sink_options(table => 'sink.delivered', timeout_ms => 2000);
query(
	qq{SELECT statesman.create_outbox('main', 'postgres', $main_options, root => 'main',
	       batch_size => 1000, poll_interval => '200 ms', lease_ttl => '6 s',
	       lease_renew_interval => '1 s', min_retry_delay => '100 ms', max_retry_delay => '1 s',
	       enabled => false)});
my $n = 10000;
query(qq{SELECT statesman.append('main', 'k' || (i % 700), jsonb_build_object('i', i, 'text', repeat('x', 200)))
	FROM generate_series(1, $n / 2) i});
query(qq{SELECT statesman.append('main', 'k' || (i % 700), jsonb_build_object('i', i, 'text', 'é "q" \\n'))
	FROM generate_series($n / 2 + 1, $n) i});
is(remote_query(q{SELECT to_regclass('sink.delivered') IS NULL}), 't', 'main: no remote table yet');
my $t0 = time;
query(q{SELECT statesman.resume_outbox('main')});
wait_for($node,
	qq{SELECT cursor_position = head_position AND published_total = $n
	   FROM statesman.outbox_status WHERE outbox_id = 'main'},
	"main: the outbox published $n records");
my $took = time - $t0;
# published_at is the start of each page's remote transaction: first to last page.
my $span = remote_query(q{SELECT extract(epoch FROM max(published_at) - min(published_at)) FROM sink.delivered});
note sprintf('main: %d records delivered %.2f s after resume_outbox (the dispatcher\'s start and the '
	  . 'remote table\'s creation included); the remote transactions of its pages of 1,000 began within %.3f s '
	  . '(%.0f records/s over the pages after the first)', $n, $took, $span, $span > 0 ? ($n - 1000) / $span : 0);
my ($rows, $problems) = compare_remote('sink.delivered', 'main');
is($rows, $n, "main: the remote table holds $n rows");
no_problems($problems, 'main: one row per record, its message_id, its global_position and its message');
is( remote_query(
		q{SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum)
		  FROM pg_attribute a WHERE a.attrelid = 'sink.delivered'::regclass AND a.attnum > 0}),
	'message_id text not null, global_position bigint not null, message jsonb not null, '
	  . 'published_at timestamp with time zone not null',
	'main: the sink created the table with the documented columns');
is(remote_query(q{SELECT count(*) FROM pg_index WHERE indrelid = 'sink.delivered'::regclass AND indisprimary}),
	1, 'main: ... message_id its primary key');
is(remote_query(q{SELECT string_agg(DISTINCT application_name, ',') FROM pg_stat_activity WHERE usename = 'sinker'}),
	'statesman', "main: the remote sees application_name 'statesman'");
is_deeply([ outbox_status($node, 'main', qw(state attempts deduplicated_total skipped_total)) ],
	[ 'leading', 0, 0, 0 ], 'main: leading, no failures, nothing deduplicated or skipped');

# ---------------------------------------------------------------------------
# 1b. The envelope fallbacks and a root filter over pages of mixed roots: the messages the
#     dispatcher builds from the rows of statesman._feed_page carry the record's envelope,
#     else the outbox's, else the root's, as statesman._message builds them.
# ---------------------------------------------------------------------------
query(q{SELECT statesman.append_bytes('envx', 'early', '\x01', NULL);
        SELECT statesman.append('othx', 'one', '{"o": 1}');
        SELECT statesman.append_bytes('envx', 'typed', '\x02', 'ct/record');
        SELECT statesman.declare_root('envx', fingerprint => 'fp-root', content_type => 'ct/root');
        SELECT statesman.append_bytes('envx', 'late', '\x03', NULL);
        SELECT statesman.append('othx', 'two', '{"o": 2}');
        SELECT statesman.append('envx', 'json', '{"e": "x\ty"}');});
my $env_options = sink_options(table => 'sink.envx', timeout_ms => 2000);
query(
	qq{SELECT statesman.create_outbox('envx', 'postgres', $env_options, root => 'envx', batch_size => 3,
	       fingerprint => 'fp-outbox', poll_interval => '200 ms', lease_ttl => '6 s',
	       lease_renew_interval => '1 s', min_retry_delay => '100 ms', max_retry_delay => '1 s')});
wait_for($node,
	q{SELECT cursor_position = head_position AND published_total = 4
	   FROM statesman.outbox_status WHERE outbox_id = 'envx'},
	'envx: the outbox published the 4 records of its root');
is( remote_query(
		q{SELECT string_agg(message->>'address' || ' ' || COALESCE(message->>'fingerprint', '-') || ' '
		    || COALESCE(message->>'contentType', '-'), ', ' ORDER BY global_position) FROM sink.envx}),
	'envx/early fp-outbox ct/root, envx/typed fp-outbox ct/record, envx/late fp-root ct/root, '
	  . 'envx/json fp-root application/json',
	'envx: the record\'s envelope, else the outbox\'s, else the root\'s; only the root\'s records');
my %built = map { split /\|/, $_, 2 } split /\n/, query(
	q{SELECT h.address, statesman._message(s.store, s.epoch, h.address, h.root, h.path, h.partition, h.revision,
	         statesman._position_of(h), h.occurred_at, h.operation, h.status, h.value_type, h.schema_version, h.source,
	         COALESCE(h.fingerprint, o.fingerprint, r.fingerprint), COALESCE(h.content_type, o.payload_content_type, r.content_type),
	         h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error)::text
	  FROM statesman.history h LEFT JOIN statesman.roots r ON r.root = h.root
	  CROSS JOIN statesman.outboxes o
	  CROSS JOIN (SELECT COALESCE(store_name, current_database()) AS store, epoch FROM statesman.store) s
	  WHERE h.root = 'envx' AND o.outbox_id = 'envx'});
my %sent = map { split /\|/, $_, 2 } split /\n/,
  remote_query(q{SELECT message->>'address', message::text FROM sink.envx});
is(scalar(grep { defined $sent{$_} && $sent{$_} eq $built{$_} } keys %built), 4,
	'envx: each message is the one statesman._message builds with those fallbacks');
query(q{SELECT statesman.drop_outbox('envx')});

# ---------------------------------------------------------------------------
# 2. A second outbox over the same remote table: everything is deduplicated.
# ---------------------------------------------------------------------------
my $snapshot = q{SELECT md5(string_agg(message_id || global_position || message::text || published_at, ','
	ORDER BY message_id)) FROM sink.delivered};
my $before = remote_query($snapshot);
query(
	qq{SELECT statesman.create_outbox('again', 'postgres', $main_options, root => 'main',
	       batch_size => 1000, poll_interval => '200 ms', lease_ttl => '6 s', max_retry_delay => '1 s')});
wait_for($node,
	q{SELECT cursor_position = head_position FROM statesman.outbox_status WHERE outbox_id = 'again'},
	'again: the second outbox went through the whole feed');
is_deeply([ outbox_status($node, 'again', qw(published_total deduplicated_total attempts)) ],
	[ 0, $n, 0 ], "again: 0 published, all $n deduplicated, no failure");
is(remote_query('SELECT count(*) FROM sink.delivered'), $n, "again: the remote table still holds $n rows");
is(remote_query($snapshot), $before, 'again: ... unchanged, row for row');
query(q{SELECT statesman.drop_outbox('again')});

# ---------------------------------------------------------------------------
# 3. A wrong password.
# ---------------------------------------------------------------------------
my $badauth = sink_options(conninfo => conninfo($wrong), table => 'sink.badauth', timeout_ms => 2000);
query(
	qq{SELECT statesman.create_outbox('badauth', 'postgres', $badauth, root => 'badauth',
	       poll_interval => '200 ms', max_retry_delay => '500 ms')});
query(q{SELECT statesman.append('badauth', 'a', '{}')});
wait_for($node, q{SELECT attempts >= 2 FROM statesman.outbox_status WHERE outbox_id = 'badauth'},
	'badauth: the outbox fails');
my $badauth_error = outbox_status($node, 'badauth', 'last_error');
like($badauth_error, qr/${error_re}could not connect: .*password authentication failed for user "sinker"/,
	'badauth: last_error names the remote and says the password was refused');
note "badauth: last_error: $badauth_error";
unlike(query('SELECT s::text FROM statesman.outbox_status s'), qr/\Q$wrong\E/,
	'badauth: the wrong password is not in outbox_status');
is(remote_query(q{SELECT to_regclass('sink.badauth') IS NULL}), 't', 'badauth: nothing was created remotely');
query(q{SELECT statesman.drop_outbox('badauth')});

# ---------------------------------------------------------------------------
# 4. The remote cluster is down for several seconds.
# ---------------------------------------------------------------------------
$remote->stop;
my $t_down = time;
query(q{SELECT statesman.append('main', 'down-' || i, jsonb_build_object('i', i)) FROM generate_series(1, 300) i});
wait_for($node,
	q{SELECT state = 'backing_off' AND attempts >= 2 FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'stopped: main backs off while the remote is down');
like(outbox_status($node, 'main', 'last_error'), qr/${error_re}could not connect: connection to server .* failed/,
	'stopped: last_error says the remote cannot be reached');
note 'stopped: last_error: ' . outbox_status($node, 'main', 'last_error');
query(q{SELECT statesman.append('main', 'down-more-' || i, '{}') FROM generate_series(1, 200) i});
my $down_for = 4;
usleep(1e6 * ($t_down + $down_for - time)) if time < $t_down + $down_for;
my $attempts_down = outbox_status($node, 'main', 'attempts');
$remote->start;
my $t_up = time;
note sprintf('stopped: the remote was down %.1f s; main failed %d times', $t_up - $t_down, $attempts_down);
wait_for($node,
	q{SELECT cursor_position = head_position AND attempts = 0
	  FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'stopped: main delivers once the remote is back');
my $recovered = time - $t_up;
note sprintf('stopped: everything delivered %.2f s after the remote was back', $recovered);
# The next attempt comes within max_retry_delay (1 s); then one page of 500.
cmp_ok($recovered, '<=', 1 + 3, 'stopped: delivered within max_retry_delay + 3 s');
($rows, $problems) = compare_remote('sink.delivered', 'main');
is($rows, $n + 500, 'stopped: the remote table holds all ' . ($n + 500) . ' records');
no_problems($problems, 'stopped: each once, at its position: nothing lost, nothing twice');

# ---------------------------------------------------------------------------
# 5. The remote is frozen (SIGSTOP to its postmaster and the sink's backend).
# ---------------------------------------------------------------------------
my $ttl = 6;    # the outbox's lease_ttl; its sink's timeout_ms is 2 s
my $leader = outbox_status($node, 'main', 'leader_pid');
like($leader, qr/^\d+$/, "frozen: main's leader is pid $leader");
my $backend = remote_query(q{SELECT pid FROM pg_stat_activity WHERE usename = 'sinker'});
like($backend, qr/^\d+$/, "frozen: the sink's remote backend is pid $backend");
my ($postmaster) = split /\n/, slurp_file($remote->data_dir . '/postmaster.pid');
my $log_start = -s $node->logfile;
kill 'STOP', $postmaster, $backend;
my $t_frozen = time;
query(q{SELECT statesman.append('main', 'frozen-' || i, jsonb_build_object('i', i)) FROM generate_series(1, 100) i});

# While frozen, sample the lease: the leader renews it between its calls, each
# of which ends after timeout_ms.
my ($max_age, $samples, @errors, $seen_attempts) = (0, 0);
my $sampler = Statesman::Session->open($node);
while (time < $t_frozen + $ttl + 2)
{
	my ($age, $pid, $attempts, $err) = split /\|/, $sampler->run(
		q{SELECT extract(epoch FROM clock_timestamp() - lease_renewed_at), leader_pid, attempts, last_error
		  FROM statesman.outbox_status WHERE outbox_id = 'main'}), -1;
	$samples++;
	$max_age = $age if $age ne '' && $age > $max_age;
	$max_age = 1e9 if $pid ne $leader;
	$seen_attempts = $attempts;
	push @errors, $err if $attempts > 0 && (!@errors || $errors[-1] ne $err);
	usleep(100_000);
}
like($errors[0] // '', qr/${error_re}timed out after \d+ ms while waiting for the page's transaction$/,
	'frozen: the first call times out waiting for the frozen backend (' . ($errors[0] // 'no error') . ')');
like($errors[-1] // '', qr/${error_re}timed out after \d+ ms while connecting$/,
	'frozen: later calls time out connecting to the frozen postmaster (' . ($errors[-1] // 'no error') . ')');
cmp_ok($seen_attempts, '>=', 2, "frozen: $seen_attempts attempts timed out in " . ($ttl + 2) . ' s');
note sprintf('frozen: %d samples over %.1f s; oldest lease renewal seen: %.2f s', $samples,
	time - $t_frozen, $max_age);
cmp_ok($max_age, '<', $ttl, "frozen: the same leader kept renewing its lease (never older than lease_ttl $ttl s)");
unlike(slurp_file($node->logfile, $log_start), qr/outbox "main": the lease holder .* has not renewed/,
	'frozen: the watchdog never had to step in');

# SIGTERM while the leader waits for the remote: polled until it is inside a sink call,
# where it waits in poll(), not on its latch (a backoff waits on the latch, with a
# wait event), then terminated at once.
my $activity = '';
my $deadline = time + 20;
while (time < $deadline)
{
	$activity = $sampler->run(
		"SELECT query || ', wait event: ' || COALESCE(wait_event, 'none') FROM pg_stat_activity WHERE pid = $leader");
	last if $activity eq 'statesman: delivering, wait event: none';
	usleep(5_000);
}
my $t_term = time;
$sampler->run("SELECT pg_terminate_backend($leader)");
usleep(5_000)
  while $sampler->run("SELECT count(*) FROM pg_stat_activity WHERE pid = $leader") ne '0'
  && time < $t_term + 20;
my $term_took = time - $t_term;
is($activity, 'statesman: delivering, wait event: none', 'frozen: the leader was inside a sink call');
note sprintf('frozen: the leader exited %.3f s after SIGTERM', $term_took);
cmp_ok($term_took, '<', 1, 'frozen: SIGTERM ends the leader within 1 s although it waits for the remote');
$sampler->close;

kill 'CONT', $postmaster, $backend;
my $t_thaw = time;
wait_for($node,
	qq{SELECT cursor_position = head_position AND attempts = 0 AND leader_pid <> $leader
	   FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'frozen: a new leader delivers everything once the remote runs again');
note sprintf('frozen: delivered %.2f s after SIGCONT', time - $t_thaw);
($rows, $problems) = compare_remote('sink.delivered', 'main');
is($rows, $n + 600, 'frozen: the remote table holds all ' . ($n + 600) . ' records');
no_problems($problems, 'frozen: each once, at its position');
is_deeply([ outbox_status($node, 'main', qw(published_total skipped_total)) ], [ $n + 600 - outbox_status($node, 'main', 'deduplicated_total'), 0 ],
	'frozen: published + deduplicated = every record, nothing skipped');
note 'main: deduplicated_total ' . outbox_status($node, 'main', 'deduplicated_total')
  . ' (pages whose commit went unanswered, sent again)';

# ---------------------------------------------------------------------------
# 6. A message already there while the pages go as plain INSERTs.
# ---------------------------------------------------------------------------
# Pages that follow each other on one connection, each inserted whole, go as plain INSERTs. A
# message the table holds already (put there by hand) makes the remote refuse such a page
# (23505): it is rolled back and sent again with ON CONFLICT in the same call, so the outbox sees
# no failure and counts the message as deduplicated.
query(q{SELECT statesman.append('main', 'warm' || i, jsonb_build_object('i', i)) FROM generate_series(1, 50) i});
wait_for($node,
	q{SELECT cursor_position = head_position AND attempts = 0 FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'plain: a page inserted whole on the connection');
my ($published_before, $dedup_before) = outbox_status($node, 'main', qw(published_total deduplicated_total));
my $error_at_before = query(q{SELECT last_error_at FROM statesman.outbox_state WHERE outbox_id = 'main'});
my ($store_name) = split m{/}, query(q{SELECT message_id FROM statesman.read_feed(NULL, 1, 'main')});
remote_query(qq{INSERT INTO sink.delivered (message_id, global_position, message)
	VALUES ('$store_name/main/there#1', 0, '{"by": "hand"}')});
my $remote_log_from = -s $remote->logfile;
query(q{SELECT statesman.append('main', p, jsonb_build_object('p', p)) FROM unnest(ARRAY['before', 'there', 'after']) p});
wait_for($node,
	qq{SELECT cursor_position = head_position AND published_total = $published_before + 2
	   FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'plain: the page with the message already there is delivered');
is_deeply([ outbox_status($node, 'main', qw(attempts deduplicated_total)) ], [ 0, $dedup_before + 1 ],
	'plain: no failure; the message already there counted as deduplicated');
is(query(q{SELECT last_error_at FROM statesman.outbox_state WHERE outbox_id = 'main'}), $error_at_before,
	'plain: ... and no error noted');
is(remote_query(q{SELECT global_position || ' ' || message::text FROM sink.delivered WHERE message_id LIKE '%/main/there#1'}),
	'0 {"by": "hand"}', 'plain: the row that was there is left as it was');
is(remote_query(q{SELECT count(*) FROM sink.delivered WHERE message_id LIKE '%/main/before#1' OR message_id LIKE '%/main/after#1'}),
	2, 'plain: the page\'s other two messages are in');
my $remote_log = substr(slurp_file($remote->logfile), $remote_log_from);
is(scalar(() = $remote_log =~ /duplicate key value violates unique constraint/g),
	1, 'plain: the remote refused the plain INSERT once (its log says so), then took the page with ON CONFLICT');

# ---------------------------------------------------------------------------
# The password never shows.
# ---------------------------------------------------------------------------
my $everything = query(q{SELECT s::text FROM statesman.outbox_status s})
  . query(q{SELECT string_agg(last_error, ' ') FROM statesman.outbox_state});
unlike($everything, qr/\Q$password\E|Remote-Pw/, 'the password is not in outbox_status or outbox_state');
my $log = slurp_file($node->logfile);
like($log, qr/outbox "main": delivery failed/, 'the failures were logged');
unlike($log, qr/\Q$password\E|Remote-Pw|\Q$wrong\E|Secret-In-Options/, '... and no password is in the server log');
is( $node->safe_psql(
		'postgres', q{SELECT has_table_privilege('public', 'statesman.outboxes', 'SELECT')}),
	'f', 'the stored options (with the password) are not readable by PUBLIC');

$node->stop;
$remote->stop;
done_testing();

# Delivery to the `redis` sink (docs/design.md §6 `redis`): Redis Streams, against a
# real redis-server (test/t/Statesman/Redis.pm) that requires a password.
#
#   options   create_outbox checks the sink options (nothing stored on a bad
#             one, the password never echoed).
#   deliver   2,000 records reach the stream `st:main` of db 3 once each, at
#             ids {globalPosition}-0, with their messageId and message.
#   again     a second outbox over the same stream publishes everything again:
#             every message counts as deduplicated, the stream is unchanged.
#   conflict  an entry at a refused id holds another messageId: the page
#             fails with an error naming the position and both ids, the
#             cursor stays; once the stream is cleared, all is delivered.
#   auth      a wrong password: the outbox backs off with "AUTH failed".
#   stopped   redis is down for several seconds: backing_off with "Connection
#             refused", then everything is delivered once it is back.
#   frozen    redis is stopped with SIGSTOP: each call times out, the leader
#             keeps renewing its lease, and a SIGTERM ends it within a
#             moment although it is waiting for redis; after SIGCONT
#             everything is delivered.
# Throughout: the password appears in no error, no view and no log line.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Redis;
use Statesman::Session;
use Test::More;
use Time::HiRes qw(time usleep);

my $password = 'Redis-Pw.7c1e"x';    # a quote inside, to test the quoting as well
my $redis    = Statesman::Redis->start(password => $password);
my $port     = $redis->port;
note "redis-server pid " . $redis->pid . " on 127.0.0.1:$port";

# The test looks for the password in what statesman says. PostgreSQL's own
# statement logging would show the create_outbox calls that carry it.
my $node = statesman_node('redis_sink', "log_statement = none\nlog_min_error_statement = panic\n");

sub query { return $node->safe_psql('postgres', $_[0]); }

# Sink options as a JSON literal for SQL (the password has a quote: JSON-escaped).
my $json = JSON::PP->new->canonical;
sub sink_options
{
	my (%extra) = @_;
	my $o = $json->encode({ port => $port + 0, password => $password, db => 3, %extra });
	$o =~ s/'/''/g;
	return "'$o'";
}

# The redis client of the test uses db 3, where the outboxes write (also
# after a restart: the helper selects it again).
$redis->command('SELECT', 3);

# Feed records of a root: position -> [message_id, message (canonical JSON)].
sub feed
{
	my ($root) = @_;
	my %feed;
	for my $line (split /\n/,
		query("SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 1000000, '$root')"))
	{
		my ($pos, $id, $message) = split /\|/, $line, 3;
		$feed{$pos} = [ $id, $json->encode(decode_json($message)) ];
	}
	return \%feed;
}

# Compares a stream with the feed of a root: returns (entries, problems).
sub compare_stream
{
	my ($key, $root) = @_;
	my $feed    = feed($root);
	my @entries = $redis->stream_entries($key);
	my (@problems, %seen);
	for my $e (@entries)
	{
		my ($id, $f) = @$e;
		my ($pos) = $id =~ /^(\d+)-0$/ or push(@problems, "entry id $id is not {position}-0"), next;
		$seen{$pos}++;
		my $want = $feed->{$pos} or push(@problems, "entry $id: no record at position $pos"), next;
		push @problems, "entry $id: messageId $f->{messageId}, want $want->[0]"
		  if ($f->{messageId} // '') ne $want->[0];
		my $got = eval { $json->encode(decode_json($f->{message} // '')) } // '(not JSON)';
		push @problems, "entry $id: message differs from the feed" if $got ne $want->[1];
		push @problems, "entry $id: fields " . join(',', sort keys %$f)
		  if join(',', sort keys %$f) ne 'message,messageId';
	}
	push @problems, map { "position $_ ($feed->{$_}[0]) is not in the stream" }
	  grep { !$seen{$_} } sort { $a <=> $b } keys %$feed;
	return (scalar @entries, \@problems);
}

sub no_problems
{
	my ($problems, $what) = @_;
	is(scalar @$problems, 0, $what)
	  or diag(join("\n", @$problems[ 0 .. ($#$problems < 9 ? $#$problems : 9) ]));
}

my $log_start = -s $node->logfile;

# ---------------------------------------------------------------------------
# 0. Options are checked at create_outbox.
# ---------------------------------------------------------------------------
query('CREATE EXTENSION statesman');
my @bad = (
	[ qq{'{"hostname": "x"}'}, qr/sink "redis": unknown option "hostname".*The redis sink takes "host", "port"/s,
		'an unknown option, with the known ones listed' ],
	[ qq{'{"port": 70000, "password": "Secret-In-Options"}'}, qr/option "port" must be between 1 and 65535/,
		'a port out of range' ],
	[ qq{'{"db": "3", "password": "Secret-In-Options"}'}, qr/option "db" must be an integer/, 'a db as a string' ],
	[ qq{'{"password": 42}'},     qr/option "password" must be a string/, 'a password that is not a string' ],
	[ qq{'{"max_length": 0}'},    qr/option "max_length" must be between 1 and/, 'max_length 0' ],
	[ qq{'{"stream": ""}'},       qr/option "stream" must not be empty/, 'an empty stream name' ],
	[ qq{'{"timeout_ms": 40000}'}, qr/"timeout_ms" \(40000 ms\) must be shorter than lease_ttl/,
		'timeout_ms not below lease_ttl' ],
	[ qq{'[1]'}, qr/sink_options must be a JSON object/, 'options that are not an object' ]);
for my $bad (@bad)
{
	my ($options, $re, $what) = @$bad;
	my ($rc, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT statesman.create_outbox('bad', 'redis', $options)");
	like($err, qr/ERROR:  22023: .*$re/s, "create_outbox refuses $what (22023)");
	unlike($err, qr/Secret-In-Options/, '... without echoing the password') if $options =~ /Secret-In-Options/;
}
is(query('SELECT count(*) FROM statesman.outboxes'), 0, 'nothing was stored');
query(q{SELECT statesman.create_outbox('defaults', 'redis', '{}', enabled => false)});
is(query(q{SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'defaults'}),
	'{"db": 0, "host": "127.0.0.1", "port": 6379, "format": "statesman", "stream": "state-change", "key_prefix": "statesman"}',
	'the stored options have their defaults filled in');
query(q{SELECT statesman.drop_outbox('defaults')});

# ---------------------------------------------------------------------------
# 1. Delivery: every record once, at {globalPosition}-0.
# ---------------------------------------------------------------------------
my $main_options = sink_options(key_prefix => 'st', stream => 'main', timeout_ms => 3000);
query(
	qq{SELECT statesman.create_outbox('main', 'redis', $main_options, root => 'main',
	       batch_size => 500, poll_interval => '200 ms', lease_ttl => '6 s',
	       lease_renew_interval => '1 s', min_retry_delay => '100 ms', max_retry_delay => '1 s')});
my $n = 2000;
query(qq{SELECT statesman.append('main', 'k' || (i % 300), jsonb_build_object('i', i, 'text', repeat('x', 200)))
	FROM generate_series(1, $n / 2) i});
query(qq{SELECT statesman.append('main', 'k' || (i % 300), jsonb_build_object('i', i, 'text', 'é "q" \\n'))
	FROM generate_series($n / 2 + 1, $n) i});
my $t0 = time;
wait_for($node,
	qq{SELECT cursor_position = head_position AND published_total = $n
	   FROM statesman.outbox_status WHERE outbox_id = 'main'},
	"main: the outbox published $n records");
note sprintf('main: %d records delivered %.2f s after the appends', $n, time - $t0);
my ($entries, $problems) = compare_stream('st:main', 'main');
is($entries, $n, "main: the stream st:main (db 3) holds $n entries");
no_problems($problems,
	'main: one entry per record, id {globalPosition}-0, its messageId and its message, nothing else');
is($redis->command('SELECT', 0) . $redis->command('EXISTS', 'st:main') . $redis->command('SELECT', 3),
	'OK0OK', 'main: nothing was written to db 0');
is_deeply([ outbox_status($node, 'main', qw(state attempts deduplicated_total skipped_total)) ],
	[ 'leading', 0, 0, 0 ], 'main: leading, no failures, nothing deduplicated or skipped');

# ---------------------------------------------------------------------------
# 2. A second outbox over the same stream: everything is deduplicated.
# ---------------------------------------------------------------------------
my $before = join "\n", map { $_->[0] . ' ' . $json->encode($_->[1]) } $redis->stream_entries('st:main');
query(
	qq{SELECT statesman.create_outbox('again', 'redis', $main_options, root => 'main',
	       batch_size => 500, poll_interval => '200 ms', lease_ttl => '6 s', max_retry_delay => '1 s')});
wait_for($node,
	q{SELECT cursor_position = head_position FROM statesman.outbox_status WHERE outbox_id = 'again'},
	'again: the second outbox went through the whole feed');
is_deeply([ outbox_status($node, 'again', qw(published_total deduplicated_total attempts)) ],
	[ 0, $n, 0 ], "again: 0 published, all $n deduplicated, no failure");
my $after = join "\n", map { $_->[0] . ' ' . $json->encode($_->[1]) } $redis->stream_entries('st:main');
ok($after eq $before, 'again: the stream is unchanged, entry for entry');
query(q{SELECT statesman.drop_outbox('again')});

# ---------------------------------------------------------------------------
# 3. An entry at a refused id with another messageId: the page fails.
# ---------------------------------------------------------------------------
my $conflict_options = sink_options(key_prefix => 'st', stream => 'conflict', timeout_ms => 3000);
query(
	qq{SELECT statesman.create_outbox('conflict', 'redis', $conflict_options, root => 'conflict',
	       poll_interval => '200 ms', min_retry_delay => '100 ms', max_retry_delay => '500 ms',
	       enabled => false)});
query(q{SELECT statesman.append('conflict', 'c' || i, jsonb_build_object('i', i)) FROM generate_series(1, 3) i});
my @c = map { [ split /\|/, $_, 3 ] } split /\n/,
  query(q{SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 1000, 'conflict')});
is(scalar @c, 3, 'conflict: three records at positions ' . join(', ', map { $_->[0] } @c));
# The first record is already there (a re-delivery), the second's id holds someone else's.
$redis->command('XADD', 'st:conflict', "$c[0][0]-0", 'messageId', $c[0][1], 'message', $c[0][2]);
$redis->command('XADD', 'st:conflict', "$c[1][0]-0", 'messageId', 'elsewhere/other#1', 'message', '{}');
query(q{SELECT statesman.resume_outbox('conflict')});
wait_for($node, q{SELECT attempts >= 3 FROM statesman.outbox_status WHERE outbox_id = 'conflict'},
	'conflict: the page fails again and again');
my ($state, $error, $cursor) = outbox_status($node, 'conflict', qw(state last_error cursor_position));
is($state, 'backing_off', 'conflict: backing_off');
like($error, qr/^redis sink 127\.0\.0\.1:$port: /, 'conflict: the error names the redis server');
like($error, qr/position $c[1][0] \(messageId "\Q$c[1][1]\E"\).*holds messageId "elsewhere\/other#1"/,
	'conflict: ... the position and both message ids');
ok($cursor eq '' || $cursor < $c[0][0], 'conflict: the cursor stays before the page (' . ($cursor || 'NULL') . ')');
is_deeply([ map { $_->[0] . ' ' . $_->[1]{messageId} } $redis->stream_entries('st:conflict') ],
	[ "$c[0][0]-0 $c[0][1]", "$c[1][0]-0 elsewhere/other#1", "$c[2][0]-0 $c[2][1]" ],
	'conflict: the foreign entry is left alone (the third record, above the top, was added)');
$redis->command('DEL', 'st:conflict');
wait_for($node,
	q{SELECT cursor_position = head_position AND attempts = 0
	  FROM statesman.outbox_status WHERE outbox_id = 'conflict'},
	'conflict: once the stream is cleared, the page is delivered');
($entries, $problems) = compare_stream('st:conflict', 'conflict');
no_problems($problems, 'conflict: the stream now holds the three records, once each');

# ---------------------------------------------------------------------------
# 4. A wrong password.
# ---------------------------------------------------------------------------
my $wrong = 'Wrong-Pw-4711';
query(
	qq{SELECT statesman.create_outbox('badauth', 'redis',
	       '{"port": $port, "password": "$wrong", "stream": "badauth", "timeout_ms": 2000}',
	       root => 'badauth', poll_interval => '200 ms', max_retry_delay => '500 ms')});
query(q{SELECT statesman.append('badauth', 'a', '{}')});
wait_for($node, q{SELECT attempts >= 2 FROM statesman.outbox_status WHERE outbox_id = 'badauth'},
	'badauth: the outbox fails');
like(outbox_status($node, 'badauth', 'last_error'), qr/^redis sink 127\.0\.0\.1:$port: AUTH failed: WRONGPASS/,
	'badauth: last_error says AUTH failed');
my $status_text = query('SELECT s::text FROM statesman.outbox_status s');
unlike($status_text, qr/\Q$wrong\E/, 'badauth: the wrong password is not in outbox_status');
is($redis->command('EXISTS', 'statesman:badauth'), 0, 'badauth: nothing was written');
query(q{SELECT statesman.drop_outbox('badauth')});

# ---------------------------------------------------------------------------
# 5. redis is down for several seconds.
# ---------------------------------------------------------------------------
$redis->stop;
my $t_down = time;
query(q{SELECT statesman.append('main', 'down-' || i, jsonb_build_object('i', i)) FROM generate_series(1, 300) i});
wait_for($node,
	q{SELECT state = 'backing_off' AND attempts >= 2 FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'stopped: main backs off while redis is down');
like(outbox_status($node, 'main', 'last_error'), qr/^redis sink 127\.0\.0\.1:$port: cannot connect: Connection refused$/,
	'stopped: last_error says the connection was refused');
query(q{SELECT statesman.append('main', 'down-more-' || i, '{}') FROM generate_series(1, 200) i});
my $down_for = 4;
usleep(1e6 * ($t_down + $down_for - time)) if time < $t_down + $down_for;
my $attempts_down = outbox_status($node, 'main', 'attempts');
$redis->start_again;
my $t_up = time;
note sprintf('stopped: redis was down %.1f s; main failed %d times', $t_up - $t_down, $attempts_down);
wait_for($node,
	q{SELECT cursor_position = head_position AND attempts = 0
	  FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'stopped: main delivers once redis is back');
my $recovered = time - $t_up;
note sprintf('stopped: everything delivered %.2f s after redis was back', $recovered);
# The next attempt comes within max_retry_delay (1 s); then one page of 500.
cmp_ok($recovered, '<=', 1 + 3, 'stopped: delivered within max_retry_delay + 3 s');
($entries, $problems) = compare_stream('st:main', 'main');
is($entries, $n + 500, 'stopped: the stream holds all ' . ($n + 500) . ' records');
no_problems($problems, 'stopped: each once, at its position: nothing lost, nothing twice');

# ---------------------------------------------------------------------------
# 6. redis is frozen (SIGSTOP).
# ---------------------------------------------------------------------------
my ($ttl, $timeout) = (6, 3);
my $leader = outbox_status($node, 'main', 'leader_pid');
like($leader, qr/^\d+$/, "frozen: main's leader is pid $leader");
$log_start = -s $node->logfile;
$redis->freeze;
my $t_frozen = time;
query(q{SELECT statesman.append('main', 'frozen-' || i, jsonb_build_object('i', i)) FROM generate_series(1, 100) i});

# While frozen, sample the lease: the leader renews it between its calls, each
# of which ends after timeout_ms.
my ($max_age, $samples, $first_error, $seen_attempts) = (0, 0, undef, 0);
my $sampler = Statesman::Session->open($node);
while (time < $t_frozen + 2 * $ttl)
{
	my ($age, $pid, $attempts, $err) = split /\|/, $sampler->run(
		q{SELECT extract(epoch FROM clock_timestamp() - lease_renewed_at), leader_pid, attempts, last_error
		  FROM statesman.outbox_status WHERE outbox_id = 'main'}), -1;
	$samples++;
	$max_age = $age if $age ne '' && $age > $max_age;
	$max_age = 1e9 if $pid ne $leader;
	$seen_attempts = $attempts;
	$first_error //= $err if $attempts > 0;
	usleep(100_000);
}
like($first_error // '', qr/^redis sink 127\.0\.0\.1:$port: timed out after \d+ ms while waiting for /,
	'frozen: the call times out (' . ($first_error // 'no error') . ')');
cmp_ok($seen_attempts, '>=', 2, "frozen: $seen_attempts attempts timed out in " . 2 * $ttl . ' s');
note sprintf('frozen: %d samples over %.1f s; oldest lease renewal seen: %.2f s', $samples,
	time - $t_frozen, $max_age);
cmp_ok($max_age, '<', $ttl, "frozen: the same leader kept renewing its lease (never older than lease_ttl $ttl s)");
unlike(slurp_file($node->logfile, $log_start), qr/outbox "main": the lease holder .* has not renewed/,
	'frozen: the watchdog never had to step in');

# SIGTERM while the leader waits for redis: polled until it is inside a sink call,
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
cmp_ok($term_took, '<', 1, 'frozen: SIGTERM ends the leader within 1 s although it waits for redis');
$sampler->close;

$redis->thaw;
my $t_thaw = time;
wait_for($node,
	qq{SELECT cursor_position = head_position AND attempts = 0 AND leader_pid <> $leader
	   FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'frozen: a new leader delivers everything once redis runs again');
note sprintf('frozen: delivered %.2f s after SIGCONT', time - $t_thaw);
($entries, $problems) = compare_stream('st:main', 'main');
is($entries, $n + 600, 'frozen: the stream holds all ' . ($n + 600) . ' records');
no_problems($problems, 'frozen: each once, at its position');

# ---------------------------------------------------------------------------
# The password never shows.
# ---------------------------------------------------------------------------
my $everything = query(q{SELECT s::text FROM statesman.outbox_status s})
  . query(q{SELECT string_agg(last_error, ' ') FROM statesman.outbox_state});
unlike($everything, qr/\Q$password\E|Redis-Pw/, 'the password is not in outbox_status or outbox_state');
my $log = slurp_file($node->logfile);
like($log, qr/outbox "main": delivery failed/, 'the failures were logged');
unlike($log, qr/\Q$password\E|Redis-Pw|\Q$wrong\E|Secret-In-Options/, '... and no password is in the server log');
is( $node->safe_psql(
		'postgres', q{SELECT has_table_privilege('public', 'statesman.outboxes', 'SELECT')}),
	'f', 'the stored options (with the password) are not readable by PUBLIC');

$node->stop;
$redis->stop;
done_testing();

# Delivery to the `kafka` sink (docs/sinks.md, "kafka"), against librdkafka's mock
# cluster (a Kafka-protocol server on loopback, test/t/Statesman/Kafka.pm) with three
# brokers, read back with a real client (kcat).
#
#   options   create_outbox refuses every property that would break the sink's
#             guarantees, and a missing "brokers", each with 22023 and naming it;
#             nothing is stored; no secret is echoed; the defaults are filled in.
#   deliver   records of two roots reach their own topics (statesman.{root}) once
#             each, key = address, headers messageId, globalPosition and epoch,
#             value = the message; every address stays in one partition, in
#             revision order; librdkafka's threads block PostgreSQL's signals.
#   errors    Produce requests fail with injected errors (retriable ones, and then
#             more of them than a call waits for): the outbox backs off with the
#             error in last_error, then everything is delivered, nothing lost.
#   down      every broker refuses connections: backing off with "timed out …
#             delivery reports", then, the brokers up, everything delivered.
#   stop      a leader waiting for delivery reports (timeout_ms 20 s) ends
#             within 1 s of a SIGTERM; so does one whose page (produced on the
#             sink's own thread) waits for room in a full producer queue.
#   unknown   a routed topic the cluster does not have: the page fails naming it.
#   events    "format": "cloudevents": each record parses as a CloudEvents 1.0
#             event with the message's attributes.
#   storm     eight query cancels of the leader while it delivers pages of 200
#             (produced on the sink's thread): every record delivered, in order (one
#             request in flight, as in deliver).
# Throughout: the sasl.password given in properties appears in no error, view or log.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status);
use JSON::PP;
use MIME::Base64;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Kafka;
use Test::More;
use Time::HiRes qw(time usleep);

my $kafka = Statesman::Kafka->start(brokers => 3);
my $brokers = $kafka->bootstrap;
note "kafka mock cluster at $brokers";

my $secret = 'Kafka-Sasl-Pw-93f1';
my $node   = statesman_node('kafka_sink', "log_statement = none\nlog_min_error_statement = panic\n");
sub query { return $node->safe_psql('postgres', $_[0]); }
my $json = JSON::PP->new->canonical;

# Sink options as an SQL literal.
sub sink_options
{
	my (%o) = @_;
	my $text = $json->encode({ brokers => $brokers, %o });
	$text =~ s/'/''/g;
	return "'$text'";
}

# The feed of a root: message id -> [position, message (canonical JSON)].
sub feed
{
	my ($root) = @_;
	my %feed;
	for my $line (split /\n/,
		query("SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 1000000, '$root')"))
	{
		my ($pos, $id, $message) = split /\|/, $line, 3;
		$feed{$id} = [ $pos, $json->encode(decode_json($message)) ];
	}
	return \%feed;
}

# Compares a topic with the feed of a root. Returns (records, problems, duplicates):
# every record of the feed must be there with its key, headers and message; a record
# twice is counted as a duplicate, and a problem unless $dups_allowed.
sub compare_topic
{
	my ($topic, $root, $dups_allowed) = @_;
	my $feed    = feed($root);
	my @records = $kafka->consume($topic);
	my (@problems, %seen, %partition_of, %last_revision);
	my $epoch = query('SELECT epoch FROM statesman.store');
	my $dups  = 0;
	for my $r (@records)
	{
		my $id   = $r->{headers}{messageId} // '(none)';
		my $want = $feed->{$id} or push(@problems, "record $r->{partition}/$r->{offset}: no feed record $id"), next;
		if ($seen{$id}++) { $dups++; next; }
		my ($address, $revision) = $id =~ m{^[^/]+/(.*)#(\d+)$};
		push @problems, "$id: key $r->{key}, want $address" if ($r->{key} // '') ne $address;
		push @problems, "$id: globalPosition header $r->{headers}{globalPosition}, want $want->[0]"
		  if ($r->{headers}{globalPosition} // '') ne $want->[0];
		push @problems, "$id: epoch header " . ($r->{headers}{epoch} // 'none') . ", want $epoch"
		  if ($r->{headers}{epoch} // '') ne $epoch;
		push @problems, "$id: headers " . join(',', @{ $r->{header_list} }[ grep { !($_ % 2) } 0 .. $#{ $r->{header_list} } ])
		  if @{ $r->{header_list} } != 6;
		my $got = eval { $json->encode(decode_json($r->{value})) } // '(not JSON)';
		push @problems, "$id: value differs from the message" if $got ne $want->[1];
		# One partition per address, revisions in order along it.
		$partition_of{$address} //= $r->{partition};
		push @problems, "$address: in partitions $partition_of{$address} and $r->{partition}"
		  if $partition_of{$address} != $r->{partition};
		push @problems, "$address: revision $revision after $last_revision{$address}"
		  if ($last_revision{$address} // 0) >= $revision;
		$last_revision{$address} = $revision;
	}
	push @problems, "$dups records twice" if $dups && !$dups_allowed;
	push @problems, map { "$_ is not in $topic" } grep { !$seen{$_} } sort keys %$feed;
	return (scalar @records, \@problems, $dups);
}

# Now, for failed_since: a failure is seen by its last_error_at even when the retry
# succeeded before the test looked (attempts is back at 0 then).
sub now { return query('SELECT clock_timestamp()'); }
sub failed_since
{
	my ($outbox, $since, $what) = @_;
	wait_for($node, qq{SELECT last_error_at > '$since' FROM statesman.outbox_state WHERE outbox_id = '$outbox'}, $what);
	return query(qq{SELECT last_error FROM statesman.outbox_state WHERE outbox_id = '$outbox'});
}

# Waits until outbox $outbox has published $count records in all, with no failure
# pending (published_total counts each record once: a failed page counts nothing).
sub wait_published
{
	my ($outbox, $count, $what) = @_;
	wait_for($node,
		qq{SELECT published_total >= $count AND attempts = 0 AND cursor_position = head_position
		   FROM statesman.outbox_status WHERE outbox_id = '$outbox'}, $what);
	return;
}

sub no_problems
{
	my ($problems, $what) = @_;
	is(scalar @$problems, 0, $what)
	  or diag(join("\n", @$problems[ 0 .. ($#$problems < 9 ? $#$problems : 9) ]));
}

query('CREATE EXTENSION statesman');

# ---------------------------------------------------------------------------
# 0. Options.
# ---------------------------------------------------------------------------
my @bad = (
	[ {}, qr/option "brokers" is required/, 'no brokers' ],
	[ { brokers => '' }, qr/option "brokers" must not be empty/, 'empty brokers' ],
	[ { properties => { acks => '0' } }, qr/property "acks" must be "all"/, 'acks=0' ],
	[ { properties => { acks => 1 } }, qr/property "acks" must be "all"/, 'acks 1 (a number)' ],
	[ { properties => { 'request.required.acks' => '1' } }, qr/property "request.required.acks" must be "all"/,
		'request.required.acks=1' ],
	[ { properties => { 'enable.idempotence' => JSON::PP::false } }, qr/property "enable.idempotence" must be true/,
		'enable.idempotence=false' ],
	[ { properties => { 'enable.gapless.guarantee' => 'false' } },
		qr/property "enable.gapless.guarantee" must be true/, 'enable.gapless.guarantee=false' ],
	[ { properties => { 'max.in.flight' => 6 } }, qr/property "max.in.flight" must be between 1 and 5/,
		'max.in.flight=6' ],
	[ { properties => { 'max.in.flight.requests.per.connection' => '100' } },
		qr/property "max.in.flight.requests.per.connection" must be between 1 and 5/, 'max.in.flight...=100' ],
	[ { properties => { 'transactional.id' => 'x' } }, qr/property "transactional.id" cannot be set/,
		'transactional.id' ],
	[ { properties => { 'bootstrap.servers' => 'elsewhere:9092' } },
		qr/property "bootstrap.servers" cannot be set: give the brokers in the option "brokers"/, 'bootstrap.servers' ],
	[ { properties => { 'plugin.library.paths' => '/tmp/x.so' } },
		qr/property "plugin.library.paths" cannot be set: it would load code/, 'plugin.library.paths' ],
	[ { properties => { 'sasl.kerberos.kinit.cmd' => 'touch /tmp/x' } },
		qr/property "sasl.kerberos.kinit.cmd" cannot be set/, 'sasl.kerberos.kinit.cmd' ],
	[ { properties => { 'no.such.setting' => '1', 'sasl.password' => $secret } },
		qr/property "no.such.setting" is refused by librdkafka: No such configuration property/,
		'a property librdkafka does not know' ],
	[ { properties => { 'linger.ms' => 'soon', 'sasl.password' => $secret } },
		qr/property "linger.ms" is refused by librdkafka: Invalid value/, 'a value librdkafka refuses' ],
	[ { properties => { 'linger.ms' => [1] } }, qr/property "linger.ms" must be a string, a number or a boolean/,
		'a property that is an array' ],
	[ { properties => [ 'acks', 'all' ] }, qr/option "properties" must be a JSON object/, 'properties as an array' ],
	[ { topic => 'statesman.{aggregate}' }, qr/option "topic" has an unknown placeholder "\{aggregate\}"/,
		'an unknown placeholder in topic' ],
	[ { format => 'avro' }, qr/option "format" must be "statesman" or "cloudevents"/, 'an unknown format' ],
	[ { timeout_ms => 0 }, qr/option "timeout_ms" must be between 1 and 3600000/, 'timeout_ms 0' ],
	[ { partitions => 3 }, qr/unknown option "partitions".*The kafka sink takes "brokers", "topic"/s,
		'an unknown option' ]);
for my $bad (@bad)
{
	my ($o, $re, $what) = @$bad;
	my $text = $json->encode({ (exists $o->{brokers} || !%$o ? () : (brokers => $brokers)), %$o });
	$text =~ s/'/''/g;
	my ($rc, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT statesman.create_outbox('bad', 'kafka', '$text')");
	like($err, qr/ERROR:  22023: .*$re/s, "create_outbox refuses $what (22023)");
	unlike($err, qr/\Q$secret\E/, '... without echoing the password') if $text =~ /\Q$secret\E/;
}
is(query('SELECT count(*) FROM statesman.outboxes'), 0, 'nothing was stored');
query(qq{SELECT statesman.create_outbox('defaults', 'kafka', '{"brokers": "h1:9092,h2:9092"}', enabled => false)});
is(query(q{SELECT sink_options FROM statesman.outboxes WHERE outbox_id = 'defaults'}),
	'{"topic": "statesman.{root}", "format": "statesman", "brokers": "h1:9092,h2:9092"}',
	'the stored options have their defaults filled in');
query(q{SELECT statesman.drop_outbox('defaults')});

# ---------------------------------------------------------------------------
# 1. Delivery: two roots, two topics.
# ---------------------------------------------------------------------------
$kafka->topic('statesman.orders', 4);
$kafka->topic('statesman.users',  3);
# One request in flight per connection: the mock does not check an idempotent producer's
# sequence numbers, so with several in flight it can take a later batch while an earlier one is
# being retried, and the producer then counts the earlier one as written (a broker refuses the
# later batch instead). docs/sinks.md, "Tested against librdkafka's mock cluster".
my $main_options = sink_options(timeout_ms => 3000,
	properties => { 'sasl.password' => $secret, 'linger.ms' => 1, 'max.in.flight' => 1 });
query(
	qq{SELECT statesman.create_outbox('main', 'kafka', $main_options,
	       batch_size => 500, poll_interval => '200 ms', lease_ttl => '8 s',
	       lease_renew_interval => '1 s', min_retry_delay => '100 ms', max_retry_delay => '1 s')});
my $n = 1500;
query(qq{SELECT statesman.append('orders', 'o' || (i % 97), jsonb_build_object('i', i, 'text', 'é "q" \\n'))
	FROM generate_series(1, $n) i});
query(qq{SELECT statesman.append('users', 'u' || (i % 41), jsonb_build_object('i', i))
	FROM generate_series(1, $n / 3) i});
my $t0 = time;
my $total = $n + int($n / 3);
wait_for($node,
	qq{SELECT cursor_position = head_position AND published_total = $total
	   FROM statesman.outbox_status WHERE outbox_id = 'main'},
	"deliver: the outbox published $total records");
note sprintf('deliver: %d records delivered %.2f s after the appends', $total, time - $t0);
my ($records, $problems) = compare_topic('statesman.orders', 'orders');
is($records, $n, "deliver: statesman.orders holds $n records");
no_problems($problems, 'deliver: orders once each, key = address, the three headers, the message; '
	  . 'one partition per address, in revision order');
($records, $problems) = compare_topic('statesman.users', 'users');
is($records, int($n / 3), 'deliver: statesman.users holds ' . int($n / 3) . ' records');
no_problems($problems, 'deliver: users likewise');
is_deeply([ outbox_status($node, 'main', qw(state attempts deduplicated_total skipped_total)) ],
	[ 'leading', 0, 0, 0 ], 'deliver: leading, no failures');

# librdkafka's threads run inside the dispatcher: they must block the signals PostgreSQL
# handles (SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGURG for the latch), so that
# every signal reaches the dispatcher's own thread.
my $leader = outbox_status($node, 'main', 'leader_pid');
my (@threads, @unblocked);
for my $status (glob "/proc/$leader/task/*/status")
{
	my ($tid) = $status =~ m{/task/(\d+)/status$};
	next if $tid == $leader;
	my ($blocked) = slurp_file($status) =~ /^SigBlk:\s*([0-9a-f]+)$/m;
	push @threads, $tid;
	my $mask = hex(substr($blocked // '0', -8));
	push @unblocked, "thread $tid: SigBlk $blocked" if grep { !($mask & (1 << ($_ - 1))) } (1, 2, 3, 10, 12, 15, 23);
}
cmp_ok(scalar @threads, '>=', 2, 'signals: the dispatcher runs librdkafka\'s threads (' . scalar(@threads) . ')');
is(scalar @unblocked, 0, 'signals: each of them blocks SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2 and SIGURG')
  or diag(join("\n", @unblocked));

# ---------------------------------------------------------------------------
# 2. Injected errors on Produce.
# ---------------------------------------------------------------------------
# A few retriable errors: librdkafka retries them within the call.
$kafka->errors(0, 7, 7, 7);
query(q{SELECT statesman.append('orders', 'o' || (i % 97), jsonb_build_object('i', i, 'phase', 'retriable'))
	FROM generate_series(1, 300) i});
$total += 300;
wait_published('main', $total, 'errors: three retriable errors (REQUEST_TIMED_OUT) are retried by the producer; all delivered');

# A non-retriable error: the page fails naming the topic, the outbox backs off.
my $since = now();
$kafka->errors(0, 29);
query(q{SELECT statesman.append('orders', 'o' || (i % 97), jsonb_build_object('i', i, 'phase', 'refused'))
	FROM generate_series(1, 300) i});
my $error = failed_since('main', $since, 'errors: a refused Produce request fails the page');
my $state;
# The refused batch fails its records; when later batches were written already, the
# producer stops with a fatal error instead (enable.gapless.guarantee) and is replaced. Once the
# producer knows the topic's error, producing the page's next message fails at once with it.
like($error, qr/^kafka sink \Q$brokers\E: (topic "statesman\.orders": position \d+ (\(messageId "[^"]+"\) was not delivered: .*authorization|cannot be produced: (the producer failed: fatal error|.*authorization))|the producer failed \(.*topic "statesman\.orders".*\): fatal error)/i,
	"errors: last_error names the topic and Kafka's error ($error)");
$total += 300;
wait_published('main', $total, 'errors: the retry delivers the page');

# More retriable errors than the call has time for: the call times out, the outbox backs
# off, then everything is delivered.
$since = now();
$kafka->errors(0, "19*400");
query(q{SELECT statesman.append('orders', 'o' || (i % 97), jsonb_build_object('i', i, 'phase', 'many'))
	FROM generate_series(1, 300) i});
$error = failed_since('main', $since, 'errors: 400 NOT_ENOUGH_REPLICAS in a row fail the call');
like($error, qr/^kafka sink \Q$brokers\E: (timed out after \d+ ms waiting for delivery reports \(\d+ of \d+ delivery reports outstanding, topic "statesman\.orders"\)|topic "statesman\.orders": .*not delivered)/,
	"errors: last_error says why ($error)");
$total += 300;
wait_published('main', $total, 'errors: once the errors are used up, everything is delivered');
my $dups;
($records, $problems, $dups) = compare_topic('statesman.orders', 'orders', 1);
no_problems($problems, 'errors: every record of orders is in its topic, with its key, headers and message, '
	  . "per address in revision order: nothing lost ($dups re-delivered)");

# ---------------------------------------------------------------------------
# 3. Every broker down.
# ---------------------------------------------------------------------------
$kafka->down($_) for 1 .. 3;
my $t_down = time;
query(q{SELECT statesman.append('users', 'u' || (i % 41), jsonb_build_object('i', i, 'phase', 'down'))
	FROM generate_series(1, 400) i});
wait_for($node,
	q{SELECT state = 'backing_off' AND attempts >= 2 FROM statesman.outbox_status WHERE outbox_id = 'main'},
	'down: the outbox backs off while no broker answers');
($state, $error) = outbox_status($node, 'main', qw(state last_error));
like($error, qr/^kafka sink \Q$brokers\E: (timed out after \d+ ms waiting for delivery reports|topic "statesman\.users": .*not delivered)/,
	"down: last_error says the delivery reports did not come ($error)");
# SIGTERM while a leader waits for delivery reports that cannot come (timeout_ms 20 s):
# it waits in rd_kafka_poll slices, not on its latch, and must end within a moment.
query(
	q{SELECT statesman.create_outbox('slow', 'kafka', } . sink_options(timeout_ms => 20000)
	  . q{, root => 'slow', poll_interval => '200 ms', lease_ttl => '30 s', max_retry_delay => '1 s')});
query(q{SELECT statesman.append('slow', 's' || i, '{}') FROM generate_series(1, 10) i});
my ($activity, $slow_leader) = ('', '');
my $deadline = time + 30;
while (time < $deadline)
{
	$slow_leader = outbox_status($node, 'slow', 'leader_pid');
	$activity = $slow_leader =~ /^\d+$/ ? query(
		"SELECT query || ', wait event: ' || COALESCE(wait_event, 'none') FROM pg_stat_activity WHERE pid = $slow_leader")
	  : '';
	last if $activity eq 'statesman: delivering, wait event: none';
	usleep(20_000);
}
is($activity, 'statesman: delivering, wait event: none', 'stop: the slow outbox\'s leader is inside a sink call');
my $t_term = time;
query("SELECT pg_terminate_backend($slow_leader)");
usleep(5_000)
  while query("SELECT count(*) FROM pg_stat_activity WHERE pid = $slow_leader") ne '0' && time < $t_term + 20;
my $term_took = time - $t_term;
note sprintf('stop: the leader exited %.3f s after SIGTERM', $term_took);
cmp_ok($term_took, '<', 1, 'stop: SIGTERM ends it within 1 s although it waits for delivery reports');
query(q{SELECT statesman.drop_outbox('slow')});

# The same while a page too large for the producer's queue (10 records) is being produced: a
# page of more than 64 records is produced on the sink's own thread, which waits for room that
# cannot come; the leader sees the SIGTERM, stops that thread, and ends within a moment.
query(
	q{SELECT statesman.create_outbox('full', 'kafka', }
	  . sink_options(timeout_ms => 20000, properties => { 'queue.buffering.max.messages' => 10 })
	  . q{, root => 'full', poll_interval => '200 ms', lease_ttl => '30 s', max_retry_delay => '1 s')});
query(q{SELECT statesman.append('full', 'f' || i, '{}') FROM generate_series(1, 200) i});
my $full_leader = '';
($activity, $deadline) = ('', time + 30);
while (time < $deadline)
{
	$full_leader = outbox_status($node, 'full', 'leader_pid');
	$activity = $full_leader =~ /^\d+$/ ? query("SELECT query FROM pg_stat_activity WHERE pid = $full_leader") : '';
	last if $activity eq 'statesman: delivering'
	  && grep { (eval { slurp_file($_) } // '') eq "statesman kafka\n" } glob("/proc/$full_leader/task/*/comm");
	usleep(20_000);
}
is($activity, 'statesman: delivering',
	'stop: the full outbox\'s leader is inside a sink call, its page on the sink\'s thread ("statesman kafka")');
$t_term = time;
query("SELECT pg_terminate_backend($full_leader)");
usleep(5_000)
  while query("SELECT count(*) FROM pg_stat_activity WHERE pid = $full_leader") ne '0' && time < $t_term + 20;
$term_took = time - $t_term;
note sprintf('stop: the leader producing into a full queue exited %.3f s after SIGTERM', $term_took);
cmp_ok($term_took, '<', 1, 'stop: SIGTERM ends it within 1 s although its page waits for room in the queue');
query(q{SELECT statesman.drop_outbox('full')});

$kafka->up($_) for 1 .. 3;
my $t_up = time;
$total += 400;
wait_published('main', $total, 'down: the brokers up, everything is delivered');
note sprintf('down: brokers down %.1f s; delivered %.1f s after they were up', $t_up - $t_down, time - $t_up);
($records, $problems, $dups) = compare_topic('statesman.users', 'users', 1);
no_problems($problems, "down: every record of users is in its topic, in order: nothing lost ($dups re-delivered)");

# ---------------------------------------------------------------------------
# 4. A routed topic the cluster does not have.
# ---------------------------------------------------------------------------
# The mock creates a topic a producer asks for; a topic error makes it say the topic
# does not exist, as a cluster without auto.create.topics.enable does.
$kafka->topic_error('missing.ghost', 3);
my $ghost_options = sink_options(topic => 'missing.{root}', timeout_ms => 2000);
query(
	qq{SELECT statesman.create_outbox('ghost', 'kafka', $ghost_options, root => 'ghost',
	       poll_interval => '200 ms', lease_ttl => '8 s', min_retry_delay => '100 ms', max_retry_delay => '1 s')});
query(q{SELECT statesman.append('ghost', 'g' || i, '{}') FROM generate_series(1, 5) i});
$error = failed_since('ghost', '-infinity', 'unknown: the page fails');
# librdkafka gives up on the topic after topic.metadata.propagation.max.ms (half the call's
# time); on a loaded machine the call's deadline can come first: then the timeout names it.
like($error,
	qr/^kafka sink \Q$brokers\E: (topic "missing\.ghost": position \d+ .*the topic does not exist|timed out after \d+ ms waiting for delivery reports \(.*topic "missing\.ghost"\))/,
	"unknown: last_error names the topic ($error)");
my $first_ghost = query(q{SELECT min(global_position) FROM statesman.read_feed(NULL, 1000, 'ghost')});
my $ghost_cursor = outbox_status($node, 'ghost', 'cursor_position');
ok($ghost_cursor eq '' || $ghost_cursor < $first_ghost,
	"unknown: the cursor (${\($ghost_cursor || 'NULL')}) stays before the page (from $first_ghost)");
$kafka->topic_error('missing.ghost', 0);
my $t_created = time;
wait_published('ghost', 5, 'unknown: once the topic exists, the page is delivered');
note sprintf('unknown: delivered %.1f s after the topic was created', time - $t_created);
($records, $problems) = compare_topic('missing.ghost', 'ghost');
no_problems($problems, 'unknown: the five records are in the topic, once each');
query(q{SELECT statesman.drop_outbox('ghost')});

# ---------------------------------------------------------------------------
# 5. CloudEvents.
# ---------------------------------------------------------------------------
query(
	q{SELECT statesman.create_outbox('events', 'kafka', } . sink_options(topic => 'events.{store}.{root}', format => 'cloudevents')
	  . q{, root => 'users', poll_interval => '200 ms', lease_ttl => '8 s', max_retry_delay => '1 s')});
my $store = query('SELECT current_database()');
wait_published('events', int($n / 3) + 400, 'events: the cloudevents outbox delivered the users');
my $feed = feed('users');
my @events = $kafka->consume("events.$store.users");
is(scalar @events, scalar keys %$feed, "events: events.$store.users holds one event per record of users");
my @bad_events;
for my $e (@events)
{
	my $ce = eval { decode_json($e->{value}) } or push(@bad_events, "not JSON: $e->{value}"), next;
	my $m = decode_json($feed->{ $ce->{id} // '' }[1] // '{}');
	my @why;
	push @why, 'specversion' if ($ce->{specversion} // '') ne '1.0';
	push @why, 'id' unless $m->{messageId};
	push @why, 'source' if ($ce->{source} // '') ne "statesman://$m->{store}";
	push @why, 'type' if ($ce->{type} // '') ne 'statesman.' . ($m->{operation} // '');
	push @why, 'subject' if ($ce->{subject} // '') ne ($m->{address} // '-');
	push @why, 'time' if ($ce->{time} // '') ne ($m->{occurredAt} // '-');
	push @why, 'datacontenttype' if ($ce->{datacontenttype} // '') ne ($m->{contentType} // '-');
	push @why, 'data' if $json->encode($ce->{data} // 0) ne $json->encode(decode_json(decode_base64($m->{payload} // '')));
	push @why, 'data_base64' if exists $ce->{data_base64};
	push @why, 'statesmanposition' if ($ce->{statesmanposition} // '') ne ($m->{globalPosition} // '-');
	push @why, 'statesmanrevision' if ($ce->{statesmanrevision} // '') ne ($m->{revision} // '-');
	push @why, 'statesmanepoch' if ($ce->{statesmanepoch} // '') ne ($m->{epoch} // '-');
	push @why, 'messageId header' if ($e->{headers}{messageId} // '') ne ($m->{messageId} // '-');
	push @why, 'key' if ($e->{key} // '') ne ($m->{address} // '-');
	push @bad_events, "$e->{value}: " . join(', ', @why) if @why;
}
is(scalar @bad_events, 0, 'events: each is CloudEvents 1.0 (specversion, id = messageId, source, type, subject, '
	  . 'time, datacontenttype, data inline, the statesman extensions), keyed and headed as before')
  or diag(join("\n", @bad_events[ 0 .. ($#bad_events < 4 ? $#bad_events : 4) ]));

# ---------------------------------------------------------------------------
# 6. Query cancels while pages are produced on the sink's thread.
# ---------------------------------------------------------------------------
# A query cancel ends the leader with an error wherever it lands: while it reads the next page
# (the sink lets go of the page its thread is producing, Sink::Forget), while it waits for that
# page to be produced or for its delivery reports (the thread stops), or between pages. Another
# dispatcher takes over from the cursor: nothing is lost, no process crashes.
$kafka->topic('storm.storm', 6);
# Each broker answers after 20 ms, so that a round's six pages take a while and most cancels
# land while a page is on its way.
$kafka->command("rtt $_ 20") for 1 .. 3;
query(
	q{SELECT statesman.create_outbox('storm', 'kafka', }
	  . sink_options(topic => 'storm.{root}', timeout_ms => 5000, properties => { 'max.in.flight' => 1 })
	  . q{, root => 'storm', batch_size => 200, poll_interval => '200 ms', lease_ttl => '8 s',
	       min_retry_delay => '100 ms', max_retry_delay => '1 s')});
my ($storm_total, $cancels, $storm_rounds, $mid_page) = (0, 0, 0, 0);
while ($cancels < 8 && $storm_rounds++ < 40)
{
	# A leader first (the one cancelled last is being replaced), then a backlog for it.
	my ($pid, $until) = ('', time + 30);
	usleep(20_000) until ($pid = outbox_status($node, 'storm', 'leader_pid')) =~ /^\d+$/ || time > $until;
	query(qq{SELECT statesman.append('storm', 's' || (i % 53), jsonb_build_object('i', i, 'round', $storm_rounds))
		FROM generate_series(1, 1200) i});
	$storm_total += 1200;
	usleep(5_000 + int(rand(40_000)));
	next unless $pid =~ /^\d+$/;
	my ($cancelled, $behind) = split /\|/, query(
		"SELECT pg_cancel_backend($pid), cursor_position IS DISTINCT FROM head_position
		   FROM statesman.outbox_status WHERE outbox_id = 'storm'");
	next unless $cancelled eq 't';
	$cancels++;
	$mid_page++ if $behind eq 't';
}
note "storm: $cancels cancels over $storm_rounds rounds of 1,200 appends, $mid_page of them with a backlog left";
is($cancels, 8, 'storm: eight query cancels reached the leader');
cmp_ok($mid_page, '>=', 1, 'storm: at least one of them while a backlog was left to deliver');
wait_published('storm', $storm_total, "storm: after the cancels, all $storm_total records are delivered");
($records, $problems, $dups) = compare_topic('storm.storm', 'storm', 1);
is($records - $dups, $storm_total, "storm: storm.storm holds each of the $storm_total records ($dups twice)");
no_problems($problems, 'storm: keys, headers and messages as the feed has them, each address in order');
$kafka->command("rtt $_ 0") for 1 .. 3;

# ---------------------------------------------------------------------------
# The password never shows.
# ---------------------------------------------------------------------------
my $everything = query(q{SELECT s::text FROM statesman.outbox_status s})
  . query(q{SELECT string_agg(last_error, ' ') FROM statesman.outbox_state});
unlike($everything, qr/\Q$secret\E/, 'the sasl.password is not in outbox_status or outbox_state');
my $log = slurp_file($node->logfile);
like($log, qr/outbox "main": delivery failed/, 'the failures were logged');
unlike($log, qr/\Q$secret\E/, '... and the sasl.password is not in the server log');
unlike($log, qr/terminated by signal|server process .* was terminated/,
	'no process of the server died of a signal (the sink\'s producing thread included)');

$node->stop;
$kafka->stop;
done_testing();

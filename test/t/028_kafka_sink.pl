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
#             revision order.
#   errors    Produce requests fail with injected errors (retriable ones, and then
#             more of them than a call waits for): the outbox backs off with the
#             error in last_error, then everything is delivered, nothing lost.
#   down      every broker refuses connections: backing off with "timed out …
#             delivery reports", then, the brokers up, everything delivered.
#   unknown   a routed topic the cluster does not have: the page fails naming it.
#   events    "format": "cloudevents": each record parses as a CloudEvents 1.0
#             event with the message's attributes.
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
my $main_options = sink_options(timeout_ms => 3000,
	properties => { 'sasl.password' => $secret, 'linger.ms' => 1 });
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

done_testing();

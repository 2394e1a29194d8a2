# Routing by root and the CloudEvents format on the `redis` sink (docs/sinks.md "Routing",
# "CloudEvents"), against a real redis-server (test/t/Statesman/Redis.pm).
#
#   routed       "stream": "by-root:{root}": the records of two roots go to two streams, each
#                record once in its root's stream, at id {globalPosition}-0, with its message;
#                pages hold records of both roots.
#   again        a second outbox over the same streams: every message is found at its id in
#                its own stream and counts as deduplicated; the streams are unchanged.
#   conflict     an entry at a refused id of one routed stream holds another messageId: the page
#                fails naming that stream, the cursor stays.
#   cloudevents  "format": "cloudevents": each entry's message parses as a CloudEvents 1.0 event
#                with its attributes (id = messageId, source, type, subject, time, data inline
#                for JSON, the statesman extensions).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status);
use JSON::PP;
use MIME::Base64;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Redis;
use Test::More;

my $redis = Statesman::Redis->start;
my $port  = $redis->port;
my $node  = statesman_node('redis_routing');
sub query { return $node->safe_psql('postgres', $_[0]); }
my $json = JSON::PP->new->canonical;

sub outbox
{
	my ($id, %options) = @_;
	my @settings = ref $options{settings} ? @{ delete $options{settings} } : ();
	push @settings, 'batch_size => 70' unless grep { /batch_size/ } @settings;
	query("SELECT statesman.create_outbox('$id', 'redis', '"
		  . $json->encode({ port => $port + 0, key_prefix => 'rt', %options })
		  . "', " . join(', ', "min_retry_delay => '100 ms'", "max_retry_delay => '1 s'", @settings)
		  . ")");
}
sub caught_up
{
	my ($id, $what) = @_;
	wait_for($node,
		"SELECT cursor_position = head_position AND attempts = 0 FROM statesman.outbox_status WHERE outbox_id = '$id'",
		$what);
}

# A routed stream against the feed of its root: the problems, or none.
sub stream_problems
{
	my ($key, $root) = @_;
	my %feed;
	for my $line (split /\n/,
		query("SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 100000, '$root')"))
	{
		my ($pos, $id, $message) = split /\|/, $line, 3;
		$feed{$pos} = [ $id, $json->encode(decode_json($message)) ];
	}
	my (@problems, %seen);
	for my $e ($redis->stream_entries($key))
	{
		my ($id, $f) = @$e;
		my ($pos) = $id =~ /^(\d+)-0$/ or push(@problems, "entry id $id"), next;
		push @problems, "entry $id twice" if $seen{$pos}++;
		my $want = $feed{$pos} or push(@problems, "entry $id: no record of root $root there"), next;
		push @problems, "entry $id: messageId $f->{messageId}" if ($f->{messageId} // '') ne $want->[0];
		push @problems, "entry $id: message differs"
		  if (eval { $json->encode(decode_json($f->{message})) } // '') ne $want->[1];
	}
	push @problems, map { "position $_ missing" } grep { !$seen{$_} } sort { $a <=> $b } keys %feed;
	return \@problems;
}
sub no_problems
{
	my ($what, @args) = @_;
	my $p = stream_problems(@args);
	is(scalar @$p, 0, $what) or diag(join("\n", @$p[ 0 .. ($#$p < 9 ? $#$p : 9) ]));
}

query('CREATE EXTENSION statesman');
# Interleaved: every page holds records of both roots.
query("SELECT count(*) FROM generate_series(1, 300) g, "
	  . "LATERAL statesman.append(CASE WHEN g % 3 = 0 THEN 'Carts' ELSE 'orders' END, 'k' || (g % 25), "
	  . "jsonb_build_object('g', g)) a");

# ---- routed -------------------------------------------------------------------------------
outbox('routed', stream => 'by-root:{root}');
caught_up('routed', 'a routed outbox delivers 300 records of two roots');
is($redis->command('XLEN', 'rt:by-root:orders'), 200, 'stream rt:by-root:orders holds the 200 records of orders');
is($redis->command('XLEN', 'rt:by-root:carts'),  100, 'stream rt:by-root:carts holds the 100 of Carts (lower-cased)');
no_problems('orders: each record once, at {globalPosition}-0, with its message', 'rt:by-root:orders', 'orders');
no_problems('carts: each record once, at {globalPosition}-0, with its message',  'rt:by-root:carts',  'carts');
is(join(',', outbox_status($node, 'routed', qw(published_total deduplicated_total))), '300,0',
	'published_total 300');

# ---- again --------------------------------------------------------------------------------
outbox('again', stream => 'by-root:{root}', settings => ["batch_size => 45"]);
caught_up('again', 'a second outbox over the same routed streams catches up');
is(join(',', outbox_status($node, 'again', qw(published_total deduplicated_total))), '0,300',
	'every message is found in its own stream and counts as deduplicated');
is($redis->command('XLEN', 'rt:by-root:orders') . ',' . $redis->command('XLEN', 'rt:by-root:carts'),
	'200,100', 'the streams are unchanged');
query("SELECT statesman.drop_outbox('again')");

# ---- conflict -----------------------------------------------------------------------------
# The first record of carts: its id in rt:other:carts holds a foreign entry; orders' stream is fine.
my $pos = query("SELECT min(global_position) FROM statesman.read_feed(NULL, 100000, 'carts')");
$redis->command('XADD', 'rt:other:carts', "$pos-0", 'messageId', 'someone/else#1', 'message', '{}');
outbox('conflict', stream => 'other:{root}');
wait_for($node,
	qq{SELECT attempts > 0 AND last_error LIKE '%XADD rt:other:carts refused id $pos-0%someone/else#1%'
	   FROM statesman.outbox_status WHERE outbox_id = 'conflict'},
	'a foreign entry in one routed stream fails the page, naming that stream and both ids');
is(query("SELECT COALESCE(statesman.cursor_position('conflict'), 0) < $pos"), 't', 'the cursor stays before it');
query("SELECT statesman.drop_outbox('conflict')");

# ---- cloudevents --------------------------------------------------------------------------
outbox('ce', stream => 'ce', format => 'cloudevents', settings => ["root => 'orders'", "payload_content_type => 'application/json'"]);
caught_up('ce', 'a cloudevents outbox delivers the 200 records of orders');
my $store = query('SELECT current_database()');
my %want  = map { my ($id, $m) = split /\|/, $_, 2; ($id => decode_json($m)) }
  split /\n/, query("SELECT message_id, message FROM statesman.read_feed(NULL, 100000, 'orders')");
my @entries = $redis->stream_entries('rt:ce');
is(scalar @entries, 200, 'the stream holds 200 events');
my @bad;
for my $e (@entries)
{
	my ($id, $f) = @$e;
	my $ce = eval { decode_json($f->{message}) } // {};
	my $w  = $want{ $f->{messageId} } // {};
	my $payload = eval { decode_json(MIME::Base64::decode_base64($w->{payload} // '')) };
	push @bad, "$id: " . $f->{message}
	  unless ($ce->{specversion} // '') eq '1.0'
	  && ($ce->{id} // '') eq ($w->{messageId} // 'x')
	  && ($ce->{source} // '') eq "statesman://$store"
	  && ($ce->{type} // '') eq 'statesman.put'
	  && ($ce->{subject} // '') eq $w->{address}
	  && ($ce->{time} // '') eq $w->{occurredAt}
	  && ($ce->{statesmanposition} // '') eq "$w->{globalPosition}"
	  && $id eq "$w->{globalPosition}-0"
	  && ($ce->{statesmanrevision} // '') eq "$w->{revision}"
	  && ($ce->{statesmanepoch} // '') eq $w->{epoch}
	  && ref $ce->{data} eq 'HASH' && $json->encode($ce->{data}) eq $json->encode($payload);
}
is(scalar @bad, 0, 'every entry is a CloudEvents 1.0 event with its attributes and the payload inline as data')
  or diag(join("\n", @bad[ 0 .. ($#bad < 4 ? $#bad : 4) ]));

$node->stop;
$redis->stop;
done_testing();

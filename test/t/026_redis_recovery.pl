# Recovering a Redis stream that lost entries (docs/sinks.md "Recovering lost entries";
# docs/reliability.md "A Redis stream that lost entries").
#
# A redis outbox delivers 200 records; the stream is then lost (FLUSHALL) while the dispatcher
# runs on, so the next 100 records land in a new stream whose top is above the gap:
#   1. the old recipe (pause_outbox, seed_cursor to before the gap, resume_outbox) fails on
#      every retry: Redis refuses ids below the stream's top, and the stream has no entry there;
#   2. the documented recipe — pause_outbox, seed_cursor(outbox, P), the documented EVAL that
#      removes the entries above P and sets the stream's last id back to P, resume_outbox —
#      with P = 0 (seed_cursor(outbox, 0): from the very beginning) rebuilds the stream: every
#      record once, at its position, with its message;
#   3. the same recipe with P > 0 repairs a stream that lost entries in the middle (XDEL of ten
#      entries below the top): again every record once.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Redis;
use Test::More;

my $redis = Statesman::Redis->start;
my $node  = statesman_node('redis_recovery');
sub query { return $node->safe_psql('postgres', $_[0]); }
my $json = JSON::PP->new->canonical;
my $key  = 'rec:state-change';

# The recipe's Redis step, exactly as docs/sinks.md gives it.
my $trim_above = q{local top = ARGV[1] if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end local gone = 0 repeat local e = redis.call('XRANGE', KEYS[1], '(' .. top, '+', 'COUNT', 1000) for _, x in ipairs(e) do redis.call('XDEL', KEYS[1], x[1]) gone = gone + 1 end until #e == 0 redis.call('XSETID', KEYS[1], top, 'MAXDELETEDID', top) return gone};

sub append_records
{
	my ($from, $to) = @_;
	query("SELECT count(*) FROM generate_series($from, $to) g, "
		  . "LATERAL statesman.append('rec', 'k' || g, jsonb_build_object('g', g)) a");
}

sub caught_up
{
	my ($what) = @_;
	wait_for($node,
		"SELECT cursor_position = head_position AND attempts = 0 FROM statesman.outbox_status WHERE outbox_id = 'events'",
		$what);
}

# Every record of the feed in the stream once, at {position}-0, with its messageId and message.
sub stream_problems
{
	my %feed;
	for my $line (split /\n/, query("SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 100000)"))
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
		my $want = $feed{$pos} or push(@problems, "entry $id: no record there"), next;
		push @problems, "entry $id: messageId $f->{messageId}" if ($f->{messageId} // '') ne $want->[0];
		push @problems, "entry $id: message differs"
		  if (eval { $json->encode(decode_json($f->{message})) } // '') ne $want->[1];
	}
	push @problems, map { "position $_ missing" } grep { !$seen{$_} } sort { $a <=> $b } keys %feed;
	return \@problems;
}

sub no_problems
{
	my ($what) = @_;
	my $problems = stream_problems();
	is(scalar @$problems, 0, $what) or diag(join("\n", @$problems[ 0 .. ($#$problems < 9 ? $#$problems : 9) ]));
}

query('CREATE EXTENSION statesman');
query("SELECT statesman.create_outbox('events', 'redis', '"
	  . $json->encode({ port => $redis->port + 0, key_prefix => 'rec' })
	  . "', batch_size => 50, min_retry_delay => '100 ms', max_retry_delay => '1 s')");
append_records(1, 200);
caught_up('200 records delivered');
is($redis->command('XLEN', $key), 200, 'the stream holds them');

$redis->command('FLUSHALL');
append_records(201, 300);
caught_up('after a FLUSHALL, the next 100 records are delivered into a new stream');
is($redis->command('XLEN', $key), 100, 'which holds only those');

# 1. Rewinding alone cannot fill the gap below the new stream's top.
query("SELECT statesman.pause_outbox('events')");
is(query("SELECT statesman.seed_cursor('events', 0) IS NULL"), 't',
	'seed_cursor(outbox, 0): before the first record');
is(query("SELECT statesman.cursor_position('events') IS NULL"), 't', '... the cursor is as before its first write');
query("SELECT statesman.resume_outbox('events')");
wait_for($node,
	"SELECT attempts >= 2 AND last_error LIKE '%refused id 1-0 as not above the stream''s top, and the stream has no entry at that id%' "
	  . "FROM statesman.outbox_status WHERE outbox_id = 'events'",
	'without the Redis step, every retry fails: the ids are below the stream\'s top');

# 2. The recipe, from the very beginning.
query("SELECT statesman.pause_outbox('events')");
query("SELECT statesman.seed_cursor('events', 0)");
is($redis->command('EVAL', $trim_above, 1, $key, '0-0'), 100, 'the Redis step removes the 100 entries above 0');
query("SELECT statesman.resume_outbox('events')");
caught_up('after the recipe the outbox catches up');
is($redis->command('XLEN', $key), 300, 'the stream holds 300 entries');
no_problems('every record is in the stream once, at its position, with its message');

# 3. Entries lost in the middle: the recipe with P = the last position before the gap.
my $p = query("SELECT max(global_position) FROM statesman.read_feed(NULL, 250)");
my @lost = map { "$_-0" } split /\n/, query("SELECT global_position FROM statesman.read_feed($p, 10)");
is($redis->command('XDEL', $key, @lost), 10, "ten entries after position $p are lost");
append_records(301, 310);
caught_up('the outbox goes on above the gap');
query("SELECT statesman.pause_outbox('events')");
is(query("SELECT statesman.seed_cursor('events', $p)"), $p, "seed_cursor(outbox, $p)");
is($redis->command('EVAL', $trim_above, 1, $key, "$p-0"), 50, 'the Redis step removes the 50 entries left above it');
query("SELECT statesman.resume_outbox('events')");
caught_up('after the recipe the outbox catches up again');
is($redis->command('XLEN', $key), 310, 'the stream holds 310 entries');
no_problems('every record is in the stream once again');

$node->stop;
$redis->stop;
done_testing();

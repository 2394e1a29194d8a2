# A record the feed cannot carry (docs/reliability.md "Records too large for the feed").
#
# A feed message is one jsonb value, and jsonb holds at most 268,435,455 bytes; the payload
# travels in it as base64. Here, with the worker on:
#   - append_bytes refuses (54000) a payload larger than the limit it names, and accepts a
#     payload of exactly that limit, whose message read_feed then builds: the bound is exact
#     to the base64 group and never too generous;
#   - a payload of 201,326,592 bytes (base64 one byte over jsonb's limit, accepted before the
#     check existed) is refused;
#   - a record that cannot be built at all, written into statesman.history directly as a
#     superuser (bypassing the append functions, as a record from before the check would be),
#     makes its page fail for a table outbox and a redis outbox alike: a failed attempt with
#     last_error, backoff, then skip_poison_after_attempts parks its page (batch_size 1) in
#     dead_letters (without a message, with the reason) and the next record is delivered, by
#     the same dispatcher process throughout (no exit, no restart loop).
# Memory: about 1.5 GB in one backend for a few seconds (two 200 MB payloads and one 268 MB
# message).

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
my $node  = statesman_node('payload_limit', "log_min_error_statement = panic\n");
sub query { return $node->safe_psql('postgres', $_[0]); }
query('CREATE EXTENSION statesman');

sub append_error
{
	my ($bytes) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT * FROM statesman.append_bytes('big', 'p', convert_to(repeat('a', $bytes), 'UTF8'), "
		  . "'application/octet-stream')",
		on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return $err;
}

# ---- The refusal, and the limit it names ----------------------------------------------------
my $err = append_error(201_326_592);
like($err, qr/ERROR:  54000: payload of 201326592 bytes is too large for the feed: .* at most (\d+) payload bytes/,
	'a payload whose base64 exceeds jsonb\'s limit is refused with 54000, naming the limit');
my ($limit) = $err =~ /at most (\d+) payload bytes/;
$limit //= 0;
note "limit for this record: $limit payload bytes";
cmp_ok($limit, '>', 200_000_000, 'the limit is about 192 MB');
is(query("SELECT count(*) FROM statesman.history WHERE root = 'big'"), '0', 'nothing was written');

like(append_error($limit + 1), qr/54000: payload of @{[ $limit + 1 ]} bytes is too large/,
	'one byte over the limit is refused');
is(append_error($limit), '', 'a payload of exactly the limit is accepted');
is( query(
		"SELECT octet_length(message->>'payload') = 4 * ceil($limit / 3.0) AND pg_column_size(message) <= 268435455 + 4 "
		  . "FROM statesman.read_feed(NULL, 10, 'big')"),
	't',
	'read_feed builds the message of a record at the limit');
query("DELETE FROM statesman.history WHERE root = 'big'");

# ---- A record that cannot be built: a failed attempt, parked, never a crash loop ------------
query("CREATE TABLE public.sink (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL)");
my $redis_options = JSON::PP->new->encode({ port => $redis->port + 0, key_prefix => 'limit' });
for my $o (["to_table", "'table'", "'{\"table\": \"public.sink\"}'"], ["to_redis", "'redis'", "'$redis_options'"])
{
	query("SELECT statesman.create_outbox('$o->[0]', $o->[1], $o->[2], root => 'poison', batch_size => 1, "
		  . "skip_poison_after_attempts => 3, min_retry_delay => '100 ms', max_retry_delay => '500 ms')");
}
query("SELECT statesman.append('poison', 'first', '{\"n\": 1}')");
wait_for($node,
	"SELECT count(*) = 2 FROM statesman.outbox_status WHERE published_total = 1 AND state = 'leading'",
	'both outboxes deliver the first record');
my %pid = map { $_ => outbox_status($node, $_, 'leader_pid') } qw(to_table to_redis);

# As a superuser, past the append functions: a payload whose base64 is one byte over jsonb's limit.
# (As the append does, the transaction takes its xid before the row's id is drawn, and the row
# carries it: the feed's ticks find records by it.)
query(
	"BEGIN; SELECT pg_current_xact_id(); "
	  . "INSERT INTO statesman.history (address, root, path, revision, occurred_at, operation, payload, content_type, txid) "
	  . "VALUES ('poison/big', 'poison', 'big', 1, now(), 'put', convert_to(repeat('a', 201326592), 'UTF8'), "
	  . "'application/octet-stream', pg_current_xact_id()); COMMIT;");
query("SELECT statesman.append('poison', 'after', '{\"n\": 2}')");

wait_for($node,
	"SELECT count(*) = 2 FROM statesman.outbox_status WHERE skipped_total = 1 AND published_total = 2",
	'both outboxes park the record that cannot be built and deliver the next one');
for my $outbox (qw(to_table to_redis))
{
	is(outbox_status($node, $outbox, 'leader_pid'), $pid{$outbox}, "$outbox: the same dispatcher throughout");
	is( query(
			"SELECT message IS NULL AND message_id LIKE '%/poison/big#1' AND attempts = 3 "
			  . "AND last_error LIKE 'its message cannot be built (payload of poison/big is too large for a jsonb message)%' "
			  . "FROM statesman.dead_letters WHERE outbox_id = '$outbox'"),
		't',
		"$outbox: parked without a message, with the reason");
	is(outbox_status($node, $outbox, 'cursor_position'), query("SELECT statesman.head_position()"),
		"$outbox: the cursor is past it");
	my ($rc, $out, $redeliver_err) = $node->psql('postgres',
		"SELECT statesman.redeliver('$outbox', (SELECT message_id FROM statesman.dead_letters WHERE outbox_id = '$outbox'))",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($redeliver_err, qr/55000: parked message .* has no message to hand to the sink/,
		"$outbox: redeliver refuses the parked record without a message");
}
is(query("SELECT string_agg(message->>'path', ',' ORDER BY global_position) FROM public.sink"),
	'first,after', 'the table sink holds the records around it');
my @entries = $redis->stream_entries('limit:state-change');
is(scalar(@entries), 2, 'the stream holds the records around it');
my $log = slurp_file($node->logfile);
unlike($log, qr/statesman dispatcher.*exited with exit code/, 'no dispatcher exited');
like($log, qr/the page's messages cannot be built: payload of poison\/big is too large/,
	'the redis outbox\'s failed attempts name the reason');

$node->stop;
$redis->stop;
done_testing();

# The `webhook` sink's drain (docs/benchmarks.md): a fresh outbox (batch_size 100 per request,
# signed with a secret, pages of 1,000) drains the backlog into a local receiver
# (test/tools/webhook_receiver.py, python3's threaded http.server on loopback, verifying every
# signature, counting what it accepted), BENCH_SINK_DRAIN_RUNS times. Next to it the receiver's
# own limit: test/tools/webhook_tool.c, a bare libcurl client posting the same number of
# messages of the backlog's size, 100 per request, signed, one request after the other on one
# kept-alive connection, as the sink does.
#
#   measure($b, $R)   after the delivery part, on its backlog; alone (BENCH_ONLY=webhook), on a
#                     backlog of BENCH_DRAIN_RECORDS records it appends itself
#   report($b, $R), summary($b, $R)
#
# Results in $R->{webhook}: n, bytes (the average message), sink_rates, sink_e2e, tool_rates.
package Bench::Webhook;

use strict;
use warnings;
use utf8;

use Bench::Drain;
use Bench::Format qw(med fmt_int fmt_cell);
use Bench::Nats;
use File::Spec;
use PostgreSQL::Test::Utils;
use Statesman::Webhook;

our $BATCH    = 100;    # messages per request
our $CATCH_UP = 600;    # seconds a drain may take before the bench gives up
my $SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
my $tool;

# Builds test/tools/webhook_tool.c (beside Statesman/ in the tree or in the bench's copy).
sub tool
{
	return $tool if $tool;
	(my $dir = Statesman::Webhook::receiver_script()) =~ s{/[^/]+\z}{};
	my $src = "$dir/webhook_tool.c";
	my $out = File::Spec->catfile(PostgreSQL::Test::Utils::tempdir('webhook_tool'), 'webhook_tool');
	system($ENV{CC} // 'cc', '-O2', '-o', $out, $src, '-lcurl', '-lcrypto') == 0
	  or die "bench: cannot build $src (libcurl4-openssl-dev, libssl-dev)\n";
	return $tool = $out;
}

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $W = $R->{webhook} = {};
	# The nats part's backlog maker: the same records (BENCH_DRAIN_RECORDS, the delivery payload).
	Bench::Nats::own_backlog($b, $R) unless ($R->{delivery} && $R->{delivery}{n}) || ($R->{nats} && $R->{nats}{n});
	my ($total, $target) = $b->row('SELECT count(*), statesman.head_position() FROM statesman.history');
	$b->fail('bench: webhook: no backlog') unless $total > 0;
	$W->{n}     = $total;
	$W->{bytes} = $b->q('SELECT round(avg(octet_length(message::text))) FROM statesman.read_feed(NULL, 1000)');
	$b->say('bench: webhook: backlog ' . fmt_int($total) . " records of $W->{bytes} bytes; batches of $BATCH");

	for my $r (1 .. $s->{sink_runs})
	{
		my $hook = Statesman::Webhook->start(secret => $SECRET, log => 0);
		my $line = `@{[ tool() ]} @{[ $hook->url ]} $SECRET $total $BATCH $W->{bytes}`;
		my ($n, $secs, $rate) = split ' ', $line // '';
		my $st = $hook->stats;
		$hook->stop;
		$b->fail("bench: webhook_tool: " . ($line // 'no output') . "; the receiver accepted $st->{messages}")
		  unless $n && $n == $total && $st->{messages} == $total && $st->{bad_signatures} == 0;
		push @{ $W->{tool_rates} }, int($rate);
		$b->say("  [webhook_tool $r/$s->{sink_runs}] " . fmt_int($total) . " messages in $secs s = " . fmt_int($rate) . ' messages/s');
	}

	for my $r (1 .. $s->{sink_runs})
	{
		my $hook = Statesman::Webhook->start(secret => $SECRET, log => 0);
		my $url  = $hook->url("/drain$r");
		my $d = Bench::Drain::run($b, name => "webhook drain run $r", outbox => "wdrain_$r", sink => 'webhook',
			options => qq({"url": "$url", "secret": "$SECRET", "batch_size": $BATCH, "timeout_ms": 10000}),
			target => $target, total => $total, catch_up => $CATCH_UP);
		my ($n, $rate, $e2e, $secs) = @$d{qw(counted rate e2e secs)};
		my $st = $hook->stats;
		$hook->stop;
		$b->fail("bench: webhook drain run $r: the outbox counted $n, the receiver accepted $st->{messages} "
			  . "($st->{bad_signatures} bad signatures), of $total")
		  if $n != $total || $st->{messages} < $total || $st->{bad_signatures} != 0;
		push @{ $W->{sink_rates} }, $rate;
		push @{ $W->{sink_e2e} },   $e2e;
		$b->say("  [webhook drain $r/$s->{sink_runs}] " . fmt_int($total) . " records in $secs s = " . fmt_int($rate)
			  . ' records/s (' . fmt_int($e2e) . " records/s counted from create_outbox); $st->{requests} requests, "
			  . fmt_int($st->{messages}) . ' messages accepted');
		$b->q("SELECT statesman.drop_outbox('wdrain_$r')");
	}
	return;
}

sub stats_of { return Bench::Format::stats(@{ $_[0] }); }

sub summary
{
	my ($b, $R) = @_;
	my $W = $R->{webhook} or return ();
	my @m = stats_of($W->{sink_rates});
	my @x = stats_of($W->{tool_rates});
	return '| 2 | drain of ' . fmt_int($W->{n}) . " records to the `webhook` sink (batches of $BATCH) vs a bare libcurl client into the same receiver, records/s | "
	  . fmt_cell(@m) . ' | ' . fmt_cell(@x) . ' | ' . sprintf('%.2f', $m[0] / $x[0]) . '× | informational | — |';
}

sub report
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $W = $R->{webhook} or return ();
	my @m = stats_of($W->{sink_rates});
	my @x = stats_of($W->{tool_rates});
	return ('', '### Delivery to the `webhook` sink', '',
		'- the receiver: `test/tools/webhook_receiver.py` (python3 `http.server`, threaded, HTTP/1.1 keep-alive) on loopback, verifying each request\'s signature and counting the messages it accepted; the backlog of '
		  . fmt_int($W->{n}) . " records (messages of $W->{bytes} bytes on average), $s->{sink_runs} times to a fresh outbox (`batch_size` $BATCH per request, a `secret`, pages of 1,000). Rate = records / (when the cursor reached the head − when it first moved), polled every 100 ms; afterwards the receiver must have accepted every record with a valid signature.",
		"- the receiver's own limit: `test/tools/webhook_tool.c`, a bare libcurl client posting the same number of messages of the same size, $BATCH per request, signed, one request after the other on one kept-alive connection",
		'',
		'| figure | median (min–max) | notes |',
		'|---|---|---|',
		"| drain to the `webhook` sink, records/s, $s->{sink_runs} runs | " . fmt_cell(@m) . ' | counted from `create_outbox`: '
		  . join(' · ', map { fmt_int($_) } @{ $W->{sink_e2e} }) . ' |',
		"| webhook_tool into the same receiver, messages/s, $s->{sink_runs} runs | " . fmt_cell(@x) . ' | the receiver\'s limit for one connection |');
}

1;

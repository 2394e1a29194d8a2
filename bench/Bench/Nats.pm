# The `nats` sink's drain (docs/benchmarks.md): a fresh outbox drains the backlog into a
# JetStream stream of a nats-server on loopback (Statesman::Nats: JetStream, file storage, its
# defaults otherwise), BENCH_SINK_DRAIN_RUNS times; next to it the broker side's own figure:
# test/tools/nats_tool.c's JetStream publisher (nats.c's asynchronous publish, 8,192 acks in
# flight, a Nats-Msg-Id on each message, as the sink does) with messages of the backlog's size.
# The `nats` CLI (`nats bench`) is not packaged for Debian.
#
#   measure($b, $R)   after the delivery part, on its backlog; alone (BENCH_ONLY=nats), on a
#                     backlog of BENCH_DRAIN_RECORDS records it appends itself
#   report($b, $R), summary($b, $R)
#
# Results in $R->{nats}: n, bytes (the average message), version, sink_rates, sink_e2e,
# tool_rates (one value per run).
package Bench::Nats;

use strict;
use warnings;
use utf8;

use Bench::Drain;
use Bench::Format qw(med fmt_int fmt_cell rate_cell);
use Statesman::Nats;
use Time::HiRes qw(time usleep);

our $TARGET   = 100000;    # records/s (docs/design.md §9)
our $WINDOW   = 8192;      # the publisher's acks in flight (the sink's window)
our $CATCH_UP = 300;       # seconds a drain may take before the bench gives up

# A backlog of $s->{drain_records} records when the delivery part did not leave one: the worker
# on, the delivery part's payload and shape (2 clients' worth of addresses, 100 per transaction).
sub own_backlog
{
	my ($b, $R, $who) = @_;
	my $s = $b->s;
	$who //= 'nats';    # the part that asks (Bench::RabbitMQ uses it too)
	$b->say("bench: $who: restarting the cluster with the worker on; appending a backlog of "
		  . fmt_int($s->{drain_records}) . ' records');
	$b->q('ALTER SYSTEM SET statesman.enabled = on');
	$b->restart;
	$b->q('TRUNCATE statesman.history');
	my $left = $s->{drain_records};
	while ($left > 0)
	{
		my $n = $left < 50000 ? $left : 50000;
		$b->q("SET synchronous_commit = off;
SELECT count(*) FROM generate_series(1, $n) i
  CROSS JOIN LATERAL statesman.append('bench', 'acct/' || (i % 10000),
    jsonb_build_object('account', i % 5000, 'amount', (random() * 1000000)::int, 'currency', 'EUR',
                       'client', 1, 'nonce', (random() * 1e12)::bigint, 'note', 'bench')) a");
		$left -= $n;
	}
	while ($b->q('SELECT COALESCE(unsequenced_records, 0) > 0 FROM statesman.feed_status') eq 't')
	{
		$b->q('SELECT statesman.sequence_feed(100000)');
		usleep(100_000);
	}
	$b->q("VACUUM ANALYZE statesman.history;\nCHECKPOINT");
	return;
}

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $N = $R->{nats} = {};
	own_backlog($b, $R) unless $R->{delivery} && $R->{delivery}{n};
	my ($total, $target) = $b->row('SELECT count(*), statesman.head_position() FROM statesman.history');
	$b->fail("bench: nats: no backlog") unless $total > 0;
	$N->{n}     = $total;
	$N->{bytes} = $b->q('SELECT round(avg(octet_length(message::text))) FROM statesman.read_feed(NULL, 1000)');
	my $nats = Statesman::Nats->start;
	my $v = `nats-server --version`;
	$N->{version} = $v =~ /\bv(\d\S*)/ ? $1 : "";
	$b->say("bench: nats: nats-server $N->{version} -js on 127.0.0.1:" . $nats->port . '; backlog '
		  . fmt_int($total) . " records of $N->{bytes} bytes");

	for my $r (1 .. $s->{sink_runs})
	{
		$nats->add_stream("TOOL$r", "tool$r.>");
		my ($n, $secs, $rate) = $nats->bench_publish("tool$r.bench", $total, $N->{bytes}, $WINDOW);
		$b->fail("bench: nats: the publisher stored " . $nats->count("TOOL$r") . " of $total")
		  unless $nats->count("TOOL$r") == $total;
		$nats->delete_stream("TOOL$r");
		push @{ $N->{tool_rates} }, int($rate);
		$b->say("  [nats_tool $r/$s->{sink_runs}] " . fmt_int($total) . " JetStream publishes of $N->{bytes} bytes in $secs s = "
			  . fmt_int($rate) . ' messages/s');
	}

	for my $r (1 .. $s->{sink_runs})
	{
		# Routed by root, as the sink's default: the backlog's root `bench` → drain_<r>.bench.
		$nats->add_stream("DRAIN$r", "drain$r.>");
		my $port = $nats->port;
		my $d = Bench::Drain::run($b, name => "nats drain run $r", outbox => "ndrain_$r", sink => 'nats',
			options => qq({"url": "nats://127.0.0.1:$port", "subject": "drain$r.{root}"}),
			target => $target, total => $total, catch_up => $CATCH_UP);
		my ($n, $rate, $e2e, $secs) = @$d{qw(counted rate e2e secs)};
		my $stored = $nats->count("DRAIN$r");
		$b->fail("bench: nats drain run $r: the outbox counted $n, the stream holds $stored, of $total")
		  if $n != $total || $stored != $total;
		push @{ $N->{sink_rates} }, $rate;
		push @{ $N->{sink_e2e} },   $e2e;
		$b->say("  [nats drain $r/$s->{sink_runs}] " . fmt_int($total) . " records in $secs s = " . fmt_int($rate)
			  . ' records/s (' . fmt_int($e2e) . ' records/s counted from create_outbox); the stream holds ' . fmt_int($stored));
		$b->q("SELECT statesman.drop_outbox('ndrain_$r')");
		$nats->delete_stream("DRAIN$r");
	}
	$nats->stop;
	return;
}

sub verdict
{
	my ($N) = @_;
	my $r = med(@{ $N->{sink_rates} });
	my $x = med(@{ $N->{tool_rates} });
	return ($r >= $TARGET && $r >= $x / 2) ? 'yes' : '**no**';
}

sub summary
{
	my ($b, $R) = @_;
	my $N = $R->{nats} or return ();
	my @m = (stats_of($N->{sink_rates}));
	my @x = (stats_of($N->{tool_rates}));
	return '| 2 | drain of ' . fmt_int($N->{n}) . ' records to the `nats` sink vs nats.c\'s own JetStream publisher, records/s | '
	  . fmt_cell(@m) . ' | ' . fmt_cell(@x) . ' | ' . sprintf('%.2f', $m[0] / $x[0]) . '× | ≥ 100,000 and ≥ 0.50× | '
	  . verdict($N) . ' |';
}

sub stats_of { return Bench::Format::stats(@{ $_[0] }); }

sub report
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $N = $R->{nats} or return ();
	my @m = stats_of($N->{sink_rates});
	my @x = stats_of($N->{tool_rates});
	return ('', '### Delivery to the `nats` sink', '',
		"- a nats-server $N->{version} with JetStream (`-js`, file storage, its defaults otherwise) on loopback; the backlog of "
		  . fmt_int($N->{n}) . " records (messages of $N->{bytes} bytes on average), $s->{sink_runs} times to a fresh outbox (default options, pages of 1,000, subject `drain<r>.{root}`) and a fresh stream. Rate = records / (when the cursor reached the head − when it first moved), polled every 100 ms; afterwards the stream must hold every record.",
		'- the broker side: `test/tools/nats_tool.c bench`, nats.c\'s asynchronous JetStream publish of the same number of messages of the same size, ' . $WINDOW . ' acks in flight, a `Nats-Msg-Id` on each (the `nats` CLI is not packaged for Debian)',
		'',
		'| figure | median (min–max) | target | met | notes |',
		'|---|---|---|---|---|',
		"| drain to the `nats` sink, records/s, $s->{sink_runs} runs | " . fmt_cell(@m) . ' | ≥ 100,000 and ≥ 0.50× of the publisher | '
		  . verdict($N) . ' | counted from `create_outbox`: ' . join(' · ', map { fmt_int($_) } @{ $N->{sink_e2e} }) . ' |',
		"| nats_tool JetStream publisher, messages/s, $s->{sink_runs} runs | " . fmt_cell(@x) . ' | informational | — | the broker side\'s limit |');
}

1;

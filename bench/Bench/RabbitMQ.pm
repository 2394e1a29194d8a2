# The `rabbitmq` sink's drain (docs/benchmarks.md): a fresh outbox drains the backlog into a
# durable classic queue of a rabbitmq-server node on loopback (Statesman::RabbitMQ: a node of its
# own, its defaults otherwise) through the default exchange, BENCH_SINK_DRAIN_RUNS times; next to
# it the broker side's own figure: test/tools/rabbitmq_tool.c's publisher (rabbitmq-c, publisher
# confirms, mandatory, persistent, a message_id and a header on each message, 8,192 confirms
# outstanding, as the sink's window) with messages of the backlog's size. RabbitMQ's PerfTest
# (Java) is not packaged for Debian.
#
#   measure($b, $R)   after the delivery part, on its backlog; alone (BENCH_ONLY=rabbitmq), on a
#                     backlog of BENCH_DRAIN_RECORDS records it appends itself
#   report($b, $R), summary($b, $R)
#
# Results in $R->{rabbitmq}: n, bytes (the average message), version, sink_rates, sink_e2e,
# tool_rates (one value per run).
package Bench::RabbitMQ;

use strict;
use warnings;
use utf8;

use Bench::Drain;
use Bench::Format qw(med fmt_int fmt_cell rate_cell);
use Bench::Nats;
use Statesman::RabbitMQ;
use Time::HiRes qw(time usleep);

our $TARGET   = 100000;    # records/s (docs/design.md §9)
our $WINDOW   = 8192;      # the publisher's confirms outstanding (the sink's window)
our $CATCH_UP = 300;       # seconds a drain may take before the bench gives up

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $N = $R->{rabbitmq} = {};
	Bench::Nats::own_backlog($b, $R, 'rabbitmq') unless $R->{delivery} && $R->{delivery}{n};
	my ($total, $target) = $b->row('SELECT count(*), statesman.head_position() FROM statesman.history');
	$b->fail("bench: rabbitmq: no backlog") unless $total > 0;
	$N->{n}     = $total;
	$N->{bytes} = $b->q('SELECT round(avg(octet_length(message::text))) FROM statesman.read_feed(NULL, 1000)');
	my $mq = Statesman::RabbitMQ->start;
	my $v = $mq->ctl('version');
	$N->{version} = $v =~ /(\d+\.\d+\.\d+)/ ? $1 : "";
	$b->say("bench: rabbitmq: rabbitmq-server $N->{version} on 127.0.0.1:" . $mq->port . '; backlog '
		  . fmt_int($total) . " records of $N->{bytes} bytes");

	for my $r (1 .. $s->{sink_runs})
	{
		$mq->queue("tool$r");
		my ($n, $secs, $rate) = $mq->bench_publish("tool$r", $total, $N->{bytes}, $WINDOW);
		$b->fail("bench: rabbitmq: the publisher stored " . $mq->count("tool$r") . " of $total")
		  unless $mq->count("tool$r") == $total;
		$mq->delete_queue("tool$r");
		push @{ $N->{tool_rates} }, int($rate);
		$b->say("  [rabbitmq_tool $r/$s->{sink_runs}] " . fmt_int($total) . " confirmed publishes of $N->{bytes} bytes in $secs s = "
			  . fmt_int($rate) . ' messages/s');
	}

	for my $r (1 .. $s->{sink_runs})
	{
		# Routed by root through the default exchange: the backlog's root `bench` → queue drain<r>.bench.
		$mq->queue("drain$r.bench");
		my $port = $mq->port;
		my $d = Bench::Drain::run($b, name => "rabbitmq drain run $r", outbox => "qdrain_$r", sink => 'rabbitmq',
			options => qq({"port": $port, "routing_key": "drain$r.{root}"}),
			target => $target, total => $total, catch_up => $CATCH_UP);
		my ($n, $rate, $e2e, $secs) = @$d{qw(counted rate e2e secs)};
		my $stored = $mq->count("drain$r.bench");
		$b->fail("bench: rabbitmq drain run $r: the outbox counted $n, the queue holds $stored, of $total")
		  if $n != $total || $stored != $total;
		push @{ $N->{sink_rates} }, $rate;
		push @{ $N->{sink_e2e} },   $e2e;
		$b->say("  [rabbitmq drain $r/$s->{sink_runs}] " . fmt_int($total) . " records in $secs s = " . fmt_int($rate)
			  . ' records/s (' . fmt_int($e2e) . ' records/s counted from create_outbox); the queue holds ' . fmt_int($stored));
		$b->q("SELECT statesman.drop_outbox('qdrain_$r')");
		$mq->delete_queue("drain$r.bench");
	}
	$mq->shutdown;
	return;
}

sub verdict
{
	my ($N) = @_;
	my $r = med(@{ $N->{sink_rates} });
	my $x = med(@{ $N->{tool_rates} });
	# The lower of the two: 100,000/s, or half of what the broker takes from a bare publisher.
	my $need = $TARGET < $x / 2 ? $TARGET : $x / 2;
	return $r >= $need ? 'yes' : '**no**';
}

sub summary
{
	my ($b, $R) = @_;
	my $N = $R->{rabbitmq} or return ();
	my @m = (stats_of($N->{sink_rates}));
	my @x = (stats_of($N->{tool_rates}));
	return '| 2 | drain of ' . fmt_int($N->{n}) . ' records to the `rabbitmq` sink vs a bare rabbitmq-c publisher with confirms, records/s | '
	  . fmt_cell(@m) . ' | ' . fmt_cell(@x) . ' | ' . sprintf('%.2f', $m[0] / $x[0]) . '× | ≥ 100,000 or ≥ 0.50×, the lower | '
	  . verdict($N) . ' |';
}

sub stats_of { return Bench::Format::stats(@{ $_[0] }); }

sub report
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $N = $R->{rabbitmq} or return ();
	my @m = stats_of($N->{sink_rates});
	my @x = stats_of($N->{tool_rates});
	return ('', '### Delivery to the `rabbitmq` sink', '',
		"- a rabbitmq-server $N->{version} node on loopback (its defaults; classic durable queues, persistent messages); the backlog of "
		  . fmt_int($N->{n}) . " records (messages of $N->{bytes} bytes on average), $s->{sink_runs} times to a fresh outbox (default options: publisher confirms, mandatory, persistent; pages of 1,000; routing key `drain<r>.{root}` through the default exchange) and a fresh queue. Rate = records / (when the cursor reached the head − when it first moved), polled every 100 ms; afterwards the queue must hold every record.",
		'- the broker side: `test/tools/rabbitmq_tool.c bench`, a bare rabbitmq-c publisher of the same number of messages of the same size into one queue, in confirm mode with ' . $WINDOW . ' confirms outstanding, mandatory, persistent, a `message_id` and a header on each (RabbitMQ\'s PerfTest is not packaged for Debian)',
		'',
		'| figure | median (min–max) | target | met | notes |',
		'|---|---|---|---|---|',
		"| drain to the `rabbitmq` sink, records/s, $s->{sink_runs} runs | " . fmt_cell(@m) . ' | ≥ 100,000 or ≥ 0.50× of the publisher, the lower | '
		  . verdict($N) . ' | counted from `create_outbox`: ' . join(' · ', map { fmt_int($_) } @{ $N->{sink_e2e} }) . ' |',
		"| rabbitmq_tool publisher with confirms, messages/s, $s->{sink_runs} runs | " . fmt_cell(@x) . ' | informational | — | the broker side\'s limit |');
}

1;

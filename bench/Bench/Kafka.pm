# The `kafka` sink's drain, on librdkafka's mock cluster (test/kafka-mock/kafka_mock.c, hosted
# by Statesman::Kafka): no Kafka broker is packaged for Debian, so the figure is the mock's, not
# a Kafka cluster's. Beside it, the broker-side figure: a bare librdkafka producer (the helper's
# `produce` mode: the sink's settings and headers, nothing of statesman) into the same mock.
#
#   measure($b, $R)   after Bench::Delivery::measure, on its backlog; alone (BENCH_ONLY=kafka)
#                     it turns the worker on and appends a backlog of its own first
#   summary($b, $R)   its row of the summary table
#   report($b, $R)    its section
#
# Results in $R->{kafka}: n, bytes, rates, e2e (per drain run), bare (per bare-producer run,
# flushing every 1,000 records as the sink waits per page: its fastest way on the mock),
# bare_unpaged (flushing only at the end), parts4 (one drain into a 4-partition topic).
package Bench::Kafka;

use strict;
use warnings;
use utf8;

use Bench::Drain;
use Bench::Format qw(stats med fmt_int fmt_cell rate_cell ratio verdict dot_list);
use IPC::Run;
use Statesman::Kafka;

our $TARGET   = 100000;    # records/s (docs/design.md §9)
our $CATCH_UP = 300;       # seconds a drain may take before the bench gives up

# A backlog of $n records (BENCH_ONLY=kafka): the worker on, appended in statements of
# 100,000, all sequenced. Returns (records, head).
sub own_backlog
{
	my ($b, $n) = @_;
	$b->say('bench: kafka: restarting the cluster with the worker on (statesman.enabled)');
	$b->q("ALTER SYSTEM SET statesman.enabled = on");
	$b->restart;
	$b->q('TRUNCATE statesman.history');
	$b->say('bench: kafka: appending a backlog of ' . fmt_int($n) . ' records');
	for (my $done = 0; $done < $n; $done += 100000)
	{
		my $k = $n - $done < 100000 ? $n - $done : 100000;
		$b->q("SELECT count(*) FROM generate_series(1, $k) i
  CROSS JOIN LATERAL statesman.append('bench', 'acct/' || (($done + i) * 37 % 10000),
    jsonb_build_object('account', ($done + i) % 5000, 'amount', (random() * 1000000)::int, 'currency', 'EUR',
                       'client', 1, 'nonce', (random() * 1e12)::bigint, 'note', 'bench')) a");
	}
	while ($b->q('SELECT COALESCE(unsequenced_records, 0) > 0 FROM statesman.feed_status') eq 't')
	{
		$b->q('SELECT statesman.sequence_feed(100000)');
	}
	$b->q("VACUUM ANALYZE statesman.history;\nCHECKPOINT");
	return $b->row('SELECT count(*), statesman.head_position() FROM statesman.history');
}

# One drain of the backlog by a fresh outbox into a fresh topic of $partitions partitions. The
# rate is records / (when the cursor reached the head − when it first moved), polled every
# 100 ms inside the server, as for the other sinks; afterwards the topic must hold every record.
sub drain_run
{
	my ($b, $K, $kafka, $label, $partitions, $total, $target) = @_;
	my $start = $target - $total;
	my $topic = "bench.$label";
	$kafka->topic($topic, $partitions);
	my $options = '{"brokers": "' . $kafka->bootstrap . '", "topic": "' . $topic . '"}';
	my $d = Bench::Drain::run($b, name => "kafka drain $label", outbox => "kdrain_$label", sink => 'kafka',
		options => $options, start => $start, target => $target, total => $total, catch_up => $CATCH_UP,
		progress => 1);
	my ($n, $rate, $e2e, $secs) = @$d{qw(counted rate e2e secs)};
	my $stored = $kafka->count($topic);
	$b->fail("bench: kafka drain $label: the outbox counted $n, the topic holds $stored, of $total")
	  if $n != $total || $stored != $total;
	$b->say("  [kafka drain $label, $partitions partition(s)] " . fmt_int($total) . " records in $secs s = "
		  . fmt_int($rate) . ' records/s (' . fmt_int($e2e) . ' records/s counted from create_outbox); the topic holds '
		  . fmt_int($stored));
	$b->q("SELECT statesman.drop_outbox('kdrain_$label')");
	return ($rate, $e2e);
}

# The bare producer into the same mock: $total records of $bytes bytes, flushed every $page
# records (0: only at the end). Returns records/s.
sub bare_run
{
	my ($b, $K, $kafka, $label, $partitions, $page) = @_;
	my $topic = "bench.$label";
	$kafka->topic($topic, $partitions);
	my ($out, $err) = ('', '');
	IPC::Run::run([ $K->{helper}, 'produce', $kafka->bootstrap, $topic, $K->{n}, $K->{bytes}, $page ],
		'<', \'', '>', \$out, '2>', \$err)
	  or $b->fail("bench: the bare producer failed: $err");
	my ($rate) = $out =~ /= (\d+) records\/s/ or $b->fail("bench: the bare producer said: $out");
	my $stored = $kafka->count($topic);
	$b->fail("bench: bare producer $label: the topic holds $stored of $K->{n}") if $stored != $K->{n};
	$b->say("  [bare producer $label] $out");
	return $rate;
}

sub measure
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my $K = $R->{kafka} = {};
	my ($total, $target);
	if ($R->{delivery} && $R->{delivery}{n})
	{
		$total  = $R->{delivery}{n};
		$target = $b->q('SELECT statesman.head_position()');
	}
	else
	{
		($total, $target) = own_backlog($b, $s->{drain_records});
	}
	$K->{n} = $total;
	$K->{bytes} = $b->q('SELECT round(avg(length(message::text))) FROM statesman.read_feed(NULL, 1000)');
	my $kafka = Statesman::Kafka->start(brokers => 1);
	$K->{helper} = Statesman::Kafka::build($kafka->{dir});
	$K->{version} = _librdkafka_version();
	$b->say('bench: kafka: librdkafka ' . _librdkafka_version() . ' mock cluster, 1 broker, at ' . $kafka->bootstrap
		  . "; messages of about $K->{bytes} bytes");
	$b->q("CREATE TABLE IF NOT EXISTS bench.kafka_runs (label text PRIMARY KEY, created_at timestamptz,
               first_at timestamptz, done_at timestamptz);
TRUNCATE bench.kafka_runs");
	for my $r (1 .. $s->{sink_runs})
	{
		my ($rate, $e2e) = drain_run($b, $K, $kafka, "drain_$r", 1, $total, $target);
		push @{ $K->{rates} }, $rate;
		push @{ $K->{e2e} },   $e2e;
	}
	($K->{parts4}) = drain_run($b, $K, $kafka, 'drain_4p', 4, $total, $target);
	push @{ $K->{bare} }, bare_run($b, $K, $kafka, "bare_$_", 1, 1000) for 1 .. $s->{sink_runs};
	$K->{bare_unpaged} = bare_run($b, $K, $kafka, 'bare_unpaged', 1, 0);
	$kafka->stop;
	return;
}

sub _librdkafka_version
{
	my $v = `dpkg-query -W -f '\${Version}' librdkafka1 2>/dev/null`;
	$v =~ s/-.*//;
	return $v || '?';
}

sub verdict_line
{
	my ($K) = @_;
	my ($r, $x) = (med(@{ $K->{rates} }), med(@{ $K->{bare} }));
	return ($r >= $TARGET && $r >= $x / 2) ? 'yes' : '**no**';
}

sub summary
{
	my ($b, $R) = @_;
	my $K = $R->{kafka} or return;
	my $N = fmt_int($K->{n});
	return "| 2 | drain of $N records to the `kafka` sink on **librdkafka's mock cluster** (not a Kafka broker) vs a bare librdkafka producer into the same mock, records/s | "
	  . rate_cell(@{ $K->{rates} }) . ' | ' . rate_cell(@{ $K->{bare} }) . ' | '
	  . ratio(med(@{ $K->{rates} }), med(@{ $K->{bare} })) . '× | ≥ 100,000/s and ≥ 0.50× | '
	  . verdict_line($K) . ' |';
}

sub report
{
	my ($b, $R) = @_;
	my $K = $R->{kafka} or return;
	my $s = $b->s;
	my $N = fmt_int($K->{n});
	my @m = stats(@{ $K->{rates} });
	my @x = stats(@{ $K->{bare} });
	my ($e2e) = stats(@{ $K->{e2e} });
	return ('', '### Delivery to `kafka`, on librdkafka\'s mock cluster', '',
		"- no Kafka broker is packaged for Debian: the figures are librdkafka $K->{version}'s mock cluster's (`rdkafka_mock.h`, one broker on loopback, hosted by test/kafka-mock/kafka_mock.c), a Kafka-protocol server that keeps its log in memory, ignores `acks` and replicates nothing. They say what the sink and the dispatcher cost, not what a Kafka cluster would take.",
		"- drain: the same $N-record backlog, $s->{sink_runs} times to a fresh outbox (default options: pages of 1,000, `acks=all`, idempotent) and a fresh topic of 1 partition; rate = records / (when the cursor reached the head − when it first moved), polled every 100 ms; afterwards the topic's high watermark must equal the backlog.",
		"- bare producer: the helper's `produce` mode, librdkafka alone with the sink's settings (idempotent, `acks=all`, murmur2 partitioner) and its three headers, $N records of $K->{bytes} bytes keyed over 5,000 keys, flushed every 1,000 records (the sink's page; on this mock faster than one flush at the end, the next row's notes): the mock's limit.",
		'- one partition, because the mock answers the requests of several partitions with a delay on this machine: with both processes idle, a page of 1,000 into 4 partitions takes tens of milliseconds (the row below); a Kafka broker does not.',
		'', '| measurement | result | target | met | notes |', '|---|---|---|---|---|',
		"| drain of $N records to the `kafka` sink (mock cluster, 1 partition), records/s, median (min–max) of $s->{sink_runs} runs | "
		  . fmt_cell(@m) . ' | ≥ 100,000 and ≥ 0.50× of the bare producer | ' . verdict_line($K) . ' | runs: '
		  . dot_list(map { fmt_int($_) } @{ $K->{rates} }) . '; counted from `create_outbox`: median ' . fmt_int($e2e)
		  . ' records/s; ' . sprintf('%.2f', $m[0] / ($x[0] || 1)) . '× of the bare producer |',
		"| bare librdkafka producer into the same mock, records/s, median (min–max) of $s->{sink_runs} runs: the broker side's limit | "
		  . fmt_cell(@x) . ' | informational | — | flushed once, at the end: ' . fmt_int($K->{bare_unpaged}) . ' records/s |',
		"| drain of the same backlog into a 4-partition topic, records/s, one run | " . fmt_int($K->{parts4})
		  . ' | informational | — | the mock\'s per-partition answers (above) |');
}

1;

# Delivery to the `rabbitmq` sink (docs/sinks.md "rabbitmq"): AMQP 0-9-1 with publisher
# confirms, against a real rabbitmq-server node of the test's own (test/t/Statesman/RabbitMQ.pm),
# on a vhost with a user and a password.
#
#   routed      1,000 records of two roots, routing key "sm.{root}" on a topic exchange: each
#               root's records are in the queue bound to its key once each, with message_id =
#               messageId, content_type, persistent, the headers globalPosition and epoch, and
#               the message as the body.
#   unroutable  a routing key no queue is bound to: the broker returns the messages (mandatory),
#               the page fails, last_error names the routing key and the exchange, the cursor
#               stays; once a queue is bound, everything is delivered.
#   no exchange an exchange that does not exist: the broker closes the channel (404), last_error
#               says so; once it exists, the sink reconnects and delivers.
#   outages     while a writer appends, the broker is stopped and started again (durable queues,
#               persistent messages): the outbox backs off, then every acknowledged record is in
#               its queue (duplicates counted and printed: at least once). Then the broker is
#               frozen (SIGSTOP): the page times out; a dispatcher waiting (timeout_ms 20000) for
#               it ends at once on SIGTERM.
#   kill -9     the dispatcher is killed (SIGKILL) twice while it drains a backlog: every message
#               id is in the queue (duplicates counted and printed).
#   cloudevents "format": "cloudevents" through the default exchange (routing key = the queue's
#               name): content_type application/cloudevents+json, the CloudEvents attributes.
#   auth        a wrong password: backing off with the broker's ACCESS_REFUSED.
# Throughout: the password appears in no error, no view and no log line.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status start_writer acked);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::RabbitMQ;
use Test::More;
use Time::HiRes qw(time usleep);

my $t_begin  = time;
my $password = 'Rabbit-Pw.7c2e';
my $vhost    = 'shop';
my $mq       = Statesman::RabbitMQ->start;
my $port     = $mq->port;
note sprintf('rabbitmq-server (VM pid %s) on 127.0.0.1:%d, started in %.1f s', $mq->pid, $port, time - $t_begin);
$mq->add_user('shop', $password, $vhost);

my $node = statesman_node('rabbitmq_sink',
	"log_statement = none\nlog_min_error_statement = panic\nrestart_after_crash = on\n");
sub query { return $node->safe_psql('postgres', $_[0]); }

my $json = JSON::PP->new->canonical;
sub sink_options
{
	my (%extra) = @_;
	return "'"
	  . $json->encode(
		{
			host       => '127.0.0.1',
			port       => $port,
			vhost      => $vhost,
			user       => 'shop',
			password   => $password,
			exchange   => 'sm',
			timeout_ms => 2000,
			%extra
		})
	  . "'";
}
sub outbox
{
	my ($id, $options, @settings) = @_;
	query("SELECT statesman.create_outbox('$id', 'rabbitmq', $options, "
		  . join(', ', "min_retry_delay => '100 ms'", "max_retry_delay => '1 s'", @settings) . ")");
}
sub caught_up
{
	my ($id, $what) = @_;
	wait_for($node,
		"SELECT cursor_position = head_position AND attempts = 0 FROM statesman.outbox_status WHERE outbox_id = '$id'",
		$what);
}

# Feed records of a root: message id -> [position, message (canonical JSON), epoch].
sub feed
{
	my ($root) = @_;
	my %feed;
	for my $line (split /\n/,
		query("SELECT global_position, message_id, message FROM statesman.read_feed(NULL, 1000000, '$root')"))
	{
		my ($pos, $id, $message) = split /\|/, $line, 3;
		my $m = decode_json($message);
		$feed{$id} = [ $pos, $json->encode($m), $m->{epoch} ];
	}
	return \%feed;
}

# A queue against the feed of its root: problems (ids twice unless allowed, missing, foreign,
# wrong routing key or properties, a message that differs), or none; and the duplicates.
# $opt{expect}: the ids that must be there (default: every record of the root); $opt{raw}: the
# bodies are not the statesman format; $opt{duplicates}: ids may repeat (at least once).
sub queue_problems
{
	my ($queue, $root, $key, %opt) = @_;
	my $feed = feed($root);
	my (@problems, %seen);
	my $duplicates = 0;
	my $i = 0;
	for my $m (@{ $mq->messages($queue, $opt{vhost} // $vhost) })
	{
		$i++;
		my $id = $m->{id};
		if ($seen{$id}++)
		{
			$duplicates++;
			push @problems, "#$i: $id twice" unless $opt{duplicates};
		}
		push @problems, "#$i: routing key $m->{key}" if $m->{key} ne $key;
		my $want = $feed->{$id} or push(@problems, "#$i: no record $id"), next;
		push @problems, "#$i: delivery_mode $m->{delivery_mode}" if $m->{delivery_mode} ne '2';
		push @problems, "#$i: headers globalPosition=" . ($m->{headers}{globalPosition} // 'none')
		  if ($m->{headers}{globalPosition} // '') ne $want->[0];
		push @problems, "#$i: headers epoch=" . ($m->{headers}{epoch} // 'none')
		  if ($m->{headers}{epoch} // '') ne $want->[2];
		next if $opt{raw};
		push @problems, "#$i: content_type $m->{content_type}" if $m->{content_type} ne 'application/json';
		push @problems, "#$i: message differs"
		  if (eval { $json->encode(decode_json($m->{data})) } // '') ne $want->[1];
	}
	push @problems, map { "$_ missing" } grep { !$seen{$_} } sort @{ $opt{expect} // [ keys %$feed ] };
	return (\@problems, $duplicates);
}
sub no_problems
{
	my ($what, @args) = @_;
	my ($p, $duplicates) = queue_problems(@args);
	is(scalar @$p, 0, $what) or diag(join("\n", @$p[ 0 .. ($#$p < 9 ? $#$p : 9) ]));
	return $duplicates;
}

query('CREATE EXTENSION statesman');
$mq->exchange('sm', 'topic', $vhost);
$mq->queue('orders', $vhost);
$mq->queue('carts',  $vhost);
$mq->bind('orders', 'sm', 'sm.orders', $vhost);
$mq->bind('carts',  'sm', 'sm.carts',  $vhost);

# ---- routed -------------------------------------------------------------------------------
outbox('routed', sink_options(routing_key => 'sm.{root}'), 'batch_size => 150');
query("SELECT count(*) FROM generate_series(1, 600) g, "
	  . "LATERAL statesman.append('Orders', 'o' || (g % 50), jsonb_build_object('g', g)) a");
query("SELECT count(*) FROM generate_series(1, 400) g, "
	  . "LATERAL statesman.append('carts', 'c' || (g % 40), jsonb_build_object('g', g), partition => 'eu') a");
caught_up('routed', 'the outbox delivers 1,000 records of two roots');
is($mq->count('orders', $vhost), 600, 'queue orders holds the 600 records of root Orders');
is($mq->count('carts',  $vhost), 400, 'queue carts holds the 400 records of root carts');
no_problems('orders: each record once, routing key sm.orders, message_id, persistent, headers, the message',
	'orders', 'orders', 'sm.orders');
no_problems('carts: each record once, routing key sm.carts, with its properties and message',
	'carts', 'carts', 'sm.carts');
is(join(',', outbox_status($node, 'routed', qw(published_total deduplicated_total))),
	'1000,0', 'published_total 1000, deduplicated_total 0');

# ---- unroutable -----------------------------------------------------------------------------
outbox('lost', sink_options(routing_key => 'nowhere.{root}'), "root => 'orders'");
wait_for($node,
	q{SELECT attempts > 1 AND cursor_position IS NULL AND published_total = 0
	    AND last_error LIKE '%returned messageId "%" as unroutable (312 NO_ROUTE) from exchange "sm" with routing key "nowhere.orders"%'
	  FROM statesman.outbox_status WHERE outbox_id = 'lost'},
	'a routing key no queue is bound to: the page fails (basic.return), last_error names key and exchange, the cursor stays');
note 'last_error: ' . outbox_status($node, 'lost', 'last_error');
# The queue is bound while no page is being published: a page that failed on the first returned
# messages may already have had the later ones routed, had the binding come while it was in
# flight; that page is published again whole (at least once), and the queue would rightly hold
# those twice. So the outbox is paused, its dispatcher gone, while the binding is made.
query("SELECT statesman.pause_outbox('lost')");
wait_for($node,
	q{SELECT dispatcher_pid IS NULL FROM statesman.outbox_state WHERE outbox_id = 'lost'},
	'pausing the failing outbox stops its dispatcher');
$mq->queue('nowhere', $vhost);
$mq->bind('nowhere', 'sm', 'nowhere.*', $vhost);
query("SELECT statesman.resume_outbox('lost')");
caught_up('lost', 'once a queue is bound to the key, the outbox delivers');
no_problems('nowhere: the 600 records of root orders, each once (the returned ones went nowhere)',
	'nowhere', 'orders', 'nowhere.orders');
query("SELECT statesman.drop_outbox('lost')");

# ---- no exchange ----------------------------------------------------------------------------
outbox('nox', sink_options(exchange => 'later', routing_key => 'x.{root}'), "root => 'carts'");
wait_for($node,
	q{SELECT attempts > 1 AND cursor_position IS NULL
	    AND last_error LIKE '%the broker closed the channel: 404 NOT_FOUND - no exchange ''later'' in vhost ''shop''%'
	  FROM statesman.outbox_status WHERE outbox_id = 'nox'},
	'an exchange that does not exist: the broker closes the channel (404), last_error says so');
note 'last_error: ' . outbox_status($node, 'nox', 'last_error');
$mq->exchange('later', 'direct', $vhost);
$mq->queue('later', $vhost);
$mq->bind('later', 'later', 'x.carts', $vhost);
caught_up('nox', 'once the exchange exists, the outbox reconnects and delivers');
no_problems('later: the 400 records of root carts, each once', 'later', 'carts', 'x.carts');
query("SELECT statesman.drop_outbox('nox')");

# ---- outages --------------------------------------------------------------------------------
# A writer appends 2,000 records (one transaction each) while the broker goes away; ten more
# records appended during the outage make sure there is something to deliver then.
$mq->purge('orders', $vhost);
query("SELECT statesman.alter_outbox('routed', root => 'orders')");
caught_up('routed', 'outbox routed now takes root orders only');
$mq->queue('patience', $vhost);
outbox('patient', sink_options(exchange => '', routing_key => '{root}', timeout_ms => 20000), "root => 'patience'");
query(q{SELECT statesman.append('patience', 'p/0', '{}')});
caught_up('patient', 'the patient outbox (timeout_ms 20000, the default exchange) is connected and idle');

my $from = query('SELECT statesman.head_position()');
my $writer = start_writer($node, 'orders', 'w', 2000, 30);
wait_for($node,
	q{SELECT count(*) >= 100 FROM statesman.read_feed(NULL, 1000000, 'orders') f
	  WHERE f.address LIKE 'orders/w/%' AND f.global_position <= statesman.cursor_position('routed')},
	'the outbox delivers the writer\'s records as they come');
$mq->stop;
query("SELECT count(*) FROM generate_series(1, 10) g, LATERAL statesman.append('orders', 'down/' || g, '{}') a");
wait_for($node,
	q{SELECT state = 'backing_off' AND attempts > 0 AND last_error LIKE '%cannot connect%'
	  FROM statesman.outbox_status WHERE outbox_id = 'routed'},
	'rabbitmq-server stopped: the outbox backs off (cannot connect)');
note 'last_error: ' . outbox_status($node, 'routed', 'last_error');
$mq->start_again;
wait_for($node,
	q{SELECT attempts = 0 FROM statesman.outbox_status WHERE outbox_id = 'routed'},
	'rabbitmq-server started again (same node, durable queues): the outbox delivers again');
{
	# Frozen broker: the kernel still takes the bytes, nothing is confirmed.
	kill 'STOP', $mq->pid or die "cannot SIGSTOP the broker: $!";
	query("SELECT count(*) FROM generate_series(1, 10) g, LATERAL statesman.append('orders', 'frozen/' || g, '{}') a");
	query(q{SELECT statesman.append('patience', 'p/1', '{}')});
	# Inside its 20 s wait for confirms from the frozen broker: a SIGTERM ends the dispatcher at once.
	my $pid = outbox_status($node, 'patient', 'leader_pid');
	sleep 2;
	my $t0 = time;
	kill 'TERM', $pid;
	usleep(20_000) while kill(0, $pid) && time - $t0 < 15;
	my $took = time - $t0;
	ok(!kill(0, $pid), sprintf('SIGTERM ends the patient dispatcher while it waits for confirms (after %.2f s)', $took));
	cmp_ok($took, '<', 3, '... within moments, not its 20 s timeout');
	wait_for($node,
		q{SELECT state = 'backing_off' AND attempts > 0 AND last_error LIKE '%timed out after 2000 ms waiting for confirms%'
		  FROM statesman.outbox_status WHERE outbox_id = 'routed'},
		'rabbitmq-server frozen (SIGSTOP): the page times out, the outbox backs off');
	note 'last_error: ' . outbox_status($node, 'routed', 'last_error');
	kill 'CONT', $mq->pid;
}
$writer->{h}->finish;
my @acked = acked($writer);
is(scalar @acked, 2000, 'the writer had all 2,000 appends acknowledged');
caught_up('routed', 'once the broker is back, the outbox catches up');
my $expect = [ split /\n/, query("SELECT message_id FROM statesman.read_feed(NULL, 1000000, 'orders') WHERE global_position > $from") ];
is(scalar @$expect, 2020, '2,020 records of root orders since the writer began');
my $dups = no_problems('orders: every record of the outages there, at least once, with its properties',
	'orders', 'orders', 'sm.orders', expect => $expect, duplicates => 1);
note "orders: $dups duplicates (pages published again after the outages)";
my %in_queue = map { $_->{id} => 1 } @{ $mq->messages('orders', $vhost) };
is(scalar(grep { !$in_queue{$_} } @acked), 0, 'every acknowledged append of the writer is in queue orders');
caught_up('patient', 'the patient outbox catches up too');
no_problems('patience: both records there', 'patience', 'patience', 'patience', duplicates => 1);
query("SELECT statesman.drop_outbox('patient')");

# ---- kill -9 --------------------------------------------------------------------------------
# Small pages, so that the kills land while the backlog drains.
$mq->queue('kills', $vhost);
$mq->bind('kills', 'sm', 'sm.kills', $vhost);
query("SELECT statesman.alter_outbox('routed', root => 'kills', batch_size => 20)");
my $start = query('SELECT statesman.head_position()');
query("SELECT count(*) FROM generate_series(1, 20000) g, "
	  . "LATERAL statesman.append('kills', 'k' || (g % 100), jsonb_build_object('g', g)) a");
my $killed = 0;
for my $kill (1 .. 2)
{
	# The cursor past 1,000 more of the backlog, under a dispatcher that is not the one killed.
	my $at = $start + 1000 * $kill;
	my ($pid, $cursor);
	my $deadline = time + 60;
	while (time < $deadline)
	{
		($pid, $cursor) = split /\|/, $node->safe_psql('postgres',
			"SELECT leader_pid, cursor_position FROM statesman.outbox_status WHERE outbox_id = 'routed'");
		last if $pid && $pid != $killed && $cursor && $cursor >= $at;
		usleep(10_000);
	}
	ok($pid && $pid != $killed && kill('KILL', $pid), "kill -9 of the dispatcher (pid $pid) while it drains");
	cmp_ok($cursor - $start, '<', 20000, '... with ' . ($cursor - $start) . ' of the 20,000 records delivered');
	$killed = $pid;
	$node->poll_query_until('postgres', 'SELECT true') or BAIL_OUT('the server did not come back');
}
caught_up('routed', 'after the crash restarts the outbox drains the backlog');
cmp_ok($mq->count('kills', $vhost), '>=', 20000, 'queue kills holds at least 20,000 messages');
$dups = no_problems('kills: every message id there, at least once', 'kills', 'kills', 'sm.kills', duplicates => 1);
note "kills: $dups duplicates (pages published again after the kills)";
is($mq->count('kills', $vhost), 20000 + $dups, 'queue kills: 20,000 messages and the duplicates counted, nothing else');
query("SELECT statesman.drop_outbox('routed')");

# ---- cloudevents ------------------------------------------------------------------------------
$mq->queue('ce.shop', $vhost);
outbox('ce', sink_options(exchange => '', routing_key => 'ce.{root}', format => 'cloudevents'),
	"root => 'shop'", "payload_content_type => 'application/json'");
query(q{SELECT statesman.append('shop', 'basket/1', '{"items": [1, 2], "total": 12.5}', partition => 'p1')});
query(q{SELECT statesman.append_bytes('shop', 'img/1', '\x00ff10', 'application/octet-stream')});
query(q{SELECT statesman.append_delete('shop', 'basket/1', partition => 'p1')});
caught_up('ce', 'the cloudevents outbox delivers 3 records');
my $store = query('SELECT current_database()');
my %want  = map { my ($id, $m) = split /\|/, $_, 2; ($id => decode_json($m)) }
  split /\n/, query("SELECT message_id, message FROM statesman.read_feed(NULL, 1000000, 'shop')");
my $events = $mq->messages('ce.shop', $vhost);
is(scalar @$events, 3, 'queue ce.shop (the default exchange) holds 3 events');
no_problems('ce.shop: each record once, with message_id, headers', 'ce.shop', 'shop', 'ce.shop', raw => 1);
for my $m (@$events)
{
	my $ce = eval { decode_json($m->{data}) } // {};
	my $w  = $want{ $m->{id} } // {};
	my $what = "event $m->{id}";
	is($m->{content_type}, 'application/cloudevents+json', "$what: content_type");
	is_deeply(
		[ @$ce{qw(specversion id source type subject time statesmanposition statesmanepoch)} ],
		[
			'1.0', $w->{messageId}, "statesman://$store", "statesman.$w->{operation}", $w->{address},
			$w->{occurredAt}, "$w->{globalPosition}", $w->{epoch}
		],
		"$what: specversion, id = messageId, source, type, subject, time, statesman extensions");
}
query("SELECT statesman.drop_outbox('ce')");

# ---- auth -------------------------------------------------------------------------------------
outbox('wrong', sink_options(password => 'Wrong-Pw.1'), "root => 'orders'");
wait_for($node,
	q{SELECT attempts > 0 AND last_error LIKE 'rabbitmq sink amqp://shop@127.0.0.1:%/shop: cannot log in as "shop" to vhost "shop": %ACCESS_REFUSED%'
	    AND last_error NOT LIKE '%Wrong-Pw.1%'
	  FROM statesman.outbox_status WHERE outbox_id = 'wrong'},
	'a wrong password: backing off with the broker\'s ACCESS_REFUSED, the password not shown');
note 'last_error: ' . outbox_status($node, 'wrong', 'last_error');
query("SELECT statesman.drop_outbox('wrong')");

# ---- secrets ----------------------------------------------------------------------------------
my $status = query('SELECT string_agg(s::text, E\'\n\') FROM statesman.outbox_status s');
unlike($status, qr/\Q$password\E/, 'the password is in no row of outbox_status');
my $log = slurp_file($node->logfile);
like($log, qr/rabbitmq sink/, 'the log has the sink\'s warnings');
unlike($log, qr/\Q$password\E|Wrong-Pw/, 'no password in the server log');

$node->stop;
$mq->shutdown;
note sprintf('%.1f s', time - $t_begin);
done_testing();

# Delivery to the `nats` sink (docs/sinks.md "nats"): NATS JetStream, against a real
# `nats-server -js` (test/t/Statesman/Nats.pm) that requires a user and a password.
#
#   routed     1,000 records of two roots, subject "sm.{root}": each root's records are in its
#              own stream once each (every Nats-Msg-Id once), on its subject, with its message.
#   again      a second outbox publishing everything again: every message counts as
#              deduplicated (the stream's duplicate window), the streams are unchanged.
#   no stream  a subject no stream captures: the page fails, last_error names the subject, the
#              cursor stays.
#   outages    while a writer appends, nats-server is stopped and started again (same store),
#              then stopped with SIGSTOP: the outbox backs off (last_error, attempts > 0), and
#              once the server is back every acknowledged record is in its stream once. A
#              dispatcher waiting (timeout_ms 20000) for the frozen server ends at once on SIGTERM.
#   kill -9    the dispatcher is killed (SIGKILL) twice while it drains a backlog: after the
#              crash restarts, every message id is in the stream once.
#   cloudevents "format": "cloudevents": each message in the stream parses as a CloudEvents 1.0
#              event with its attributes (id = messageId, source, type, subject, time, data
#              inline for JSON, data_base64 otherwise, none for a delete, the statesman
#              extensions).
#   auth       a wrong password: backing off with the server's authorization error.
#   threads    nats.c's threads in the dispatcher have the process's signals blocked.
# Throughout: the password appears in no error, no view and no log line.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status start_writer acked);
use JSON::PP;
use MIME::Base64;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Nats;
use Test::More;
use Time::HiRes qw(time usleep);

my $t_begin  = time;
my $password = 'Nats-Pw.9f3b';
my $nats     = Statesman::Nats->start(user => 'shop', password => $password);
my $port     = $nats->port;
note "nats-server pid " . $nats->pid . " on 127.0.0.1:$port";

# The test looks for the password in what statesman says; PostgreSQL's own statement logging
# would show the create_outbox calls that carry it.
my $node = statesman_node('nats_sink',
	"log_statement = none\nlog_min_error_statement = panic\nrestart_after_crash = on\n");
sub query { return $node->safe_psql('postgres', $_[0]); }

my $json = JSON::PP->new->canonical;
sub sink_options
{
	my (%extra) = @_;
	return "'"
	  . $json->encode(
		{ url => "nats://127.0.0.1:$port", user => 'shop', password => $password, timeout_ms => 1000, %extra })
	  . "'";
}
sub outbox
{
	my ($id, $options, @settings) = @_;
	query("SELECT statesman.create_outbox('$id', 'nats', $options, "
		  . join(', ', "min_retry_delay => '100 ms'", "max_retry_delay => '1 s'", @settings) . ")");
}
sub caught_up
{
	my ($id, $what) = @_;
	wait_for($node,
		"SELECT cursor_position = head_position AND attempts = 0 FROM statesman.outbox_status WHERE outbox_id = '$id'",
		$what);
}

# Feed records of a root: message id -> [position, message (canonical JSON)].
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

# A stream against the feed of its root: problems (ids twice, missing, foreign, wrong subject,
# a message that differs), or none. $expect: message ids that must be there (default: every
# record of the root); $raw: the messages are not the statesman format (not compared).
sub stream_problems
{
	my ($stream, $root, $subject, %opt) = @_;
	my $feed = feed($root);
	my (@problems, %seen);
	for my $m (@{ $nats->messages($stream) })
	{
		my $id = $m->{id};
		push @problems, "seq $m->{seq}: $id twice" if $seen{$id}++;
		push @problems, "seq $m->{seq}: subject $m->{subject}" if $m->{subject} ne $subject;
		my $want = $feed->{$id} or push(@problems, "seq $m->{seq}: no record $id"), next;
		next if $opt{raw};
		push @problems, "seq $m->{seq}: message differs"
		  if (eval { $json->encode(decode_json($m->{data})) } // '') ne $want->[1];
	}
	push @problems, map { "$_ missing" } grep { !$seen{$_} } sort @{ $opt{expect} // [ keys %$feed ] };
	return \@problems;
}
sub no_problems
{
	my ($what, @args) = @_;
	my $p = stream_problems(@args);
	is(scalar @$p, 0, $what) or diag(join("\n", @$p[ 0 .. ($#$p < 9 ? $#$p : 9) ]));
}

query('CREATE EXTENSION statesman');
$nats->add_stream('ORDERS', 'sm.orders');
$nats->add_stream('CARTS',  'sm.carts');

# ---- routed -------------------------------------------------------------------------------
outbox('routed', sink_options(subject => 'sm.{root}'), 'batch_size => 150');
query("SELECT count(*) FROM generate_series(1, 600) g, "
	  . "LATERAL statesman.append('Orders', 'o' || (g % 50), jsonb_build_object('g', g)) a");
query("SELECT count(*) FROM generate_series(1, 400) g, "
	  . "LATERAL statesman.append('carts', 'c' || (g % 40), jsonb_build_object('g', g), partition => 'eu') a");
caught_up('routed', 'the outbox delivers 1,000 records of two roots');
is($nats->count('ORDERS'), 600, 'stream ORDERS holds the 600 records of root Orders');
is($nats->count('CARTS'),  400, 'stream CARTS holds the 400 records of root carts');
no_problems('ORDERS: each record once, on subject sm.orders (the root lower-cased), with its message',
	'ORDERS', 'orders', 'sm.orders');
no_problems('CARTS: each record once, on subject sm.carts, with its message', 'CARTS', 'carts', 'sm.carts');
is(join(',', outbox_status($node, 'routed', qw(published_total deduplicated_total))),
	'1000,0', 'published_total 1000, deduplicated_total 0');

# nats.c's threads (reader, flusher, timers, ack delivery) are started with the signals blocked,
# so that SIGTERM, SIGHUP and SIGUSR1 are handled on the dispatcher's own thread.
{
	my $pid = outbox_status($node, 'routed', 'leader_pid');
	my @threads = grep { $_ != $pid } map { m{/(\d+)$} ? $1 : () } glob("/proc/$pid/task/*");
	my @open;
	for my $t (@threads)
	{
		my ($blk) = slurp_file("/proc/$pid/task/$t/status") =~ /^SigBlk:\s*([0-9a-f]+)/m;
		# SIGHUP 1, SIGINT 2, SIGQUIT 3, SIGUSR1 10, SIGTERM 15: bits 0, 1, 2, 9, 14.
		push @open, "$t ($blk)" unless (hex($blk) & 0x4207) == 0x4207;
	}
	cmp_ok(scalar @threads, '>=', 3, 'the dispatcher runs nats.c\'s threads beside its own (' . scalar(@threads) . ')');
	is("@open", '', 'each of them blocks SIGHUP, SIGINT, SIGQUIT, SIGUSR1 and SIGTERM');
}

# ---- again --------------------------------------------------------------------------------
outbox('again', sink_options(subject => 'sm.{root}'), 'batch_size => 300');
caught_up('again', 'a second outbox over the same streams catches up');
is(join(',', outbox_status($node, 'again', qw(published_total deduplicated_total))),
	'0,1000', 'it counts every message as deduplicated (PubAck duplicate: true)');
is($nats->count('ORDERS') . ',' . $nats->count('CARTS'), '600,400', 'the streams are unchanged');
query("SELECT statesman.drop_outbox('again')");

# ---- no stream ----------------------------------------------------------------------------
outbox('lost', sink_options(subject => 'nowhere.{root}'), "root => 'orders'");
wait_for($node,
	q{SELECT attempts > 0 AND last_error LIKE '%no stream captures subject "nowhere.orders"%' AND cursor_position IS NULL
	  FROM statesman.outbox_status WHERE outbox_id = 'lost'},
	'a subject no stream captures: last_error names it, the cursor stays');
note 'last_error: ' . outbox_status($node, 'lost', 'last_error');
query("SELECT statesman.drop_outbox('lost')");

# ---- outages --------------------------------------------------------------------------------
# A writer appends 2,000 records (one transaction each) while the server goes away twice; ten
# more records appended during each outage make sure there is something to deliver then.
# An outbox with a long timeout, to be stopped (SIGTERM) while it waits for a frozen server.
$nats->add_stream('PATIENCE', 'sm.patience');
outbox('patient', sink_options(subject => 'sm.{root}', timeout_ms => 20000), "root => 'patience'");
query(q{SELECT statesman.append('patience', 'p/0', '{}')});
caught_up('patient', 'the patient outbox (timeout_ms 20000) is connected and idle');

my $writer = start_writer($node, 'orders', 'w', 2000, 30);
wait_for($node,
	q{SELECT count(*) >= 100 FROM statesman.read_feed(NULL, 1000000, 'orders') f
	  WHERE f.address LIKE 'orders/w/%' AND f.global_position <= statesman.cursor_position('routed')},
	'the outbox delivers the writer\'s records as they come');
$nats->stop;
query("SELECT count(*) FROM generate_series(1, 10) g, LATERAL statesman.append('orders', 'down/' || g, '{}') a");
wait_for($node,
	q{SELECT state = 'backing_off' AND attempts > 0 AND (last_error LIKE '%not connected%' OR last_error LIKE '%cannot connect%')
	  FROM statesman.outbox_status WHERE outbox_id = 'routed'},
	'nats-server stopped: the outbox backs off (not connected, reconnecting)');
note 'last_error: ' . outbox_status($node, 'routed', 'last_error');
$nats->start_again;
wait_for($node,
	q{SELECT attempts = 0 FROM statesman.outbox_status WHERE outbox_id = 'routed'},
	'nats-server started again (same store): the outbox delivers again');
$nats->freeze;
query("SELECT count(*) FROM generate_series(1, 10) g, LATERAL statesman.append('orders', 'frozen/' || g, '{}') a");
query(q{SELECT statesman.append('patience', 'p/1', '{}')});
{
	# Inside its 20 s wait for acks from the frozen server: a SIGTERM ends the dispatcher at once.
	my $pid = outbox_status($node, 'patient', 'leader_pid');
	sleep 2;
	my $t0 = time;
	kill 'TERM', $pid;
	usleep(20_000) while kill(0, $pid) && time - $t0 < 15;
	my $took = time - $t0;
	ok(!kill(0, $pid), sprintf('SIGTERM ends the patient dispatcher while it waits for acks (after %.2f s)', $took));
	cmp_ok($took, '<', 3, '... within moments, not its 20 s timeout');
}
wait_for($node,
	q{SELECT state = 'backing_off' AND attempts > 0 AND (last_error LIKE '%timed out%' OR last_error LIKE '%not connected%')
	  FROM statesman.outbox_status WHERE outbox_id = 'routed'},
	'nats-server frozen (SIGSTOP): the page times out, the outbox backs off');
note 'last_error: ' . outbox_status($node, 'routed', 'last_error');
$nats->thaw;
$writer->{h}->finish;
my @acked = acked($writer);
is(scalar @acked, 2000, 'the writer had all 2,000 appends acknowledged');
caught_up('routed', 'once the server is back, the outbox catches up');
no_problems('ORDERS: every record once (the writer\'s, those of the outages), nothing lost, nothing twice',
	'ORDERS', 'orders', 'sm.orders');
my %in_stream = map { $_->{id} => 1 } @{ $nats->messages('ORDERS') };
is(scalar(grep { !$in_stream{$_} } @acked), 0, 'every acknowledged append of the writer is in ORDERS');
is($nats->count('ORDERS'), 2620, 'ORDERS holds 2,620 messages');
caught_up('patient', 'the patient outbox catches up too');
no_problems('PATIENCE: both records once (the two outboxes deliver them both: deduplicated)',
	'PATIENCE', 'patience', 'sm.patience');
query("SELECT statesman.drop_outbox('patient')");

# ---- kill -9 --------------------------------------------------------------------------------
# Small pages, so that the kills land while the backlog drains.
$nats->add_stream('KILLS', 'sm.kills');
query("SELECT statesman.alter_outbox('routed', batch_size => 20)");
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
is($nats->count('KILLS'), 20000, 'KILLS holds 20,000 messages');
no_problems('KILLS: every message id once', 'KILLS', 'kills', 'sm.kills', raw => 1);
query("SELECT statesman.drop_outbox('routed')");

# ---- cloudevents ------------------------------------------------------------------------------
$nats->add_stream('CE', 'ce.>');
outbox('ce', sink_options(subject => 'ce.{store}.{root}', format => 'cloudevents'),
	"root => 'shop'", "payload_content_type => 'application/json'");
query(q{SELECT statesman.append('shop', 'basket/1', '{"items": [1, 2], "total": 12.5}', partition => 'p1')});
query(q{SELECT statesman.append_bytes('shop', 'img/1', '\x00ff10', 'application/octet-stream')});
query(q{SELECT statesman.append_delete('shop', 'basket/1', partition => 'p1')});
caught_up('ce', 'the cloudevents outbox delivers 3 records');
my $store = query('SELECT current_database()');
my %want  = map { my ($id, $m) = split /\|/, $_, 2; ($id => decode_json($m)) }
  split /\n/, query("SELECT message_id, message FROM statesman.read_feed(NULL, 1000000, 'shop')");
my $events = $nats->messages('CE');
is(scalar @$events, 3, 'the stream CE holds 3 events');
for my $m (@$events)
{
	my $ce = eval { decode_json($m->{data}) } // {};
	my $w  = $want{ $m->{id} } // {};
	my $what = "event $m->{id}";
	is($m->{subject}, "ce.$store.shop", "$what: on subject ce.{store}.{root}");
	is($m->{headers}{'Content-Type'}, 'application/cloudevents+json', "$what: Content-Type header");
	is_deeply(
		[ @$ce{qw(specversion id source type subject time statesmanposition statesmanrevision statesmanepoch)} ],
		[
			'1.0', $w->{messageId}, "statesman://$store", "statesman.$w->{operation}", $w->{address},
			$w->{occurredAt}, "$w->{globalPosition}", "$w->{revision}", $w->{epoch}
		],
		"$what: specversion, id = messageId, source, type, subject, time, statesman extensions");
	if ($w->{operation} eq 'delete')
	{
		ok(!exists $ce->{data} && !exists $ce->{data_base64}, "$what: a delete carries no data");
	}
	elsif ($w->{contentType} eq 'application/json')
	{
		is($ce->{datacontenttype}, 'application/json', "$what: datacontenttype");
		is_deeply($ce->{data}, { items => [ 1, 2 ], total => 12.5 }, "$what: the JSON payload inline as data");
	}
	else
	{
		is($ce->{datacontenttype}, 'application/octet-stream', "$what: datacontenttype");
		is(decode_base64($ce->{data_base64} // ''), "\x00\xff\x10", "$what: other payloads as data_base64");
		ok(!exists $ce->{data}, "$what: and no data");
	}
}

# ---- auth -------------------------------------------------------------------------------------
outbox('wrong', sink_options(password => 'Wrong-Pw.1'), "root => 'orders'");
wait_for($node,
	q{SELECT attempts > 0 AND last_error LIKE '%cannot connect: Authentication Violation%' AND last_error NOT LIKE '%Wrong-Pw.1%'
	  FROM statesman.outbox_status WHERE outbox_id = 'wrong'},
	'a wrong password: backing off with the authorization error, the password not shown');
note 'last_error: ' . outbox_status($node, 'wrong', 'last_error');
query("SELECT statesman.drop_outbox('wrong')");
query("SELECT statesman.create_outbox('wrong-url', 'nats', '{\"url\": \"nats://shop:Wrong-Url-Pw.2\@127.0.0.1:$port\", "
	  . "\"timeout_ms\": 1000}', root => 'orders', min_retry_delay => '100 ms', max_retry_delay => '1 s')");
wait_for($node,
	q{SELECT attempts > 0 AND last_error LIKE 'nats sink nats://********@127.0.0.1:%cannot connect: Authentication Violation%'
	    AND last_error NOT LIKE '%Wrong-Url-Pw%' AND last_error NOT LIKE '%shop:%'
	  FROM statesman.outbox_status WHERE outbox_id = 'wrong-url'},
	'credentials inside the url: the error shows the url with them masked');
query("SELECT statesman.drop_outbox('wrong-url')");

# ---- secrets ----------------------------------------------------------------------------------
my $status = query('SELECT string_agg(s::text, E\'\n\') FROM statesman.outbox_status s');
unlike($status, qr/\Q$password\E/, 'the password is in no row of outbox_status');
my $log = slurp_file($node->logfile);
like($log, qr/nats sink/, 'the log has the sink\'s warnings');
unlike($log, qr/\Q$password\E|Wrong-Pw|Wrong-Url-Pw/, 'no password in the server log');

$node->stop;
$nats->stop;
note sprintf('%.1f s', time - $t_begin);
done_testing();

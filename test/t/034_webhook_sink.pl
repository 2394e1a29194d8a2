# Delivery to the `webhook` sink (docs/sinks.md "webhook"): HTTP POSTs into a local receiver
# (test/tools/webhook_receiver.py through test/t/Statesman/Webhook.pm) that verifies the Standard
# Webhooks signature of every request itself and records them.
#
#   signed      300 records of two roots, one POST each, secret "whsec_…": each message received
#               once, with webhook-id = messageId, a valid signature, the message as the body, the
#               fixed headers (an Authorization bearer); all on one kept-alive connection.
#   batches     batch_size 50: JSON arrays of at most 50 messages in position order, webhook-id
#               made from the first and last position, every message once.
#   flaky       every 3rd request answers 503: retried, every message accepted.
#   hang        every 4th request hangs past timeout_ms: retried, every message accepted; a
#               dispatcher waiting on a hung request ends at once on SIGTERM.
#   restart     the receiver stopped: backing off with the connection error; started again on the
#               same port: everything delivered.
#   400         a receiver that answers 400 with a body: last_error has the status and an excerpt
#               of the body (not the secret, the header values, the url's credentials), the cursor stays.
#   retry-after 429 and 503 with Retry-After: 2: the next attempt comes no sooner than ~2 s (the
#               backoff alone would be 100 ms); Retry-After: 30 under max_retry_delay 1 s: within
#               about a second.
#   cloudevents "format": "cloudevents", one and batched: CloudEvents 1.0 events, their content types.
#   plain key   a secret without "whsec_" is the key's bytes as written.
#   tls         https to a receiver with a self-signed certificate: refused with the certificate
#               error while tls_verify is on (the default); delivered with tls_verify false.
# Throughout: the secret, the bearer token and the url's password appear in no error, view or log.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node wait_for outbox_status);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Webhook;
use Test::More;
use Time::HiRes qw(time usleep);

my $t_begin = time;
my $secret  = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
my $bearer  = 'Bearer tok-7d1f.Secret';
my $url_pw  = 'Url-Pw.5e2';

my $node = statesman_node('webhook_sink', "log_statement = none\nlog_min_error_statement = panic\n");
sub query { return $node->safe_psql('postgres', $_[0]); }
my $json = JSON::PP->new->canonical;

sub outbox
{
	my ($id, $options, @settings) = @_;
	query("SELECT statesman.create_outbox('$id', 'webhook', '"
		  . $json->encode({ timeout_ms => 1000, %$options }) . "', "
		  . join(', ', "min_retry_delay => '100 ms'",
			(grep({ /max_retry_delay/ } @settings) ? () : "max_retry_delay => '1 s'"), @settings) . ")");
}
sub caught_up
{
	my ($id, $what) = @_;
	wait_for($node,
		"SELECT cursor_position = head_position AND attempts = 0 FROM statesman.outbox_status WHERE outbox_id = '$id'",
		$what);
}
# message id -> [position, canonical message JSON], of one root.
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
sub append_n
{
	my ($root, $n, $tag) = @_;
	query("SELECT count(*) FROM generate_series(1, $n) g, "
		  . "LATERAL statesman.append('$root', '$tag' || (g % 25), jsonb_build_object('g', g)) a");
}
# Message ids accepted (in a 200 answer), with how often.
sub accepted
{
	my ($hook) = @_;
	my %n;
	for my $r (grep { $_->{status} == 200 } @{ $hook->requests })
	{
		$n{$_}++ for @{ $r->{ids} // [] };
	}
	return \%n;
}
sub missing
{
	my ($hook, $root) = @_;
	my $got = accepted($hook);
	return [ grep { !$got->{$_} } sort keys %{ feed($root) } ];
}

query('CREATE EXTENSION statesman');

# ---- signed ------------------------------------------------------------------------------------
my $signed = Statesman::Webhook->start(secret => $secret);
outbox('signed', { url => $signed->url, secret => $secret, headers => { Authorization => $bearer } },
	"root => 'orders'", 'batch_size => 100');
append_n('orders', 300, 'o');
caught_up('signed', 'the outbox delivers 300 records, one POST each');
{
	my $reqs  = $signed->requests;
	my $feed  = feed('orders');
	my @bad   = grep { !$_->{signature_ok} } @$reqs;
	my @wrong = grep {
		my $f = $feed->{ $_->{id} // '' };
		!$f || @{ $_->{ids} } != 1 || $_->{ids}[0] ne $_->{id}
		  || $json->encode(decode_json($_->{body})) ne $f->[1]
	} @$reqs;
	my %seen;
	$seen{ $_->{id} }++ for @$reqs;
	is(scalar @$reqs, 300, '300 requests');
	is(scalar(keys %seen), 300, 'each with its own webhook-id: every message once');
	is(scalar @bad, 0, 'every request has a valid webhook-signature (checked by the receiver)');
	is(scalar @wrong, 0, 'webhook-id is the messageId, the body is the message');
	is(scalar(grep { ($_->{authorization} // '') ne $bearer } @$reqs), 0, 'the headers option: Authorization on each');
	is(scalar(grep { $_->{content_type} ne 'application/json' } @$reqs), 0, 'Content-Type: application/json');
	my %peers = map { $_->{peer} => 1 } @$reqs;
	cmp_ok(scalar(keys %peers), '<=', 2, 'keep-alive: the 300 requests came over ' . scalar(keys %peers) . ' connection(s)');
	is(join(',', outbox_status($node, 'signed', qw(published_total deduplicated_total))), '300,0',
		'published_total 300');
}
query("SELECT statesman.drop_outbox('signed')");

# ---- batches -----------------------------------------------------------------------------------
my $batches = Statesman::Webhook->start(secret => $secret);
outbox('batches', { url => $batches->url, secret => $secret, batch_size => 50 }, "root => 'carts'", 'batch_size => 120');
append_n('carts', 500, 'c');
caught_up('batches', 'batch_size 50: the outbox delivers 500 records');
{
	my $reqs = $batches->requests;
	my $feed = feed('carts');
	my (@problems, %seen);
	for my $r (@$reqs)
	{
		my @m   = @{ decode_json($r->{body}) };
		my @pos = map { $_->{globalPosition} } @m;
		push @problems, "request $r->{n}: " . scalar(@m) . ' messages' if @m > 50 || @m < 1;
		push @problems, "request $r->{n}: not in position order" if join(',', @pos) ne join(',', sort { $a <=> $b } @pos);
		push @problems, "request $r->{n}: webhook-id $r->{id}" if $r->{id} ne "statesman-batch-$pos[0]-$pos[-1]";
		push @problems, "request $r->{n}: bad signature" unless $r->{signature_ok};
		$seen{ $_->{messageId} }++ for @m;
	}
	push @problems, map { "$_ missing" } grep { !$seen{$_} } keys %$feed;
	push @problems, map { "$_ twice" } grep { $seen{$_} > 1 } keys %seen;
	is(scalar @problems, 0, 'JSON arrays of at most 50, in order, webhook-id from first and last position, each message once')
	  or diag(join("\n", @problems[ 0 .. ($#problems < 9 ? $#problems : 9) ]));
	cmp_ok(scalar @$reqs, '>=', 10, scalar(@$reqs) . ' requests for 500 messages');
}
query("SELECT statesman.drop_outbox('batches')");

# ---- flaky -------------------------------------------------------------------------------------
my $flaky = Statesman::Webhook->start(secret => $secret);
$flaky->control(fail_every => 3);
outbox('flaky', { url => $flaky->url, secret => $secret, batch_size => 10 }, "root => 'flaky'", 'batch_size => 40');
append_n('flaky', 400, 'f');
caught_up('flaky', 'every 3rd request answers 503: the outbox still catches up');
{
	my $reqs = $flaky->requests;
	cmp_ok(scalar(grep { $_->{status} == 503 } @$reqs), '>', 0, 'the receiver did answer 503s');
	is_deeply(missing($flaky, 'flaky'), [], 'every message was accepted: nothing lost');
}
query("SELECT statesman.drop_outbox('flaky')");

# ---- hang --------------------------------------------------------------------------------------
my $hang = Statesman::Webhook->start(secret => $secret);
$hang->control(hang_every => 4, hang_s => 2);
outbox('hang', { url => $hang->url, secret => $secret, batch_size => 10, timeout_ms => 500 }, "root => 'hang'",
	'batch_size => 20');
my $hang_log = -s $node->logfile;
append_n('hang', 100, 'h');
# The failed attempt shows in outbox_status only until the retry 100 ms later succeeds: the
# server log keeps it.
ok($node->wait_for_log(
		qr/outbox "hang": delivery failed \(attempt \d+\), retrying in \d+ ms: webhook sink \S+: timed out after 500 ms waiting for the answer to messages/,
		$hang_log),
	'a request hanging past timeout_ms fails the page: timed out');
caught_up('hang', 'every 4th request hangs: the outbox still catches up');
is_deeply(missing($hang, 'hang'), [], 'every message was accepted: nothing lost');
# A dispatcher waiting on a hung request (timeout_ms 20000) ends at once on SIGTERM: a fresh
# outbox, so that its settings are those from its start.
query("SELECT statesman.drop_outbox('hang')");
$hang->control(hang_every => 1, hang_s => 30);
outbox('patient', { url => $hang->url, secret => $secret, timeout_ms => 20000 }, "root => 'patient'");
{
	my $n0 = $hang->stats->{requests};
	query("SELECT statesman.append('patient', 'late', '{}')");
	my $deadline = time + 30;
	usleep(50_000) while $hang->stats->{requests} == $n0 && time < $deadline;
	my $pid = outbox_status($node, 'patient', 'leader_pid');
	# A timeout of 500 ms would have brought a retry within 1.5 s (timeout + max_retry_delay).
	usleep(2_500_000);
	is($hang->stats->{requests}, $n0 + 1, 'the dispatcher is still waiting on its one hung request (timeout_ms 20000)');
	my $t0 = time;
	kill 'TERM', $pid;
	usleep(20_000) while kill(0, $pid) && time - $t0 < 15;
	my $took = time - $t0;
	ok(!kill(0, $pid), sprintf('SIGTERM ends the dispatcher waiting for a hung receiver (after %.2f s)', $took));
	cmp_ok($took, '<', 3, '... within moments, not its 20 s timeout');
}
query("SELECT statesman.drop_outbox('patient')");
$hang->stop;

# ---- restart -----------------------------------------------------------------------------------
# The receiver goes away while records come in: the outbox backs off with the connection error;
# a receiver started again on the same port gets everything (libcurl connects anew).
{
	my $first = Statesman::Webhook->start(secret => $secret);
	my $port  = $first->port;
	outbox('restart', { url => $first->url, secret => $secret, batch_size => 10 }, "root => 'restart'");
	append_n('restart', 100, 'r');
	caught_up('restart', 'the restart outbox delivers its first 100 records');
	$first->stop;
	append_n('restart', 100, 's');
	wait_for($node,
		q{SELECT state = 'backing_off' AND attempts > 0 AND last_error LIKE '%failed: Failed to connect to 127.0.0.1 port%'
		  FROM statesman.outbox_status WHERE outbox_id = 'restart'},
		'the receiver stopped: the outbox backs off with the connection error');
	note 'last_error: ' . outbox_status($node, 'restart', 'last_error');
	my $again = Statesman::Webhook->start(secret => $secret, port => $port);
	caught_up('restart', 'a receiver on the same port again: the outbox catches up');
	my %got = (%{ accepted($first) }, %{ accepted($again) });
	is_deeply([ grep { !$got{$_} } sort keys %{ feed('restart') } ], [], 'all 200 records received, nothing lost');
	query("SELECT statesman.drop_outbox('restart')");
	$again->stop;
}

# ---- 400 ---------------------------------------------------------------------------------------
my $refuse = Statesman::Webhook->start(secret => $secret);
$refuse->control(status => 400, body => "field \"total\" is not a number\nsee the docs");
(my $cred_url = $refuse->url) =~ s{//}{//shop:$url_pw\@};
outbox('refused', { url => "$cred_url?token=Qs-Token.3", secret => $secret, headers => { Authorization => $bearer } },
	"root => 'orders'");
wait_for($node,
	q{SELECT attempts > 0 AND cursor_position IS NULL
	    AND last_error LIKE '%answered HTTP 400: field "total" is not a number see the docs%'
	  FROM statesman.outbox_status WHERE outbox_id = 'refused'},
	'HTTP 400: last_error has the status and the body excerpt, the cursor stays');
{
	my $e = outbox_status($node, 'refused', 'last_error');
	note "last_error: $e";
	like($e, qr{^webhook sink http://\*\*\*\*\*\*\*\*\@127\.0\.0\.1:\d+/hook\?\*\*\*\*\*\*\*\*: }, 'the url is shown with its credentials and query masked');
	unlike($e, qr/\Q$url_pw\E|Qs-Token|tok-7d1f|MfKQ9r8/, 'no password, token, header value or secret in last_error');
}
query("SELECT statesman.drop_outbox('refused')");

# ---- retry-after -------------------------------------------------------------------------------
# The gap between the answer with Retry-After and the next attempt.
sub retry_gap
{
	my ($hook, $status, $retry_after, $max_delay, $root) = @_;
	$hook->control(status => 0, retry_after => $retry_after, retry_status => $status, retry_count => 1);
	my $id = "ra-$status-$root";
	outbox($id, { url => $hook->url, secret => $secret }, "root => '$root'", "max_retry_delay => '$max_delay'");
	query("SELECT statesman.append('$root', 'r', '{}')");
	caught_up($id, "$status with Retry-After: $retry_after (max_retry_delay $max_delay): delivered after the wait");
	my @r = grep { ($_->{ids}[0] // '') =~ m{/\Q$root\E/} } @{ $hook->requests };
	my ($first) = grep { $_->{status} == $status } @r;
	my ($next)  = grep { $_->{status} == 200 } @r;
	query("SELECT statesman.drop_outbox('$id')");
	return $first && $next ? $next->{t} - $first->{t} : -1;
}
{
	my $ra = Statesman::Webhook->start(secret => $secret);
	my $gap = retry_gap($ra, 429, 2, '5 s', 'ra1');
	note sprintf('429, Retry-After 2: next attempt after %.2f s', $gap);
	cmp_ok($gap, '>=', 1.8, '429 with Retry-After: 2 -> the next attempt no sooner than ~2 s (backoff alone: 100 ms)');
	cmp_ok($gap, '<', 4.5, '... and not much later');
	$gap = retry_gap($ra, 503, 2, '5 s', 'ra2');
	note sprintf('503, Retry-After 2: next attempt after %.2f s', $gap);
	cmp_ok($gap, '>=', 1.8, '503 with Retry-After: 2 -> the next attempt no sooner than ~2 s');
	$gap = retry_gap($ra, 429, 30, '1 s', 'ra3');
	note sprintf('429, Retry-After 30, max_retry_delay 1 s: next attempt after %.2f s', $gap);
	cmp_ok($gap, '>=', 0.8, 'Retry-After: 30 under max_retry_delay 1 s: waits about max_retry_delay');
	cmp_ok($gap, '<', 3.5, '... never beyond max_retry_delay (not 30 s)');
	$ra->stop;
}

# ---- cloudevents -------------------------------------------------------------------------------
for my $bs (1, 5)
{
	my $ce = Statesman::Webhook->start(secret => $secret);
	outbox("ce$bs", { url => $ce->url, secret => $secret, format => 'cloudevents', batch_size => $bs }, "root => 'orders'");
	caught_up("ce$bs", "cloudevents, batch_size $bs: delivers root orders");
	my $feed = feed('orders');
	my $store = query('SELECT current_database()');
	my (@problems, %seen);
	for my $r (@{ $ce->requests })
	{
		my $doc = decode_json($r->{body});
		my @ev  = $bs > 1 ? @$doc : ($doc);
		push @problems, "content type $r->{content_type}"
		  if $r->{content_type} ne ($bs > 1 ? 'application/cloudevents-batch+json' : 'application/cloudevents+json');
		push @problems, "request $r->{n}: " . ($bs > 1 ? 'not an array' : 'an array') if ($bs > 1) != (ref $doc eq 'ARRAY');
		for my $e (@ev)
		{
			my $w = $feed->{ $e->{id} } or push(@problems, "no record $e->{id}"), next;
			my $m = decode_json($w->[1]);
			push @problems, "$e->{id}: attributes"
			  unless $e->{specversion} eq '1.0' && $e->{source} eq "statesman://$store"
			  && $e->{type} eq "statesman.$m->{operation}" && $e->{statesmanposition} eq "$m->{globalPosition}"
			  && $e->{subject} eq $m->{address};
			$seen{ $e->{id} }++;
		}
	}
	push @problems, map { "$_ missing" } grep { !$seen{$_} } keys %$feed;
	is(scalar @problems, 0, "cloudevents, batch_size $bs: every message once as a CloudEvents 1.0 event, content type")
	  or diag(join("\n", @problems[ 0 .. ($#problems < 9 ? $#problems : 9) ]));
	query("SELECT statesman.drop_outbox('ce$bs')");
	$ce->stop;
}

# ---- plain key ---------------------------------------------------------------------------------
{
	my $plain = Statesman::Webhook->start(secret => 'plain text key');
	outbox('plain', { url => $plain->url, secret => 'plain text key' }, "root => 'carts'", 'batch_size => 500');
	caught_up('plain', 'a plain-text secret: delivered');
	my $reqs = $plain->requests;
	is(scalar(grep { !$_->{signature_ok} } @$reqs), 0, 'signed with the text\'s own bytes as the key (' . scalar(@$reqs) . ' requests)');
	query("SELECT statesman.drop_outbox('plain')");
	$plain->stop;
}

# ---- tls ---------------------------------------------------------------------------------------
{
	my $tls = Statesman::Webhook->start(secret => $secret, tls => 1);
	outbox('tls', { url => $tls->url, secret => $secret }, "root => 'carts'");
	wait_for($node,
		q{SELECT attempts > 0 AND cursor_position IS NULL AND last_error LIKE '%SSL certificate problem: self%signed certificate%'
		  FROM statesman.outbox_status WHERE outbox_id = 'tls'},
		'https to a self-signed certificate: refused with the certificate error (verification on by default)');
	note 'last_error: ' . outbox_status($node, 'tls', 'last_error');
	is(scalar @{ $tls->requests }, 0, 'the receiver got no request');
	query("SELECT statesman.alter_outbox('tls', sink_options => '"
		  . $json->encode({ url => $tls->url, secret => $secret, timeout_ms => 1000, tls_verify => JSON::PP::false }) . "')");
	caught_up('tls', 'tls_verify false: delivered over https');
	is_deeply(missing($tls, 'carts'), [], 'every message received over https, signature checked');
	query("SELECT statesman.drop_outbox('tls')");
	$tls->stop;
}

# ---- secrets -----------------------------------------------------------------------------------
my $status = query('SELECT string_agg(s::text, E\'\n\') FROM statesman.outbox_status s');
unlike($status, qr/MfKQ9r8|tok-7d1f|\Q$url_pw\E/, 'no secret in outbox_status');
my $log = slurp_file($node->logfile);
like($log, qr/webhook sink/, 'the log has the sink\'s warnings');
unlike($log, qr/MfKQ9r8|tok-7d1f|\Q$url_pw\E|Qs-Token/, 'no secret, token or password in the server log');

$node->stop;
note sprintf('%.1f s', time - $t_begin);
done_testing();

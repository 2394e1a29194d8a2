# Long-open transactions and the feed (docs/design.md §3 F1, F4; docs/feed.md
# "Long-open writers do not hold the feed back", "What can hold the feed
# back"; statesman.feed_status).
#
# statesman gives a record its feed position only after its transaction
# committed, so a writing transaction left open delays its own records and
# nothing else; the one thing that holds the whole feed back is a session
# that keeps the sequencer lock.  One outbox, `lo` (root lo, into
# public.sink_lo, poll_interval 1 s), delivers throughout.
#
#   1. A transaction appends two records and stays open for 30 s, while
#      another session appends a record every 0.25 s.  While it is open:
#      feed_status names its pid as the oldest open writer, with its age;
#      its records are not delivered; everyone else's are (F1 holds: the
#      held records get positions above all of them when it commits).  Its
#      COMMIT is followed by their delivery within the poll interval (with
#      hints, in milliseconds): the time is measured.
#   2. A session calls sequence_feed() inside a transaction and keeps it open
#      for 10 s: the sequencer lock is held, so records committed meanwhile
#      get no position and are not delivered; feed_status names the session
#      as holding_back_pid.  After its COMMIT they are delivered at once.
# In the end the sink holds every record of the ledger exactly once.

use strict;
use warnings;

use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node);
use PostgreSQL::Test::Cluster;
use Statesman::Session;
use PostgreSQL::Test::Utils;
use Test::More;

my $hold_writer    = 30;    # seconds the appending transaction stays open
my $hold_sequencer = 10;    # seconds the sequencer lock is held
my $poll           = 1;     # the outbox's poll_interval, seconds

my $node = statesman_node('long_open');

my $w = Statesman::Session->open($node);    # autocommit appends and checks
$w->run('CREATE EXTENSION statesman');
$w->run(qq{SELECT statesman.create_outbox('lo', root => 'lo', poll_interval => '$poll s',
           sink_options => '{"table": "public.sink_lo"}')});

sub wait_until
{
	my ($sql, $limit) = @_;
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		return time - $t0 if $w->run($sql) eq 't';
		usleep(10_000);
	}
	diag("gave up after ${limit}s waiting for: $sql");
	return undef;
}

sub in_sink
{
	my ($pattern) = @_;
	return $w->run("SELECT count(*) FROM public.sink_lo WHERE message->>'path' LIKE '$pattern'");
}

ok(defined wait_until(q{SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'lo'}, 30),
	'outbox lo has a leading dispatcher');

# ---------------------------------------------------------------------------
# 1. An appending transaction open for 30 s.
# ---------------------------------------------------------------------------
my $h = Statesman::Session->open($node);
my $h_pid = $h->run('SELECT pg_backend_pid()');
$h->run('BEGIN');
$h->run(q{SELECT statesman.append('lo', 'held/1', '{"held": 1}')});
$h->run(q{SELECT statesman.append('lo', 'held/2', '{"held": 2}')});
my $t_open = time;

my ($n_flow, $named, $max_age, $held_seen) = (0, 0, 0, 0);
while (time - $t_open < $hold_writer)
{
	$n_flow++;
	$w->run(qq{SELECT statesman.append('lo', 'flow/$n_flow', '{}')});
	my ($pid, $age) = split /\|/,
	  $w->run(q{SELECT oldest_writer_pid, extract(epoch FROM oldest_writer_age) FROM statesman.feed_status});
	$named++ if $pid eq $h_pid;
	$max_age = $age if $age ne '' && $age > $max_age;
	$held_seen += in_sink('held/%');
	usleep(250_000);
}
my $checks = $n_flow;
is($named, $checks, "feed_status named the open transaction's pid ($h_pid) as the oldest writer at every look ($checks)");
cmp_ok($max_age, '>=', $hold_writer - 2, sprintf('... with its age (%.1f s at the last look)', $max_age));
is($held_seen, 0, 'its records were never delivered while it was open');

# Everyone else's records are delivered while it is still open.
my $took = wait_until(qq{SELECT count(*) = $n_flow FROM public.sink_lo WHERE message->>'path' LIKE 'flow/%'}, 10);
ok(defined $took, "all $n_flow records committed by others while it was open are delivered before it ends");
is($w->run("SELECT state FROM pg_stat_activity WHERE pid = $h_pid"), 'idle in transaction',
	'... while it is still open');
my ($p50, $p99, $max) = split /\|/, $w->run(
	q{SELECT round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY d)),
	         round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY d)),
	         round(1000 * max(d))
	  FROM (SELECT extract(epoch FROM t.published_at - h.occurred_at) AS d
	        FROM public.sink_lo t JOIN statesman.history h ON statesman._position_of(h) = t.global_position
	        WHERE t.message->>'path' LIKE 'flow/%') x});
note sprintf('while a writing transaction stayed open %d s, %d records of other sessions reached the sink '
	  . 'in p50 %d ms, p99 %d ms, max %d ms (append to delivery)', $hold_writer, $n_flow, $p50, $p99, $max);

$h->run('COMMIT');
my $t_commit = time;
$took = wait_until(q{SELECT count(*) = 2 FROM public.sink_lo WHERE message->>'path' LIKE 'held/%'}, $poll + 2);
ok(defined $took, "after its COMMIT its records are delivered within poll_interval ($poll s) + 2 s");
note sprintf('held records delivered %.0f ms after the COMMIT returned', 1000 * ($took // -1));
is($w->run(q{SELECT min(statesman._position_of(h)) > max(statesman._position_of(f))
             FROM statesman.history h, statesman.history f
             WHERE h.path LIKE 'held/%' AND f.path LIKE 'flow/%'}),
	't', 'the held records got positions above every record delivered while they were open (F1)');
is($w->run('SELECT open_writers FROM statesman.feed_status'), '0', 'feed_status: no open writer any more');

# ---------------------------------------------------------------------------
# 2. The sequencer lock held for 10 s holds the whole feed back.
# ---------------------------------------------------------------------------
my $s = Statesman::Session->open($node);
my $s_pid = $s->run('SELECT pg_backend_pid()');
$s->run('BEGIN');
$s->run('SELECT statesman.sequence_feed()');
my $t_lock = time;
my $head_at_lock = $w->run('SELECT statesman.head_position()');
my ($n_blocked, $holding_named, $delivered_meanwhile) = (0, 0, 0);
while (time - $t_lock < $hold_sequencer)
{
	$n_blocked++;
	$w->run(qq{SELECT statesman.append('lo', 'blocked/$n_blocked', '{}')});
	$holding_named++ if $w->run('SELECT holding_back_pid FROM statesman.feed_status') eq $s_pid;
	$delivered_meanwhile += in_sink('blocked/%');
	usleep(250_000);
}
is($holding_named, $n_blocked, "feed_status named the lock holder ($s_pid) as holding_back_pid at every look");
is($delivered_meanwhile, 0, "none of the $n_blocked records committed meanwhile was delivered");
is($w->run('SELECT statesman.head_position()'), $head_at_lock, '... none got a feed position');
is($w->run('SELECT unsequenced_records FROM statesman.feed_status'), $n_blocked,
	"feed_status counts the $n_blocked records waiting for a position");

$s->run('COMMIT');
$took = wait_until(qq{SELECT count(*) = $n_blocked FROM public.sink_lo WHERE message->>'path' LIKE 'blocked/%'},
	$poll + 2);
ok(defined $took, "after the COMMIT the $n_blocked waiting records are delivered within poll_interval + 2 s");
note sprintf('sequencer lock held %d s; its %d waiting records delivered %.0f ms after its COMMIT returned',
	$hold_sequencer, $n_blocked, 1000 * ($took // -1));

# ---------------------------------------------------------------------------
# Nothing lost, nothing twice.
# ---------------------------------------------------------------------------
ok(defined wait_until(q{SELECT cursor_position = head_position FROM statesman.outbox_status WHERE outbox_id = 'lo'}, 10),
	'the cursor reaches the head');
my $ledger = $w->run(q{SELECT count(*) FROM statesman.history WHERE root = 'lo'});
is($ledger, $n_flow + 2 + $n_blocked, "the ledger holds the $ledger appended records");
is($w->run(q{SELECT count(*) || '/' || count(DISTINCT message_id) || '/' ||
                    (SELECT count(*) FROM statesman.history h WHERE NOT EXISTS (
                        SELECT FROM public.sink_lo t WHERE t.global_position = statesman._position_of(h)
                          AND t.message->>'address' = h.address
                          AND (t.message->>'revision')::bigint = h.revision))
             FROM public.sink_lo}),
	"$ledger/$ledger/0", 'the sink holds every record once, at its position');

$h->close;
$s->close;
$w->close;
$node->stop;
done_testing();

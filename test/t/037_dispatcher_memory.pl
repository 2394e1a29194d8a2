# A dispatcher keeps the memory of its full pages while it drains a backlog, and gives it back
# to the system once the backlog is drained (docs/operations.md, "Memory"): a burst of large
# records must not stay in the dispatcher's memory for the rest of its life.
#
# The dispatcher's private memory is RssAnon in /proc/<leader_pid>/status, read every few
# tens of ms from the burst's commit until it is back near where it was before. The test
# checks that the burst's pages did take memory (else it would prove nothing), that the memory
# comes back down, twice (a second burst after the first give-back), that it also comes back
# while the dispatcher backs off from a sink that refuses a page (a third burst) and while it
# stands by after losing its lease in the middle of a drain (a fourth), and that the
# dispatcher still delivers afterwards. Without the give-back the first burst's 25 MB stay.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin";
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Statesman::Node qw(statesman_node wait_for hold_session session_holds);

my $node = statesman_node('dispatcher_memory');
sub query { return $node->safe_psql('postgres', $_[0]); }

query(
	q{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('mem', root => 'mem',
	    sink_options => '{"table":"public.sink_mem"}', poll_interval => '200 ms');
});
wait_for($node, q{SELECT state = 'leading' FROM statesman.outbox_status WHERE outbox_id = 'mem'},
	'the outbox has a leader');
query(q{SELECT statesman.append('mem', 'warm-up/' || i, '{"n": 1}') FROM generate_series(1, 20) i});
wait_for($node, q{SELECT count(*) = 20 FROM public.sink_mem}, 'the warm-up records are delivered');
# A few more polls, so that what the first deliveries cache (plans, catalog entries) is there.
usleep(1_000_000);

my $pid = query(q{SELECT leader_pid FROM statesman.outbox_status WHERE outbox_id = 'mem'});
like($pid, qr/^\d+$/, 'the leader has a pid');

# The dispatcher's RssAnon in kB.
sub rss_anon
{
	open my $fh, '<', "/proc/$pid/status" or die "cannot read /proc/$pid/status: $!";
	while (<$fh>) { return $1 if /^RssAnon:\s+(\d+) kB/; }
	die "no RssAnon in /proc/$pid/status";
}

my $delivered = 20;
my $idle      = rss_anon();    # before any burst
for my $burst (1, 2)
{
	my $before = rss_anon();
	# 5,000 records of about 4 kB each: five full pages of some 5 MB of messages each.
	query(
		qq{SELECT count(*) FROM (SELECT statesman.append('mem', 'burst$burst/' || i,
		       jsonb_build_object('blob', repeat(md5(i::text), 128))) FROM generate_series(1, 5000) i) a});
	$delivered += 5000;
	my ($peak, $now, $t0) = (0, 0, time);
	my $done = 0;
	while (time - $t0 < 120)
	{
		$now = rss_anon();
		$peak = $now if $now > $peak;
		$done ||= query('SELECT count(*) FROM public.sink_mem') == $delivered;
		# Given back: within 4 MB of before, with every record delivered.
		last if $done && $now <= $before + 4096;
		usleep(20_000);
	}
	note("burst $burst: RssAnon ${before} kB before, ${peak} kB at most, ${now} kB at the end");
	cmp_ok($peak, '>', $before + 8192, "burst $burst: the full pages took more than 8 MB");
	ok($done, "burst $burst: every record is delivered");
	cmp_ok($now, '<=', $before + 4096, "burst $burst: the drained dispatcher gave its pages' memory back");
	is(query(q{SELECT leader_pid FROM statesman.outbox_status WHERE outbox_id = 'mem'}),
		$pid, "burst $burst: the same dispatcher delivered it");
}

# A third burst, whose fourth page the sink refuses (a trigger on the target table, while
# public.refuse says so): the dispatcher backs off between attempts, and the memory of the
# pages it read must go back while it waits, not only once a drain ends. The attempts are 3 s
# apart, so a give-back a second after each refused page shows as a low between them.
query(
	q{
	CREATE TABLE public.refuse (now_on boolean NOT NULL);
	INSERT INTO public.refuse VALUES (true);
	CREATE FUNCTION public.refuse_page() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	    IF NEW.message_id LIKE '%/burst3/4000#%' AND (SELECT now_on FROM public.refuse) THEN
	        RAISE EXCEPTION 'refused by the test';
	    END IF;
	    RETURN NEW;
	END $$;
	CREATE TRIGGER refuse BEFORE INSERT ON public.sink_mem FOR EACH ROW EXECUTE FUNCTION public.refuse_page();
	SELECT statesman.alter_outbox('mem', min_retry_delay => '3 s', max_retry_delay => '3 s');
});
{
	my $before = rss_anon();
	query(
		q{SELECT count(*) FROM (SELECT statesman.append('mem', 'burst3/' || i,
		       jsonb_build_object('blob', repeat(md5(i::text), 128))) FROM generate_series(1, 5000) i) a});
	wait_for($node, q{SELECT attempts >= 1 FROM statesman.outbox_status WHERE outbox_id = 'mem'},
		'burst 3: the sink refuses the fourth page');
	my ($peak, $low, $t0) = (0, undef, time);
	while (time - $t0 < 8)
	{
		my $now = rss_anon();
		$peak = $now if $now > $peak;
		$low  = $now if !defined $low || $now < $low;
		usleep(20_000);
	}
	my ($in_sink, $attempts) = split /\|/,
	  query(q{SELECT (SELECT count(*) FROM public.sink_mem), attempts FROM statesman.outbox_status WHERE outbox_id = 'mem'});
	note("burst 3: RssAnon ${before} kB before, ${peak} kB at most and ${low} kB at least while backing off, "
		  . "$attempts attempts");
	is($in_sink, $delivered + 3000, 'burst 3: the three pages before the refused one are delivered, none after');
	cmp_ok($attempts, '>=', 2, 'burst 3: the refused page was attempted again while the test watched');
	cmp_ok($peak, '>', $before + 8192, 'burst 3: the pages read took more than 8 MB');
	cmp_ok($low, '<=', $before + 4096, 'burst 3: the memory goes back between attempts, while backing off');
	query(q{UPDATE public.refuse SET now_on = false});
	$delivered += 5000;
	wait_for($node, qq{SELECT count(*) = $delivered FROM public.sink_mem},
		'burst 3: once the sink accepts, every record is delivered');
	is(query(q{SELECT leader_pid FROM statesman.outbox_status WHERE outbox_id = 'mem'}),
		$pid, 'burst 3: the same dispatcher delivered it');
}

# A fourth burst, in the middle of which the dispatcher loses its lease: the sink holds the
# third page (a trigger waits for a lock the test holds) while the test clears the lease row
# and queues for the lease lock. Once the page is in, the dispatcher's renewal fails, it lets
# the lock go, the test's session takes it, and the dispatcher stands by with two pages still
# to deliver. Standing by, it must give the memory of the pages it read back; once the lease
# lock is free again, it takes the lease back and delivers the rest.
query(
	q{
	CREATE FUNCTION public.hold_page() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	    IF NEW.message_id LIKE '%/burst4/2001#%' THEN
	        PERFORM pg_advisory_lock_shared(37037);
	        PERFORM pg_advisory_unlock_shared(37037);
	    END IF;
	    RETURN NEW;
	END $$;
	CREATE TRIGGER hold_page BEFORE INSERT ON public.sink_mem FOR EACH ROW EXECUTE FUNCTION public.hold_page();
	SELECT statesman.alter_outbox('mem', lease_renew_interval => '1 s');
});
{
	my $superuser = query('SELECT current_user');
	my ($page_lock) = hold_session($node, $superuser, 'SELECT pg_advisory_lock(37037);');
	# The third burst's last pages' memory goes back a second after they were read.
	my $t1 = time;
	usleep(100_000) while rss_anon() > $idle + 4096 && time - $t1 < 10;
	my $before = rss_anon();
	query(
		q{SELECT count(*) FROM (SELECT statesman.append('mem', 'burst4/' || i,
		       jsonb_build_object('blob', repeat(md5(i::text), 128))) FROM generate_series(1, 5000) i) a});
	wait_for($node,
		qq{SELECT count(*) = 1 FROM pg_locks WHERE pid = $pid AND locktype = 'advisory' AND objid = 37037 AND NOT granted},
		'burst 4: the sink holds the third page');
	my $held = rss_anon();
	is(query('SELECT count(*) FROM public.sink_mem'), $delivered + 2000, 'burst 4: two pages are delivered');

	# The lease row no longer names the dispatcher, and the test waits for the lease lock.
	query(q{UPDATE statesman.leases SET holder_pid = NULL WHERE outbox_id = 'mem'});
	my ($taker) = hold_session($node, $superuser,
		q{SELECT pg_advisory_lock(statesman._lock_space('lease'), statesman._lease_key('mem'));}, 0);
	usleep(1_100_000);    # past the renewal interval
	$page_lock->{h}->kill_kill;
	# outbox_status names the lease lock's holder, the test's session, as the leader: the
	# dispatcher's own word is in outbox_state.
	wait_for($node,
		qq{SELECT dispatcher_pid = $pid AND dispatcher_state = 'standby' FROM statesman.outbox_state WHERE outbox_id = 'mem'},
		'burst 4: the dispatcher lost its lease and stands by');
	ok(session_holds($taker), "burst 4: the test's session holds the lease lock");
	my ($low, $t0) = (undef, time);
	while (time - $t0 < 8)
	{
		my $now = rss_anon();
		$low = $now if !defined $low || $now < $low;
		last if $low <= $before + 4096;
		usleep(20_000);
	}
	my ($in_sink, $state) = split /\|/,
	  query(q{SELECT (SELECT count(*) FROM public.sink_mem), dispatcher_state FROM statesman.outbox_state WHERE outbox_id = 'mem'});
	note("burst 4: RssAnon ${before} kB before, ${held} kB while the sink held a page, ${low} kB at least standing by");
	cmp_ok($held, '>', $before + 8192, 'burst 4: the pages read took more than 8 MB');
	is($in_sink, $delivered + 3000, 'burst 4: standing by, the last two pages are not delivered');
	is($state, 'standby', 'burst 4: still standing by');
	cmp_ok($low, '<=', $before + 4096, 'burst 4: the memory goes back while the dispatcher stands by');
	like(slurp_file($node->logfile), qr/statesman: outbox "mem": lease lost; standing by/,
		'burst 4: the log says the lease was lost');

	$taker->{h}->kill_kill;
	$delivered += 5000;
	wait_for($node, qq{SELECT count(*) = $delivered FROM public.sink_mem},
		'burst 4: once the lease lock is free, every record is delivered');
	is(query(q{SELECT leader_pid FROM statesman.outbox_status WHERE outbox_id = 'mem'}),
		$pid, 'burst 4: the same dispatcher took the lease back and delivered it');
}

query(q{SELECT statesman.append('mem', 'after', '{"n": 2}')});
wait_for($node, qq{SELECT count(*) = @{[$delivered + 1]} FROM public.sink_mem},
	'a record appended afterwards is delivered');

$node->stop;
done_testing();

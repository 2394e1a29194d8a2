# A dispatcher keeps the memory of its full pages while it drains a backlog, and gives it back
# to the system once the backlog is drained (docs/operations.md, "Memory"): a burst of large
# records must not stay in the dispatcher's memory for the rest of its life.
#
# The dispatcher's private memory is RssAnon in /proc/<leader_pid>/status, read every few
# tens of ms from the burst's commit until it is back near where it was before. The test
# checks that the burst's pages did take memory (else it would prove nothing), that the memory
# comes back down, twice (a second burst after the first give-back), that it also comes back
# while the dispatcher backs off from a sink that refuses a page (a third burst), and that the
# dispatcher still delivers afterwards. Without the give-back the first burst's 25 MB stay.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin";
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Statesman::Node qw(statesman_node wait_for);

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

query(q{SELECT statesman.append('mem', 'after', '{"n": 2}')});
wait_for($node, qq{SELECT count(*) = @{[$delivered + 1]} FROM public.sink_mem},
	'a record appended afterwards is delivered');

$node->stop;
done_testing();

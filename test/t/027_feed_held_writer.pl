# A writer held open holds back only its own records (F5), and nothing in the feed rewrites a
# ledger row (F6), with the database worker ticking as deployed (docs/feed.md).
#
#   1. A transaction appends one record and stays open for 4 s. Records committed by other
#      sessions meanwhile are readable at once through read_feed (each within 2 s of its
#      commit), while the held record is not in the feed.
#   2. A reader that read past them (its position is their last one) receives the held
#      record after its COMMIT, above every position it had read (F1), exactly once; so does
#      every reader whatever its page size (read_feed against statesman._feed_page), also in
#      the tick that spans the ids of the records committed meanwhile.
#   3. No ledger row was updated in all this (pg_stat_user_tables.n_tup_upd of
#      statesman.history), although every record got its position.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node);
use Statesman::Session;
use Test::More;

my $hold  = 4;    # seconds the writer stays open
my $n_after = 5;  # records committed by others while it is open

my $node = statesman_node('held_writer');
sub query { return $node->safe_psql('postgres', $_[0]); }
query('CREATE EXTENSION statesman');
# The worker ticks: wait for it, so that readers below never tick themselves first.
ok($node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'statesman database worker'}),
	'the database worker runs');

query(q{SELECT statesman.append('held', 'before', '{"n": 0}')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM statesman.read_feed(NULL, 100, 'held')}),
	'a record appended before the held writer is in the feed');
my $reader = query(q{SELECT max(global_position) FROM statesman.read_feed(NULL, 100, 'held')});

# 1. The held writer.
my $w = Statesman::Session->open($node);
$w->run('BEGIN');
$w->run(q{SELECT statesman.append('held', 'held', '{"n": "held"}')});
my $t_open = time;

my @after_pos;
for my $i (1 .. $n_after)
{
	query(qq{SELECT statesman.append('held', 'after/$i', '{"n": $i}')});
	my $t0 = time;
	my $pos;
	while (time - $t0 < 2)
	{
		$pos = query(qq{SELECT global_position FROM statesman.read_feed($reader, 100, 'held')
		                WHERE address = 'held/after/$i'});
		last if $pos ne '';
		usleep(20_000);
	}
	push @after_pos, $pos;
}
my $held_open_for = time - $t_open;
is(scalar(grep { $_ ne '' } @after_pos), $n_after,
	"all $n_after records committed while the writer was open were readable within 2 s of their commit");
cmp_ok($held_open_for, '<', $hold, sprintf('... while the writer was still open (%.1f s)', $held_open_for));
is(query(qq{SELECT count(*) FROM statesman.read_feed($reader, 1000, 'held') WHERE address = 'held/held'}),
	'0', 'the held record is not in the feed while its transaction is open');
my @sorted = sort { $a <=> $b } @after_pos;
is_deeply(\@after_pos, \@sorted, 'the later records are in the feed in their commit order');
my $feed_status = query(q{SELECT open_writers, oldest_writer_pid IS NOT NULL FROM statesman.feed_status});
is($feed_status, '1|t', 'feed_status names the open writer');

# 2. The reader advances past them; then the writer commits.
my $read_up_to = $after_pos[-1];
usleep(1_000_000 * ($hold - (time - $t_open))) if time - $t_open < $hold;
# A second record of the held transaction, drawn after the others': the tick that takes both
# spans the ids of the records committed meanwhile, which earlier ticks took.
$w->run(q{SELECT statesman.append('held', 'held-last', '{"n": "last"}')});
$w->run('COMMIT');
$w->close;
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM statesman.read_feed($read_up_to, 100, 'held') WHERE address = 'held/held'}),
	'a reader past the later records receives the held record after its commit');
my ($held_pos, $n_held) = split /\|/, query(
	qq{SELECT max(global_position), count(*) FROM statesman.read_feed($read_up_to, 100, 'held')
	   WHERE address = 'held/held'});
cmp_ok($held_pos, '>', $read_up_to, "the held record's position ($held_pos) is above every one read before ($read_up_to)");
is(query(q{SELECT count(*) || '/' || count(DISTINCT global_position) || '/' || count(DISTINCT message_id)
           FROM statesman.read_feed(NULL, 1000, 'held')}),
	($n_after + 3) . '/' . ($n_after + 3) . '/' . ($n_after + 3),
	'the feed holds every record once, each at its own position');

# The held record's tick spans the ids of records that earlier ticks took (their positions in
# its range are holes): the row source that read_feed and the dispatcher use must read exactly
# what statesman._feed_page defines, from every starting position, in pages of 1, 2 and 1,000.
is(query(q{BEGIN;
           SELECT count(*) FILTER (WHERE ARRAY(SELECT f.global_position FROM statesman.read_feed(a, m) f
                                                ORDER BY 1)
                                       IS DISTINCT FROM
                                       ARRAY(SELECT p.global_position FROM statesman._feed_page(a, NULL, m, NULL) p
                                              ORDER BY 1))
                  || '/' || count(*)
             FROM generate_series(0, statesman.head_position() + 1) a, unnest(ARRAY[1, 2, 1000]) m;
           COMMIT;}),
	'0/' . (3 * (query('SELECT statesman.head_position()') + 2)),
	'read_feed reads what _feed_page defines, from every position, across the held record\'s tick');

# 3. F6: positions without rewriting any ledger row.
query('SELECT pg_stat_force_next_flush()');
ok($node->poll_query_until('postgres',
		q{SELECT n_tup_ins >= 7 FROM pg_stat_user_tables WHERE relid = 'statesman.history'::regclass}),
	'the statistics count the inserts');
is(query(q{SELECT n_tup_upd || '/' || n_tup_hot_upd FROM pg_stat_user_tables
           WHERE relid = 'statesman.history'::regclass}),
	'0/0', 'no ledger row was updated: giving positions wrote nothing to statesman.history');

$node->stop;
done_testing();

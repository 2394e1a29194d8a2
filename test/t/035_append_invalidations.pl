# The append keeps facts about the ledger between appends (the shape of statesman.history's
# rows, its catalog oids, the root declarations) and forgets them at any relation cache
# invalidation, which can arrive in the middle of an append: every lock the append takes for
# the first time in its transaction takes in the invalidations other sessions sent. Here two
# writers append 3,000 records each while a third session runs ANALYZE statesman.history in a
# loop (each one invalidates the table in every session) and another declares and redeclares
# the writers' root (each invalidates the declarations). Every append must succeed, and the
# ledger must hold exactly the appended records, each with its id, its transaction and its
# revision in sequence, and the declaration's content type once the declaration committed.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node start_writer acked);
use Test::More;

my $node = statesman_node('append_invalidations');
sub query { return $node->safe_psql('postgres', $_[0]); }
query('CREATE EXTENSION statesman');

# A psql running one statement many times, each in a transaction of its own.
sub start_loop
{
	my ($name, $statement, $times) = @_;
	my $file = "$PostgreSQL::Test::Utils::tmp_check/loop_035_$name.sql";
	open(my $fh, '>', $file) or die "cannot write $file: $!";
	print $fh "$statement\n" x $times;
	close($fh) or die "cannot write $file: $!";
	my %h = (out => "$file.out", err => "$file.err");
	$h{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', $file ],
		'>', $h{out}, '2>', $h{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default * 2));
	return \%h;
}

my $analyze = start_loop('analyze', 'ANALYZE statesman.history;', 100_000);
my $declare = start_loop('declare',
	"SELECT statesman.declare_root('inval', content_type => 'ct/' || (random() * 3)::int) IS NULL;", 100_000);
my @writers = map { start_writer($node, 'inval', "w$_", 3000, 50) } 1 .. 2;
$_->{h}->finish for @writers;
$_->{h}->kill_kill for $analyze, $declare;

for my $i (0 .. 1)
{
	my $n = scalar acked($writers[$i]);
	is($n, 3000, 'writer ' . ($i + 1) . ': all 3,000 appends acknowledged');
	is(slurp_file($writers[$i]->{err}), '', 'writer ' . ($i + 1) . ': no error');
}
cmp_ok(query(q{SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'statesman.history'::regclass}),
	'>', 10, 'ANALYZE ran over and over meanwhile (each invalidating statesman.history in every session)');
is(query(q{SELECT count(*) || '/' || count(id) || '/' || count(txid) || '/' || count(DISTINCT id)
           FROM statesman.history WHERE root = 'inval'}),
	'6000/6000/6000/6000', 'the ledger holds the 6,000 records, each with its own id and its transaction');
is(query(q{SELECT count(*) FROM (SELECT revision, lag(revision) OVER (PARTITION BY address ORDER BY revision) AS prev,
                                        row_number() OVER (PARTITION BY address ORDER BY revision) AS n
                                   FROM statesman.history WHERE root = 'inval') r
           WHERE revision <> n}),
	'0', 'every address has revisions 1, 2, 3, … without a gap or a repeat');
is(query(q{SELECT count(*) FROM statesman.history WHERE root = 'inval' AND content_type IS NULL
             AND occurred_at > (SELECT declared_at FROM statesman.roots WHERE root = 'inval')}),
	'0', 'records appended after the last declaration committed carry its content type');

$node->stop;
done_testing();

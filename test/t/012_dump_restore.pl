# pg_dump / pg_restore of a database that uses statesman (docs/operations.md
# "Replicas, dumps and copies"; sql/statesman.sql marks every table, and the
# feed's position sequence, with pg_extension_config_dump).
#
# Database `src` (server with the library preloaded) has a named store, a
# declared root, a consumer position, an external cursor, and three outboxes
# of root `orders`: `main` (into statesman.delivered) and `side` (into
# public.sink_side, batch_size 7) have delivered all 300 records, `late` is
# paused and has delivered nothing.  It is dumped (custom format) and
# restored into a new database `dst` on the same server, whose own workers
# pick it up.
#
#   - pg_restore reports no error, also with --single-transaction (into a
#     second database, `dst_single`);
#   - dst has src's store name, epoch, ledger (every record at its
#     position), roots, consumer positions, cursors, outboxes and sink rows;
#   - new appends in dst get positions above the restored head, and ids
#     (insert order, which the sequencer follows) above the restored ones;
#   - dst's `main` and `side` deliver exactly the new records: nothing of the
#     old backlog twice, nothing skipped; `late`, resumed, delivers the whole
#     ledger once;
#   - src is not touched by any of it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Time::HiRes qw(time usleep);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node wait_until);
use Test::More;

my $n_old = 300;    # records before the dump
my $n_new = 50;     # records appended in dst after the restore

# Two databases with three outboxes each: 2 database workers and 6 dispatchers.
my $node = statesman_node('dump', "statesman.max_workers = 12\n");

sub query { my ($db, $sql) = @_; return $node->safe_psql($db, $sql); }

# Everything the dump must keep, one line per item, comparable between
# databases (sink rows and ledger records as md5 digests of their contents).
my %state_sql = (
	store   => q{SELECT store || ' ' || epoch || ' ' || head_position || ' ' || oldest_position FROM statesman.store_info()},
	ledger  => q{SELECT count(*) || ' ' || md5(string_agg(concat_ws('|', address, revision, statesman._position_of(h), occurred_at, operation, encode(payload, 'hex'), fingerprint, content_type, metadata), ',' ORDER BY statesman._position_of(h))) FROM statesman.history h},
	roots   => q{SELECT string_agg(concat_ws(':', root, fingerprint, content_type, max_revisions, max_bytes), ',' ORDER BY root) FROM statesman.roots},
	applied => q{SELECT string_agg(concat_ws(':', consumer, feed, epoch, position), ',' ORDER BY consumer, feed) FROM statesman.applied},
	cursors => q{SELECT string_agg(outbox_id || '=' || position, ',' ORDER BY outbox_id) FROM statesman.cursors},
	outboxes => q{SELECT string_agg(concat_ws(':', outbox_id, sink, sink_options, root, batch_size, poll_interval, require_lease, lease_ttl, enabled), ',' ORDER BY outbox_id) FROM statesman.outboxes},
	totals  => q{SELECT string_agg(concat_ws(':', outbox_id, published_total, deduplicated_total, skipped_total), ',' ORDER BY outbox_id) FROM statesman.outbox_state},
	delivered => q{SELECT count(*) || ' ' || md5(string_agg(message_id || '@' || global_position || message::text, ',' ORDER BY global_position)) FROM statesman.delivered},
	sink_side => q{SELECT count(*) || ' ' || md5(string_agg(message_id || '@' || global_position || message::text, ',' ORDER BY global_position)) FROM public.sink_side},
	sink_late => q{SELECT count(*) FROM public.sink_late},
);
sub state_of { my ($db) = @_; return { map { $_ => query($db, $state_sql{$_}) } keys %state_sql }; }

# ---------------------------------------------------------------------------
# The source database.
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE src');
query('src', q{
	CREATE EXTENSION statesman;
	SELECT statesman.set_store_name('shop');
	SELECT statesman.declare_root('orders', fingerprint => 'orders-v1', content_type => 'application/json');
	SELECT statesman.create_outbox('main', root => 'orders');
	SELECT statesman.create_outbox('side', root => 'orders', batch_size => 7,
	    sink_options => '{"table": "public.sink_side"}');
	SELECT statesman.create_outbox('late', root => 'orders', enabled => false,
	    sink_options => '{"table": "public.sink_late"}');
});
query('src', qq{
	SELECT count(*) FROM generate_series(1, $n_old) g,
	    LATERAL statesman.append('orders', 'o/' || (g % 30), jsonb_build_object('g', g)) a;
});
ok(defined wait_until($node,
		q{SELECT count(*) = 2 FROM statesman.outbox_status
		  WHERE outbox_id IN ('main', 'side') AND cursor_position = head_position}, 60, 'src'),
	'src: main and side delivered the records');
query('src', q{
	SELECT statesman.advance_cursor('ext-reader', 120);
	SELECT statesman.mark_applied('billing', s.store, s.epoch, 100) FROM statesman.store_info() s;
});
my $src = state_of('src');
my ($src_head) = split / /, (split / /, $src->{store}, 3)[2];
is($src_head + 0, $n_old, "src: the feed's head is $n_old");
like($src->{cursors}, qr/^ext-reader=120,main=$n_old,side=$n_old$/, 'src: the cursors before the dump');

# ---------------------------------------------------------------------------
# Dump, and restore into a new database on the same server.
# ---------------------------------------------------------------------------
my $dump = "$PostgreSQL::Test::Utils::tmp_check/src.dump";
command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', $dump ], 'pg_dump -Fc of src');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
my $t_restore = time;
my ($stdout, $stderr);
my $restored = IPC::Run::run([ 'pg_restore', '-d', $node->connstr('dst'), $dump ],
	'>', \$stdout, '2>', \$stderr);
ok($restored, 'pg_restore into dst succeeds');
is($stderr, '', 'pg_restore reports no error');
note sprintf('restore took %.2f s', time - $t_restore);

# The same dump restored in one transaction (pg_restore --single-transaction:
# the workers cannot see a half-restored database): one error there undoes
# the whole restore.
$node->safe_psql('postgres', 'CREATE DATABASE dst_single');
my ($out_single, $err_single);
IPC::Run::run([ 'pg_restore', '--single-transaction', '-d', $node->connstr('dst_single'), $dump ],
	'>', \$out_single, '2>', \$err_single);
is($err_single, '', 'pg_restore --single-transaction reports no error');
my ($rc_single, $store_single) = $node->psql('dst_single', $state_sql{store});
is($store_single, $src->{store}, "dst_single has src's store name, epoch and positions");

# ---------------------------------------------------------------------------
# What dst holds.
# ---------------------------------------------------------------------------
my $dst = state_of('dst');
for my $item (qw(store ledger roots applied cursors outboxes totals delivered sink_side sink_late))
{
	is($dst->{$item}, $src->{$item}, "dst keeps src's $item");
}
my $ticks_sql = q{SELECT count(*) || ' ' || md5(string_agg(concat_ws('|', tick_id, base, lo, hi, last_id, xid, snap,
                       prev_snap, system_id), ',' ORDER BY tick_id)) FROM statesman.ticks WHERE tick_id <= };
my $src_last_tick = query('src', q{SELECT max(tick_id) FROM statesman.ticks});
is(query('dst', $ticks_sql . $src_last_tick), query('src', $ticks_sql . $src_last_tick),
	"dst keeps the ticks that give the positions ($src_last_tick ticks after the first)");

# The restored outboxes are picked up by dst's own workers.
ok(defined wait_until($node,
		q{SELECT count(*) = 2 FROM statesman.outbox_status
		  WHERE outbox_id IN ('main', 'side') AND state = 'leading'}, 30, 'dst'),
	'dst: the restored outboxes main and side have leading dispatchers');
is(query('dst', q{SELECT state FROM statesman.outbox_status WHERE outbox_id = 'late'}),
	'paused', 'dst: late is still paused');

# ---------------------------------------------------------------------------
# New appends in dst: positions above the restored head, delivered once.
# ---------------------------------------------------------------------------
my $max_id = query('dst', q{SELECT max(id) FROM statesman.history});
query('dst', qq{
	SELECT count(*) FROM generate_series(1, $n_new) g,
	    LATERAL statesman.append('orders', 'new/' || g, jsonb_build_object('g', g)) a;
});
my $took = wait_until($node,
	q{SELECT count(*) = 2 FROM statesman.outbox_status
	  WHERE outbox_id IN ('main', 'side') AND cursor_position = head_position}, 60, 'dst');
ok(defined $took, 'dst: main and side delivered the new records');
note sprintf('dst delivered the %d new records %.2f s after they were appended', $n_new, $took // -1);

my ($new_min, $new_max, $new_min_id) = split /\|/, query('dst',
	q{SELECT min(statesman._position_of(h)), max(statesman._position_of(h)), min(id) FROM statesman.history h WHERE path LIKE 'new/%'});
cmp_ok($new_min, '>', $src_head, "new records get positions above the restored head ($new_min > $src_head)");
cmp_ok($new_min_id, '>', $max_id,
	"new records get insert-order ids above the restored ones ($new_min_id > $max_id): "
	  . 'the identity sequence of statesman.history.id is kept');

for my $t ([ 'main', 'statesman.delivered' ], [ 'side', 'public.sink_side' ])
{
	my ($outbox, $table) = @$t;
	my ($rows, $distinct, $new_rows, $missing) = split /\|/, query('dst', qq{
		SELECT (SELECT count(*) FROM $table),
		       (SELECT count(DISTINCT message_id) FROM $table),
		       (SELECT count(*) FROM $table WHERE global_position > $src_head),
		       (SELECT count(*) FROM statesman.history h
		        WHERE NOT EXISTS (SELECT FROM $table t
		                          WHERE t.message->>'address' = h.address
		                            AND (t.message->>'revision')::bigint = h.revision
		                            AND t.global_position = statesman._position_of(h)))});
	is_deeply([ $rows, $distinct, $new_rows, $missing ], [ $n_old + $n_new, $n_old + $n_new, $n_new, 0 ],
		"dst $table: the $n_old restored rows plus exactly the $n_new new ones, each once, none missing");
	my $item = $outbox eq 'main' ? 'delivered' : 'sink_side';
	is(query('dst', $state_sql{$item} . " WHERE global_position <= $src_head"), $src->{$item},
		"dst $table: the restored rows are untouched (none delivered again)");
	my ($src_store, $src_epoch) = split / /, $src->{store};
	is(query('dst', qq{SELECT count(*) FROM $table WHERE global_position > $src_head
	                     AND (message_id NOT LIKE '$src_store/%' OR message->>'store' <> '$src_store'
	                          OR message->>'epoch' <> '$src_epoch')}),
		'0', "dst $table: the new messages carry the restored store name and epoch ($src_store, $src_epoch)");
	my ($published, $dedup) = split /\|/, query('dst',
		qq{SELECT published_total, deduplicated_total FROM statesman.outbox_status WHERE outbox_id = '$outbox'});
	my ($src_published) = $src->{totals} =~ /\b$outbox:(\d+):/;
	is_deeply([ $published - $src_published, $dedup ], [ $n_new, 0 ],
		"dst $outbox published only the $n_new new records after the restore, deduplicated none");
}

# The paused outbox, resumed, delivers the whole ledger once.
query('dst', q{SELECT statesman.resume_outbox('late')});
ok(defined wait_until($node,
		q{SELECT cursor_position = head_position FROM statesman.outbox_status WHERE outbox_id = 'late'}, 60, 'dst'),
	'dst: late, resumed, catches up');
is(query('dst', q{SELECT count(*) || '/' || count(DISTINCT message_id) FROM public.sink_late}),
	($n_old + $n_new) . '/' . ($n_old + $n_new), 'dst late: every record of the ledger once');

# src was not touched.
is_deeply(state_of('src'), $src, 'src is unchanged by the restore and by dst\'s delivery');

$node->stop;
done_testing();

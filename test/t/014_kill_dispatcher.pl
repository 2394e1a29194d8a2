# kill -9 of the dispatcher, ten times, while 50,000 records flow (docs/design.md §4
# "The delivery promise", §6 `table` and `redis`; docs/delivery.md "Sinks
# outside the database", "Durability of pages").
#
# Two writers append 25,000 records each to root `flow` (transactions of 25
# appends, with a short pause between them) while two outboxes deliver the
# root: `to_redis` to the Redis stream kill:flow (a real redis-server with
# appendonly yes / appendfsync always) and `to_table` to public.flow_sink,
# both with batch_size 100.  Ten times, spread over the writers' progress,
# the leader of one of the outboxes (in turn) is caught in the middle of
# delivering (pg_stat_activity: backend_type 'statesman dispatcher', query
# 'statesman: delivering') and sent SIGKILL.
#
# A SIGKILLed backend makes the postmaster reset the whole server: every
# session is dropped and the server goes through crash recovery
# (restart_after_crash = on here).  Writers reconnect and go on after the last
# transaction they saw commit; one that was in flight may have committed or
# not, so the truth is the ledger after recovery (statesman.history), not
# what the writers meant to write.  Once the writers are done and both
# outboxes have caught up:
#   - public.flow_sink holds every ledger record exactly once, at its
#     position (message ids compared), and nothing else;
#   - the stream holds every ledger record exactly once: entry id
#     {globalPosition}-0, its messageId that of the ledger record there, no
#     messageId twice, nothing else (docs/design.md §6: a message handed over again is
#     recognised by its id and not added again);
#   - the totals add up: every record was counted once, as published or as
#     deduplicated (the table sink: published only).
# Printed: the kills, "duplicates published" (deduplicated_total: messages
# handed over again and recognised) and "duplicates stored" (rows or entries
# minus distinct message ids).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Statesman::Node qw(statesman_node);
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Redis;
use Statesman::Session;
use Test::More;
use Time::HiRes qw(time usleep);

my $n_kills     = 10;
my $n_writers   = 2;
my $per_writer  = 25_000;
my $chunk       = 25;      # appends per writer transaction
my $pause       = 0.02;    # seconds a writer waits between its transactions
my $n_addresses = 40;      # per writer, so revisions grow
my $n_chunks    = $per_writer / $chunk;
my $total       = $n_writers * $per_writer;
my $key         = 'kill:flow';
my $t_begin     = time;

my $redis = Statesman::Redis->start;
my $port  = $redis->port;

my $node = statesman_node('kill_dispatcher', "max_connections = 40\nrestart_after_crash = on\nlog_statement = none\n");

sub query { return $node->safe_psql('postgres', $_[0]); }

query(
	qq{
	CREATE EXTENSION statesman;
	SELECT statesman.create_outbox('to_redis', 'redis',
	    '{"port": $port, "key_prefix": "kill", "stream": "flow"}', root => 'flow', batch_size => 100);
	SELECT statesman.create_outbox('to_table', root => 'flow', batch_size => 100,
	    sink_options => '{"table": "public.flow_sink"}');
});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 2 FROM statesman.outbox_status WHERE state = 'leading'}),
	'both outboxes have a leading dispatcher')
  or BAIL_OUT('no dispatchers');

# ---------------------------------------------------------------------------
# Writers: psql processes that survive the server's resets. Each prints
# "<chunk>|<appends>" for every transaction it saw commit; when the server
# drops it, it is started again after the last chunk it saw commit.
# ---------------------------------------------------------------------------
my $connstr = $node->connstr('postgres');
my @writers = map { { w => $_, acked => 0, starts => 0 } } 1 .. $n_writers;

sub start_writer
{
	my ($w) = @_;
	# One script per starting chunk: a writer that cannot connect yet (the
	# server is recovering) is started again on the same script.
	my $script = "$PostgreSQL::Test::Utils::tmp_check/writer_$w->{w}_from_" . ($w->{acked} + 1) . '.sql';
	if (!-e $script)
	{
		my $sql = '';
		for my $c ($w->{acked} + 1 .. $n_chunks)
		{
			my ($first, $last) = (($c - 1) * $chunk + 1, $c * $chunk);
			$sql .=
			    "SELECT $c, count(*) FROM generate_series($first, $last) i, LATERAL "
			  . "statesman.append('flow', 'w$w->{w}/k' || (i % $n_addresses), "
			  . "jsonb_build_object('w', $w->{w}, 'i', i)) a;\n"
			  . "SELECT pg_sleep($pause);\n";
		}
		PostgreSQL::Test::Utils::append_to_file($script, $sql);
	}
	my $base = "$PostgreSQL::Test::Utils::tmp_check/writer_$w->{w}_" . ++$w->{starts};
	$w->{out} = "$base.out";
	my $pid = fork // die "cannot fork: $!";
	if ($pid == 0)
	{
		open STDIN,  '<', '/dev/null';
		open STDOUT, '>', "$base.out";
		open STDERR, '>', "$base.err";
		exec('psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $connstr, '-f', $script)
		  or POSIX::_exit(127);
	}
	$w->{pid} = $pid;
	return;
}

# Reaps writers that ended and starts them again (at most every 100 ms while
# the server is down); true when every writer has written all its chunks.
sub tend_writers
{
	for my $w (@writers)
	{
		next if $w->{done};
		if ($w->{pid})
		{
			next if waitpid($w->{pid}, WNOHANG) == 0;
			my $status = $?;
			delete $w->{pid};
			for (split /\n/, slurp_file($w->{out}))
			{
				$w->{acked} = $1 if /^(\d+)\|\d+$/ && $1 > $w->{acked};
			}
			if ($status == 0 && $w->{acked} == $n_chunks)
			{
				$w->{done} = 1;
				next;
			}
			$w->{retry_at} = time + 0.1;
		}
		start_writer($w) if time >= ($w->{retry_at} // 0);
	}
	return !grep { !$_->{done} } @writers;
}

# Appends the writers have seen commit so far (read from their output).
sub acked_appends
{
	my $n = 0;
	for my $w (@writers)
	{
		my $acked = $w->{acked};
		if ($w->{pid} && -e $w->{out})
		{
			for (split /\n/, slurp_file($w->{out}))
			{
				$acked = $1 if /^(\d+)\|\d+$/ && $1 > $acked;
			}
		}
		$n += $acked * $chunk;
	}
	return $n;
}

# ---------------------------------------------------------------------------
# A monitoring session, opened again after each reset.
# ---------------------------------------------------------------------------
my $mon;

# The output of $sql, or undef while the server is down or recovering.
sub watch
{
	my ($sql) = @_;
	if (!$mon)
	{
		my $s = Statesman::Session->open($node);
		if (!eval { $s->run('SELECT 1'); 1 })
		{
			eval { $s->{h}->kill_kill };
			return undef;
		}
		$mon = $s;
	}
	my $out = eval { $mon->run($sql) };
	if (!defined $out)
	{
		eval { $mon->{h}->kill_kill };
		undef $mon;
	}
	return $out;
}

# ---------------------------------------------------------------------------
# Ten kills, spread over the writers' progress.
# ---------------------------------------------------------------------------
my @kills;
my $log_offset = -s $node->logfile;
for my $k (1 .. $n_kills)
{
	my $outbox    = $k % 2 ? 'to_redis' : 'to_table';
	my $threshold = int($k * $total / ($n_kills + 1));
	my $deadline  = time + 60;
	my ($leader, $hit);
	while (!$hit)
	{
		BAIL_OUT("kill $k: no $outbox dispatcher seen delivering within 60 s") if time > $deadline;
		tend_writers();
		if (acked_appends() < $threshold)
		{
			usleep(10_000);
			next;
		}
		if (!$leader)
		{
			my $pid = watch(
				qq{SELECT s.leader_pid FROM statesman.outbox_status s
				   JOIN pg_stat_activity a ON a.pid = s.leader_pid
				   WHERE s.outbox_id = '$outbox' AND a.backend_type = 'statesman dispatcher'});
			if ($pid)
			{
				$leader = $pid;
			}
			else
			{
				usleep(20_000);
			}
			next;
		}
		my $row = watch(
			qq{SELECT a.state = 'active' AND a.query = 'statesman: delivering',
			          COALESCE(statesman.head_position(), 0)
			            - COALESCE(statesman.cursor_position('$outbox'), 0)
			   FROM pg_stat_activity a
			   WHERE a.pid = $leader AND a.backend_type = 'statesman dispatcher'});
		if (!defined $row || $row eq '')
		{
			undef $leader;    # gone (or the server is down): look again
			usleep(20_000);
			next;
		}
		my ($delivering, $lag) = split /\|/, $row;
		next unless $delivering eq 't';
		my $t_kill = time;
		my $sent   = kill 'KILL', $leader;
		$hit = {
			k        => $k,
			outbox   => $outbox,
			pid      => $leader,
			sent     => $sent,
			lag      => $lag,
			acked    => acked_appends(),
			flowing  => scalar(grep { !$_->{done} } @writers),
			at       => $t_kill - $t_begin,
		};
	}
	push @kills, $hit;

	# The postmaster notices, resets the server and recovers; wait for the log
	# to say so before the next round looks for a dispatcher.
	my $deadline_log = time + 30;
	until (slurp_file($node->logfile, $log_offset) =~ /\(PID $hit->{pid}\) was terminated by signal 9/)
	{
		last if time > $deadline_log;
		tend_writers();
		usleep(10_000);
	}
	# Then until both outboxes have a leading dispatcher again.
	my $deadline_back = time + 60;
	until ((watch(q{SELECT count(*) FROM statesman.outbox_status WHERE state = 'leading'}) // '') eq '2')
	{
		last if time > $deadline_back;
		tend_writers();
		usleep(20_000);
	}
	$hit->{back} = time - $t_begin - $hit->{at};
	note sprintf(
		'kill %d at %.1f s: SIGKILL to the %s dispatcher (pid %d) while delivering, %d records '
		  . 'behind it, %d appends acknowledged so far; both outboxes led again %.1f s later',
		$k, $hit->{at}, $outbox, $hit->{pid}, $hit->{lag}, $hit->{acked}, $hit->{back});
}
eval { $mon->close } if $mon;
undef $mon;

is(scalar(grep { $_->{sent} == 1 } @kills), $n_kills, "$n_kills SIGKILLs reached a running dispatcher");
is(scalar(grep { $_->{flowing} > 0 } @kills),
	$n_kills, 'every kill came while the writers were still appending');
my $log = slurp_file($node->logfile, $log_offset);
my @terminated =
  grep { $log =~ /background worker "statesman dispatcher[^"]*" \(PID $_->{pid}\) was terminated by signal 9/ }
  @kills;
is(scalar(@terminated), $n_kills, 'the log names each killed dispatcher as terminated by signal 9');
my $resets = () = $log =~ /all server processes terminated; reinitializing/g;
is($resets, $n_kills, "the server reset and recovered $n_kills times");

# ---------------------------------------------------------------------------
# Writers finish; delivery catches up.
# ---------------------------------------------------------------------------
my $deadline = time + 120;
usleep(50_000) until tend_writers() || time > $deadline;
ok(!grep({ !$_->{done} } @writers), 'the writers wrote all their records')
  or BAIL_OUT('writers did not finish');
my $restarts = 0;
$restarts += $_->{starts} - 1 for @writers;

ok( $node->poll_query_until(
		'postgres', q{
		SELECT (SELECT unsequenced_records FROM statesman.feed_status) = 0
		   AND count(*) = 2 AND bool_and(cursor_position = head_position)
		FROM statesman.outbox_status}),
	'both outboxes caught up with the feed')
  or BAIL_OUT('delivery did not catch up');
my $t_caught_up = time;

# ---------------------------------------------------------------------------
# The ledger after recovery is the truth.
# ---------------------------------------------------------------------------
my %ledger;    # position -> message id
for (split /\n/, query(
	q{SELECT statesman._position_of(h), s.store || '/' || h.address || '#' || h.revision
	  FROM statesman.history h CROSS JOIN statesman.store_info() s
	  WHERE h.root = 'flow'}))
{
	my ($pos, $id) = split /\|/;
	$ledger{$pos} = $id;
}
my $n_ledger = keys %ledger;
cmp_ok($n_ledger, '>=', $total, "the ledger holds at least the $total acknowledged appends ($n_ledger records)");

# The table sink.
my ($rows, $distinct, $stray, $missing) = split /\|/, query(
	q{WITH s AS (SELECT store FROM statesman.store_info()),
	       l AS (SELECT s.store || '/' || h.address || '#' || h.revision AS id, statesman._position_of(h) AS global_position
	             FROM statesman.history h, s WHERE h.root = 'flow')
	  SELECT (SELECT count(*) FROM public.flow_sink),
	         (SELECT count(DISTINCT message_id) FROM public.flow_sink),
	         (SELECT count(*) FROM public.flow_sink t WHERE NOT EXISTS
	             (SELECT FROM l WHERE l.id = t.message_id AND l.global_position = t.global_position)),
	         (SELECT count(*) FROM l WHERE NOT EXISTS
	             (SELECT FROM public.flow_sink t WHERE t.message_id = l.id))});
my $table_dups = $rows - $distinct;
is_deeply(
	{ rows => $rows, duplicates => $table_dups, stray => $stray, missing => $missing },
	{ rows => $n_ledger, duplicates => 0, stray => 0, missing => 0 },
	"public.flow_sink holds all $n_ledger ledger records exactly once, each at its position");

# The stream, read in pages; the message bodies are only checked for their
# position, not kept.
my ($entries, $bad_id, $wrong, $body_pos) = (0, 0, 0, 0);
my (%seen_id, %seen_pos, @problems);
my $start = '-';
while (1)
{
	my $page = $redis->command('XRANGE', $key, $start, '+', 'COUNT', 5000);
	last unless $page && @$page;
	for my $e (@$page)
	{
		my ($id, $fields) = ($e->[0], { @{ $e->[1] } });
		$entries++;
		$start = "($id";
		my ($pos) = $id =~ /^(\d+)-0$/;
		if (!defined $pos)
		{
			$bad_id++;
			push @problems, "entry id $id is not {position}-0";
			next;
		}
		$seen_pos{$pos}++;
		$seen_id{ $fields->{messageId} // '' }++;
		if (($ledger{$pos} // '') ne ($fields->{messageId} // ''))
		{
			$wrong++;
			push @problems, "entry $id: messageId " . ($fields->{messageId} // 'none')
			  . ', the ledger has ' . ($ledger{$pos} // 'nothing') . ' there';
		}
		my ($in_body) = ($fields->{message} // '') =~ /"globalPosition": (\d+)/;
		if (($in_body // -1) != $pos)
		{
			$body_pos++;
			push @problems, "entry $id: its message has globalPosition " . ($in_body // 'none');
		}
	}
}
my $stream_dups = $entries - keys %seen_id;
my $stream_missing = grep { !$seen_pos{$_} } keys %ledger;
is_deeply(
	{
		entries    => $entries,
		duplicates => $stream_dups,
		missing    => $stream_missing,
		'bad ids'  => $bad_id,
		'wrong ids' => $wrong,
		'wrong bodies' => $body_pos
	},
	{
		entries    => $n_ledger,
		duplicates => 0,
		missing    => 0,
		'bad ids'  => 0,
		'wrong ids' => 0,
		'wrong bodies' => 0
	},
	"the stream $key holds all $n_ledger ledger records exactly once, each at id {position}-0")
  or diag(join("\n", @problems[ 0 .. ($#problems < 9 ? $#problems : 9) ]));

# The totals: each record counted once, by the page attempt that committed.
my %totals;
for (split /\n/, query(
	q{SELECT outbox_id, published_total, deduplicated_total, skipped_total, parked
	  FROM statesman.outbox_status}))
{
	my ($o, @t) = split /\|/;
	$totals{$o} = \@t;
}
my ($r_pub, $r_dedup, $r_skip, $r_parked) = @{ $totals{to_redis} };
my ($t_pub, $t_dedup, $t_skip, $t_parked) = @{ $totals{to_table} };
is_deeply([ $t_pub, $t_dedup, $t_skip, $t_parked ], [ $n_ledger, 0, 0, 0 ],
	"to_table: published_total = $n_ledger, nothing deduplicated, skipped or parked");
is_deeply([ $r_pub + $r_dedup, $r_skip, $r_parked ], [ $n_ledger, 0, 0 ],
	"to_redis: published_total + deduplicated_total = $n_ledger ($r_pub + $r_dedup), nothing skipped or parked");

my ($lag_sum, $back_max) = (0, 0);
for (@kills)
{
	$lag_sum += $_->{lag};
	$back_max = $_->{back} if $_->{back} > $back_max;
}
note sprintf('%d kills (%d of the to_redis dispatcher, %d of to_table), each while it was delivering; '
	  . 'on average %.0f records were still to deliver', scalar(@kills),
	scalar(grep { $_->{outbox} eq 'to_redis' } @kills), scalar(grep { $_->{outbox} eq 'to_table' } @kills),
	$lag_sum / @kills);
note sprintf('from a kill until both outboxes had a leading dispatcher again (crash recovery, launcher, '
	  . 'database worker, dispatchers): at most %.1f s', $back_max);
note sprintf('ledger: %d records (%d appends acknowledged by the writers, %d writer restarts)',
	$n_ledger, $total, $restarts);
note sprintf('duplicates published (handed over again and recognised, deduplicated_total): '
	  . 'to_redis %d, to_table %d', $r_dedup, $t_dedup);
note sprintf('duplicates stored: public.flow_sink %d, stream %s %d', $table_dups, $key, $stream_dups);
note sprintf('wall time: %.1f s (writers and kills), %.1f s in all',
	$t_caught_up - $t_begin, time - $t_begin);

$node->stop;
$redis->stop;
done_testing();

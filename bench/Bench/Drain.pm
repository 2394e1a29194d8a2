# One drain of a backlog into a sink outside the database, as every broker part measures it
# (docs/benchmarks.md): a fresh outbox is created, one session polls its cursor every 100 ms
# (committing between looks) until it reaches the head, and the rate is the backlog over the
# time from the first delivered page to that moment (and, as a second figure, from
# create_outbox). The caller checks what the sink holds afterwards and drops the outbox.
#
#   my $d = Bench::Drain::run($b, name => 'nats drain run 1', outbox => 'ndrain_1', sink => 'nats',
#                             options => '{…}', start => $before, target => $head, total => $n,
#                             catch_up => 300, progress => 1);
#   $d->{counted} (published + deduplicated), $d->{rate}, $d->{e2e}, $d->{secs}
#
# progress: a NOTICE every 2 s with the cursor and the rate of the last interval.
package Bench::Drain;

use strict;
use warnings;
use utf8;

sub run
{
	my ($b, %a) = @_;
	my ($outbox, $target, $total) = @a{qw(outbox target total)};
	my $start    = $a{start} // -1;
	my $catch_up = $a{catch_up} // 300;
	my $name     = $a{name} // "drain of $outbox";
	my $progress = $a{progress}
	  ? "IF clock_timestamp() - last_note >= interval '2 seconds' THEN
            RAISE NOTICE '  $name: cursor % records past the start, % records/s in the last % s',
                COALESCE(pos - GREATEST($start, 0), 0),
                round((COALESCE(pos, last_pos) - last_pos) / extract(epoch FROM clock_timestamp() - last_note)),
                round(extract(epoch FROM clock_timestamp() - last_note)::numeric, 1);
            last_note := clock_timestamp();
            last_pos := COALESCE(pos, last_pos);
        END IF;"
	  : '';
	# The table exists after the first drain: its NOTICE saying so is left out, a warning is not.
	$b->q("SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS bench.sink_drains (outbox_id text PRIMARY KEY, created_at timestamptz,
               first_at timestamptz, done_at timestamptz);
DELETE FROM bench.sink_drains WHERE outbox_id = '$outbox'");
	$b->q('CHECKPOINT');
	$b->q(<<"SQL", notices => 1);
SELECT statesman.create_outbox('$outbox', '$a{sink}', '$a{options}');
DO \$\$
DECLARE
    t0 timestamptz := clock_timestamp();
    t_first timestamptz;
    last_note timestamptz := clock_timestamp();
    last_pos bigint := GREATEST($start, 0);
    pos bigint;
    err text;
BEGIN
    LOOP
        SELECT s.cursor_position, s.last_error INTO pos, err
        FROM statesman.outbox_status s WHERE s.outbox_id = '$outbox';
        IF t_first IS NULL AND pos > $start THEN t_first := clock_timestamp(); END IF;
        EXIT WHEN pos >= $target;
        IF clock_timestamp() - t0 > interval '$catch_up seconds' THEN
            RAISE EXCEPTION '$name: the cursor is at % of $target after $catch_up s (last error: %)', pos, err;
        END IF;
        $progress
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
    INSERT INTO bench.sink_drains VALUES ('$outbox', t0, t_first, clock_timestamp());
END
\$\$;
SQL
	my ($counted, $rate, $e2e, $secs) = $b->row("
    SELECT s.published_total + s.deduplicated_total,
           round($total / extract(epoch FROM r.done_at - r.first_at)),
           round($total / extract(epoch FROM r.done_at - r.created_at)),
           round(extract(epoch FROM r.done_at - r.first_at)::numeric, 2)
    FROM bench.sink_drains r, statesman.outbox_status s
    WHERE r.outbox_id = '$outbox' AND s.outbox_id = '$outbox'");
	return { counted => $counted, rate => $rate, e2e => $e2e, secs => $secs };
}

1;

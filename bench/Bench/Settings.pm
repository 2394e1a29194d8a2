# The benchmark's settings: every BENCH_* variable of the environment, checked, with its
# default. A bad value stops the program with exit status 2 before anything is installed or
# started. Pure Perl: scripts/bench reads them before it builds, bench/bench.pl again.
#
#   my $s = Bench::Settings::from_env();   # a hash: $s->{secs}, $s->{append_clients} (array), …
#   Bench::Settings::want($s, 'append')    # true when that part runs
package Bench::Settings;

use strict;
use warnings;

use Exporter 'import';
our @EXPORT_OK = qw(from_env want);

sub _bad
{
	my ($msg) = @_;
	print STDERR "bench: $msg\n";
	exit 2;
}

# $ENV{$name} or $default, which must match $re; $msg when it does not.
sub _get
{
	my ($name, $default, $re, $msg) = @_;
	my $v = $ENV{$name} // $default;
	_bad($msg) unless $v =~ $re;
	return $v;
}

sub from_env
{
	my %s;
	my $whole = qr/^[0-9]+$/;
	my $pos   = qr/^[1-9][0-9]*$/;

	# The append part (and the clients of every other part).
	$s{secs}    = _get('BENCH_SECONDS', 15, $whole, 'BENCH_SECONDS must be a whole number');
	$s{runs}    = _get('BENCH_RUNS',    3,  $whole, 'BENCH_RUNS must be a whole number');
	$s{warmup}  = _get('BENCH_WARMUP',  5,  $whole, 'BENCH_WARMUP must be a whole number');
	$s{clients} = _get('BENCH_CLIENTS', 2,  $whole, 'BENCH_CLIENTS must be a whole number');
	$s{only}    = $ENV{BENCH_ONLY} // '';
	$s{parts}   = { map { $_ => 1 } split /,/, $s{only} };
	_bad('BENCH_ONLY must be append, capture, delivery, kafka, pgq, steady, nats, rabbitmq or webhook, or several of them separated by commas')
	  unless $s{only} eq ''
	  || ($s{only} =~ /^[a-z,]+$/ && !grep { !/^(append|capture|delivery|kafka|pgq|steady|nats|rabbitmq|webhook)$/ } split /,/, $s{only});
	# The report in docs/benchmarks.md is a whole run's: a partial one would replace it.
	_bad("BENCH_WRITE_DOCS (make bench) writes a whole run into docs/benchmarks.md: run ./scripts/bench for BENCH_ONLY=$s{only}")
	  if ($ENV{BENCH_WRITE_DOCS} // '') ne '' && $s{only} ne '';
	_bad('BENCH_CLIENTS must be >= 1') unless $s{clients} >= 1;
	my $ac = $ENV{BENCH_APPEND_CLIENTS} // '2 8';
	_bad('BENCH_APPEND_CLIENTS must be client counts >= 1, separated by spaces')
	  unless $ac =~ /^ *[1-9][0-9]*( +[1-9][0-9]*)* *$/;
	$s{append_clients} = [ split ' ', $ac ];
	_bad('BENCH_RUNS and BENCH_SECONDS must be >= 1') if $s{runs} < 1 || $s{secs} < 1;
	# The worker-off breakdown of the append part: its runs per cell (0: not run).
	$s{worker_off_runs} = _get('BENCH_WORKER_OFF_RUNS', $s{runs}, $whole,
		'BENCH_WORKER_OFF_RUNS must be a whole number');

	# The delivery part (scripts/bench's delivery section); PgQ's drain and latency use the same.
	my $dmsg =
	  'the delivery settings (BENCH_DRAIN_*, BENCH_LATENCY_*, BENCH_LEASE_*) must be whole numbers >= 1';
	$s{drain_records} = _get('BENCH_DRAIN_RECORDS',   1000000, $pos, $dmsg);
	$s{drain_runs}    = _get('BENCH_DRAIN_RUNS',      3,       $pos, $dmsg);
	$s{lat_rate}      = _get('BENCH_LATENCY_RATE',    1000,    $pos, $dmsg);
	$s{lat_secs}      = _get('BENCH_LATENCY_SECONDS', 20,      $pos, $dmsg);
	$s{lease_rate}    = _get('BENCH_LEASE_RATE',      3000,    $pos, $dmsg);
	$s{lease_secs}    = _get('BENCH_LEASE_SECONDS',   15,      $pos, $dmsg);
	$s{sink_runs}   = _get('BENCH_SINK_DRAIN_RUNS', $s{drain_runs}, $pos, $dmsg);
	$s{lat_windows} = _get('BENCH_LATENCY_WINDOWS', 3, $pos, $dmsg);

	# PgQ.
	$s{pgq_poll_ms} = _get('BENCH_PGQ_POLL_MS', 10, $pos,
		'BENCH_DRAIN_*, BENCH_LATENCY_* and BENCH_PGQ_POLL_MS must be whole numbers >= 1');

	# The steady state.
	my $smsg =
	  'BENCH_STEADY_SECONDS, BENCH_STEADY_RATE and BENCH_STEADY_SAMPLE must be whole numbers >= 1';
	$s{steady_secs}   = _get('BENCH_STEADY_SECONDS', 600,  $pos, $smsg);
	$s{steady_rate}   = _get('BENCH_STEADY_RATE',    2000, $pos, $smsg);
	$s{steady_sample} = _get('BENCH_STEADY_SAMPLE',  10,   $pos, $smsg);
	$s{steady_sync} =
	  _get('BENCH_STEADY_SYNC', 'off', qr/^(on|off)$/, 'BENCH_STEADY_SYNC must be on or off');

	# Fixed sizes of the workloads.
	$s{addresses} = 10000;    # addresses of the append runs
	$s{seq_batch} = 10000;    # sequence_feed's batch after the append runs
	return \%s;
}

# True when part $part runs (BENCH_ONLY unset, or naming that part).
sub want
{
	my ($s, $part) = @_;
	return $s->{only} eq '' || $s->{parts}{$part};
}

1;

#!/usr/bin/env perl
# The measuring half of `make bench`, run by scripts/bench (as the cluster owner: `postgres`
# when scripts/bench runs as root) once it has installed, built and reserved huge pages:
# starts the throwaway cluster, runs the parts BENCH_ONLY selects, and prints the markdown
# report on stdout; one progress line per measurement on stderr. The settings are
# scripts/bench's environment (Bench::Settings).
#
#   bench/bench.pl --huge-pages=on|try
#
# The parts: Bench::Append (append vs bare INSERT and PgQ with the worker on and pgqd ticking;
# the worker-off breakdown and sequence_feed), Bench::Delivery
# (latency, lease, read_feed drains and breakdown, drains to the sinks), Bench::Nats (the drain
# to the `nats` sink and nats.c's own publisher), Bench::Webhook (the drain to the `webhook` sink
# and a bare libcurl client into the same receiver), Bench::PgQ (PgQ's drain and latency),
# Bench::Steady (the steady state); the report: Bench::Report.
use strict;
use warnings;
use utf8;

# PostgreSQL::Test::Utils sends STDOUT and STDERR to its log file when it loads: keep the
# originals for the report and the progress lines.
BEGIN
{
	open $Bench::Run::OUT, '>&', \*STDOUT or die "cannot dup stdout: $!";
	open $Bench::Run::ERR, '>&', \*STDERR or die "cannot dup stderr: $!";
	$Bench::Run::OUT->autoflush(1);
	$Bench::Run::ERR->autoflush(1);
	# It also resets the locale variables; initdb takes the invoker's, as before.
	%Bench::Run::LOCALE = map { $_ => $ENV{$_} } grep { defined $ENV{$_} } qw(LC_ALL LC_MESSAGES);
}

use FindBin;
use lib $FindBin::Bin;

use Bench::Append;
use Bench::Capture;
use Bench::Delivery;
use Bench::Nats;
use Bench::RabbitMQ;
use Bench::Kafka;
use Bench::Webhook;
use Bench::PgQ;
use Bench::Report;
use Bench::Run;
use Bench::Settings qw(from_env want);
use Bench::Steady;
use Test::More ();

# A stop by signal runs the END blocks too (clusters, redis-server, pgqd).
$SIG{INT} = $SIG{TERM} = sub { $SIG{INT} = $SIG{TERM} = 'IGNORE'; die "bench: interrupted\n" };
# An error of this program goes to the original stderr, not to PostgreSQL::Test::Utils's log.
$SIG{__DIE__} = sub { print {$Bench::Run::ERR} $_[0] unless $^S; };
Test::More->builder->no_ending(1);

my $huge = 'try';
for (@ARGV)
{
	if (/^--huge-pages=(on|try)$/) { $huge = $1; }
	else { die "usage: bench/bench.pl --huge-pages=on|try\n"; }
}

delete $ENV{LC_MESSAGES};
%ENV = (%ENV, %Bench::Run::LOCALE);

my $s = from_env();
my $b = Bench::Run->new($s);
END { print {$Bench::Run::ERR} $b->failed_start if $? && $b; }
my $R = {};

sub loadavg
{
	open my $fh, '<', '/proc/loadavg' or return '?';
	my @l = split ' ', <$fh>;
	close $fh;
	return "@l[0 .. 2]";
}

# The cluster's settings. Identical for every workload: nothing here favours either side. The
# background worker starts off; the append part turns it on for its headline rounds and off
# for its breakdown (statesman.enabled is reloadable), the delivery part turns it on (and
# restarts the cluster).
my @settings = (
	'shared_buffers = 4GB',
	'max_wal_size = 4GB',
	'checkpoint_timeout = 30min',
	'synchronous_commit = on',
	'log_checkpoints = on',
	'statesman.enabled = off',
	'track_wal_io_timing = on',    # the append part's flush times (pg_stat_wal)
	'statesman.naptime = 1s',
	'max_worker_processes = 16',
	"huge_pages = $huge");

$R->{load_before} = loadavg();
my $node = $b->start_main(@settings);
$b->say('bench: a throwaway cluster in ' . $node->basedir . ' (port ' . $node->port
	  . "); load average before it started $R->{load_before}");

Bench::Append::setup($b, $R);
Bench::PgQ::setup($b, $R);    # PgQ, its queue `bench`, and pgq.sql: the same payload through pgq.insert_event

Bench::Append::measure($b, $R) if want($s, 'append');
Bench::Capture::measure($b, $R) if want($s, 'capture');

# Read now: the delivery part restarts the cluster with other settings.
$R->{server_settings} = [
	split /\n/, $b->q("SELECT name || ' = ' || current_setting(name) FROM pg_settings
  WHERE name IN ('shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'synchronous_commit', 'fsync',
                 'wal_level', 'wal_buffers', 'full_page_writes', 'autovacuum', 'max_connections',
                 'huge_pages', 'huge_page_size')
  ORDER BY name")
];
$R->{checkpoints} = () =
  PostgreSQL::Test::Utils::slurp_file($node->logfile) =~ /checkpoint starting: (?:wal|time)/g;
$R->{statesman_version} = $b->q("SELECT extversion FROM pg_extension WHERE extname = 'statesman'");
$R->{server_version}    = $b->q('SHOW server_version');

Bench::Delivery::measure($b, $R) if want($s, 'delivery');
Bench::Nats::measure($b, $R)     if want($s, 'nats');        # on the delivery part's backlog, or its own
Bench::Kafka::measure($b, $R)    if want($s, 'kafka');    # on the delivery part's backlog, or its own
Bench::RabbitMQ::measure($b, $R) if want($s, 'rabbitmq'); # on the delivery part's backlog, or its own
Bench::Webhook::measure($b, $R)  if want($s, 'webhook');  # on the delivery part's backlog, or its own
Bench::PgQ::measure($b, $R)      if want($s, 'pgq');
Bench::Steady::measure($b, $R)   if want($s, 'steady');

$R->{load_after} = loadavg();
$b->say("bench: done; load average $R->{load_after}");

$b->out(Bench::Report::lines($b, $R));

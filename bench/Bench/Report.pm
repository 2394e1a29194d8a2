# The markdown report: the heading, the machine and the settings, the one summary table (every
# figure of the run against its baseline and its target, each the median of the runs or
# windows its section lists, with their min and max), then a section per part.
#
#   Bench::Report::lines($b, $R)                  the report, as lines
#   Bench::Report::write_docs($docs, $report, $intro)   replaces the latest run in
#                                                 docs/benchmarks.md (pure Perl: scripts/bench
#                                                 calls it as the invoking user)
package Bench::Report;

use strict;
use warnings;
use utf8;

use Bench::Settings qw(want);

my %TITLE = (
	''       => "append vs bare INSERT and PgQ, worker on; delivery; PgQ's drain and latency; steady state",
	append   => 'append vs bare INSERT and PgQ, worker on',
	capture  => 'INSERT and UPDATE into a captured table vs uncaptured',
	delivery => 'delivery',
	kafka    => 'delivery to kafka (librdkafka\'s mock cluster)',
	pgq      => "PgQ's drain and latency",
	steady   => 'steady state',
	nats     => 'delivery to the nats sink',
	rabbitmq => 'delivery to the rabbitmq sink',
	webhook  => 'delivery to the webhook sink');

sub _machine
{
	my $model = '';
	if (open my $fh, '<', '/proc/cpuinfo')
	{
		while (<$fh>) { if (/^model name\s*:\s*(.*)$/) { $model = $1; last; } }
		close $fh;
	}
	my $mem = 0;
	if (open my $fh, '<', '/proc/meminfo')
	{
		while (<$fh>) { if (/^MemTotal:\s+(\d+)/) { $mem = $1; last; } }
		close $fh;
	}
	return sprintf('%s CPUs (%s), %.1f GB RAM', $_[0], $model, $mem / 1048576);
}

sub summary
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my @o = ('', '### Summary', '',
		'| # | figure | statesman: median (min–max) | baseline: median (min–max) | statesman ÷ baseline | target | met |',
		'|---|---|---|---|---|---|---|');
	push @o, Bench::Append::summary($b, $R) if want($s, 'append');
	push @o, Bench::Capture::summary($b, $R) if want($s, 'capture');
	push @o, Bench::Delivery::summary($b, $R) if want($s, 'delivery');
	push @o, Bench::Kafka::summary($b, $R)    if want($s, 'kafka');
	push @o, Bench::PgQ::summary($b, $R) if want($s, 'pgq') && !want($s, 'delivery');
	push @o, Bench::Steady::summary($b, $R) if want($s, 'steady');
	push @o, Bench::Nats::summary($b, $R) if want($s, 'nats');
	push @o, Bench::RabbitMQ::summary($b, $R) if want($s, 'rabbitmq');
	push @o, Bench::Webhook::summary($b, $R) if want($s, 'webhook');
	return @o;
}

sub lines
{
	my ($b, $R) = @_;
	my $s = $b->s;
	my @u = gmtime;
	my $title = $s->{only} eq '' ? $TITLE{''} : join('; ', map { $TITLE{$_} } split /,/, $s->{only});
	my @o = ("## statesman benchmark — $title", '',
		sprintf('- date: %04d-%02d-%02d %02d:%02d UTC', $u[5] + 1900, $u[4] + 1, $u[3], $u[2], $u[1]),
		'- machine: ' . _machine($b->{ncpu}),
		"- load average (1/5/15 min): before $R->{load_before}, after $R->{load_after} (the benchmark's own load included)");
	push @o,
	  '  CPU used by other processes on the machine during each measured append run (the span of its pgbench) is in the last column of the append tables against the bare INSERT (% of all CPUs, kernel threads included)'
	  if want($s, 'append');
	push @o, "- PostgreSQL: $R->{server_version}; statesman $R->{statesman_version}",
	  '- cluster settings (one throwaway cluster, the same for every workload): ' . join(', ', @{ $R->{server_settings} });
	push @o, summary($b, $R);
	push @o, '', 'The sections below give each figure\'s runs, settings and method.';
	push @o, Bench::Append::report($b, $R) if want($s, 'append');
	push @o, Bench::Capture::report($b, $R) if want($s, 'capture');
	push @o, Bench::Delivery::report($b, $R) if want($s, 'delivery');
	push @o, Bench::Kafka::report($b, $R)    if want($s, 'kafka');
	push @o, Bench::PgQ::report($b, $R)      if want($s, 'pgq');
	push @o, Bench::Steady::report($b, $R)   if want($s, 'steady');
	push @o, Bench::Nats::report($b, $R)     if want($s, 'nats');
	push @o, Bench::RabbitMQ::report($b, $R) if want($s, 'rabbitmq');
	push @o, Bench::Webhook::report($b, $R)  if want($s, 'webhook');
	return @o;
}

# Replaces what stands between the two latest-run markers of $docs with $intro, an empty line,
# and $report with its headings one level down. False when the markers are missing.
sub write_docs
{
	my ($docs, $report, $intro) = @_;
	open my $fh, '<:encoding(UTF-8)', $docs or die "cannot read $docs: $!";
	my $text = do { local $/; <$fh> };
	close $fh;
	my $begin = '<!-- make bench: latest run (begin) -->';
	my $end   = '<!-- make bench: latest run (end) -->';
	return 0 unless $text =~ /^\Q$begin\E$/m && $text =~ /^\Q$end\E$/m;
	(my $r = $report) =~ s/^#/##/mg;
	my $new = "$intro\n\n$r";
	$text =~ s/(\Q$begin\E\n).*?(\Q$end\E)/$1\n$new\n$2/s;
	open $fh, '>:encoding(UTF-8)', $docs or die "cannot write $docs: $!";
	print $fh $text;
	close $fh;
	return 1;
}

1;

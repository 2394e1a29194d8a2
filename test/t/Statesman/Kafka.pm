# A Kafka cluster for the Perl TAP tests and the benchmark: librdkafka's mock cluster (a
# Kafka-protocol server on loopback), hosted by test/kafka-mock/kafka_mock.c, which this module
# compiles into a temp dir and starts; and a real client, kcat, to read the topics back.
#
#   my $kafka = Statesman::Kafka->start(brokers => 3);   # dies without cc/librdkafka-dev
#   $kafka->bootstrap;                                     # "127.0.0.1:port,…"
#   $kafka->topic('statesman.orders', 4);                  # create a topic (else auto-created)
#   $kafka->errors(0, 7, 7, 7);                            # the next 3 Produce requests fail
#   $kafka->down(1); $kafka->up(1);                        # a broker refuses connections
#   my @records = $kafka->consume('statesman.orders');     # every record, see consume()
#   $kafka->count('statesman.orders');                     # records ever written
#   $kafka->stop;
#
# What the mock does not check (docs/sinks.md): it ignores acks, has no replication, and checks
# idempotent sequence numbers only for transactional producers.
package Statesman::Kafka;

use strict;
use warnings;

use Carp;
use FindBin;
use File::Spec;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Utils;

my @running;

# The source of the helper: from STATESMAN_SOURCE_DIR, next to the tests, or next to the
# benchmark's copy of bench/ (scripts/bench copies test/kafka-mock/ beside it).
sub _source
{
	my @roots = grep { defined } ($ENV{STATESMAN_SOURCE_DIR}, "$FindBin::RealBin/../..", "$FindBin::RealBin/..");
	for my $f ((map { "$_/test/kafka-mock/kafka_mock.c" } @roots), "$FindBin::RealBin/../kafka-mock/kafka_mock.c")
	{
		return $f if -f $f;
	}
	croak 'test/kafka-mock/kafka_mock.c not found (set STATESMAN_SOURCE_DIR to the source tree)';
}

# Compiles the helper (once per test) and returns its path.
sub build
{
	my ($dir) = @_;
	my $bin = File::Spec->catfile($dir, 'kafka_mock');
	return $bin if -x $bin;
	my ($out, $err) = ('', '');
	my $cc = $ENV{CC} // 'cc';
	IPC::Run::run([ $cc, '-O1', '-o', $bin, _source(), '-lrdkafka' ], '>', \$out, '2>', \$err)
	  or croak "cannot build the kafka mock helper (librdkafka-dev installed?): $err";
	return $bin;
}

# Starts a mock cluster of `brokers` brokers (default 1).
sub start
{
	my ($class, %opts) = @_;
	my $dir  = PostgreSQL::Test::Utils::tempdir('kafka');
	my $self = bless { dir => $dir, in => '', out => '', err => '' }, $class;
	my $bin  = build($dir);
	$self->{log} = File::Spec->catfile($dir, 'kafka_mock.log');
	$self->{h} = IPC::Run::start([ $bin, $opts{brokers} // 1 ],
		'<', \$self->{in}, '>', \$self->{out}, '2>', $self->{log});
	my $line = $self->_line;
	($self->{bootstrap}) = $line =~ /^bootstrap (\S+)$/
	  or croak "kafka mock: unexpected first line '$line'";
	push @running, $self;
	return $self;
}

sub bootstrap { return $_[0]->{bootstrap}; }
sub logfile   { return $_[0]->{log}; }

# One command, its "ok" awaited (dies on "error: …").
sub command
{
	my ($self, $cmd) = @_;
	$self->{in} .= "$cmd\n";
	my $reply = $self->_line;
	croak "kafka mock: $cmd: $reply" unless $reply eq 'ok';
	return;
}

# The records ever written to a topic (its partitions' high watermarks summed: the mock
# keeps only the last few thousand records of each partition, consume() reads those).
sub count
{
	my ($self, $topic) = @_;
	$self->{in} .= "count $topic\n";
	my $reply = $self->_line;
	my ($n) = $reply =~ /^ok (\d+)$/ or croak "kafka mock: count $topic: $reply";
	return $n;
}

sub topic       { my ($self, $name, $partitions) = @_; $self->command("topic $name " . ($partitions // 1)); }
sub errors      { my ($self, $api, @codes) = @_; $self->command("errors $api @codes"); }
sub clear       { my ($self, $api) = @_; $self->command("clear $api"); }
sub topic_error { my ($self, $name, $code) = @_; $self->command("topic_error $name $code"); }
sub down        { my ($self, $id) = @_; $self->command("down $id"); }
sub up          { my ($self, $id) = @_; $self->command("up $id"); }

# Every record of a topic, read by kcat from the beginning to the end of each partition, as
# hashes { partition, offset, key, headers => { name => value }, header_list => [ … ], value },
# in partition order, then offset order. An absent topic gives an empty list.
sub consume
{
	my ($self, $topic) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'kcat', '-C', '-q', '-b', $self->{bootstrap}, '-t', $topic, '-o', 'beginning', '-e', '-J',
		  '-X', 'topic.metadata.refresh.interval.ms=1000' ],
		'<', \'', '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	croak "kcat -C -t $topic failed: $err" unless $ok || $err =~ /Unknown topic|not available/i;
	my @records;
	for my $line (split /\n/, $out)
	{
		next unless $line =~ /^\{/;
		my $r = decode_json($line);
		my @h = @{ $r->{headers} // [] };
		my %h;
		for (my $i = 0; $i + 1 < @h; $i += 2) { $h{ $h[$i] } = $h[ $i + 1 ]; }
		push @records,
		  { partition => $r->{partition}, offset => $r->{offset}, key => $r->{key},
			headers => \%h, header_list => \@h, value => $r->{payload} };
	}
	return sort { $a->{partition} <=> $b->{partition} || $a->{offset} <=> $b->{offset} } @records;
}

sub stop
{
	my ($self) = @_;
	return unless $self->{h};
	$self->{in} .= "exit\n";
	eval { $self->{h}->finish; 1 } or $self->{h}->kill_kill;
	delete $self->{h};
	return;
}

sub _line
{
	my ($self) = @_;
	my $deadline = time + 30;
	my $line;
	until (defined($line = ($self->{out} =~ s/^([^\n]*)\n// ? $1 : undef)))
	{
		croak 'kafka mock: no answer within 30 s; log: ' . PostgreSQL::Test::Utils::slurp_file($self->{log})
		  if time > $deadline;
		croak 'kafka mock exited; log: ' . PostgreSQL::Test::Utils::slurp_file($self->{log})
		  unless $self->{h}->pumpable;
		$self->{h}->pump_nb;
		select(undef, undef, undef, 0.01);
	}
	return $line;
}

END
{
	local $?;    # the script's exit status, which stopping a broker would overwrite
	$_->stop for grep { $_->{h} } @running;
}

1;

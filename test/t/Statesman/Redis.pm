# A throwaway redis-server for the Perl TAP tests: it runs as the current user
# on a free loopback port, with its config, data and log in a temp dir, and the
# test talks to it in RESP over a socket of its own.
#
#   my $redis = Statesman::Redis->start(password => 'pw');   # dies without redis-server
#   $redis->command('XLEN', 'statesman:state-change');      # a reply, see command()
#   $redis->command('SELECT', 3);                            # kept across reconnects
#   $redis->freeze; $redis->thaw;                            # SIGSTOP / SIGCONT
#   $redis->stop; $redis->start_again;                       # same port, same data
#   $redis->stop;
#   my $redis = Statesman::Redis->start_volatile;          # no AOF, no snapshots (make bench)
#
# Data survives stop/start_again: the append-only file is written and fsynced on
# every write (appendfsync always), and stop is redis's own clean shutdown.
package Statesman::Redis;

use strict;
use warnings;

use Carp;
use File::Spec;
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time usleep);

my $server_bin = '/usr/bin/redis-server';
my @running;    # every started server, stopped at exit whatever happened

# Starts a server. Options: password (requirepass). Dies when redis-server is
# missing or does not answer within 30 s.
sub start
{
	my ($class, %opts) = @_;
	my $bin = -x $server_bin ? $server_bin : _which('redis-server');
	croak "redis-server not found (install the redis-server package)" unless $bin;
	my $self = bless {
		bin      => $bin,
		dir      => PostgreSQL::Test::Utils::tempdir('redis'),
		port     => PostgreSQL::Test::Cluster::get_free_port(),
		password => $opts{password},
	}, $class;
	$self->{logfile} = File::Spec->catfile($self->{dir}, 'redis.log');
	$self->{conf}    = File::Spec->catfile($self->{dir}, 'redis.conf');
	open my $fh, '>', $self->{conf} or croak "cannot write $self->{conf}: $!";
	print $fh <<"EOF";
bind 127.0.0.1
port $self->{port}
dir $self->{dir}
daemonize no
logfile $self->{logfile}
save ""
appendonly yes
appendfsync always
EOF
	if (defined $self->{password})
	{
		(my $quoted = $self->{password}) =~ s/(["\\])/\\$1/g;
		print $fh "requirepass \"$quoted\"\n";
	}
	close $fh;
	push @running, $self;
	$self->start_again;
	return $self;
}

# Starts a server as start does, then turns its persistence off (no append-only file, no
# snapshots): redis's default durability without the fork of a snapshot, which the benchmark
# wants inside its measurements. Data does not survive stop/start_again.
sub start_volatile
{
	my ($class, %opts) = @_;
	my $self = $class->start(%opts);
	$self->command('CONFIG', 'SET', 'appendonly', 'no');
	$self->command('CONFIG', 'SET', 'save', '');
	return $self;
}

sub port { return $_[0]->{port}; }
sub pid  { return $_[0]->{pid}; }
sub logfile { return $_[0]->{logfile}; }

# (Re)starts the server on its port, with its data; waits until it answers.
# The server is our child process, so stop can wait for its exit.
sub start_again
{
	my ($self) = @_;
	croak 'redis-server is already running' if $self->{pid};
	my $pid = fork // croak "cannot fork: $!";
	if ($pid == 0)
	{
		open STDIN,  '<', '/dev/null';
		open STDOUT, '>>', $self->{logfile};
		open STDERR, '>&', \*STDOUT;
		exec $self->{bin}, $self->{conf} or POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	my $deadline = time + 30;
	until (eval { $self->_connect; $self->command('PING') eq 'PONG' })
	{
		my $error = $@;
		if (waitpid($pid, WNOHANG) == $pid)
		{
			delete $self->{pid};
			croak "redis-server exited (status $?); log:\n" . _slurp($self->{logfile});
		}
		croak "redis-server does not answer on port $self->{port}: $error\nlog:\n"
		  . _slurp($self->{logfile})
		  if time > $deadline;
		usleep(20_000);
	}
	return $self;
}

# Stops the server cleanly (SIGTERM: redis flushes its append-only file and
# exits) and waits until the process is gone.
sub stop
{
	my ($self) = @_;
	my $pid = $self->{pid} or return;
	delete $self->{sock};
	kill 'CONT', $pid;
	kill 'TERM', $pid;
	my $deadline = time + 30;
	usleep(10_000) while waitpid($pid, WNOHANG) == 0 && time < $deadline;
	croak "redis-server (pid $pid) did not stop" if kill 0, $pid;
	delete $self->{pid};
	return;
}

# Stops the process from running (SIGSTOP): connections are still accepted by
# the kernel, but nothing is ever answered until thaw.
sub freeze
{
	my ($self) = @_;
	delete $self->{sock};    # our own connection would hang too
	kill('STOP', $self->{pid}) or croak "cannot SIGSTOP redis-server: $!";
	return;
}

sub thaw
{
	my ($self) = @_;
	kill('CONT', $self->{pid}) or croak "cannot SIGCONT redis-server: $!";
	return;
}

# Runs one command and returns its reply: a string for simple strings, bulk
# strings and integers, undef for a nil, an array ref for an array. An error
# reply dies, unless the command is given as command({ allow_error => 1 }, …),
# which returns it as { error => 'ERR …' }.
sub command
{
	my ($self, @args) = @_;
	my $allow_error = ref $args[0] eq 'HASH' ? shift(@args)->{allow_error} : 0;
	$self->_connect unless $self->{sock};
	my $req = '*' . scalar(@args) . "\r\n";
	for my $arg (@args)
	{
		my $bytes = $arg;
		utf8::encode($bytes) if utf8::is_utf8($bytes);
		$req .= '$' . length($bytes) . "\r\n$bytes\r\n";
	}
	my $sock = $self->{sock};
	print {$sock} $req or croak "redis: cannot send: $!";
	my $reply = $self->_read_reply;
	# A new connection (after stop, freeze) selects the same database again.
	$self->{db} = $args[1] if uc $args[0] eq 'SELECT' && !ref $reply;
	if (ref $reply eq 'Statesman::Redis::Error')
	{
		return { error => $$reply } if $allow_error;
		croak "redis: @args[0 .. ($#args < 2 ? $#args : 2)]: $$reply";
	}
	return $reply;
}

# All entries of a stream as [ [id, { field => value }], … ], in id order.
sub stream_entries
{
	my ($self, $key) = @_;
	my @entries;
	for my $e (@{ $self->command('XRANGE', $key, '-', '+') })
	{
		my %fields = @{ $e->[1] };
		push @entries, [ $e->[0], \%fields ];
	}
	return @entries;
}

sub _connect
{
	my ($self) = @_;
	delete $self->{sock};
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $self->{port},
		Proto    => 'tcp',
		Timeout  => 10) or die "cannot connect to redis on port $self->{port}: $!\n";
	$sock->autoflush(1);
	# A read never hangs a test: 30 s and the test dies (a frozen server, a bug).
	setsockopt($sock, Socket::SOL_SOCKET(), Socket::SO_RCVTIMEO(), pack('l!l!', 30, 0));
	$self->{sock} = $sock;
	$self->command('AUTH', $self->{password}) if defined $self->{password};
	$self->command('SELECT', $self->{db}) if $self->{db};
	return;
}

sub _read_line
{
	my ($self) = @_;
	my $line = readline($self->{sock});
	croak "redis: connection closed or timed out" unless defined $line;
	$line =~ s/\r\n\z// or croak "redis: malformed reply line";
	return $line;
}

sub _read_reply
{
	my ($self) = @_;
	my $line = $self->_read_line;
	my ($type, $rest) = (substr($line, 0, 1), substr($line, 1));
	return $rest if $type eq '+' || $type eq ':';
	return bless \$rest, 'Statesman::Redis::Error' if $type eq '-';
	if ($type eq '$')
	{
		return undef if $rest < 0;
		my $data = '';
		while (length($data) < $rest + 2)
		{
			my $n = read($self->{sock}, $data, $rest + 2 - length($data), length($data));
			croak "redis: connection closed or timed out" unless $n;
		}
		return substr($data, 0, $rest);
	}
	if ($type eq '*')
	{
		return undef if $rest < 0;
		return [ map { $self->_read_reply } 1 .. $rest ];
	}
	croak "redis: unexpected reply type '$type'";
}

sub _which
{
	my ($name) = @_;
	for my $d (split /:/, $ENV{PATH} // '')
	{
		return "$d/$name" if -x "$d/$name";
	}
	return;
}

sub _slurp
{
	my ($file) = @_;
	open my $fh, '<', $file or return '';
	local $/;
	return <$fh>;
}

END
{
	local $?;    # the script's exit status, which waitpid would overwrite
	for my $r (@running)
	{
		next unless $r->{pid};
		kill 'CONT', $r->{pid};
		kill 'TERM', $r->{pid};
		waitpid($r->{pid}, 0);
	}
}

1;

# A throwaway nats-server with JetStream for the Perl TAP tests: it runs as the current user on
# a free loopback port, with its config, store and log in a temp dir. The test talks to it
# through test/tools/nats_tool.c (built here against libnats: the `nats` CLI is not packaged).
#
#   my $nats = Statesman::Nats->start(user => 'u', password => 'pw');   # or token => 't'
#   $nats->add_stream('ORDERS', 'statesman.orders', 120);     # name, subject, duplicate window (s)
#   $nats->count('ORDERS');                                   # messages in the stream
#   $nats->messages('ORDERS');    # [ { seq, subject, id, headers => {…}, data }, … ] in order
#   $nats->freeze; $nats->thaw;                               # SIGSTOP / SIGCONT
#   $nats->stop; $nats->start_again;                          # same port, same store
#   $nats->url                                                # nats://[user:pw@]127.0.0.1:port
#   $nats->delete_stream('ORDERS');
#   my ($n, $secs, $rate) = $nats->bench_publish('subject', 100000, 400, 8192);   # nats_tool bench
#   my $tool = Statesman::Nats::tool();                       # the built nats_tool (make bench)
package Statesman::Nats;

use strict;
use warnings;

use Carp;
use File::Spec;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time usleep);

my $server_bin = '/usr/sbin/nats-server';
my @running;    # every started server, stopped at exit whatever happened
my $tool;       # the built nats_tool

# test/tools/nats_tool.c: beside this module's test/t/Statesman/ in the source tree, or in the
# copy of make bench (bench's scratch dir holds Statesman/ and tools/ side by side).
sub _tool_source
{
	my $here = File::Spec->rel2abs(__FILE__);
	$here =~ s{/[^/]+\z}{};    # …/Statesman
	for my $c ("$here/../../tools/nats_tool.c", "$here/../tools/nats_tool.c")
	{
		return $c if -f $c;
	}
	croak "cannot find nats_tool.c near $here";
}

# Builds test/tools/nats_tool.c once per process, into a temp dir; returns its path.
sub tool
{
	return $tool if $tool;
	my $src = _tool_source();
	my $out = File::Spec->catfile(PostgreSQL::Test::Utils::tempdir('nats_tool'), 'nats_tool');
	my $cc  = $ENV{CC} // 'cc';
	system($cc, '-O2', '-o', $out, $src, '-lnats') == 0
	  or croak "cannot build $src with $cc (install libnats-dev)";
	return $tool = $out;
}

# Starts a server. Options: user + password, or token (the server then requires them).
sub start
{
	my ($class, %opts) = @_;
	my $bin = -x $server_bin ? $server_bin : _which('nats-server');
	croak "nats-server not found (install the nats-server package)" unless $bin;
	my $self = bless {
		bin      => $bin,
		dir      => PostgreSQL::Test::Utils::tempdir('nats'),
		port     => PostgreSQL::Test::Cluster::get_free_port(),
		user     => $opts{user},
		password => $opts{password},
		token    => $opts{token},
	}, $class;
	$self->{logfile} = File::Spec->catfile($self->{dir}, 'nats.log');
	$self->{conf}    = File::Spec->catfile($self->{dir}, 'nats.conf');
	my $store = File::Spec->catfile($self->{dir}, 'store');
	open my $fh, '>', $self->{conf} or croak "cannot write $self->{conf}: $!";
	print $fh "listen: \"127.0.0.1:$self->{port}\"\n";
	print $fh "jetstream { store_dir: \"$store\" }\n";
	print $fh "authorization { user: \"$opts{user}\", password: \"$opts{password}\" }\n" if defined $opts{user};
	print $fh "authorization { token: \"$opts{token}\" }\n" if defined $opts{token};
	close $fh;
	tool();
	push @running, $self;
	$self->start_again;
	return $self;
}

sub port    { return $_[0]->{port}; }
sub pid     { return $_[0]->{pid}; }
sub logfile { return $_[0]->{logfile}; }

# The URL with the server's credentials (for the test's own client).
sub url
{
	my ($self) = @_;
	my $auth =
	    defined $self->{user}  ? "$self->{user}:$self->{password}\@"
	  : defined $self->{token} ? "$self->{token}\@"
	  :                          '';
	return "nats://${auth}127.0.0.1:$self->{port}";
}

# (Re)starts the server on its port, with its store; waits until JetStream answers.
sub start_again
{
	my ($self) = @_;
	croak 'nats-server is already running' if $self->{pid};
	my $pid = fork // croak "cannot fork: $!";
	if ($pid == 0)
	{
		open STDIN,  '<', '/dev/null';
		open STDOUT, '>>', $self->{logfile};
		open STDERR, '>&', \*STDOUT;
		exec $self->{bin}, '-c', $self->{conf} or POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	my $deadline = time + 30;
	until (_answers($self->{port}) && eval { $self->_tool('account') ; 1 })
	{
		if (waitpid($pid, WNOHANG) == $pid)
		{
			delete $self->{pid};
			croak "nats-server exited (status $?); log:\n" . _slurp($self->{logfile});
		}
		croak "nats-server does not answer on port $self->{port}\nlog:\n" . _slurp($self->{logfile})
		  if time > $deadline;
		usleep(50_000);
	}
	return $self;
}

# Stops the server cleanly (SIGTERM) and waits until the process is gone.
sub stop
{
	my ($self) = @_;
	my $pid = $self->{pid} or return;
	kill 'CONT', $pid;
	kill 'TERM', $pid;
	my $deadline = time + 30;
	usleep(10_000) while waitpid($pid, WNOHANG) == 0 && time < $deadline;
	croak "nats-server (pid $pid) did not stop" if kill 0, $pid;
	delete $self->{pid};
	return;
}

# SIGSTOP: connections are still accepted by the kernel, nothing is answered until thaw.
sub freeze { kill('STOP', $_[0]->{pid}) or croak "cannot SIGSTOP nats-server: $!"; return; }
sub thaw   { kill('CONT', $_[0]->{pid}) or croak "cannot SIGCONT nats-server: $!"; return; }

# A file-backed stream capturing $subject, with a duplicate window of $window seconds
# (the server's default, 2 minutes, when undef).
sub add_stream
{
	my ($self, $name, $subject, $window) = @_;
	$self->_tool('add-stream', $name, $subject, defined $window ? ($window) : ());
	return;
}

sub delete_stream { my ($self, $name) = @_; $self->_tool('delete-stream', $name); return; }

# nats_tool's own JetStream publisher (make bench): $count messages of $size bytes to $subject,
# each with a Nats-Msg-Id, $window acks in flight; returns (count, seconds, rate).
sub bench_publish
{
	my ($self, $subject, $count, $size, $window) = @_;
	return split ' ', $self->_tool('bench', $subject, $count, $size, $window);
}

sub count { my ($self, $name) = @_; my $n = $self->_tool('count', $name); chomp $n; return $n; }

# Every message of a stream, in sequence order.
sub messages
{
	my ($self, $name) = @_;
	my @out;
	for my $line (split /\n/, $self->_tool('dump', $name))
	{
		my ($seq, $subject, $id, $headers, $data) = split /\t/, $line, 5;
		my %h = map { split /=/, $_, 2 } grep { length } split /;/, $headers // '';
		push @out, { seq => $seq, subject => $subject, id => $id, headers => \%h, data => pack('H*', $data // '') };
	}
	return \@out;
}

# Runs nats_tool against this server; dies with its message when it fails.
sub _tool
{
	my ($self, @args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ tool(), $self->url, @args ], '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	croak "nats_tool @args: $err" unless $ok;
	return $out;
}

sub _answers
{
	my ($port) = @_;
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 2)
	  or return 0;
	setsockopt($sock, Socket::SOL_SOCKET(), Socket::SO_RCVTIMEO(), pack('l!l!', 2, 0));
	my $line = readline($sock);
	return defined $line && $line =~ /^INFO /;
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
	for my $n (@running)
	{
		next unless $n->{pid};
		kill 'CONT', $n->{pid};
		kill 'TERM', $n->{pid};
		waitpid($n->{pid}, 0);
	}
}

1;

# A throwaway rabbitmq-server node for the Perl TAP tests: a node of its own (its own name,
# Mnesia directory, logs, Erlang cookie and epmd, all in a temp dir) on free loopback ports,
# run as the current user (root included). The test declares queues and reads messages back
# through test/tools/rabbitmq_tool.c (built here against rabbitmq-c), and manages users and
# vhosts with rabbitmqctl against this node only.
#
#   my $mq = Statesman::RabbitMQ->start;                     # about 5 s
#   $mq->add_user('shop', 'pw', 'vhost');                    # a vhost with a user allowed everything
#   $mq->queue('orders', 'vhost');                           # a durable queue (default exchange binds it)
#   $mq->exchange('ex', 'topic', 'vhost'); $mq->bind('orders', 'ex', 'sm.orders', 'vhost');
#   $mq->count('orders', 'vhost'); $mq->purge('orders', 'vhost'); $mq->delete_queue('orders', 'vhost');
#   $mq->messages('orders', 'vhost');   # [ { key, id, content_type, delivery_mode, headers => {…}, data }, … ]
#   $mq->stop; $mq->start_again;        # same port, same node, same Mnesia (durable queues stay)
#   my ($n, $secs, $rate) = $mq->bench_publish('queue', 100000, 400, 8192, 'vhost');
#   $mq->port, $mq->pid (the broker's OS process)
package Statesman::RabbitMQ;

use strict;
use warnings;

use Carp;
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time usleep);

my $server = '/usr/lib/rabbitmq/bin/rabbitmq-server';
my $ctl    = '/usr/lib/rabbitmq/bin/rabbitmqctl';
my @running;    # every started node, stopped at exit whatever happened
my $tool;       # the built rabbitmq_tool
my $serial = 0;

sub _tool_source
{
	my $here = File::Spec->rel2abs(__FILE__);
	$here =~ s{/[^/]+\z}{};    # …/Statesman
	for my $c ("$here/../../tools/rabbitmq_tool.c", "$here/../tools/rabbitmq_tool.c")
	{
		return $c if -f $c;
	}
	croak "cannot find rabbitmq_tool.c near $here";
}

# Builds test/tools/rabbitmq_tool.c once per process, into a temp dir; returns its path.
sub tool
{
	return $tool if $tool;
	my $src = _tool_source();
	my $out = File::Spec->catfile(PostgreSQL::Test::Utils::tempdir('rabbitmq_tool'), 'rabbitmq_tool');
	my $cc  = $ENV{CC} // 'cc';
	system($cc, '-O2', '-o', $out, $src, '-lrabbitmq') == 0
	  or croak "cannot build $src with $cc (install librabbitmq-dev)";
	return $tool = $out;
}

sub start
{
	my ($class) = @_;
	croak "rabbitmq-server not found (install the rabbitmq-server package)" unless -x $server;
	my $dir  = PostgreSQL::Test::Utils::tempdir('rabbitmq');
	my $self = bless {
		dir       => $dir,
		port      => PostgreSQL::Test::Cluster::get_free_port(),
		dist_port => PostgreSQL::Test::Cluster::get_free_port(),
		epmd_port => PostgreSQL::Test::Cluster::get_free_port(),
		node      => 'statesman-' . $$ . '-' . ++$serial . '@localhost',
	}, $class;
	open my $fh, '>', "$dir/enabled_plugins" or croak "cannot write $dir/enabled_plugins: $!";
	print $fh "[].\n";
	close $fh;
	# The default user guest/guest (loopback only), a small disk limit, no telemetry of its own.
	open $fh, '>', "$dir/rabbitmq.conf" or croak "cannot write $dir/rabbitmq.conf: $!";
	print $fh "listeners.tcp.default = 127.0.0.1:$self->{port}\n";
	print $fh "disk_free_limit.absolute = 50MB\n";
	print $fh "log.console = false\nlog.file.level = warning\n";
	close $fh;
	$self->{env} = {
		HOME                                => $dir,
		RABBITMQ_MNESIA_BASE                => "$dir/mnesia",
		RABBITMQ_LOG_BASE                   => "$dir/log",
		RABBITMQ_NODENAME                   => $self->{node},
		RABBITMQ_NODE_IP_ADDRESS            => '127.0.0.1',
		RABBITMQ_NODE_PORT                  => $self->{port},
		RABBITMQ_DIST_PORT                  => $self->{dist_port},
		RABBITMQ_ENABLED_PLUGINS_FILE       => "$dir/enabled_plugins",
		RABBITMQ_CONFIG_FILE                => "$dir/rabbitmq",
		RABBITMQ_PID_FILE                   => "$dir/rabbitmq.pid",
		RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS => '-kernel inet_dist_use_interface {127,0,0,1}',
		ERL_EPMD_PORT                       => $self->{epmd_port},
		ERL_EPMD_ADDRESS                    => '127.0.0.1',
	};
	tool();
	push @running, $self;
	$self->start_again;
	return $self;
}

sub port    { return $_[0]->{port}; }
sub pid     { return $_[0]->{beam}; }
sub node    { return $_[0]->{node}; }
sub logfile { return "$_[0]->{dir}/log/$_[0]->{node}.log"; }

# (Re)starts the node on its port, with its Mnesia directory; waits until it takes logins.
sub start_again
{
	my ($self) = @_;
	croak 'rabbitmq-server is already running' if $self->{pid};
	unlink "$self->{dir}/rabbitmq.pid";
	my $pid = fork // croak "cannot fork: $!";
	if ($pid == 0)
	{
		%ENV = (%ENV, %{ $self->{env} });
		chdir $self->{dir};
		open STDIN,  '<',  '/dev/null';
		open STDOUT, '>>', "$self->{dir}/server.out";
		open STDERR, '>&', \*STDOUT;
		# Its own process group: the stop reaches the wrapper script and the VM.
		POSIX::setsid();
		exec $server or POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	# The Erlang VM's boot has taken over 60 s on a loaded 2-core machine (after a bench's
	# other parts): a late answer is waited for, an exit is reported at once.
	my $deadline = time + 180;
	until (eval { $self->_tool('/', 'guest', 'guest', 'ping'); 1 })
	{
		if (waitpid($pid, WNOHANG) == $pid)
		{
			delete $self->{pid};
			croak "rabbitmq-server exited (status $?); output:\n" . _slurp("$self->{dir}/server.out");
		}
		croak "rabbitmq-server does not answer on port $self->{port}\noutput:\n" . _slurp("$self->{dir}/server.out")
		  if time > $deadline;
		usleep(100_000);
	}
	($self->{beam}) = _slurp("$self->{dir}/rabbitmq.pid") =~ /(\d+)/;
	return $self;
}

# Stops the node cleanly (SIGTERM to the wrapper, which stops the VM) and waits until it is gone.
sub stop
{
	my ($self) = @_;
	my $pid = $self->{pid} or return;
	kill 'TERM', $pid;
	my $deadline = time + 60;
	usleep(20_000) while waitpid($pid, WNOHANG) == 0 && time < $deadline;
	my $beam = $self->{beam};
	usleep(20_000) while $beam && kill(0, $beam) && time < $deadline;
	croak "rabbitmq-server (pid $pid, VM $beam) did not stop" if kill(0, $pid) || ($beam && kill(0, $beam));
	delete $self->{pid};
	delete $self->{beam};
	return;
}

# The node stopped for good, and its epmd too.
sub shutdown
{
	my ($self) = @_;
	$self->stop;
	local $ENV{ERL_EPMD_PORT} = $self->{epmd_port};
	system('epmd', '-port', $self->{epmd_port}, '-kill');
	return;
}

sub ctl
{
	my ($self, @args) = @_;
	local %ENV = (%ENV, %{ $self->{env} });
	my ($out, $err) = ('', '');
	IPC::Run::run([ $ctl, '-n', $self->{node}, @args ], '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or croak "rabbitmqctl @args: $err$out";
	return $out;
}

# A vhost (created when missing) and a user with every permission on it.
sub add_user
{
	my ($self, $user, $password, $vhost) = @_;
	$self->ctl('add_vhost', $vhost) unless $vhost eq '/';
	$self->ctl('add_user', $user, $password);
	$self->ctl('set_permissions', '-p', $vhost, $user, '.*', '.*', '.*');
	$self->{users}{$vhost} = [ $user, $password ];
	return;
}

sub queue    { my ($self, $q, $vh) = @_; $self->_as($vh, 'queue', $q); return; }
sub purge    { my ($self, $q, $vh) = @_; $self->_as($vh, 'purge', $q); return; }
sub delete_queue { my ($self, $q, $vh) = @_; $self->_as($vh, 'delete', $q); return; }
sub exchange { my ($self, $x, $type, $vh) = @_; $self->_as($vh, 'exchange', $x, $type); return; }
sub bind     { my ($self, $q, $x, $key, $vh) = @_; $self->_as($vh, 'bind', $q, $x, $key); return; }

sub count
{
	my ($self, $q, $vh) = @_;
	my $n = $self->_as($vh, 'count', $q);
	chomp $n;
	return $n;
}

# Every message of a queue, in queue order (left in the queue).
sub messages
{
	my ($self, $q, $vh) = @_;
	my @out;
	for my $line (split /\n/, $self->_as($vh, 'dump', $q))
	{
		my ($key, $id, $ct, $mode, $headers, $data) = split /\t/, $line, 6;
		my %h = map { split /=/, $_, 2 } grep { length } split /;/, $headers // '';
		push @out,
		  {
			key           => $key,
			id            => $id,
			content_type  => $ct,
			delivery_mode => $mode,
			headers       => \%h,
			data          => pack('H*', $data // '')
		  };
	}
	return \@out;
}

# rabbitmq_tool's own publisher with confirms (make bench): $count messages of $size bytes to
# the queue $key by the default exchange, $window confirms outstanding; (count, seconds, rate).
sub bench_publish
{
	my ($self, $key, $count, $size, $window, $vh) = @_;
	return split ' ', $self->_as($vh, 'bench', $key, $count, $size, $window);
}

# rabbitmq_tool as the user of $vhost (guest on "/", unless a user was added there).
sub _as
{
	my ($self, $vhost, @args) = @_;
	$vhost //= '/';
	my ($user, $password) = @{ $self->{users}{$vhost} // [ 'guest', 'guest' ] };
	return $self->_tool($vhost, $user, $password, @args);
}

sub _tool
{
	my ($self, $vhost, $user, $password, @args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ tool(), '127.0.0.1', $self->{port}, $vhost, $user, $password, @args ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	croak "rabbitmq_tool @args: $err" unless $ok;
	return $out;
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
	my $status = $?;
	for my $n (@running)
	{
		eval { $n->shutdown; 1 } or do {
			kill 'KILL', $n->{beam} if $n->{beam};
			kill 'KILL', $n->{pid}  if $n->{pid};
			system('epmd', '-port', $n->{epmd_port}, '-kill');
		};
	}
	$? = $status;
}

1;

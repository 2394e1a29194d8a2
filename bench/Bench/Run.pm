# One benchmark run's session: the throwaway cluster (PostgreSQL::Test::Cluster, started by
# Statesman::Node::statesman_node), psql and pgbench against it, the scratch files, progress
# lines, and the CPU accounting of the append runs.
#
#   my $b = Bench::Run->new($settings, huge_pages => 'on');
#   $b->say('bench: …');                          # a progress line on stderr
#   my $v = $b->q('SELECT 1');                    # one value (or lines), dies on an error
#   my @f = $b->row('SELECT 1, 2');               # the fields of one row
#   my $r = $b->pgbench(file => …, clients => 2, secs => 15, sync => 'on');
#   $b->fail('message');                          # says it, exits 1 (clusters are stopped)
#
# The report goes to the original stdout ($b->out), progress to the original stderr:
# PostgreSQL::Test::Utils sends STDOUT and STDERR to its log file, where the clusters' own
# notes go.
package Bench::Run;

use strict;
use warnings;
use utf8;

use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Statesman::Node qw(statesman_node wait_until);
use Time::HiRes qw(time usleep);

our ($OUT, $ERR);    # the original stdout and stderr, saved by bench/bench.pl before INIT

sub new
{
	my ($class, $s, %opts) = @_;
	my $self = bless {
		s    => $s,
		dir  => $PostgreSQL::Test::Utils::tmp_check,
		hz   => POSIX::sysconf(POSIX::_SC_CLK_TCK()),
		ncpu => _nproc(),
	}, $class;
	return $self;
}

sub s   { return $_[0]->{s}; }
sub dir { return $_[0]->{dir}; }
sub node { return $_[0]->{node}; }

sub say
{
	my ($self, @msg) = @_;
	binmode($ERR, ':encoding(UTF-8)') unless $self->{err_utf8}++;
	print {$ERR} join('', @msg), "\n";
	return;
}

# The markdown report, on the original stdout.
sub out
{
	my ($self, @lines) = @_;
	binmode($OUT, ':encoding(UTF-8)') unless $self->{out_utf8}++;
	print {$OUT} map { "$_\n" } @lines;
	return;
}

sub fail
{
	my ($self, @msg) = @_;
	$self->say(@msg);
	exit 1;
}

sub _nproc
{
	my $n = `nproc 2>/dev/null`;
	chomp $n;
	return $n || 1;
}

# Starts a cluster named $name: statesman preloaded (Statesman::Node), the settings of the
# bench instead of the test defaults (fsync on, WAL as a server has it, no statement log), a
# TCP listener on loopback besides the socket, and @settings (postgresql.conf lines).
sub start_cluster
{
	my ($self, $name, @settings) = @_;
	# Where PostgreSQL::Test::Cluster logs the server: shown when the start fails (failed_start).
	$self->{starting} = "$PostgreSQL::Test::Utils::log_path/bench_$name.log";
	my $node = statesman_node(
		$name,
		join('', map { "$_\n" } "listen_addresses = '127.0.0.1'", 'fsync = on',
			'wal_level = replica', 'max_wal_senders = 10', 'log_statement = none',
			@settings),
		extra => [ '-U', 'postgres' ]);
	delete $self->{starting};
	$self->warm_shared_memory($node);
	return $node;
}

# Touches every page of the server's shared buffers once, as a server in service has long
# since done: a throwaway unlogged table as large as shared_buffers, written through the buffers
# (an INSERT, not a bulk write with its small ring) and dropped. On a fresh server the first
# touch of each page of shared memory makes the kernel zero it; on this virtual machine that cost
# about a fifth of a `table` sink drain's CPU (perf: clear_page under hugetlb_fault), paid by
# whichever workload first wrote into new buffers, so the figures depended on the order of the
# parts and the runs. Called after every start and restart; here it took 16-19 s for 4 GB and
# 11 s for 1 GB.
sub warm_shared_memory
{
	my ($self, $node) = @_;
	my $t0 = time;
	$self->q(<<'SQL', node => $node);
CREATE UNLOGGED TABLE public.bench_warm (x text);
ALTER TABLE public.bench_warm ALTER COLUMN x SET STORAGE PLAIN;
INSERT INTO public.bench_warm
  SELECT repeat('x', 3900)    -- two rows to a page, as many pages as there are buffers
    FROM generate_series(1, 2 * (SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'shared_buffers'));
DROP TABLE public.bench_warm
SQL
	$self->say(sprintf('  %s: shared buffers (%s) touched once in %.1f s', $node->name,
		$self->q('SHOW shared_buffers', node => $node), time - $t0));
	return;
}

# The end of the log of a server that did not start, if one did not (for the exit).
sub failed_start
{
	my ($self) = @_;
	my $log = $self->{starting} or return '';
	return '' unless -e $log;
	my @l = split /\n/, PostgreSQL::Test::Utils::slurp_file($log);
	@l = @l[ -20 .. -1 ] if @l > 20;
	return join("\n", "bench: the server did not start; the end of its log:", @l) . "\n";
}

# The bench's own cluster; the environment of psql and pgbench points at it.
sub start_main
{
	my ($self, @settings) = @_;
	my $node = $self->start_cluster('bench', @settings);
	$self->{node} = $node;
	$ENV{PGHOST}     = $node->host;
	$ENV{PGPORT}     = $node->port;
	$ENV{PGUSER}     = 'postgres';
	$ENV{PGDATABASE} = 'postgres';
	return $node;
}

# Runs SQL (statements separated by ";\n", each its own transaction) with psql against $node
# (default: the bench's cluster); returns stdout without the last newline. Fields are
# separated by '|'. %o: node, options (PGOPTIONS), notices (print NOTICE lines live, without
# their prefix, as progress lines).
sub q
{
	my ($self, $sql, %o) = @_;
	my $node = $o{node} // $self->{node};
	my ($out, $err) = ('', '');
	my $errbuf = '';
	my $errsub = sub {
		my ($t) = @_;
		$err .= $t;
		return unless $o{notices};
		$errbuf .= $t;
		while ($errbuf =~ s/^(.*?)\n//)
		{
			(my $l = $1) =~ s/^NOTICE:  //;
			print {$ERR} "$l\n";
		}
	};
	local $ENV{PGOPTIONS} = $o{options} if defined $o{options};
	my @cmd = ('psql', '-X', '-q', '-t', '-A', '-v', 'ON_ERROR_STOP=1', '-d',
		$node->connstr('postgres'));
	push @cmd, '-f', $o{file} if defined $o{file};
	my $ok = IPC::Run::run(\@cmd, '<', defined $o{file} ? \'' : \"$sql\n", '>', \$out,
		'2>', $errsub);
	unless ($ok)
	{
		$self->fail("bench: psql failed:\n$err"
			  . (defined $o{file} ? "in $o{file}" : "for: $sql"));
	}
	print {$ERR} $err if $err ne '' && !$o{notices} && !$o{quiet};
	chomp $out;
	return $out;
}

# The fields of the one row $sql returns.
sub row
{
	my ($self, $sql, %o) = @_;
	return split /\|/, $self->q($sql, %o), -1;
}

# Writes $content to $name in the scratch directory; returns the path.
sub file
{
	my ($self, $name, $content) = @_;
	my $path = "$self->{dir}/$name";
	open my $fh, '>', $path or die "cannot write $path: $!";
	print $fh $content;
	close $fh;
	return $path;
}

# Polls $sql (returning t) every 100 ms; after $timeout s: says so, shows the server log's end
# and stops the bench.
sub wait_for
{
	my ($self, $sql, $timeout, $what) = @_;
	return if defined wait_until($self->{node}, $sql, $timeout);
	$self->say("bench: timed out after $timeout s waiting for $what");
	$self->say($self->log_tail(20));
	exit 1;
}

sub log_tail
{
	my ($self, $n) = @_;
	my @l = split /\n/, PostgreSQL::Test::Utils::slurp_file($self->{node}->logfile);
	@l = @l[ -$n .. -1 ] if @l > $n;
	return join("\n", @l);
}

sub restart
{
	my ($self) = @_;
	$self->{node}->restart;
	$self->warm_shared_memory($self->{node});
	return;
}

# ---- pgbench ----

sub _pgbench_cmd
{
	my (%a) = @_;
	my @cmd = ('pgbench', '-n', '-M', 'prepared', '-c', $a{clients}, '-j', $a{clients});
	push @cmd, '-R', $a{rate} if $a{rate};
	push @cmd, defined $a{transactions} ? ('-t', $a{transactions}) : ('-T', $a{secs});
	push @cmd, '-f', $a{file};
	return @cmd;
}

# The figures of a pgbench run's output: tps (without connections), transactions, the
# average time a transaction took (latency less the schedule lag of -R, "%.2f"), the schedule
# lag "avg max".
sub parse_pgbench
{
	my ($out) = @_;
	my %r;
	($r{tps}) = $out =~ /^tps = ([0-9.]*) \(without initial connection time\)$/m;
	($r{ntx}) = $out =~ /^number of transactions actually processed: ([0-9]*)/m;
	my ($l) = $out =~ /^latency average = (\S+)/m;
	my ($g, $gmax) = $out =~ /^rate limit schedule lag: avg (\S+) \(max (\S+)\)/m;
	$r{txlat} = sprintf('%.2f', $l - ($g // 0)) if defined $l;
	$r{sched_lag} = "$g $gmax" if defined $g;
	$r{failed} = $out =~ /^number of failed transactions: [1-9]/m;
	$r{out} = $out;
	return \%r;
}

# Runs pgbench to its end: %a file, clients, secs or transactions, rate (-R), sync
# (synchronous_commit of its sessions, via PGOPTIONS), what (for the error message),
# tolerate (a failure is ignored: the warm-ups). Stops the bench when it fails.
sub pgbench
{
	my ($self, %a) = @_;
	local $ENV{PGOPTIONS} = "-c synchronous_commit=$a{sync}" if defined $a{sync};
	my $out = '';
	my $ok = IPC::Run::run([ _pgbench_cmd(%a) ], '<', \'', '>&', \$out);
	return parse_pgbench($out) if $a{tolerate};
	$self->fail("bench: pgbench failed ($a{what}):\n$out") unless $ok;
	$self->fail("bench: failed transactions ($a{what}):\n$out")
	  if parse_pgbench($out)->{failed} && $a{check_failed};
	return parse_pgbench($out);
}

# Starts @cmd in the background, stdin from /dev/null, stdout and stderr into $log, with
# PGOPTIONS $options when given; returns a handle for running and reap.
sub spawn
{
	my ($self, $log, $options, @cmd) = @_;
	my $pid = fork // die "cannot fork: $!";
	if ($pid == 0)
	{
		$ENV{PGOPTIONS} = $options if defined $options;
		open STDIN,  '<', '/dev/null';
		open STDOUT, '>', $log;
		open STDERR, '>&', \*STDOUT;
		exec @cmd or POSIX::_exit(127);
	}
	return { pid => $pid, log => $log };
}

# True while a spawned process runs (it is reaped when it has ended).
sub running
{
	my ($self, $p) = @_;
	return 0 if defined $p->{status};
	my $r = waitpid($p->{pid}, POSIX::WNOHANG());
	return 1 if $r == 0;
	$p->{status} = $r == $p->{pid} ? $? : -1;
	return 0;
}

# Waits for a spawned process; true when it exited with 0.
sub reap
{
	my ($self, $p) = @_;
	if (!defined $p->{status})
	{
		my $r = waitpid($p->{pid}, 0);
		$p->{status} = $r == $p->{pid} ? $? : -1;
	}
	return $p->{status} == 0;
}

# Starts pgbench in the background, its output into $log; returns a handle for running and
# pgbench_wait.
sub pgbench_start
{
	my ($self, $log, %a) = @_;
	return $self->spawn($log, defined $a{sync} ? "-c synchronous_commit=$a{sync}" : undef,
		_pgbench_cmd(%a));
}

# Waits for a background pgbench; its parsed output, or undef when it failed.
sub pgbench_wait
{
	my ($self, $p) = @_;
	my $ok = $self->reap($p);
	return undef unless $ok;
	return parse_pgbench(PostgreSQL::Test::Utils::slurp_file($p->{log}));
}

# ---- CPU accounting ----

# CPU ticks the whole machine spent busy, the ticks of this cluster (the postmaster, its live
# children and the children it has reaped) and of this program and its own children (pgbench,
# psql), and the wall clock.
sub snapshot
{
	my ($self) = @_;
	my $pm = (split /\n/, PostgreSQL::Test::Utils::slurp_file($self->{node}->data_dir . '/postmaster.pid'))[0];
	my $cluster = 0;
	opendir my $d, '/proc' or die "cannot read /proc: $!";
	for my $pid (grep { /^[0-9]+$/ } readdir $d)
	{
		open my $fh, '<', "/proc/$pid/stat" or next;
		my $line = <$fh>;
		close $fh;
		next unless defined $line;
		$line =~ s/^.*\) //s;
		my @f = (undef, split ' ', $line);    # f[1] = state, f[2] = ppid, f[12..15] = times
		if ($pid == $pm) { $cluster += $f[12] + $f[13] + $f[14] + $f[15]; }
		elsif ($f[2] == $pm) { $cluster += $f[12] + $f[13]; }
	}
	closedir $d;
	my ($u, $sy, $cu, $cs) = times;
	my $kids = sprintf('%.0f', ($u + $sy + $cu + $cs) * $self->{hz});
	open my $st, '<', '/proc/stat' or die "cannot read /proc/stat: $!";
	my $busy;
	while (<$st>)
	{
		if (/^cpu /) { my @c = split; $busy = $c[1] + $c[2] + $c[3] + $c[6] + $c[7] + $c[8]; last; }
	}
	close $st;
	return [ $busy, $cluster + $kids, time ];
}

# % of the machine's CPU used by other processes between two snapshots.
sub others_pct
{
	my ($self, $a, $b) = @_;
	my $x = (($b->[0] - $a->[0]) - ($b->[1] - $a->[1]))
	  / (($b->[2] - $a->[2]) * $self->{hz} * $self->{ncpu}) * 100;
	return sprintf('%.0f', $x < 0 ? 0 : $x);
}

# µs of CPU (ours: cluster and our children) per transaction between two snapshots.
sub cpu_per_tx
{
	my ($self, $a, $b, $n) = @_;
	return sprintf('%.0f', ($b->[1] - $a->[1]) / $self->{hz} * 1e6 / $n);
}

1;

# A throwaway webhook receiver for the Perl TAP tests and the bench of the `webhook` sink: it runs
# test/tools/webhook_receiver.py (python3's http.server, HTTP/1.1 keep-alive) as the current user
# on a free loopback port, verifying each request's Standard Webhooks signature itself and
# recording every request in a JSON-lines log in a temp dir.
#
#   my $hook = Statesman::Webhook->start(secret => 'whsec_…');    # or a plain secret, or none
#   my $hook = Statesman::Webhook->start(tls => 1);                # https with a self-signed cert
#   $hook->url('/orders');                  # http://127.0.0.1:port/orders
#   $hook->control(fail_every => 3);        # see the receiver: fail_every, hang_every + hang_s,
#                                           #   status + body, retry_after + retry_status + retry_count
#   $hook->requests;                        # [ { n, t, id, timestamp, signature_ok, ids, body, status, peer }, … ]
#   $hook->stats;                           # { requests, accepted, messages, bad_signatures }
#   $hook->stop;
package Statesman::Webhook;

use strict;
use warnings;

use Carp;
use File::Spec;
use IO::Socket::INET;
use JSON::PP;
use PostgreSQL::Test::Utils;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time usleep);

my @running;    # every started receiver, stopped at exit whatever happened

# test/tools/webhook_receiver.py: beside this module's test/t/Statesman/ in the source tree, or
# in the copy of make bench (bench's scratch dir holds Statesman/ and tools/ side by side).
sub receiver_script
{
	my $here = File::Spec->rel2abs(__FILE__);
	$here =~ s{/[^/]+\z}{};    # …/Statesman
	for my $c ("$here/../../tools/webhook_receiver.py", "$here/../tools/webhook_receiver.py")
	{
		return $c if -f $c;
	}
	croak "cannot find webhook_receiver.py near $here";
}

# Starts a receiver. Options: secret (verified on every request; none: requests must be
# unsigned), tls => 1 (https, a self-signed certificate for 127.0.0.1 made with openssl),
# no_bodies => 1 (the log keeps ids only: the bench), log => 0 (no log at all), port => N (that
# port instead of a free one: a receiver started again where a stopped one was).
sub start
{
	my ($class, %opts) = @_;
	my $self = bless { dir => PostgreSQL::Test::Utils::tempdir('webhook'), %opts }, $class;
	$self->{logfile}  = File::Spec->catfile($self->{dir}, 'requests.jsonl');
	$self->{portfile} = File::Spec->catfile($self->{dir}, 'port');
	$self->{errfile}  = File::Spec->catfile($self->{dir}, 'receiver.err');
	my @cmd = ('python3', receiver_script(), '--port-file', $self->{portfile});
	push @cmd, '--log', $self->{logfile} unless defined $opts{log} && !$opts{log};
	push @cmd, '--secret', $opts{secret} if defined $opts{secret};
	push @cmd, '--no-bodies' if $opts{no_bodies};
	push @cmd, '--port', $opts{port} if $opts{port};
	if ($opts{tls})
	{
		my ($cert, $key) = map { File::Spec->catfile($self->{dir}, $_) } qw(cert.pem key.pem);
		system("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
			  . "-addext subjectAltName=IP:127.0.0.1 -keyout '$key' -out '$cert' >/dev/null 2>&1") == 0
		  or croak 'cannot make a self-signed certificate with openssl';
		push @cmd, '--tls', $cert, $key;
	}
	my $pid = fork // croak "cannot fork: $!";
	if ($pid == 0)
	{
		open STDIN,  '<', '/dev/null';
		open STDOUT, '>>', $self->{errfile};
		open STDERR, '>&', \*STDOUT;
		exec @cmd or POSIX::_exit(127);
	}
	$self->{pid} = $pid;
	push @running, $self;
	my $deadline = time + 30;
	until (-s $self->{portfile})
	{
		if (waitpid($pid, WNOHANG) == $pid)
		{
			delete $self->{pid};
			croak "webhook_receiver.py exited (status $?):\n" . _slurp($self->{errfile});
		}
		croak 'webhook_receiver.py did not start' if time > $deadline;
		usleep(20_000);
	}
	$self->{port} = _slurp($self->{portfile}) + 0;
	return $self;
}

sub port { return $_[0]->{port}; }
sub pid  { return $_[0]->{pid}; }

sub url
{
	my ($self, $path) = @_;
	return ($self->{tls} ? 'https' : 'http') . "://127.0.0.1:$self->{port}" . ($path // '/hook');
}

# One request to the receiver itself (plain HTTP/1.0 over a socket; not for the tls receiver).
sub _call
{
	my ($self, $method, $path, $body) = @_;
	croak 'control and stats need the plain http receiver' if $self->{tls};
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port}, Proto => 'tcp', Timeout => 10)
	  or croak "cannot connect to the receiver: $!";
	$body //= '';
	print $sock "$method $path HTTP/1.0\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
	local $/;
	my $answer = <$sock>;
	close $sock;
	my ($head, $content) = split /\r\n\r\n/, $answer // '', 2;
	croak "the receiver answered: " . ($head // 'nothing') unless ($head // '') =~ m{^HTTP/1\.\d 200};
	return $content;
}

# Sets the receiver's behaviour (see webhook_receiver.py).
sub control
{
	my ($self, %state) = @_;
	$self->_call('POST', '/_control', encode_json(\%state));
	return;
}

sub stats { my ($self) = @_; return decode_json($self->_call('GET', '/_stats')); }

# Every request recorded so far, in arrival order.
sub requests
{
	my ($self) = @_;
	my @r;
	open my $fh, '<', $self->{logfile} or return [];
	while (my $line = <$fh>)
	{
		next unless $line =~ /\n\z/;    # a line being written
		push @r, decode_json($line);
	}
	return \@r;
}

sub stop
{
	my ($self) = @_;
	my $pid = $self->{pid} or return;
	kill 'TERM', $pid;
	my $deadline = time + 10;
	usleep(10_000) while waitpid($pid, WNOHANG) == 0 && time < $deadline;
	kill 'KILL', $pid if kill 0, $pid;
	waitpid($pid, 0);
	delete $self->{pid};
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
	local $?;    # the test's exit status, which waitpid would overwrite
	$_->stop for grep { $_->{pid} } @running;
}

1;

# A psql session kept open across statements, for the Perl TAP tests: stdin and
# stdout through pipes, each statement on its own (autocommit outside BEGIN).
#
#   my $s = Statesman::Session->open($node);
#   my $out = $s->run('SELECT 1');    # dies on an ERROR, returns the output
#   $s->close;
package Statesman::Session;

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;

sub open
{
	my ($class, $node, $dbname) = @_;
	my $self = bless { in => '', out => '', err => '', n => 0 }, $class;
	$self->{h} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr($dbname // 'postgres'), '-f', '-'
		],
		'<', \$self->{in}, '>', \$self->{out}, '2>', \$self->{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default * 2));
	return $self;
}

# Runs one statement and returns its output (without the trailing newline).
sub run
{
	my ($self, $sql) = @_;
	my $mark = 'statement done ' . ++$self->{n};
	$self->{in} .= "$sql\n;\n\\echo '$mark'\n";
	eval {
		$self->{h}->pump until $self->{out} =~ /^\Q$mark\E$/m;
		1;
	} or die "psql session failed on: $sql\nstderr: $self->{err}\n$@";
	die "psql session reported: $self->{err}\nfor: $sql\n" if $self->{err} =~ /ERROR|FATAL/;
	my $out = $self->{out};
	$out =~ s/^\Q$mark\E\n//m;
	$self->{out} = '';
	chomp $out;
	return $out;
}

sub close
{
	my ($self) = @_;
	$self->{in} .= "\\q\n";
	$self->{h}->finish;
}

1;

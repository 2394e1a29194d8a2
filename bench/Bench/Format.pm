# The benchmark's arithmetic and number formats, shared by every part of the report.
#
#   stats(@v)            (median, min, max)
#   fmt_int(12345.6)     "12,346"
#   fmt_cell(m, lo, hi)  "3,120 (3,050–3,190)"
#   rate_cell(@v)        fmt_cell of stats(@v)
#   ratio(a, b)          "0.94"
#   verdict(v, t, 'le')  "yes" or "**no**" (v ≥ t; with 'le', v ≤ t)
#   paired_ratio(\@a, \@b)  (median of the ratios a[i]/b[i], "1.01 · 0.98 · …")
#   dot_list(@s)         "a · b · c"
package Bench::Format;

use strict;
use warnings;
use utf8;

use Exporter 'import';
our @EXPORT_OK = qw(num stats med fmt_int fmt_cell rate_cell ratio verdict paired_ratio
  dot_list int_list median_max);

# A computed number as the report has always printed one (awk's print): integral values as
# integers, others with 6 significant digits (so a median of an even count of large rates is
# rounded there).
sub num
{
	my ($x) = @_;
	return $x if !defined $x;
	return sprintf('%d', $x) if $x == int($x) && abs($x) < 2**31;
	return sprintf('%.6g', $x);
}

# (median, min, max) of the values. A value taken as it is keeps its text ("0.0" stays "0.0");
# the median of an even count is the mean of the middle two, printed by num.
sub stats
{
	my @v = sort { $a <=> $b } @_;
	return ('-', '-', '-') unless @v;
	my $n = @v;
	my $m = $n % 2 ? $v[ ($n - 1) / 2 ] : num(($v[ $n / 2 - 1 ] + $v[ $n / 2 ]) / 2);
	return ($m, $v[0], $v[-1]);
}

sub med { return (stats(@_))[0]; }

# (median, max) of the values; ('-', '-') of none.
sub median_max
{
	my @v = sort { $a <=> $b } @_;
	return ('-', '-') unless @v;
	my ($m) = stats(@v);
	return ($m, $v[-1]);
}

sub fmt_int
{
	my ($x) = @_;
	my $s = sprintf('%.0f', $x);
	my $o = '';
	while (length($s) > 3)
	{
		$o = ',' . substr($s, -3) . $o;
		$s = substr($s, 0, length($s) - 3);
	}
	return $s . $o;
}

sub fmt_cell
{
	my ($m, $lo, $hi) = @_;
	return fmt_int($m) . ' (' . fmt_int($lo) . '–' . fmt_int($hi) . ')';
}

sub rate_cell { return fmt_cell(stats(@_)); }

sub ratio
{
	my ($a, $b) = @_;
	return sprintf('%.2f', $a / $b);
}

sub verdict
{
	my ($v, $t, $le) = @_;
	my $ok = (defined $le && $le eq 'le') ? $v <= $t : $v >= $t;
	return $ok ? 'yes' : '**no**';
}

# Run i of @$a over run i of @$b (the runs of one round): the median of those ratios, and each
# rounded, joined by " · ".
sub paired_ratio
{
	my ($a, $b) = @_;
	my (@raw, @per);
	for my $i (0 .. $#$a)
	{
		push @raw, sprintf('%.6f', $a->[$i] / $b->[$i]);
		push @per, ratio($a->[$i], $b->[$i]);
	}
	return (med(@raw), join(' · ', @per));
}

sub dot_list { return join(' · ', @_); }

# Whole numbers with thousands separators, anything else as it is, joined by " · ".
sub int_list { return dot_list(map { /^[0-9]+$/ ? fmt_int($_) : $_ } @_); }

1;

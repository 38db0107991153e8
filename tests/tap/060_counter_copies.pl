# The token counter against copies of its page and crash jumps: after each of
# these, the next token exceeds every token issued before in that database.
#
#  (a) CREATE DATABASE from a template that has issued tokens, with the
#      WAL_LOG strategy (PostgreSQL 15's default), with FILE_COPY, and a
#      plain CREATE DATABASE with fencing installed in template1: tokens in
#      the new database, an immediate shutdown before the next checkpoint,
#      tokens again;
#  (b) ALTER DATABASE ... SET TABLESPACE, tokens, an immediate shutdown;
#  (c) the clock bound: with fencing.log_ahead = 2^30 and repeated crashes,
#      no token and no covered value (what a crash resumes at) is ever more
#      than 2 s (kClockLead) ahead of the wall clock; the first token after a
#      crash is at that bound; DROP/CREATE EXTENSION then starts above every
#      earlier token and above the old counter's covered value;
#  (d) a crash right after acquisitions whose WAL nobody else flushes (WAL
#      writer stopped with SIGSTOP, synchronous_commit = off, no background
#      writer): every token issued after the restart exceeds every token
#      returned before, with the counter near the clock and with a counter
#      moved far past it (there only the WAL protects it, so a token handed
#      out before its record is flushed would be issued again);
#  (e) pg_dump of a database whose counter runs at the clock bound, restored
#      into a new database: new tokens exceed the old counter's covered value.
#
# FENCING_PROFILE=long repeats the crash cycles of (c) and (d) more often.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(restart_after_crash);

my $long = ($ENV{FENCING_PROFILE} // 'quick') eq 'long';
my $lead = 2_000_000;    # core::kClockLead, microseconds

my $node = PostgreSQL::Test::Cluster->new('copies');
$node->init;
$node->append_conf('postgresql.conf', q{
fsync = on
synchronous_commit = off
wal_writer_delay = 10s
wal_writer_flush_after = 1GB
bgwriter_lru_maxpages = 0
checkpoint_timeout = 1h
max_wal_size = 4GB
autovacuum = off
restart_after_crash = on
log_min_messages = warning
log_statement = none
});
$node->start;

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# Set-up statements commit durably (the server's default is off): what a
# crash may lose is the counter's business alone, never the test's set-up.
sub setup { my ($db, $q) = @_; return $node->safe_psql($db, "SET synchronous_commit = on; $q"); }

# One token for $res in $db (a session lock, released at once).
sub acq
{
	my ($db, $res) = @_;
	return sql($db, "SELECT fencing.acquire('$res')::bigint; SELECT fencing.release('$res')") =~ s/\n.*//sr;
}

# $n tokens in $db for resources "$prefix:1" ... (each acquired and released).
sub acq_many
{
	my ($db, $prefix, $n) = @_;
	my @t = split /\n/, sql($db, qq{
	  SELECT fencing.acquire_xact('$prefix:' || g)::bigint FROM generate_series(1, $n) g});
	return @t;
}

sub max_of { my $m = shift; for (@_) { $m = $_ if $_ > $m; } return $m; }
sub min_of { my $m = shift; for (@_) { $m = $_ if $_ < $m; } return $m; }

# What a crash would resume the counter of $db at: the value its newest
# record covers.
sub covered { return sql($_[0], 'SELECT last_value + log_cnt FROM fencing.token_seq'); }

sub crash
{
	$node->stop('immediate');
	$node->start;
}

# ---- (a) CREATE DATABASE ------------------------------------------------------------

setup('postgres', 'CREATE DATABASE tpl');
setup('tpl', 'CREATE EXTENSION fencing');
my @tpl_tokens = acq_many('tpl', 'tpl', 20);
for my $strategy ('WAL_LOG', 'FILE_COPY')
{
	my $db = lc "clone_$strategy";
	setup('postgres', "CREATE DATABASE $db TEMPLATE tpl STRATEGY $strategy");
	my @before = (acq($db, 'r'), acq($db, 'r'), acq($db, 'r'), acq_many($db, "$db:x", 5));
	crash();
	my @after = (acq($db, 'r'), acq_many($db, "$db:x", 5), acq($db, 'new'));
	my ($hi, $lo) = (max_of(@before), min_of(@after));
	cmp_ok($lo, '>', $hi, "CREATE DATABASE STRATEGY $strategy, crash: every later token is greater ($lo > $hi)");
	cmp_ok(min_of(@before), '>', max_of(@tpl_tokens),
		"CREATE DATABASE STRATEGY $strategy: the copy's tokens are above the template's");
}

# fencing in template1, a plain CREATE DATABASE.
setup('template1', 'CREATE EXTENSION fencing');
acq_many('template1', 't1', 10);
setup('postgres', 'CREATE DATABASE from_template1');
{
	my @before = (acq('from_template1', 'r'), acq('from_template1', 'r'), acq_many('from_template1', 'x', 5));
	crash();
	my @after = (acq('from_template1', 'r'), acq_many('from_template1', 'x', 5));
	my ($hi, $lo) = (max_of(@before), min_of(@after));
	cmp_ok($lo, '>', $hi, "CREATE DATABASE from template1, crash: every later token is greater ($lo > $hi)");
}
setup('template1', 'DROP EXTENSION fencing; DROP SCHEMA IF EXISTS fencing');

# ---- (b) ALTER DATABASE ... SET TABLESPACE ----------------------------------------------

{
	my $dir = PostgreSQL::Test::Utils::tempdir_short . '/ts';
	mkdir $dir or die "mkdir $dir: $!";
	setup('postgres', "CREATE TABLESPACE moved LOCATION '$dir'");
	setup('postgres', 'CREATE DATABASE mv');
	setup('mv', 'CREATE EXTENSION fencing');
	my @before = (acq('mv', 'r'), acq_many('mv', 'x', 10));
	setup('postgres', 'ALTER DATABASE mv SET TABLESPACE moved');
	push @before, acq('mv', 'r'), acq_many('mv', 'y', 10);
	crash();
	my @after = (acq('mv', 'r'), acq_many('mv', 'y', 10));
	my ($hi, $lo) = (max_of(@before), min_of(@after));
	cmp_ok($lo, '>', $hi, "ALTER DATABASE SET TABLESPACE, crash: every later token is greater ($lo > $hi)");
	# And back, with tokens in between, then a crash.
	setup('postgres', 'ALTER DATABASE mv SET TABLESPACE pg_default');
	push @before, @after, acq_many('mv', 'z', 10);
	crash();
	@after = (acq('mv', 'r'), acq_many('mv', 'z', 10));
	($hi, $lo) = (max_of(@before), min_of(@after));
	cmp_ok($lo, '>', $hi, "ALTER DATABASE SET TABLESPACE back, crash: every later token is greater ($lo > $hi)");
}

# ---- (c) the clock bound ------------------------------------------------------------

# Tokens with the wall clock (microseconds since 1970) read right before and
# right after: "before token after" lines.
sub acq_clocked
{
	my ($db, $prefix, $n) = @_;
	my $r = sql($db, qq{
	  SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
	         fencing.acquire_xact('$prefix:' || g)::bigint,
	         (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
	  FROM generate_series(1, $n) g});
	return map { [ split /\|/ ] } split /\n/, $r;
}

{
	setup('postgres', 'CREATE DATABASE jumps');
	setup('jumps', 'CREATE EXTENSION fencing');
	setup('postgres', 'ALTER DATABASE jumps SET fencing.log_ahead = 1073741824');
	my ($max_ahead, $max_cover_ahead, $all_max) = (-1e18, -1e18, 0);
	my ($fresh_ok, $cycles) = (1, $long ? 12 : 6);
	my @fresh;
	for my $cycle (1 .. $cycles)
	{
		my @rows = acq_clocked('jumps', "c$cycle", 50);
		# The first token after a restart (or CREATE EXTENSION) starts a
		# fresh counter at the clock bound.
		my ($b0, $t0, $a0) = @{ $rows[0] };
		push @fresh, sprintf('%d..%d', $t0 - $a0, $t0 - $b0);
		$fresh_ok = 0 unless $t0 >= $b0 + $lead && $t0 <= $a0 + $lead;
		for my $r (@rows)
		{
			my ($b, $t, $a) = @$r;
			$max_ahead = $t - $a if $t - $a > $max_ahead;
			$all_max = $t if $t > $all_max;
		}
		my $clock = sql('jumps', 'SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint');
		my $cov = covered('jumps');
		$max_cover_ahead = $cov - $clock if $cov - $clock > $max_cover_ahead;
		crash();
	}
	ok($fresh_ok, "clock bound: after each of $cycles crashes the first token is at clock + 2 s (token - clock: @fresh)");
	cmp_ok($max_ahead, '<=', $lead, "clock bound: no token more than 2 s ahead of the clock (at most $max_ahead us)");
	cmp_ok($max_cover_ahead, '<=', $lead,
		"clock bound: the covered value never more than 2 s ahead of the clock (at most $max_cover_ahead us)");

	# A fresh counter after the crash jumps starts above them all.
	my $old_cover = covered('jumps');
	$all_max = max_of($all_max, acq_many('jumps', 'last', 5));
	$old_cover = max_of($old_cover, covered('jumps'));
	setup('jumps', 'DROP EXTENSION fencing; CREATE EXTENSION fencing');
	my @new = acq_many('jumps', 'new', 5);
	cmp_ok(min_of(@new), '>', $all_max, 'DROP/CREATE EXTENSION after crash jumps: new tokens exceed every old one');
	cmp_ok(min_of(@new), '>', $old_cover,
		'DROP/CREATE EXTENSION after crash jumps: new tokens exceed what the old counter covered');
	# The same right after a crash, before anything else is issued.
	crash();
	my @old = acq_many('jumps', 'new', 5);
	$old_cover = covered('jumps');
	setup('jumps', 'DROP EXTENSION fencing; CREATE EXTENSION fencing');
	@new = acq_many('jumps', 'new', 5);
	cmp_ok(min_of(@new), '>', max_of(@old, $old_cover),
		'DROP/CREATE EXTENSION right after a crash: new tokens exceed the old counter');
}

# ---- (d) a crash that loses every WAL record nobody flushed -------------------------

sub walwriter_pid
{
	return sql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'});
}

sub wait_ready
{
	my $deadline = time + 120;
	while (time < $deadline)
	{
		# (psql may find the server going down under it, even write into a
		# closed pipe.)
		my ($rc, $out) = eval { $node->psql('postgres', 'SELECT NOT pg_is_in_recovery()') };
		return 1 if defined $rc && $rc == 0 && $out eq 't';
		sleep 0.2;
	}
	return 0;
}

# Stops the WAL writer, has $code acquire, then kills the WAL writer (a crash
# restart): only WAL that a backend flushed itself survives.
sub crash_unflushed
{
	my ($code) = @_;
	my $ww = walwriter_pid();
	kill 'STOP', $ww or die "SIGSTOP $ww: $!";
	my @t = eval { $code->() };
	my $err = $@;
	my $log_at = -s $node->logfile;
	kill 'KILL', $ww;
	kill 'CONT', $ww;
	die $err if $err;
	# The postmaster notices the kill a moment later: until it has, the
	# server still answers as if nothing happened, and the next connection
	# would meet the crash restart ("in recovery mode").
	my $deadline = time + 60;
	sleep 0.05 while time < $deadline && !$node->log_contains('terminated by signal 9', $log_at);
	wait_ready() or die 'the server did not come back after the crash';
	return @t;
}

for my $mode ('near the clock', 'far past the clock')
{
	my $db = $mode =~ /far/ ? 'unflushed_far' : 'unflushed_near';
	setup('postgres', "CREATE DATABASE $db");
	setup($db, 'CREATE EXTENSION fencing; CREATE TABLE far (t bigint)');
	setup('postgres', "ALTER DATABASE $db SET fencing.log_ahead = 16");
	if ($mode =~ /far/)
	{
		# An hour ahead of the clock: outside the clock bound.
		setup($db, q{SELECT fencing.advance_past('far',
		  (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + 3600000000)});
	}
	my ($ok, $detail) = (1, '');
	for my $cycle (1 .. ($long ? 8 : 3))
	{
		my @before = crash_unflushed(sub { return acq_many($db, "u$cycle", 60) });
		my @after = acq_many($db, "u$cycle", 60);
		my ($hi, $lo) = (max_of(@before), min_of(@after));
		if (!($lo > $hi)) { $ok = 0; $detail .= " cycle $cycle: $lo <= $hi;"; }
	}
	ok($ok, "unflushed WAL lost in a crash ($mode): every later token exceeds every earlier one$detail");
	ok($node->log_contains('terminated by signal 9'), "unflushed WAL ($mode): the server crashed");
}

# ---- (e) pg_dump of a counter at the clock bound, restored ----------------------------

{
	setup('postgres', 'CREATE DATABASE bound_src');
	setup('bound_src', 'CREATE EXTENSION fencing');
	setup('postgres', 'ALTER DATABASE bound_src SET fencing.log_ahead = 1073741824');
	acq_many('bound_src', 'd', 10);
	crash();
	my @old = acq_many('bound_src', 'd', 10);
	my $old_cover = covered('bound_src');
	my $file = PostgreSQL::Test::Utils::tempdir . '/bound_src.dump';
	$node->command_ok([ 'pg_dump', '-d', $node->connstr('bound_src'), '-F', 'c', '-f', $file ],
		'dump at the clock bound: pg_dump');
	setup('postgres', 'CREATE DATABASE bound_dst TEMPLATE template0');
	$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('bound_dst'), $file ],
		'dump at the clock bound: pg_restore into a new database');
	my @new = (acq_many('bound_dst', 'd', 10), acq_many('bound_dst', 'brand-new', 3));
	cmp_ok(min_of(@new), '>', max_of(@old, $old_cover),
		'dump at the clock bound: new tokens exceed the old tokens and the old counter\'s covered value');
}

$node->stop;
done_testing();

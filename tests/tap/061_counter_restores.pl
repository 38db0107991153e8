# The token counter after WAL is lost: copies of the cluster that miss tokens
# the original issued. Nothing in the copy's WAL covers those tokens, so the
# copy relies on the clock bound: no token is ever more than 2 s (kClockLead)
# ahead of the wall clock at its issue, and a counter whose page is not
# stamped by its own server run (every page of a restored or promoted
# cluster) starts at clock + 2 s. Each case checks that the first token of
# the copy is at that bound and that every token of the copy exceeds every
# token the original issued, the lost ones included:
#
# The original runs with fencing.log_ahead = 16 and crashes right before the
# tokens that are lost, so that those run at the clock bound and far past what
# the copy's last record covers.
#
#  (a) a base backup taken while tokens are issued, restored as it is (it
#      recovers to the end of the backup; the tokens issued after are lost);
#  (b) the same backup recovered to an earlier point in time (PITR to an
#      LSN before the last tokens) and promoted;
#  (c) an asynchronous standby that misses the primary's last tokens and is
#      promoted after the primary fails;
#  (d) the failed primary, whose last tokens the new one never saw, rewound
#      with pg_rewind, following the new primary as a standby, then promoted
#      in its turn after the new primary fails (with its own last tokens).
#
# (The clock bound holds across machines as far as their clocks agree: a
# standby's clock behind the primary's by more than the time between the
# last lost token and the first new one would void it.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time sleep);

my $lead = 2_000_000;    # core::kClockLead, microseconds

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, has_archiving => 1);
$primary->append_conf('postgresql.conf', q{
autovacuum = off
wal_log_hints = on
fencing.log_ahead = 16
log_min_messages = warning
log_statement = none
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION fencing');

sub max_of { my $m = shift; for (@_) { $m = $_ if $_ > $m; } return $m; }
sub min_of { my $m = shift; for (@_) { $m = $_ if $_ < $m; } return $m; }

sub acq_many
{
	my ($node, $prefix, $n) = @_;
	return split /\n/, $node->safe_psql('postgres', qq{
	  SELECT fencing.acquire_xact('$prefix:' || g)::bigint FROM generate_series(1, $n) g});
}

# The first tokens of a copy, with the clock read right before them: checks
# that the first is at the clock bound and all exceed every earlier token.
sub check_copy
{
	my ($node, $what, @earlier) = @_;
	my $r = $node->safe_psql('postgres', q{
	  SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
	         fencing.acquire_xact('copy:' || g)::bigint,
	         (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
	  FROM generate_series(1, 20) g});
	my @rows = map { [ split /\|/ ] } split /\n/, $r;
	my ($b0, $t0, $a0) = @{ $rows[0] };
	ok($t0 >= $b0 + $lead && $t0 <= $a0 + $lead,
		sprintf('%s: the first token is at clock + 2 s (token - clock: %d..%d us)', $what, $t0 - $a0, $t0 - $b0));
	my $lo = min_of(map { $_->[1] } @rows);
	my $hi = max_of(@earlier);
	cmp_ok($lo, '>', $hi, "$what: every token exceeds every token the original issued ($lo > $hi)");
	return;
}

# An immediate shutdown and a start: the counter of the primary then runs at
# the clock bound, so that the tokens lost next are as high as they can be.
sub crash_primary
{
	$primary->stop('immediate');
	$primary->start;
}

# A psql client that acquires and releases one resource $n times, 10 ms
# apart, printing each token; returns its handle and output file.
sub start_client
{
	my ($node, $name, $n) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $script = "\\set ON_ERROR_STOP 1\n";
	$script .= "SELECT fencing.acquire('$name')::bigint; SELECT fencing.release('$name') \\gset\nSELECT pg_sleep(0.01) \\gset\n"
	  for 1 .. $n;
	PostgreSQL::Test::Utils::append_to_file("$dir/c.sql", $script);
	my $h = IPC::Run::start([ 'psql', '-X', '-q', '-At', '-d', $node->connstr('postgres'), '-f', "$dir/c.sql" ],
		'>', "$dir/c.out", '2>', "$dir/c.err");
	return ($h, "$dir/c.out");
}

sub client_tokens
{
	my ($h, $out) = @_;
	$h->finish;
	return grep { /^\d+$/ } split /\n/, PostgreSQL::Test::Utils::slurp_file($out);
}

# ---- a base backup taken while tokens are issued ---------------------------------------

my @issued = acq_many($primary, 'before', 50);
my ($client, $client_out) = start_client($primary, 'during', 200);
# Wait until the client is under way, then back up while it acquires.
$primary->poll_query_until('postgres', q{SELECT count(*) > 0 FROM fencing.fence_state WHERE resource = 'during'})
  or die 'the client did not start';
$primary->backup('b1');
push @issued, client_tokens($client, $client_out);
my $target = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
crash_primary();
push @issued, acq_many($primary, 'after', 50);
# Flushed, archived.
my $segment = $primary->safe_psql('postgres', 'SELECT pg_walfile_name(pg_current_wal_lsn())');
$primary->safe_psql('postgres', 'SELECT pg_switch_wal()');
$primary->poll_query_until('postgres', qq{SELECT last_archived_wal >= '$segment' FROM pg_stat_archiver})
  or die 'WAL was not archived';

# (a) restored as it is.
{
	my $copy = PostgreSQL::Test::Cluster->new('restored');
	$copy->init_from_backup($primary, 'b1');
	$copy->append_conf('postgresql.conf', 'archive_mode = off');    # not into the primary's archive
	$copy->start;
	$copy->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
	check_copy($copy, 'base backup taken while acquiring, restored', @issued);
	$copy->stop;
}

# (b) PITR to an LSN before the last 50 tokens.
{
	my $copy = PostgreSQL::Test::Cluster->new('pitr');
	$copy->init_from_backup($primary, 'b1', has_restoring => 1);
	$copy->append_conf('postgresql.conf', qq{
archive_mode = off
recovery_target_lsn = '$target'
recovery_target_action = 'promote'
});
	$copy->start;
	$copy->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
	is($copy->safe_psql('postgres', q{SELECT count(*) FROM fencing.fence_state WHERE resource LIKE 'after:%'}),
		'0', 'PITR: recovered to a point before the last tokens');
	check_copy($copy, 'PITR to an earlier point', @issued);
	$copy->stop;
}

# ---- (c) promotion of an asynchronous standby that missed the last tokens ---------------

{
	my $standby = PostgreSQL::Test::Cluster->new('standby');
	$standby->init_from_backup($primary, 'b1', has_streaming => 1);
	$standby->append_conf('postgresql.conf', 'archive_mode = off');
	$standby->start;
	push @issued, acq_many($primary, 'replicated', 50);
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	# The standby falls behind (here: it stops), the primary issues more and
	# fails.
	$standby->stop('fast');
	crash_primary();
	push @issued, acq_many($primary, 'lost', 50);
	$primary->stop('immediate');
	$standby->start;
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
	is($standby->safe_psql('postgres', q{SELECT count(*) FROM fencing.fence_state WHERE resource LIKE 'lost:%'}),
		'0', 'async standby: the primary\'s last tokens did not reach it');
	check_copy($standby, 'promoted asynchronous standby', @issued);
	push @issued, acq_many($standby, 'new-primary', 50);

	# ---- (d) the old primary, rewound, follows the new one and is promoted --------------
	$standby->safe_psql('postgres', 'CHECKPOINT');
	my $old = $primary;
	# The WAL it needs back to the divergence comes from its archive.
	my $archive = $old->archive_dir;
	$old->append_conf('postgresql.conf', qq{restore_command = 'cp "$archive/%f" "%p"'});
	# pg_rewind copies the source's configuration; keep the target's own.
	my $conf = $old->data_dir . '/postgresql.conf';
	my $saved = PostgreSQL::Test::Utils::slurp_file($conf);
	command_ok(
		[
			'pg_rewind', '--restore-target-wal', '--target-pgdata', $old->data_dir,
			'--source-server', $standby->connstr('postgres')
		],
		'pg_rewind: the old primary is rewound to the new one');
	open my $fh, '>', $conf or die "$conf: $!";
	print $fh $saved;
	close $fh;
	unlink $old->data_dir . '/postgresql.auto.conf';
	$old->enable_streaming($standby);
	$old->start;
	push @issued, acq_many($standby, 'followed', 50);
	$standby->wait_for_catchup($old, 'replay', $standby->lsn('insert'));
	$old->stop('fast');
	# The new primary's last tokens (issued at its clock bound) never reach it.
	$standby->stop('immediate');
	$standby->start;
	push @issued, acq_many($standby, 'lost-again', 50);
	$standby->stop('immediate');
	$old->start;
	$old->promote;
	$old->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
	is($old->safe_psql('postgres', q{SELECT count(*) FROM fencing.fence_state WHERE resource LIKE 'lost%'}),
		'0', 'pg_rewind: none of the lost tokens reached the rewound primary');
	check_copy($old, 'rewound old primary, promoted', @issued);
	$old->stop;
}

done_testing();

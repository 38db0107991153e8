# The synchronous-standby wait of acquisition, under every synchronous_commit.
#
# A token leaves the backend only after a synchronous standby flushed the WAL
# record that covers it, whatever the session's synchronous_commit says:
#   - with the standby up, acquisitions succeed under off, local,
#     remote_write, on and remote_apply, including the first one after a
#     CHECKPOINT and bursts that cross the counter's log-ahead window;
#   - with the standby stopped, an acquisition under each value waits (it is
#     not enough that the record is flushed locally); statement_timeout or a
#     cancel ends the wait with SQLSTATE 57014 (never a class-08 code, which
#     tells connection pools the connection is broken), the session holds no
#     lock afterwards, and a later acquisition gets a greater token;
#   - once the standby is back, acquisitions succeed again;
#   - a session whose counter record is already flushed locally (it acquired
#     before synchronous_standby_names was set) still waits for the standby
#     for its next token, which that record covers, under every value.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate send_nb wait_tag pause);

my $db = 'postgres';
my @modes = ('off', 'local', 'remote_write', 'on', 'remote_apply');

my $primary = PostgreSQL::Test::Cluster->new('sync_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq(
log_min_messages = warning
fencing.log_ahead = 16
));
$primary->start;
$primary->safe_psql($db, 'CREATE EXTENSION fencing');
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('sync_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->safe_psql($db, "ALTER SYSTEM SET synchronous_standby_names = 'sync_standby'; SELECT pg_reload_conf()");
$primary->poll_query_until($db,
	"SELECT sync_state FROM pg_stat_replication WHERE application_name = 'sync_standby'", 'sync')
  or die 'the standby did not become synchronous';

# ---- standby up: every value works ---------------------------------------------------
for my $mode (@modes)
{
	my @states;
	for my $i (1 .. 3)
	{
		my ($state, $out) = psql_sqlstate($primary, $db, qq{
CHECKPOINT;
SET synchronous_commit = $mode;
SELECT fencing.acquire('sync:$mode:$i') > 0;
SELECT fencing.release('sync:$mode:$i');});
		push @states, $state eq '' && $out eq "t\nt" ? 'ok' : "$state $out";
	}
	is(join(',', @states), 'ok,ok,ok', "synchronous_commit = $mode: the first acquisition after each CHECKPOINT succeeds");
	my ($state, $out) = psql_sqlstate($primary, $db, qq{
SET synchronous_commit = $mode;
SELECT count(*) FROM (SELECT fencing.acquire_xact('burst:$mode:' || g) FROM generate_series(1, 50) g) t;});
	is("$state|$out", '|50', "synchronous_commit = $mode: 50 acquisitions across log-ahead windows succeed");
}

# ---- standby gone: every value waits, a timeout or cancel ends the wait --------------------
$standby->stop('fast');
for my $mode (@modes)
{
	my $s = $primary->background_psql($db, on_error_stop => 0);
	$s->query_safe("SET synchronous_commit = $mode; SET statement_timeout = '1s'");
	# Enough acquisitions to need a counter record the standby never got.
	my $started = time;
	$s->{stderr} = '';
	my ($out) = $s->query(qq{\\set VERBOSITY verbose
DO \$\$ BEGIN
  FOR i IN 1 .. 100 LOOP
    PERFORM fencing.acquire('gone:$mode');
    PERFORM fencing.release('gone:$mode');
  END LOOP;
END \$\$;});
	my $took = time - $started;
	my $err = $s->{stderr};
	$s->{stderr} = '';
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	is($state // '', '57014', "synchronous_commit = $mode, standby gone: the acquisition waited until statement_timeout (57014)");
	cmp_ok($took, '>=', 0.9, "synchronous_commit = $mode, standby gone: it waited ($took s)");
	unlike($err, qr/ERROR:\s+08/, "synchronous_commit = $mode: no class-08 SQLSTATE");
	is($s->query_safe(q{SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'}),
		'0', "synchronous_commit = $mode: no lock is left held after the failed wait");
	$s->quit;
}

# A cancel ends the wait the same way.
my $c = $primary->background_psql($db, on_error_stop => 0);
my ($c_pid) = $c->query_safe('SELECT pg_backend_pid()');
send_nb($c, q{\set VERBOSITY verbose
DO $$ BEGIN
  FOR i IN 1 .. 100 LOOP
    PERFORM fencing.acquire('gone:cancel');
    PERFORM fencing.release('gone:cancel');
  END LOOP;
END $$}, 'done');
$primary->poll_query_until($db, "SELECT wait_event FROM pg_stat_activity WHERE pid = $c_pid", 'SyncRep')
  or die 'the acquisition did not wait for the standby';
$primary->safe_psql($db, "SELECT pg_cancel_backend($c_pid)");
my (undef, $c_err) = wait_tag($c, 'done');
like($c_err, qr/ERROR:\s+57014:/, 'a canceled wait for the standby raises 57014');
is($c->query_safe(q{SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'}),
	'0', 'no lock is left held after the canceled wait');
my $failed_at = $c->query_safe(q{SELECT fencing.current('gone:cancel')});
$c->quit;

# ---- standby back ----------------------------------------------------------------------------
$standby->start;
$primary->poll_query_until($db,
	"SELECT sync_state FROM pg_stat_replication WHERE application_name = 'sync_standby'", 'sync')
  or die 'the standby did not come back';
for my $mode (@modes)
{
	my ($state, $out) = psql_sqlstate($primary, $db,
		"SET synchronous_commit = $mode; SELECT fencing.acquire_xact('gone:cancel') > $failed_at");
	is("$state|$out", '|t', "synchronous_commit = $mode, standby back: acquisition succeeds with a greater token");
}

# ---- a record flushed locally before the standby was configured ----------------------------
# A backend skips the flush of a record it knows to be flushed; with a
# synchronous standby configured it must not skip the standby's confirmation.
sub set_sync_names
{
	my ($names) = @_;
	$primary->safe_psql($db, "ALTER SYSTEM SET synchronous_standby_names = '$names'; SELECT pg_reload_conf()");
	$primary->poll_query_until($db, "SELECT current_setting('synchronous_standby_names') = '$names'") or die;
	pause 1;    # the checkpointer publishes the new setting to the backends
}
for my $mode (@modes)
{
	set_sync_names('');
	$standby->stop('fast');
	my $s = $primary->background_psql($db, on_error_stop => 0);
	# A window wide enough that the next token is covered by the same record,
	# which the checkpoint makes a new one, never sent to the standby: the
	# session flushes it itself, with no standby to wait for.
	$s->query_safe("SET fencing.log_ahead = 1048576; SET synchronous_commit = $mode; SET statement_timeout = '1s'");
	$s->query_safe(q{CHECKPOINT; SELECT fencing.acquire_xact('flushed:warm')});
	set_sync_names('sync_standby');
	$s->{stderr} = '';
	my ($out) = $s->query(qq{\\set VERBOSITY verbose
SELECT fencing.acquire_xact('flushed:$mode')});
	my $err = $s->{stderr};
	$s->{stderr} = '';
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	is($state // "token $out", '57014',
		"synchronous_commit = $mode, record flushed before the standby was configured: the next token waits for the standby (57014)");
	$s->quit;
	$standby->start;
	$primary->poll_query_until($db,
		"SELECT sync_state FROM pg_stat_replication WHERE application_name = 'sync_standby'", 'sync')
	  or die 'the standby did not come back';
}

$standby->stop;
$primary->stop;
done_testing();

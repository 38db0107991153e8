# validate()-guarded writes commit before the next holder gets its token, or
# fail.
#
# A worker holds log:1 on one connection and appends on another:
#   BEGIN; INSERT ... WHERE fencing.validate('log:1', T1) IS NOT NULL; ... COMMIT
# It loses the lock while that transaction is open; a new holder asks for the
# lock. Expected:
#   1. the new acquisition waits until the guarded transaction ends (it
#      commits in time: its entry is committed before the new token exists);
#   2. a guarded writer that pauses (client silent) is ended after the grant's
#      lease, so it cannot hold the resource up for longer: the new holder
#      gets the lock within lease + 1 s, the stale entry never commits;
#   3. the waiting acquirer respects its own wait and lock_timeout (55P03,
#      also for wait => 0) and try_acquire returns NULL, and none leaves a
#      lock behind;
#   4. a cycle between a guard and a lock is a deadlock PostgreSQL detects.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(send_nb wait_tag pause);

my $node = PostgreSQL::Test::Cluster->new('guard');
$node->init;
$node->append_conf('postgresql.conf', "log_min_messages = warning\ndeadlock_timeout = 100ms\n");
$node->start;
$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing;
  CREATE TABLE log (seq bigserial PRIMARY KEY, resource text, worker text, token bigint,
                    committed_at timestamptz);
});

sub session { return $node->background_psql('postgres', on_error_stop => 0); }
sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub finish
{
	my ($s) = @_;
	eval { $s->quit; };
	eval { $s->{run}->kill_kill; };
	return;
}

sub backend_alive { return q1("SELECT count(*) FROM pg_stat_activity WHERE pid = $_[0]") eq '1'; }

sub append_sql
{
	my ($res, $worker, $token) = @_;
	return "INSERT INTO log (resource, worker, token) SELECT '$res', '$worker', $token "
	  . "WHERE fencing.validate('$res', $token) IS NOT NULL";
}

# ---- 1. the guarded transaction commits in time ------------------------------------

{
	my ($lock, $store, $next) = (session(), session(), session());
	my $t1 = $lock->query_safe("SELECT fencing.acquire('log:1', lease => '5s')");
	$store->query_safe('BEGIN; ' . append_sql('log:1', 'S', $t1));
	$lock->query_safe("SELECT fencing.release('log:1')");
	my $asked = time;
	# The next holder acquires and appends in one go.
	send_nb($next, q{SELECT fencing.acquire('log:1', wait => '8s') AS t2 \gset
BEGIN;
} . append_sql('log:1', 'N', ':t2') . q{;
UPDATE log SET committed_at = clock_timestamp() WHERE worker = 'N';
COMMIT;
SELECT :t2}, 'got');
	pause 0.5;
	is(q1(q{SELECT fencing.current('log:1')}), $t1,
		'the next acquisition does not issue a token while the guarded transaction is open');
	$store->query_safe("UPDATE log SET committed_at = clock_timestamp() WHERE worker = 'S'; COMMIT");
	my ($t2, $err) = wait_tag($next, 'got');
	is($err, '', 'the next acquisition succeeds once the guarded transaction committed');
	cmp_ok($t2, '>', $t1, 'with a greater token');
	cmp_ok(time - $asked, '>=', 0.5, 'after waiting for it');
	is(q1(q{SELECT string_agg(worker || ':' || token, ',' ORDER BY committed_at) FROM log WHERE resource = 'log:1'}),
		"S:$t1,N:$t2", 'entries committed in token order');
	$next->query_safe("SELECT fencing.release('log:1')");
	finish($_) for ($lock, $store, $next);
}

# ---- 2. a paused guarded writer is ended by the grant's lease ------------------------

{
	my ($lock, $store, $next) = (session(), session(), session());
	my $t1 = $lock->query_safe("SELECT fencing.acquire('log:2', lease => '1s')");
	my ($store_pid) = $store->query_safe('SELECT pg_backend_pid()');
	$store->query_safe('BEGIN; ' . append_sql('log:2', 'S', $t1));
	my $paused = time;
	# The worker's lock connection stays busy (its lease holds), then lets go;
	# the storage connection stays silent.
	$lock->query_safe("SELECT pg_sleep(0.2); SELECT fencing.release('log:2')");
	send_nb($next, "SELECT fencing.acquire('log:2', wait => '8s')", 'got');
	my ($t2, $err) = wait_tag($next, 'got');
	my $took = time - $paused;
	is($err, '', 'the next acquisition succeeds while the guarded writer is paused');
	cmp_ok($t2, '>', $t1, 'with a greater token');
	cmp_ok($took, '<=', 2.5, "within the grant's lease + 1 s of the writer's pause ($took s)");
	ok(!backend_alive($store_pid), 'the paused guarded writer\'s session was ended');
	my (undef, $failed) = eval { $store->query('COMMIT') };
	is(q1(q{SELECT count(*) FROM log WHERE resource = 'log:2'}), '0', 'the stale entry was never committed');
	ok($node->log_contains('terminating connection because its fencing lease of 1000 ms expired'),
		'server log: the lease ended the guarded writer');
	$next->query_safe("SELECT fencing.release('log:2')");
	finish($_) for ($lock, $store, $next);
}

# ---- 3. the acquirer's own wait, try_acquire ----------------------------------------------

{
	my ($lock, $store, $next) = (session(), session(), session());
	my $t1 = $lock->query_safe("SELECT fencing.acquire('log:3')");
	$store->query_safe('BEGIN; ' . append_sql('log:3', 'S', $t1));
	$lock->query_safe("SELECT fencing.release('log:3')");
	my $started = time;
	$next->{stderr} = '';
	$next->query("\\set VERBOSITY verbose\nSELECT fencing.acquire('log:3', wait => '300ms')");
	my $took = time - $started;
	like($next->{stderr}, qr/ERROR:\s+55P03:/, 'a bounded wait for a guarded transaction fails with 55P03');
	cmp_ok($took, '<', 3, "and ends after about its bound ($took s)");
	$next->{stderr} = '';
	is($next->query_safe("SELECT fencing.try_acquire('log:3') IS NULL"), 't',
		'try_acquire returns NULL while a guarded transaction is open');
	$next->query("\\set VERBOSITY verbose\nSELECT fencing.acquire('log:3', wait => '0')");
	like($next->{stderr}, qr/ERROR:\s+55P03:/, 'acquire with wait => 0 raises 55P03 while a guarded transaction is open');
	$next->{stderr} = '';
	is($next->query_safe(q{SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'}),
		'0', 'neither left a lock behind');
	$next->query_safe("SET lock_timeout = '200ms'");
	$next->query("\\set VERBOSITY verbose\nSELECT fencing.acquire('log:3')");
	like($next->{stderr}, qr/ERROR:\s+55P03:/, 'lock_timeout bounds the wait for a guarded transaction too');
	$next->{stderr} = '';
	$next->query_safe('RESET lock_timeout');
	$store->query_safe('COMMIT');
	is($next->query_safe("SELECT fencing.try_acquire('log:3') > $t1"), 't',
		'after the guarded commit, try_acquire gets a greater token');
	$next->query_safe('SELECT fencing.release_all()');
	finish($_) for ($lock, $store, $next);
}

# ---- 4. deadlock ---------------------------------------------------------------------------

{
	my ($a, $b) = (session(), session());
	my $ta = $a->query_safe("SELECT fencing.acquire('dl:x')");
	$b->query_safe("SELECT fencing.acquire('dl:y')");
	# A validates its token of dl:x in a transaction, then lets dl:x go.
	$a->query_safe("BEGIN; SELECT fencing.validate('dl:x', $ta); SELECT fencing.release('dl:x')");
	# B waits for A's guard of dl:x; A then waits for B's dl:y.
	send_nb($b, "\\set VERBOSITY verbose\nSELECT fencing.acquire('dl:x')", 'b');
	pause 0.3;
	send_nb($a, "\\set VERBOSITY verbose\nSELECT fencing.acquire('dl:y')", 'a');
	my (undef, $err_a) = wait_tag($a, 'a');
	my (undef, $err_b) = wait_tag($b, 'b');
	my @deadlocked = grep { /ERROR:\s+40P01:/ } ($err_a, $err_b);
	is(scalar(@deadlocked), 1, 'a guard-lock cycle is detected as a deadlock (40P01) in one of the two');
	finish($_) for ($a, $b);
}

$node->stop;
done_testing();

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
#   4. a cycle between a guard and a lock is a deadlock PostgreSQL detects;
#   5. at the instant a holder ends (its resource lock freed, its token lock
#      not yet: PostgreSQL frees them one after the other), no validate() of
#      its token succeeds once the next holder has its token.
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

# ---- 5. validate() at the instant a holder ends -----------------------------------------
#
# PostgreSQL frees an ending holder's locks one after the other, in hash
# order: the next holder may get the resource while the old token's lock
# lingers. A test function (modules/release_one_lock.c, built here) frees the
# old holder's resource lock alone, which holds that instant open; a session
# locking fencing.fence_state holds the next acquisition between its drain of
# the guard and the recording of its token, so that a validate() of the old
# token comes exactly there (it takes the guard, sees the old token recorded
# and its lock held, and succeeds). Expected: the next acquisition does not
# return its token while that validate()'s transaction is open.

{
	my $so = $node->basedir . '/release_one_lock.so';
	my ($out, $err);
	my $built = IPC::Run::run(
		[ $ENV{CC} // 'cc', '-fPIC', '-shared', '-I' . $node->config_data('--includedir-server'),
			'-o', $so, "$FindBin::Bin/modules/release_one_lock.c" ],
		'>', \$out, '2>', \$err);
	ok($built, 'the test function release_one_lock builds') or diag $err;
	q1("CREATE FUNCTION release_one_lock(bigint, bigint, int, int, bool) RETURNS bool "
		  . "AS '$so', 'release_one_lock' LANGUAGE C STRICT");
	my ($old, $next, $check, $blocker) = (session(), session(), session(), session());
	my $t1 = $old->query_safe("SELECT fencing.acquire('die:1')");
	my $next_pid = $next->query_safe('SELECT pg_backend_pid()');
	# ExclusiveLock (7), session scope: a session grant's resource and token locks.
	my $free = sub {
		my ($kind) = @_;
		return $old->query_safe('SELECT release_one_lock(classid::bigint, objid::bigint, objsubid, 7, true) '
			  . "FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND objsubid = $kind");
	};
	is($free->('32257 /* kResourceTagKind */'), 't', "the old holder's resource lock alone is freed");
	is(q1("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 32258 /* kTokenTagKind */ "
			  . "AND objid = ($t1 & 4294967295)::oid AND granted"), '1', "its token lock lingers");
	$blocker->query_safe('BEGIN; LOCK TABLE fencing.fence_state IN SHARE MODE');
	send_nb($next, "BEGIN;\nSELECT fencing.acquire('die:1', wait => '60s')", 'next');
	# Where the next acquisition is: waiting on a lock of a kind, or returned.
	my $where = sub {
		my ($kind_sql) = @_;
		my $q = "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = $next_pid AND NOT l.granted "
		  . "AND $kind_sql) THEN 'waiting' WHEN a.state = 'idle in transaction' THEN 'returned' END "
		  . "FROM pg_stat_activity a WHERE a.pid = $next_pid";
		$node->poll_query_until('postgres', "SELECT ($q) IS NOT NULL") or die 'next acquisition neither waits nor returns';
		return q1($q);
	};
	is($where->("l.relation = 'fencing.fence_state'::regclass"), 'waiting',
		'the next acquisition, past its drain of the guard, waits to record its token');
	$check->query_safe('BEGIN');
	is($check->query_safe("SELECT fencing.validate('die:1', $t1)"), $t1,
		'validate() of the old token in that instant succeeds (no newer token exists yet)');
	$blocker->query_safe('COMMIT');
	is($where->("l.locktype = 'advisory' AND l.objsubid = 32258 /* kTokenTagKind */"), 'waiting',
		'once its token is recorded, the next acquisition waits for the old token lock instead of returning');
	is($free->('32258 /* kTokenTagKind */'), 't', "the old holder's token lock is freed");
	is($where->("l.locktype = 'advisory' AND l.objsubid = 32259 /* kGuardTagKind */"), 'waiting',
		'then it waits for the transaction that validated the old token instead of returning');
	$check->query_safe('COMMIT');
	my ($t2, $next_err) = wait_tag($next, 'next');
	is($next_err, '', 'the next acquisition returns once that transaction ended');
	cmp_ok($t2, '>', $t1, 'with a greater token');
	my ($rc, $stdout, $stderr) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT fencing.validate('die:1', $t1)");
	like($stderr, qr/23T01/, 'and validate() of the old token fails from then on (23T01)');
	$next->query_safe('COMMIT');
	finish($_) for ($old, $next, $check, $blocker);
}

$node->stop;
done_testing();

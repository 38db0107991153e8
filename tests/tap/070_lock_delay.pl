# Lock-delay: a grant taken with lock_delay that ends uncleanly (its session
# terminated, its client killed, its lease run out) is followed by no other
# grant of the resource until the delay has passed; waiters keep waiting
# within their own wait; a clean release or commit frees the resource at once.
# fencing.locks shows the resource in its delay and until when. Everything
# else the lost session held is freed at once, and its backend exits at once:
# the delay is kept by the supervisor. A fast shutdown and a crash end
# delays.
#
# Delays are 2 s; the checks are lower bounds (never earlier than the delay)
# and generous upper bounds, so that a slow machine does not fail them.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use IPC::Run;
use FencingTAP qw(send_nb wait_tag psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('lock_delay');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', "log_min_messages = warning\nmax_connections = 60\nrestart_after_crash = on\n");
$node->start;

$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing;
  CREATE TABLE work (id int PRIMARY KEY, note text);
});

# ---- helpers -----------------------------------------------------------------

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

sub finish
{
	my ($s) = @_;
	eval { $s->quit; };
	eval { $s->{run}->kill_kill; };
	return;
}

sub sql { return $node->safe_psql('postgres', $_[0]); }
sub sqlstate_of { return (psql_sqlstate($node, 'postgres', $_[0]))[0]; }
sub now_epoch { return sql('SELECT extract(epoch FROM clock_timestamp())'); }

# A waiter blocked in acquire: it reports "token epoch" (the server's clock
# when it was granted).
sub waiter
{
	my ($resource, $extra) = @_;
	$extra //= '';
	my $s = session();
	send_nb($s, "SELECT fencing.acquire('$resource'$extra) || ' ' || extract(epoch FROM clock_timestamp())", 'got');
	return $s;
}

# Waits until $n sessions wait for $resource.
sub wait_for_waiters
{
	my ($resource, $n) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) >= $n FROM fencing.locks WHERE resource = '$resource' AND NOT granted")
	  or die "no waiter for $resource";
	return;
}

# Terminates the backend $pid; returns the server's clock just before (the
# delay starts later, as the backend exits: a lower bound never too late).
sub terminated_at
{
	my ($pid) = @_;
	my $at = now_epoch();
	sql("SELECT pg_terminate_backend($pid)") eq 't' or die "could not terminate $pid";
	return $at;
}

# The granted token and time of a waiter.
sub granted
{
	my ($s) = @_;
	my ($out, $err) = wait_tag($s, 'got');
	my ($token, $at) = split / /, $out;
	return ($token, $at, $err);
}

# ---- a terminated holder -----------------------------------------------------------

my $h = session();
my $t_h = $h->query_safe("SELECT fencing.acquire('ld:term', lock_delay => '2 s')");
$h->query_safe("SELECT fencing.acquire('ld:other')");     # no delay
$h->query_safe('SELECT pg_advisory_lock(4242)');          # the application's own
my $pid_h = $h->query_safe('SELECT pg_backend_pid()');
my $w = waiter('ld:term');
wait_for_waiters('ld:term', 1);
is(sql("SELECT delay_until IS NULL FROM fencing.locks WHERE resource = 'ld:term' AND granted"),
	't', 'no delay while the holder holds');

my $killed_at = terminated_at($pid_h);
ok($killed_at > 0, 'holder terminated');
# The other fencing lock and the application's advisory lock are free at once.
$node->poll_query_until('postgres', "SELECT fencing.try_acquire('ld:other') IS NOT NULL")
  or die 'ld:other stays held';
my $other_free = now_epoch() - $killed_at;
cmp_ok($other_free, '<', 1.5, "the lost session's lock without a delay is free at once ($other_free s)");
is(sql('SELECT pg_try_advisory_lock(4242)'), 't', "the lost session's own advisory lock is free");

# During the delay.
my $during = sql(q{
  SELECT pid, granted, delay_until > now(), delay_until <= now() + interval '3 s', token IS NOT NULL
    FROM fencing.locks WHERE resource = 'ld:term' AND granted});
is($during, "$pid_h|t|t|t|t", 'fencing.locks: the resource is in its delay (the lost holder\'s row, until when)');
is(sql("SELECT fencing.try_acquire('ld:term') IS NULL"), 't', 'try_acquire is refused during the delay');
is(sqlstate_of("SELECT fencing.acquire('ld:term', wait => '200 ms')"), '55P03',
	'a waiter whose own wait ends during the delay gets 55P03');
is(sqlstate_of("SELECT fencing.validate('ld:term', $t_h)"), '23T01', 'the lost grant\'s token is not valid during the delay');
is(sql("SELECT count(*) FROM pg_stat_activity WHERE pid = $pid_h"), '0',
	'the lost session\'s backend has exited (its connection slot is free) during the delay');

my ($t_w, $at_w, $err_w) = granted($w);
is($err_w, '', 'the waiter is granted after the delay');
cmp_ok($t_w, '>', $t_h, 'with a newer token');
my $after = $at_w - $killed_at;
cmp_ok($after, '>=', 2.0, "not before the delay has passed ($after s after the termination)");
cmp_ok($after, '<', 6.0, 'and soon after it');
$node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid_h")
  or die 'the lost backend did not exit';
pass('the lost backend exits after its delay');
$w->query_safe("SELECT fencing.release('ld:term')");
finish($_) for ($h, $w);

# ---- the lost session's client sees its connection end at once -----------------------

{
	# psql sends the next statement after the terminated one: it learns at once
	# that the connection is gone, not when the delay ends.
	my $script = "${PostgreSQL::Test::Utils::tmp_check}/close.sql";
	PostgreSQL::Test::Utils::append_to_file($script,
		"SELECT fencing.acquire('ld:close', lock_delay => '10 s');\nSELECT pg_sleep(60);\nSELECT 1;\n");
	my ($out, $err) = ('', '');
	my $psql = IPC::Run::start([ 'psql', '-X', '-f', $script, '-d', $node->connstr('postgres') ], '>', \$out, '2>', \$err);
	my $sleeping = "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(60)%' AND state = 'active'";
	$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($sleeping) s") or die 'no sleeping holder';
	my $pid = sql($sleeping);
	my $t = time;
	sql("SELECT pg_terminate_backend($pid)");
	$psql->finish;
	my $took = time - $t;
	cmp_ok($took, '<', 5, "the lost session's client sees the connection closed at once ($took s, delay 10 s)");
	like($err, qr/terminating connection due to administrator command/, 'and the reason');
	sql("SELECT pg_terminate_backend($pid)");    # end that delay
}

# ---- a killed client -------------------------------------------------------------

my $c = session();
my $t_c = $c->query_safe("SELECT fencing.acquire('ld:client', lock_delay => '2 s')");
my $pid_c = $c->query_safe('SELECT pg_backend_pid()');
my $wc = waiter('ld:client');
wait_for_waiters('ld:client', 1);
my $client_killed_at = now_epoch();
$c->{run}->kill_kill;    # SIGKILL to psql: the server sees the connection drop
my ($t_wc, $at_wc, $err_wc) = granted($wc);
is($err_wc, '', 'killed client: the waiter is granted');
my $after_c = $at_wc - $client_killed_at;
cmp_ok($after_c, '>=', 2.0, "killed client: not before the delay ($after_c s)");
cmp_ok($after_c, '<', 6.0, 'killed client: soon after it');
cmp_ok($t_wc, '>', $t_c, 'killed client: newer token');
finish($wc);

# ---- a lease that runs out --------------------------------------------------------

my $l = session();
my $lease_last = $l->query_safe(
	"SELECT fencing.acquire('ld:lease', lease => '1 s', lock_delay => '2 s') IS NOT NULL; SELECT extract(epoch FROM clock_timestamp())");
($lease_last) = (split /\n/, $lease_last)[-1];
my $wl = waiter('ld:lease');
$node->poll_query_until('postgres',
	"SELECT delay_until IS NOT NULL FROM fencing.locks WHERE resource = 'ld:lease' AND granted") or die;
is(sql("SELECT lease IS NULL AND expires_at IS NULL FROM fencing.locks WHERE resource = 'ld:lease' AND granted"),
	't', 'lease ran out: the row in its delay shows no lease');
my ($t_wl, $at_wl, $err_wl) = granted($wl);
is($err_wl, '', 'lease ran out: the waiter is granted');
my $after_l = $at_wl - $lease_last;
cmp_ok($after_l, '>=', 3.0, "lease ran out: not before lease + delay after the holder's last statement ($after_l s)");
cmp_ok($after_l, '<', 8.0, 'lease ran out: soon after it');
ok($node->log_contains('terminating connection because its fencing lease of 1000 ms expired'),
	'the lease ended the holder');
finish($_) for ($l, $wl);

# ---- a transaction-scoped holder, terminated with uncommitted work ------------------

my $x = session();
$x->query_safe("BEGIN; INSERT INTO work VALUES (1, 'uncommitted'); SELECT fencing.acquire_xact('ld:xact', lock_delay => '2 s')");
my $pid_x = $x->query_safe('SELECT pg_backend_pid()');
my $wx = waiter('ld:xact');
wait_for_waiters('ld:xact', 1);
my $x_killed_at = terminated_at($pid_x);
# Its transaction is rolled back at once: the row's key is free.
my $row_at = sql("INSERT INTO work VALUES (1, 'after'); SELECT extract(epoch FROM clock_timestamp())");
cmp_ok($row_at - $x_killed_at, '<', 1.5, 'transaction scope: the lost transaction is rolled back at once');
is(sql("SELECT scope FROM fencing.locks WHERE resource = 'ld:xact' AND granted AND delay_until IS NOT NULL"),
	'transaction', 'transaction scope: fencing.locks shows the delay');
my ($t_wx, $at_wx, $err_wx) = granted($wx);
is($err_wx, '', 'transaction scope: the waiter is granted');
cmp_ok($at_wx - $x_killed_at, '>=', 2.0, 'transaction scope: not before the delay');
finish($_) for ($x, $wx);

# ---- a clean release, and a commit, free the resource at once ----------------------

for my $case (['release', "SELECT fencing.acquire('ld:clean', lock_delay => '2 s')", "SELECT fencing.release('ld:clean')"],
	['commit', "BEGIN; SELECT fencing.acquire_xact('ld:clean', lock_delay => '2 s')", 'COMMIT'],
	['rollback', "BEGIN; SELECT fencing.acquire_xact('ld:clean', lock_delay => '2 s')", 'ROLLBACK'])
{
	my ($what, $take, $end) = @$case;
	my $s = session();
	$s->query_safe($take);
	my $ws = waiter('ld:clean');
	wait_for_waiters('ld:clean', 1);
	my $ended_at = $s->query_safe("$end; SELECT extract(epoch FROM clock_timestamp())");
	($ended_at) = (split /\n/, $ended_at)[-1];
	my ($t_ws, $at_ws, $err_ws) = granted($ws);
	is($err_ws, '', "$what: the waiter is granted");
	cmp_ok($at_ws - $ended_at, '<', 1.0, "$what: at once, no delay");
	$ws->query_safe("SELECT fencing.release('ld:clean')");
	finish($_) for ($s, $ws);
}

# ---- permits and shared holds take delays too ----------------------------------------

{
	my $p = session();
	$p->query_safe("SELECT fencing.acquire('ld:pool', permits => 1, lock_delay => '2 s')");
	my $pid_p = $p->query_safe('SELECT pg_backend_pid()');
	my $wp = waiter('ld:pool', ', permits => 1');
	$node->poll_query_until('postgres',
		"SELECT count(*) >= 1 FROM fencing.locks WHERE resource = 'ld:pool' AND NOT granted") or die;
	my $at = terminated_at($pid_p);
	is(sql("SELECT permit FROM fencing.locks WHERE resource = 'ld:pool' AND granted AND delay_until IS NOT NULL"),
		'1', 'a permit in its delay shows in fencing.locks');
	my (undef, $at_p, $err_p) = granted($wp);
	is($err_p, '', 'permit: the waiter is granted');
	cmp_ok($at_p - $at, '>=', 2.0, 'permit: not before the delay');
	finish($_) for ($p, $wp);

	my $r = session();
	$r->query_safe("SELECT fencing.acquire('ld:shared', shared => true, lock_delay => '2 s')");
	my $pid_r = $r->query_safe('SELECT pg_backend_pid()');
	my $at_r = terminated_at($pid_r);
	$node->poll_query_until('postgres',
		"SELECT delay_until IS NOT NULL FROM fencing.locks WHERE resource = 'ld:shared' AND granted") or die;
	is(sql("SELECT fencing.try_acquire('ld:shared', shared => true) IS NOT NULL"), 't',
		'shared: another shared hold is granted during a lost reader\'s delay');
	is(sql("SELECT fencing.try_acquire('ld:shared') IS NULL"), 't', 'shared: an exclusive one is not');
	my $ww = waiter('ld:shared');
	my (undef, $at_ww, $err_ww) = granted($ww);
	is($err_ww, '', 'shared: the exclusive waiter is granted');
	cmp_ok($at_ww - $at_r, '>=', 2.0, 'shared: not before the lost reader\'s delay');
	finish($_) for ($r, $ww);
}

# ---- a shared hold is refused on a standby (it would exclude nobody on the primary) --------

{
	$node->backup('b');
	my $standby = PostgreSQL::Test::Cluster->new('lock_delay_standby');
	$standby->init_from_backup($node, 'b', has_streaming => 1);
	$standby->start;
	$node->wait_for_catchup($standby);
	my ($state) = psql_sqlstate($standby, 'postgres', "SELECT fencing.acquire('ld:catalog', shared => true)");
	is($state, '25006', 'a shared hold on a standby: 25006');
	$standby->stop;
}

# ---- the delay belongs to nobody's backend: nothing ends it early -----------------------

my $long = session();
$long->query_safe("SELECT fencing.acquire('ld:long', lock_delay => '3 s')");
my $pid_long = $long->query_safe('SELECT pg_backend_pid()');
my $t0 = now_epoch();
sql("SELECT pg_terminate_backend($pid_long)");
$node->poll_query_until('postgres',
	"SELECT delay_until IS NOT NULL FROM fencing.locks WHERE resource = 'ld:long' AND granted") or die;
finish($long);
is(sql("SELECT count(*) FROM pg_stat_activity WHERE pid = $pid_long"), '0', 'the lost holder\'s backend is gone');
is(sql("SELECT fencing.try_acquire('ld:long') IS NULL"), 't', 'and its delay holds without it');
my $wlong = waiter('ld:long');
my (undef, $at_long, $err_long) = granted($wlong);
is($err_long, '', 'a waiter is granted when the delay is over');
cmp_ok($at_long - $t0, '>=', 2.9, 'not before');
finish($wlong);

# ---- a fast shutdown does not wait for delays ------------------------------------------

my $sd = session();
$sd->query_safe("SELECT fencing.acquire('ld:shutdown', lock_delay => '60 s')");
my $pid_sd = $sd->query_safe('SELECT pg_backend_pid()');
sql("SELECT pg_terminate_backend($pid_sd)");
$node->poll_query_until('postgres',
	"SELECT delay_until IS NOT NULL FROM fencing.locks WHERE resource = 'ld:shutdown' AND granted") or die;
finish($sd);
my $stop_started = time;
$node->stop('fast');
my $stop_took = time - $stop_started;
cmp_ok($stop_took, '<', 20, "a fast shutdown ends delays ($stop_took s with a 60 s delay)");
$node->start;
is(sql("SELECT fencing.try_acquire('ld:shutdown') IS NOT NULL"), 't', 'after a restart no delay remains');

# ---- a crash ends delays -----------------------------------------------------------------

my $cr = session();
$cr->query_safe("SELECT fencing.acquire('ld:crash', lock_delay => '60 s')");
my $pid_cr = $cr->query_safe('SELECT pg_backend_pid()');
sql("SELECT pg_terminate_backend($pid_cr)");
$node->poll_query_until('postgres',
	"SELECT delay_until IS NOT NULL FROM fencing.locks WHERE resource = 'ld:crash' AND granted") or die;
finish($cr);
# SIGKILL of a backend makes the postmaster reinitialize: every session ends.
my $victim = session();
my $victim_pid = $victim->query_safe('SELECT pg_backend_pid()');
kill 'KILL', $victim_pid;
finish($victim);
# Polled with psql's errors caught: while the postmaster restarts, psql may
# exit before it reads its query (a broken pipe in poll_query_until).
my ($crash_deadline, $crash_free) = (time + 180, 0);
while (!$crash_free && time < $crash_deadline)
{
	my ($rc, $out) = eval { $node->psql('postgres', "SELECT fencing.try_acquire('ld:crash') IS NOT NULL") };
	$crash_free = defined $rc && $rc == 0 && defined $out && $out eq 't';
	sleep 0.2 unless $crash_free;
}
ok($crash_free, 'a crash (restart after a killed backend) ends every delay');

$node->stop;
done_testing();

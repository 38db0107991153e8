# The supervisor: leases, lock-delays and the events of ended sessions are
# the work of one background worker, not of the holder's own backend.
#
# 1. A leased holder whose session raised an ERROR (division by zero, a 23T01
#    rejection, a statement_timeout cancel, an error inside BEGIN, an error
#    rolled back to a savepoint), or that ran DISCARD ALL, RESET ALL or set
#    its own timeouts, and then went silent (idle, or idle in a
#    transaction), loses its lock within lease + 1 s: PostgreSQL's error
#    recovery cancels a backend's timers, not another process's work. A
#    holder busy in a long statement after an error keeps its lock.
# 2. Holders with a lock-delay that are terminated exit at once: their
#    connection slots are free (20 new connections fit in max_connections =
#    30 while the 20 delays last), fencing.locks shows the 20 delays, and
#    the delay is still enforced; a smart shutdown is not held up by them.
# 3. `lost` reaches a listener for each of 100 holders terminated at once,
#    each exactly once, within 2 s; `delay_ended` for each delay.
# 4. Without the preload, an acquisition with a lease or a lock-delay raises
#    55000 naming shared_preload_libraries; a plain one works.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use JSON::PP;
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('supervisor');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'fencing'\nmax_connections = 140\nlog_min_messages = warning\n"
	  . "listen_addresses = '127.0.0.1'\n");
$node->append_conf('pg_hba.conf', "host all all 127.0.0.1/32 trust\n");
$node->start;
$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing;
  CREATE TABLE acct (id int PRIMARY KEY, v int, fence_token fencing.token);
  SELECT fencing.protect('acct');
  INSERT INTO acct VALUES (1, 0, fencing.acquire_xact('acct:0'));
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub session { return $node->background_psql('postgres', on_error_stop => 0); }

sub finish
{
	my ($s) = @_;
	eval { $s->quit; };
	eval { $s->{run}->kill_kill; };
	return;
}

sub alive { return q1("SELECT count(*) FROM pg_stat_activity WHERE pid = $_[0]") eq '1'; }

is(q1(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'fencing supervisor'}), '1',
	'pg_stat_activity shows the supervisor');

# ---- 1. leases after errors ---------------------------------------------------------

# Each history runs in its own session after a 1 s leased acquisition; then
# the session goes silent (its psql waits for input).
my $stale = q1("SELECT fencing.acquire('acct:1'); SELECT fencing.release('acct:1');");
($stale) = split /\n/, $stale;
$node->safe_psql('postgres', "UPDATE acct SET fence_token = fencing.acquire_xact('acct:1') WHERE id = 1");
# Each history is a list of statements, sent one at a time.
my @histories = (
	[ 'division by zero', 'SELECT 1/0' ],
	[ 'a 23T01 rejection', "UPDATE acct SET v = 1, fence_token = $stale WHERE id = 1" ],
	[ 'a statement_timeout cancel', "SET statement_timeout = '50ms'", 'SELECT pg_sleep(1)', 'RESET statement_timeout' ],
	[ 'an error inside BEGIN, idle in the aborted transaction', 'BEGIN', 'SELECT 1/0' ],
	[ 'an error rolled back to a savepoint, idle in the transaction',
		'BEGIN', 'SAVEPOINT a', 'SELECT 1/0', 'ROLLBACK TO SAVEPOINT a' ],
	[ 'DISCARD ALL, then a leased acquisition again',
		'SELECT 1/0', 'DISCARD ALL', "SELECT fencing.acquire('err:5', lease => '1 s')" ],
	[ 'RESET ALL', 'SELECT 1/0', 'RESET ALL' ],
	[ 'its own timeouts', "SET idle_session_timeout = '1h'", "SET idle_in_transaction_session_timeout = '1h'",
		"SET statement_timeout = '1h'", 'SELECT 1/0' ],
);
my @cases;
my $i = 0;
for my $h (@histories)
{
	my ($what, @sql) = @$h;
	my $s = session();
	my ($pid) = $s->query_safe('SELECT pg_backend_pid()');
	my $res = "err:$i";
	$s->query_safe("SELECT fencing.acquire('$res', lease => '1 s')");
	$s->query($_) for @sql;
	push @cases, { what => $what, s => $s, pid => $pid, res => $res, silent_at => time };
	$i++;
}
# A holder busy in a long statement after an error keeps its lock.
my $busy = session();
my ($busy_pid) = $busy->query_safe('SELECT pg_backend_pid()');
$busy->query_safe("SELECT fencing.acquire('busy:1', lease => '1 s')");
$busy->query('SELECT 1/0');
$busy->query_until(qr/^$/m, "SELECT pg_sleep(4);\n");
my $busy_from = time;

# Every holder's end, seen from outside (pg_stat_activity, polled).
my $deadline = time + 8;
while (time < $deadline && grep { !defined $_->{ended_at} } @cases)
{
	my %live = map { $_ => 1 } split /\n/, q1('SELECT pid FROM pg_stat_activity');
	for my $c (@cases) { $c->{ended_at} //= time unless $live{ $c->{pid} }; }
	sleep 0.05;
}
for my $c (@cases)
{
	ok(defined $c->{ended_at}, "$c->{what}: the holder's session was ended");
	# lease + 1 s, and half a second for the polling on a loaded machine
	cmp_ok(($c->{ended_at} // 1e9) - $c->{silent_at}, '<=', 2.5, "$c->{what}: within lease + 1 s of its silence");
	is(q1("SELECT fencing.try_acquire('$c->{res}') IS NOT NULL"), 't', "$c->{what}: the lock is free for the next holder");
	finish($c->{s});
}
my ($rc) = psql_sqlstate($node, 'postgres', "SELECT fencing.acquire('busy:1', wait => '1 s')");
is($rc, '55P03', 'a holder busy in a statement after an error keeps its lock');
ok(alive($busy_pid), '... and its session');
finish($busy);
ok($node->log_contains('terminating connection because its fencing lease of 1000 ms expired'),
	'the ended sessions are told that the lease expired');

# ---- 2. lock-delays: the backend exits at once --------------------------------------

$node->append_conf('postgresql.conf', "max_connections = 30\n");
$node->restart;
my @holders;
for my $n (1 .. 20)
{
	my $s = session();
	my ($pid) = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe("SELECT fencing.acquire('delay:$n', lock_delay => '6 s')");
	push @holders, { s => $s, pid => $pid };
}
my $pids = join(',', map { $_->{pid} } @holders);
my $t_end = time;
q1("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid IN ($pids)");
my $gone = 0;
for (1 .. 40)
{
	$gone = q1("SELECT count(*) FROM pg_stat_activity WHERE pid IN ($pids)") eq '0';
	last if $gone;
	sleep 0.05;
}
ok($gone, 'terminated holders with a lock-delay exit at once (within 2 s)');
finish($_->{s}) for @holders;
is(q1("SELECT count(*) FROM fencing.locks WHERE resource LIKE 'delay:%' AND delay_until IS NOT NULL AND granted"),
	'20', 'fencing.locks shows the 20 delays');
my @fresh;
my $refused = 0;
for (1 .. 20)
{
	my $s = eval { session() };
	if ($s) { push @fresh, $s; } else { $refused++; }
}
is($refused, 0, '20 new connections fit while the delays last (max_connections = 30)');
finish($_) for @fresh;
my ($try) = q1("SELECT fencing.try_acquire('delay:1') IS NULL");
is($try, 't', 'the delay is still enforced: try_acquire returns NULL');
my $w0 = time;
my $got = q1("SELECT fencing.acquire('delay:2', wait => '20 s') IS NOT NULL");
my $waited = time - $t_end;
is($got, 't', 'a waiter is granted after the delay');
cmp_ok($waited, '>=', 5.9, 'not before the delay has passed');

# A smart shutdown is not held up by delays (none is kept by a backend).
for my $n (21 .. 25)
{
	my $s = session();
	my ($pid) = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe("SELECT fencing.acquire('delay:$n', lock_delay => '1 min')");
	q1("SELECT pg_terminate_backend($pid)");
	finish($s);
}
my $t_stop = time;
$node->stop('smart');
cmp_ok(time - $t_stop, '<', 10, 'a smart shutdown with delays pending takes no longer than without');
$node->append_conf('postgresql.conf', "max_connections = 140\n");
$node->start;

# ---- 3. lost and delay_ended, in a burst ----------------------------------------------

q1('SELECT fencing.set_notify(NULL)');
my $listener = session();
$listener->query_safe('LISTEN fencing');
sub events
{
	my ($out) = $listener->query('SELECT 1');
	my @ev;
	for my $line (split /\n/, $out)
	{
		next unless $line =~ /^Asynchronous notification "fencing" with payload "(.*)" received/;
		push @ev, JSON::PP->new->decode($1);
	}
	return @ev;
}
my @burst;
for my $n (1 .. 100)
{
	my $s = session();
	my ($pid) = $s->query_safe('SELECT pg_backend_pid()');
	my $delay = $n <= 20 ? ", lock_delay => '1 s'" : '';
	$s->query_safe("SELECT fencing.acquire('burst:$n'$delay)");
	push @burst, { s => $s, pid => $pid };
}
events();    # the grants
my $t_burst = time;
q1('SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid IN ('
	  . join(',', map { $_->{pid} } @burst) . ')');
my (%lost, %ended, $lost_done_at);
while (time < $t_burst + 6)
{
	for my $e (events())
	{
		$lost{ $e->{resource} }++ if $e->{event} eq 'lost';
		$ended{ $e->{resource} }++ if $e->{event} eq 'delay_ended';
	}
	$lost_done_at //= time if keys %lost == 100;
	last if keys %lost == 100 && keys %ended == 20;
	sleep 0.05;
}
is(scalar(keys %lost), 100, 'lost for each of 100 holders terminated at once');
is(scalar(grep { $_ != 1 } values %lost), 0, '... each exactly once');
cmp_ok(($lost_done_at // 1e9) - $t_burst, '<=', 2.0, '... all within 2 s');
is(scalar(keys %ended), 20, 'delay_ended for each of the 20 delays');
is(scalar(grep { $_ != 1 } values %ended), 0, '... each exactly once');
finish($_->{s}) for @burst;
finish($listener);

# ---- 5. what an outside attack found -------------------------------------------------

# track_activities turned off after the acquisition: the lease still ends.
{
	my $s = session();
	my ($pid) = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe("SELECT fencing.acquire('trk:1', lease => '1 s')");
	$s->query_safe('SET track_activities = off');
	my $from = time;
	my $ended;
	while (time < $from + 6) { if (!alive($pid)) { $ended = time; last; } sleep 0.05; }
	ok(defined $ended && $ended - $from <= 2.5, 'track_activities off after the acquisition: the lease still ends');
	finish($s);
}

# A client sending one long statement slowly over TCP is not silent; once it
# stops sending, its lease ends.
{
	use IO::Socket::INET;
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $node->port, Proto => 'tcp')
	  or die "connect: $!";
	my $user = getpwuid($<);
	my $params = "user\0$user\0database\0postgres\0\0";
	print $sock pack('NN', 8 + length($params), 196608) . $params;
	my $read_until_ready = sub {
		my $out = '';
		while (1)
		{
			my $hdr = '';
			read($sock, $hdr, 5) == 5 or return undef;
			my ($type, $len) = unpack('aN', $hdr);
			my $body = '';
			read($sock, $body, $len - 4) if $len > 4;
			$out .= substr($body, 6) if $type eq 'D';
			return $out if $type eq 'Z';
		}
	};
	$read_until_ready->() // die 'no ReadyForQuery';
	my $query = sub { my ($sql) = @_; print $sock pack('aN', 'Q', 5 + length($sql)) . "$sql\0"; return $read_until_ready->(); };
	my $row = $query->("SELECT pg_backend_pid()::text || ':' || fencing.acquire('tcp:big', lease => '1 s')");
	my ($pid) = $row =~ /(\d+):/;
	# A statement of 300 kB: its header, then 3 kB every 100 ms for 3 s.
	my $filler = 'x' x 300000;
	my $sql = "SELECT length('$filler')";
	my $msg = pack('aN', 'Q', 5 + length($sql)) . "$sql\0";
	$sock->autoflush(1);
	my $sent = 0;
	my $t0 = time;
	while (time < $t0 + 3 && $sent < length($msg) - 3000)
	{
		print $sock substr($msg, $sent, 3000);
		$sent += 3000;
		sleep 0.1;
	}
	ok(alive($pid), 'TCP: a client sending a long statement slowly for 3x its lease keeps its session');
	is(q1("SELECT fencing.try_acquire('tcp:big') IS NULL"), 't', '... and its lock');
	my $stopped = time;
	my $ended;
	while (time < $stopped + 6) { if (!alive($pid)) { $ended = time; last; } sleep 0.05; }
	ok(defined $ended && $ended - $stopped <= 2.5, 'TCP: once it stops sending mid-statement, its lease ends');
	close $sock;
}

# lock_timeout bounds the wait for a lost grant's delay.
{
	my $h = session();
	my ($pid) = $h->query_safe('SELECT pg_backend_pid()');
	$h->query_safe("SELECT fencing.acquire('lt:1', lock_delay => '5 s')");
	q1("SELECT pg_terminate_backend($pid)");
	finish($h);
	my $t0 = time;
	my ($code) = psql_sqlstate($node, 'postgres', "SET lock_timeout = '800ms'; SELECT fencing.acquire('lt:1')");
	my $took = time - $t0;
	is($code, '55P03', 'lock_timeout ends the wait for a delay with 55P03');
	cmp_ok($took, '<', 3.5, "... well before the delay is over ($took s)");
}

# A permit kept by a delay counts for the one-count rule.
{
	my $h = session();
	my ($pid) = $h->query_safe('SELECT pg_backend_pid()');
	$h->query_safe("SELECT fencing.acquire('pc:1', permits => 2, lock_delay => '5 s')");
	q1("SELECT pg_terminate_backend($pid)");
	finish($h);
	sleep 0.3;
	my ($code) = psql_sqlstate($node, 'postgres', "SELECT fencing.acquire('pc:1', permits => 3, wait => '1 s')");
	is($code, '55T01', 'a permit kept by a lock-delay holds the count: another count gets 55T01');
}

# DROP DATABASE and CREATE DATABASE ... TEMPLATE right after sessions with
# delays and notifications ended (events keep coming for several seconds).
{
	q1('CREATE DATABASE dw');
	$node->safe_psql('dw', 'CREATE EXTENSION fencing; SELECT fencing.set_notify(NULL)');
	my @h;
	for my $n (1 .. 20)
	{
		my $s = $node->background_psql('dw', on_error_stop => 0);
		my $ms = 500 + $n * 300;
		$s->query_safe("SELECT fencing.acquire('dw:$n', lock_delay => '$ms ms')");
		push @h, $s;
	}
	finish($_) for @h;
	sleep 1.5;
	my ($code) = psql_sqlstate($node, 'postgres', 'CREATE DATABASE dw2 TEMPLATE dw');
	is($code, '', 'CREATE DATABASE ... TEMPLATE while delay_ended events of the template keep coming');
	($code) = psql_sqlstate($node, 'postgres', 'DROP DATABASE dw');
	is($code, '', 'DROP DATABASE while delay_ended events keep coming');
	q1('DROP DATABASE IF EXISTS dw2');
}

# A transaction-scoped grant with a delay, its session ended before commit:
# no lost and no delay_ended (its granted was never sent).
{
	my $l = session();
	$l->query_safe('LISTEN fencing');
	my $h = session();
	my ($pid) = $h->query_safe('SELECT pg_backend_pid()');
	$h->query_safe("BEGIN; SELECT fencing.acquire_xact('nx:1', lock_delay => '1 s')");
	q1("SELECT pg_terminate_backend($pid)");
	finish($h);
	sleep 2.5;
	my ($out) = $l->query('SELECT 1');
	unlike($out, qr/nx:1/, 'an uncommitted transaction-scoped grant with a delay: no event at all');
	finish($l);
}

# ---- 4. without the preload ------------------------------------------------------------

$node->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
$node->restart;
my ($code, $err) = (psql_sqlstate($node, 'postgres', "SELECT fencing.acquire('np:1', lease => '1 s')"))[ 0, 2 ];
is($code, '55000', 'without the preload a leased acquisition raises 55000');
($code, $err) = (psql_sqlstate($node, 'postgres', "SELECT fencing.acquire('np:2', lock_delay => '1 s')"))[ 0, 2 ];
is($code, '55000', '... and so does one with a lock-delay');
is(q1("SELECT fencing.acquire('np:3') IS NOT NULL"), 't', 'a plain acquisition works without the preload');

done_testing();

# Leases, the silences idle timeouts cannot see, and locks that go away.
#
# 1. A leased holder whose client stops reading a large result (the backend
#    blocks sending it: wait event ClientWrite), stops sending COPY data
#    (ClientRead inside COPY FROM STDIN), or is stopped while idle with
#    LISTEN while NOTIFY traffic keeps arriving for it (the backend's writes
#    of the notifications succeed into the socket buffers: server activity,
#    not the client's), loses its lock within lease + 1 s: a waiter asking
#    for 8 s gets it, and the holder's session is ended.
# 2. Lease enforcement ends the moment the last leased lock is gone, however
#    it went: pg_advisory_unlock_all(), DISCARD ALL (what poolers run between
#    clients), ROLLBACK TO SAVEPOINT undoing a leased acquire_xact. Such
#    sessions, silent for twice the lease afterwards, are still alive.
# 3. The session's own idle_session_timeout / idle_in_transaction_session_timeout
#    are never touched: SHOW reports the user's values while a lease is held.
# 4. A holder whose statement waits for a row lock is busy, not silent, even
#    with its client stopped: it keeps its lock while the statement waits,
#    and loses it within lease + 1 s once the statement is over and its
#    backend waits for the stopped client.
#
# Every case runs at the same time as the others: about 5 s in all.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(send_nb wait_tag pause);

my $node = PostgreSQL::Test::Cluster->new('silence');
$node->init;
$node->append_conf('postgresql.conf', "log_min_messages = warning\n");
$node->start;
$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing;
  CREATE TABLE copy_sink (id int, note text);
  CREATE TABLE row_sink (id int PRIMARY KEY, v int);
  INSERT INTO row_sink VALUES (1, 0);
});

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

sub finish
{
	my ($s) = @_;
	eval { $s->quit; };
	eval { $s->{run}->kill_kill; };
	return;
}

sub q1 { return $node->safe_psql('postgres', $_[0]); }

# poll($sql, $want, $seconds): runs $sql until it returns $want; true when it did.
sub poll
{
	my ($sql, $want, $seconds) = @_;
	my $until = time + ($seconds // 30);
	while (time < $until)
	{
		return 1 if q1($sql) eq $want;
		sleep 0.05;
	}
	return 0;
}

sub backend_alive { return q1("SELECT count(*) FROM pg_stat_activity WHERE pid = $_[0]") eq '1'; }

my $psql = $node->installed_command('psql') // 'psql';
my @conn = ('-X', '-q', '-d', $node->connstr('postgres'));

# ---- 1. silent clients that are not idle --------------------------------------

# Client that stops reading: one query string acquires the lock and asks for a
# 200 MB result; psql is stopped as soon as the lock is granted.
my ($w_in, $w_out, $w_err) = ('', '', '');
my $writer = IPC::Run::start([ $psql, @conn, '-v', 'application_name=x', '-c',
		"SET application_name = 'silent-writer'; SELECT fencing.acquire('silence:write', lease => '1s'); "
		  . "SELECT repeat('x', 100) FROM generate_series(1, 2000000)" ],
	'<', \$w_in, '>', \$w_out, '2>', \$w_err);
my $writer_psql = $writer->{KIDS}[0]{PID};
ok(poll("SELECT count(*) FROM fencing.locks WHERE resource = 'silence:write' AND granted", '1'),
	'ClientWrite: the holder got its lock');
kill 'STOP', $writer_psql;
my $writer_silent_since = time;
my $writer_pid = q1("SELECT pid FROM pg_stat_activity WHERE application_name = 'silent-writer'");

# Client that stops sending COPY data: psql copies from its stdin, which gets
# a few rows and then nothing more (the pipe stays open).
my $c_in = "SET application_name = 'silent-copier';\n"
  . "SELECT fencing.acquire('silence:copy', lease => '1s');\n"
  . "COPY copy_sink FROM STDIN;\n1\tone\n2\ttwo\n";
my ($c_out, $c_err) = ('', '');
my $copier = IPC::Run::start([ $psql, @conn, '-f', '-' ], '<', \$c_in, '>', \$c_out, '2>', \$c_err);
$copier->pump_nb;
ok(poll("SELECT wait_event FROM pg_stat_activity WHERE application_name = 'silent-copier' "
		  . "AND query LIKE 'COPY%'", 'ClientRead'),
	'ClientRead in COPY: the holder waits for COPY data');
my $copier_silent_since = time;
my $copier_pid = q1("SELECT pid FROM pg_stat_activity WHERE application_name = 'silent-copier'");
is(q1("SELECT pid FROM fencing.locks WHERE resource = 'silence:copy' AND granted"), $copier_pid,
	'ClientRead in COPY: the holder holds its lock');

ok(poll("SELECT wait_event FROM pg_stat_activity WHERE pid = $writer_pid", 'ClientWrite', 10),
	'ClientWrite: the holder is blocked sending its result');

# Waiters for both, each asking for 8 s.
my %waiter;
sub waiter_for
{
	my ($name) = @_;
	my $s = session();
	send_nb($s, "SELECT fencing.acquire('silence:$name', wait => '8s') IS NOT NULL", 'got');
	$waiter{$name} = $s;
	return;
}
waiter_for($_) for ('write', 'copy');

# Client that only listens: psql runs LISTEN and the acquisition from its
# stdin, then waits for more (the pipe stays open) and is stopped; another
# session sends a notification every 20 ms for 6 s.
my $l_in = "SET application_name = 'silent-listener';\nLISTEN fencing_news;\n"
  . "SELECT fencing.acquire('silence:listen', lease => '1s');\n";
my ($l_out, $l_err) = ('', '');
my $listener = IPC::Run::start([ $psql, @conn, '-f', '-' ], '<', \$l_in, '>', \$l_out, '2>', \$l_err);
$listener->pump_nb;
ok(poll("SELECT count(*) FROM fencing.locks WHERE resource = 'silence:listen' AND granted", '1'),
	'LISTEN: the holder got its lock');
my $listener_psql = $listener->{KIDS}[0]{PID};
kill 'STOP', $listener_psql;
my $listener_silent_since = time;
my $listener_pid = q1("SELECT pid FROM pg_stat_activity WHERE application_name = 'silent-listener'");
my $notifier = session();
send_nb($notifier, q{DO $$ BEGIN FOR i IN 1..300 LOOP PERFORM pg_notify('fencing_news', repeat('n', 200)); COMMIT;
  PERFORM pg_sleep(0.02); END LOOP; END $$}, 'notified');

waiter_for('listen');

# ---- 2. and 3., while those wait ------------------------------------------------

my $show = q{SELECT current_setting('idle_session_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout')};

my $unlock_all = session();
$unlock_all->query_safe("SELECT fencing.acquire('gone:unlock-all', lease => '1s')");
is($unlock_all->query_safe($show), '0 0', 'SHOW: a lease leaves the idle timeouts as they were (off)');
$unlock_all->query_safe('SELECT pg_advisory_unlock_all()');
my ($unlock_all_pid) = $unlock_all->query_safe('SELECT pg_backend_pid()');

my $own = session();
$own->query_safe("SET idle_session_timeout = 0; SET idle_in_transaction_session_timeout = '10min'");
$own->query_safe("SELECT fencing.acquire('gone:own', lease => '1s')");
is($own->query_safe($show), '0 10min', 'SHOW: the session\'s own timeouts are reported while it holds a lease');
$own->query_safe('SELECT pg_advisory_unlock_all()');
my ($own_pid) = $own->query_safe('SELECT pg_backend_pid()');

# A pooled connection: the first client took a leased lock, the pooler ran
# DISCARD ALL, the next client never uses a lease and goes quiet.
my $pooled = session();
$pooled->query_safe("SELECT fencing.acquire('gone:discard', lease => '1s')");
$pooled->query_safe('DISCARD ALL');
$pooled->query_safe('SELECT 1');
my ($pooled_pid) = $pooled->query_safe('SELECT pg_backend_pid()');

# Inside a transaction block the ledger meets no transaction end: the timer
# asks the lock manager before it ends anybody.
my $in_block = session();
$in_block->query_safe(q{
  BEGIN;
  SELECT fencing.acquire('gone:in-block', lease => '1s');
  SELECT pg_advisory_unlock_all()});
my ($in_block_pid) = $in_block->query_safe('SELECT pg_backend_pid()');

my $savepoint = session();
$savepoint->query_safe(q{
  BEGIN;
  SAVEPOINT a;
  SELECT fencing.acquire_xact('gone:savepoint', NULL, '1s');
  ROLLBACK TO SAVEPOINT a});
my ($savepoint_pid) = $savepoint->query_safe('SELECT pg_backend_pid()');

# A leased lock still held by the savepoint's parent stays enforced: control.
my $kept = session();
$kept->query_safe(q{
  BEGIN;
  SELECT fencing.acquire_xact('kept:outer', NULL, '1s');
  SAVEPOINT a;
  SELECT fencing.acquire_xact('kept:inner', NULL, '1s');
  ROLLBACK TO SAVEPOINT a});
my ($kept_pid) = $kept->query_safe('SELECT pg_backend_pid()');
my $gone_at = time;

# ---- results of 1. ----------------------------------------------------------------

for my $w ([ 'write', 'ClientWrite', $writer_silent_since, $writer_pid ],
	[ 'copy', 'ClientRead in COPY', $copier_silent_since, $copier_pid ],
	[ 'listen', 'idle with LISTEN, notified every 20 ms', $listener_silent_since, $listener_pid ])
{
	my ($name, $what, $since, $pid) = @$w;
	my ($out, $err) = wait_tag($waiter{$name}, 'got');
	my $elapsed = time - $since;
	note sprintf('%s: the lock changed hands %.2f s after the client fell silent', $what, $elapsed);
	is($out, 't', "$what: the waiter got the lock (stderr: $err)");
	cmp_ok($elapsed, '<=', 2.5,
		"$what: the lock changed hands within lease + 1 s of the client's silence (plus polling)");
	ok(!backend_alive($pid), "$what: the holder's session was ended");
}
kill 'CONT', $writer_psql;
$writer->kill_kill;
$c_in .= "\\.\n";
eval { $copier->finish; };
like($c_err, qr/fencing lease of 1000 ms expired|server closed the connection/,
	'ClientRead in COPY: the client learns that the lease ended its session');
is(q1('SELECT count(*) FROM copy_sink'), '0', 'ClientRead in COPY: the interrupted COPY stored nothing');
ok($node->log_contains('terminating connection because its fencing lease of 1000 ms expired'),
	'server log: the lease expiry is named');
kill 'CONT', $listener_psql;
$listener->kill_kill;
my (undef, $notify_err) = wait_tag($notifier, 'notified');
is($notify_err, '', 'LISTEN: the notifications were sent all along');

# ---- results of 2. ----------------------------------------------------------------

# At least twice the lease since the locks went away.
my $left = $gone_at + 2.2 - time;
pause $left if $left > 0;
for my $c ([ $unlock_all, $unlock_all_pid, 'after pg_advisory_unlock_all()' ],
	[ $own, $own_pid, 'with its own idle_session_timeout = 0, after pg_advisory_unlock_all()' ],
	[ $pooled, $pooled_pid, 'pooled, after DISCARD ALL' ],
	[ $in_block, $in_block_pid, 'idle in a transaction block after pg_advisory_unlock_all()' ],
	[ $savepoint, $savepoint_pid, 'after ROLLBACK TO SAVEPOINT undid a leased acquire_xact' ])
{
	my ($s, $pid, $what) = @$c;
	ok(backend_alive($pid), "$what: the session is alive after twice the lease");
	my ($one) = eval { $s->query('SELECT 1') };
	is($one // '', '1', "$what: and still answers");
}
ok(!backend_alive($kept_pid), 'a leased lock held above a rolled-back savepoint is still enforced');
$savepoint->query('COMMIT');
is($own->query_safe($show), '0 10min', 'SHOW: the session\'s own values afterwards');

# ---- 4. busy in a statement that waits for a row lock -------------------------------

my $blocker = session();
$blocker->query_safe('BEGIN; UPDATE row_sink SET v = v + 1 WHERE id = 1');
my $r_in = "SET application_name = 'row-waiter';\n"
  . "SELECT fencing.acquire('busy:row', lease => '1s');\n"
  . "UPDATE row_sink SET v = v + 10 WHERE id = 1;\n";
my ($r_out, $r_err) = ('', '');
my $row_waiter = IPC::Run::start([ $psql, @conn, '-f', '-' ], '<', \$r_in, '>', \$r_out, '2>', \$r_err);
$row_waiter->pump_nb;
ok(poll("SELECT wait_event_type FROM pg_stat_activity WHERE application_name = 'row-waiter'", 'Lock'),
	'row lock: the holder waits for the row lock');
my $row_waiter_psql = $row_waiter->{KIDS}[0]{PID};
kill 'STOP', $row_waiter_psql;
my $row_waiter_pid = q1("SELECT pid FROM pg_stat_activity WHERE application_name = 'row-waiter'");
pause 2.5;
is(q1("SELECT pid FROM fencing.locks WHERE resource = 'busy:row' AND granted"), $row_waiter_pid,
	'row lock: with its client stopped, a holder waiting for a row lock keeps its lock for 2.5x the lease');
$blocker->query_safe('COMMIT');
my $row_done = time;
ok(poll("SELECT count(*) FROM fencing.locks WHERE resource = 'busy:row'", '0', 10),
	'row lock: once its statement is over, the holder with the stopped client loses its lock');
cmp_ok(time - $row_done, '<=', 2.5, 'row lock: within lease + 1 s of the statement\'s end (plus polling)');
ok(!backend_alive($row_waiter_pid), 'row lock: and its session');
is(q1('SELECT v FROM row_sink WHERE id = 1'), '11', 'row lock: its UPDATE (autocommit) completed and committed while it was busy');
kill 'CONT', $row_waiter_psql;
$row_waiter->kill_kill;
finish($blocker);

finish($_) for ($unlock_all, $in_block, $own, $pooled, $savepoint, $kept, values %waiter);
$node->stop;
done_testing();

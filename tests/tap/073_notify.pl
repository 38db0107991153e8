# Notifications of lock events (fencing.set_notify; NOTIFY on channel
# "fencing" with a JSON payload), on a server that does not preload fencing:
# nothing without an opt-in; granted and released, in commit order, with the
# grant's token; nothing for what did not commit (a rolled back transaction,
# an aborted subtransaction, the part of a session that is rolled back);
# lost, sent by the ending session, for a holder that is terminated, ended by
# its lease, or disconnects; delay_ended after a lost grant's lock-delay;
# permits and shared holds; the whole database; settings reaching sessions
# that are already connected; the per-transaction bound.
use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('notify');
$node->init(allows_streaming => 1);    # max_wal_senders > 0: synchronous replication can be asked for
$node->append_conf('postgresql.conf', "log_min_messages = warning\nmax_prepared_transactions = 2\n");
$node->start;
$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing;
  CREATE ROLE app LOGIN;
  GRANT USAGE ON SCHEMA fencing TO app;
});

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

sub finish
{
	my ($s) = @_;
	eval { $s->quit; };
	eval { $s->{run}->kill_kill; };
	return;
}

sub gone
{
	my ($pid) = @_;
	for (1 .. 200)
	{
		return 1 if $node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0';
		sleep 0.05;
	}
	return 0;
}

my $listener = session();
$listener->query_safe('LISTEN fencing');

# events(): the notifications the listener received since the last call, as
# [ { resource, event, token, time, pid, raw } ].
sub events
{
	my ($out) = $listener->query('SELECT 1');
	my @ev;
	for my $line (split /\n/, $out)
	{
		next unless $line =~ /^Asynchronous notification "fencing" with payload "(.*)" received from server process with PID (\d+)\.$/;
		my ($raw, $pid) = ($1, $2);
		my $e = JSON::PP->new->decode($raw);
		$e->{pid} = $pid;
		$e->{raw} = $raw;
		push @ev, $e;
	}
	return @ev;
}

# summary(@events): "event resource token" of each, comma-separated.
sub summary { return join(', ', map { "$_->{event} $_->{resource} $_->{token}" } @_); }

# events_after($seconds, $n): collects events until there are $n, or $seconds passed.
sub events_until
{
	my ($n, $seconds) = @_;
	my @ev;
	my $deadline = time + ($seconds // 10);
	while (time < $deadline)
	{
		push @ev, events();
		last if @ev >= $n;
		sleep 0.05;
	}
	return @ev;
}

my $s = session();
my ($s_pid) = $s->query_safe('SELECT pg_backend_pid()');

# ---- nothing without an opt-in ----------------------------------------------------------

$s->query_safe("SELECT fencing.acquire('n:a'); SELECT fencing.release('n:a')");
is(summary(events()), '', 'no notification while nothing is enabled');

# ---- one resource ------------------------------------------------------------------

$node->safe_psql('postgres', "SELECT fencing.set_notify('n:a')");
my $t1 = $s->query_safe("SELECT fencing.acquire('n:a')");
my @ev = events_until(1);
is(summary(@ev), "granted n:a $t1", 'granted, with the token acquire returned');
is($ev[0]{pid}, $s_pid, 'sent by the acquiring session');
like($ev[0]{raw}, qr/^\{"resource":"n:a","event":"granted","token":$t1,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"\}$/,
	'the payload: resource, event, token (a JSON number), time (UTC, microseconds)');
my $t_now = $node->safe_psql('postgres', 'SELECT extract(epoch FROM now())');
my $ev_time = $node->safe_psql('postgres', "SELECT extract(epoch FROM '$ev[0]{time}'::timestamptz)");
ok(abs($t_now - $ev_time) < 60, 'the time is the grant\'s');
$s->query_safe("SELECT fencing.release('n:a')");
is(summary(events_until(1)), "released n:a $t1", 'released, with the same token');
$s->query_safe("SELECT fencing.acquire('n:b'); SELECT fencing.release('n:b')");
is(summary(events()), '', 'a resource that is not enabled is not notified');

# ---- only what commits -----------------------------------------------------------------

$s->query_safe("BEGIN; SELECT fencing.acquire_xact('n:a'); ROLLBACK");
is(summary(events()), '', 'a transaction-scoped grant that is rolled back: nothing');
my $t2 = $s->query_safe("BEGIN; SELECT fencing.acquire('n:a')");
$s->query_safe('ROLLBACK');
is(summary(events()), '', 'a session-scoped grant inside a rolled back transaction: nothing (the lock is still held)');
is($s->query_safe("SELECT count(*) FROM fencing.locks WHERE resource = 'n:a' AND granted"), '1', 'it is held');
$s->query_safe("SELECT fencing.release('n:a')");
is(summary(events_until(1)), "released n:a $t2", 'its release commits: released');
my $t3 = (split /\n/, $s->query_safe(q{BEGIN; SAVEPOINT x; SELECT fencing.acquire_xact('n:a'); ROLLBACK TO x;
  SELECT fencing.acquire_xact('n:a')}))[-1];
is(summary(events()), '', 'nothing before the commit');
$s->query_safe('COMMIT');
@ev = events_until(2);
is(summary(@ev), "granted n:a $t3, released n:a $t3",
	'a committed transaction: its grant and its end, in order; the aborted subtransaction\'s grant not at all');
ok($ev[1]{time} ge $ev[0]{time}, 'released is not earlier than granted');
$s->query_safe("BEGIN; SELECT fencing.acquire('n:a'); SELECT fencing.release('n:a'); ROLLBACK");
is(summary(events()), '', 'a session lock taken and released in a rolled back transaction: nothing');

# ---- lost ---------------------------------------------------------------------------

$node->safe_psql('postgres', "SELECT fencing.set_notify('n:x-open')");
my $k = session();
my $tk = $k->query_safe("SELECT fencing.acquire('n:a')");
my ($k_pid) = $k->query_safe('SELECT pg_backend_pid()');
$k->query_safe("BEGIN; SELECT fencing.acquire_xact('n:x-open')");
is(summary(events_until(1)), "granted n:a $tk", 'a holder');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($k_pid)");
ok(gone($k_pid), 'the holder is terminated');
@ev = events_until(1);
is(summary(@ev), "lost n:a $tk", 'a terminated holder: lost (and nothing for its uncommitted transaction\'s grant)');
isnt($ev[0]{pid}, $k_pid, 'sent for it by the supervisor\'s notifier, not by the ending session');
is($node->safe_psql('postgres', "SELECT fencing.try_acquire_xact('n:a') > $tk"), 't', 'the lock is free afterwards');
is(scalar(events_until(2)), 2, 'that grant is notified, and its end');
finish($k);

my $l = session();
my $tl = $l->query_safe("SELECT fencing.acquire('n:a', lease => '1s')");
my ($l_pid) = $l->query_safe('SELECT pg_backend_pid()');
ok(gone($l_pid), 'a silent leased holder is ended by its lease');
is(summary(events_until(2)), "granted n:a $tl, lost n:a $tl", 'ended by its lease: lost');
finish($l);

my $q = session();
my $tq = $q->query_safe("SELECT fencing.acquire('n:a')");
my ($q_pid) = $q->query_safe('SELECT pg_backend_pid()');
finish($q);
ok(gone($q_pid), 'a holder disconnects without releasing');
is(summary(events_until(2)), "granted n:a $tq, lost n:a $tq", 'disconnected: lost');

# ---- the lock options of 1.1 ----------------------------------------------------------
# A lost grant with a lock-delay: lost when its session ends, delay_ended when
# the delay has passed (both sent by the supervisor's notifier). A permit
# and a shared hold are announced under the resource's name.

my $dl = session();
my $tdl = $dl->query_safe("SELECT fencing.acquire('n:a', lock_delay => '2 s')");
my ($dl_pid) = $dl->query_safe('SELECT pg_backend_pid()');
is(summary(events_until(1)), "granted n:a $tdl", 'a holder with a lock-delay');
my $t_kill = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($dl_pid)");
@ev = events_until(1, 5);
is(summary(@ev), "lost n:a $tdl", 'terminated: lost, at once');
ok(time - $t_kill < 1.8, 'lost arrives before the delay has passed');
@ev = events_until(1, 10);
is(summary(@ev), "delay_ended n:a $tdl", 'then delay_ended, with the lost grant\'s token');
ok(time - $t_kill >= 1.9, 'delay_ended only after the delay (2 s)');
isnt($ev[0]{pid}, $dl_pid, 'sent by the supervisor\'s notifier');
ok(gone($dl_pid), 'the ended session\'s backend exited at once');
finish($dl);

my $tp = $s->query_safe("SELECT fencing.acquire('n:a', permits => 2)");
is(summary(events_until(1)), "granted n:a $tp", 'a permit: granted under the resource\'s name, with the permit\'s token');
$s->query_safe("SELECT fencing.release('n:a')");
is(summary(events_until(1)), "released n:a $tp", 'and released');
my $tsh = $s->query_safe("SELECT fencing.acquire('n:a', shared => true)");
is(summary(events_until(1)), "granted n:a $tsh", 'a shared hold: granted, with the latest token');
$s->query_safe("SELECT fencing.release('n:a')");
is(summary(events_until(1)), "released n:a $tsh", 'and released');

# ---- the whole database; settings reach connected sessions ------------------------------

$s->query_safe("SELECT fencing.acquire('n:c'); SELECT fencing.release('n:c')");
is(summary(events()), '', 'n:c is not enabled');
$node->safe_psql('postgres', "SELECT fencing.set_notify(NULL)");
my $tc = $s->query_safe("SELECT fencing.acquire('n:c')");
$s->query_safe("SELECT fencing.release('n:c')");
is(summary(events_until(2)), "granted n:c $tc, released n:c $tc",
	'set_notify(NULL): every resource; a session connected before sees it at its next transaction');
$node->safe_psql('postgres', "SELECT fencing.set_notify(NULL, false)");
$s->query_safe("SELECT fencing.acquire('n:c'); SELECT fencing.release('n:c')");
is(summary(events()), '', 'set_notify(NULL, false): off again');
my $ta = $s->query_safe("SELECT fencing.acquire('n:a')");
is(summary(events_until(1)), "granted n:a $ta", 'the per-resource setting stays');
$node->safe_psql('postgres', "SELECT fencing.set_notify('n:a', false)");
$s->query_safe("SELECT fencing.release('n:a')");
is(summary(events_until(1)), "released n:a $ta", 'a grant made while enabled still announces its end');
$s->query_safe("SELECT fencing.acquire('n:a'); SELECT fencing.release('n:a')");
is(summary(events()), '', 'later grants are not notified');

# ---- locks released behind fencing's back; PREPARE ---------------------------------------

$node->safe_psql('postgres', "SELECT fencing.set_notify('n:a')");
my $tu = $s->query_safe("SELECT fencing.acquire('n:a')");
events_until(1);
$s->query_safe('SELECT pg_advisory_unlock_all()');
is(summary(events_until(1)), "released n:a $tu", 'pg_advisory_unlock_all(): released, at its commit');
my $td = $s->query_safe("SELECT fencing.acquire('n:a')");
events_until(1);
$s->query_safe('DISCARD ALL');
is(summary(events_until(1)), "released n:a $td", 'DISCARD ALL: released');
$s->query_safe('LISTEN fencing; UNLISTEN fencing');    # (DISCARD ALL ended no listening of the listener)
my ($st) = psql_sqlstate($node, 'postgres', "BEGIN; SELECT fencing.acquire('n:a'); PREPARE TRANSACTION 'p'");
is($st, '0A000', 'a transaction that queued a notification cannot be prepared (0A000)');
like(summary(events_until(1)), qr/^lost n:a \d+$/,
	'its session lock stays held: no granted (rolled back), and lost when that session ends');
$node->safe_psql('postgres', "SELECT fencing.set_notify('n:a', false)");

# ---- escaping ---------------------------------------------------------------------------

my $nasty = "n:\"q\\u\tote\x{1}";
$node->safe_psql('postgres', "SELECT fencing.set_notify(E'n:\"q\\\\u\\tote\\001')");
my $tn = $s->query_safe("SELECT fencing.acquire(E'n:\"q\\\\u\\tote\\001')");
@ev = events_until(1);
is($ev[0]{resource}, $nasty, 'a name with quotes, a backslash and control characters survives JSON');
is($ev[0]{token}, $tn, 'with its token');
$s->query_safe('SELECT fencing.release_all()');
is(summary(events_until(1)), "released $nasty $tn", 'release_all announces the end');

# ---- the bound per transaction ----------------------------------------------------------

$node->safe_psql('postgres', "SELECT fencing.set_notify('n:many')");
my ($rc, $out, $err) = $node->psql('postgres', q{DO $$ BEGIN FOR i IN 1..5001 LOOP
  PERFORM fencing.acquire('n:many'); PERFORM fencing.release('n:many'); END LOOP; END $$});
is($rc, 0, 'a transaction with 10,002 events commits');
like($err, qr/WARNING:.*fencing.*not sent/, 'with a warning that some notifications were not sent');
@ev = events_until(10000, 30);
is(scalar(@ev), 10000, 'exactly 10,000 notifications of one transaction are sent');
is(scalar(grep { $_->{event} eq 'granted' } @ev), 5000, 'the first ones, in order');

# ---- who may -------------------------------------------------------------------------

is((psql_sqlstate($node, 'postgres', "SET ROLE app; SELECT fencing.set_notify('n:app')"))[0], '42501',
	'set_notify is not executable by a role with USAGE only');
$node->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION fencing.set_notify(text, boolean) TO app');
is((psql_sqlstate($node, 'postgres', "SET ROLE app; SELECT fencing.set_notify('n:app')"))[0], '',
	'GRANT EXECUTE lets it');
# A new resource key secret gives every name a new key: a connected session
# sees the settings under the new keys.
my $tapp = $s->query_safe("SELECT fencing.acquire('n:app'); SELECT fencing.release('n:app')");
is(scalar(events_until(2)), 2, 'n:app notifies');
$node->safe_psql('postgres', 'INSERT INTO fencing.key_secret DEFAULT VALUES');
$tapp = (split /\n/, $s->query_safe("SELECT fencing.acquire('n:app'); SELECT fencing.release('n:app')"))[0];
is(summary(events_until(2)), "granted n:app $tapp, released n:app $tapp",
	'after a new resource key secret, still (a session connected before)');

is($node->safe_psql('postgres', "SELECT string_agg(coalesce(resource, '(all)'), ',' ORDER BY resource) FROM fencing.notify_settings"),
	"n:\"q\\u\tote\x{1},n:app,n:many,n:x-open", 'fencing.notify_settings lists the enabled resources');

# ---- an ending session never waits for long: a synchronous standby that is not there ---------

# Tokens are issued before the standby is configured (acquisition waits for
# it). Then: the notifier's commit does not wait for the missing standby;
# and when another commit holds the notification queue (it waits for the
# standby after its NOTIFY), the ending session still ends at once and its
# locks are freed; its lost is sent once the queue is free again, once.
$node->safe_psql('postgres',
	"SELECT fencing.set_notify('n:sync'), fencing.set_notify('n:sync2'); CREATE TABLE blocker_t (a int)");
my $h1 = session();
my $th1 = $h1->query_safe("SELECT fencing.acquire('n:sync')");
my ($h1_pid) = $h1->query_safe('SELECT pg_backend_pid()');
my $h2 = session();
my $th2 = $h2->query_safe("SELECT fencing.acquire('n:sync2')");
my ($h2_pid) = $h2->query_safe('SELECT pg_backend_pid()');
is(summary(events_until(2)), "granted n:sync $th1, granted n:sync2 $th2", 'two holders');
$node->append_conf('postgresql.conf', "synchronous_standby_names = 'nobody'\n");
$node->reload;
sleep 0.5;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($h1_pid)");
ok(gone($h1_pid), 'with a synchronous standby configured but absent, a holder ends');
is(summary(events_until(1)), "lost n:sync $th1", 'its lost is sent: its commit does not wait for the standby');
my $blocker = session();
$blocker->query_safe('SET synchronous_commit = on');
my ($blocker_pid) = $blocker->query_safe('SELECT pg_backend_pid()');
$blocker->{stdin} .= "BEGIN; NOTIFY other_channel; INSERT INTO blocker_t VALUES (1); COMMIT;\n";
$blocker->{run}->pump_nb;
my $waiting = '';
for (1 .. 100)
{
	$waiting = $node->safe_psql('postgres', "SELECT wait_event FROM pg_stat_activity WHERE pid = $blocker_pid");
	last if $waiting eq 'SyncRep';
	sleep 0.05;
}
is($waiting, 'SyncRep', 'another commit holds the notification queue, waiting for the standby');
my $t_kill = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($h2_pid)");
ok(gone($h2_pid), 'a holder ends meanwhile');
my $took = time - $t_kill;
cmp_ok($took, '<', 2, sprintf('it ends at once: it does not wait for the queue (%.1f s)', $took));
is($node->safe_psql('postgres', "SELECT count(*) FROM fencing.locks WHERE resource = 'n:sync2'"), '0', 'its lock is free');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($blocker_pid)");
$node->adjust_conf('postgresql.conf', 'synchronous_standby_names', undef);
$node->reload;
sleep 0.5;
my @late = grep { $_->{event} eq 'lost' } events_until(1, 5);
is(summary(@late), "lost n:sync2 $th2", 'its lost is sent once the queue is free, once');
finish($_) for ($h1, $h2, $blocker);

finish($_) for ($s, $listener);
$node->stop;
done_testing();

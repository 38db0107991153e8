# Leases: a holder that goes silent loses its fencing locks within lease + 1 s
# (the server ends its session), one that keeps talking or is busy in a long
# statement keeps them, and the session's own idle timeouts are never touched.
#
# The silent, talking and busy holders run at the same time, so the whole file
# takes about as long as the longest of them (3 s).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(send_nb wait_tag psql_sqlstate pause);

my $node = PostgreSQL::Test::Cluster->new('leases');
$node->init;
$node->append_conf('postgresql.conf', "log_min_messages = warning\n");
$node->start;

$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing;
  CREATE TABLE work_log (id int PRIMARY KEY, note text);
});

# ---- helpers -----------------------------------------------------------------

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

# q_err($s, $sql): runs $sql in $s; returns (output, stderr), whether or not it failed.
sub q_err
{
	my ($s, $sql) = @_;
	$s->{stderr} = '';
	my ($out) = $s->query($sql);
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return ($out, $err);
}

sub finish
{
	my ($s) = @_;
	eval { $s->quit; };
	eval { $s->{run}->kill_kill; };
	return;
}

# The pid of a lock's holder, or '' when nobody holds it.
sub holder_of
{
	my ($resource) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM fencing.locks WHERE resource = '$resource' AND granted");
}

# sqlstate_of($sql): the SQLSTATE $sql fails with ('' if it succeeds).
sub sqlstate_of { return (psql_sqlstate($node, 'postgres', $_[0]))[0]; }

# ---- the silent holders, the talking one and the busy one, all at once ------

# silent_xact: a session lock with a 1 s lease, then uncommitted work, then
# silence (idle in transaction).
my $silent_xact = session();
my $t_silent_xact = $silent_xact->query_safe(
	"SELECT fencing.acquire('lease:silent-xact', lease => '1s')");
my ($silent_xact_pid) = $silent_xact->query_safe('SELECT pg_backend_pid()');
my $silent_xact_last = $silent_xact->query_safe(
	"BEGIN; INSERT INTO work_log VALUES (1, 'uncommitted'); SELECT clock_timestamp()");

# silent_idle: a session lock with a 1 s lease, then silence (idle, no transaction).
my $silent_idle = session();
my $t_silent_idle = $silent_idle->query_safe(
	"SELECT fencing.acquire('lease:silent-idle', lease => '1s')");
my $silent_idle_last = $silent_idle->query_safe('SELECT clock_timestamp()');

# xact: a transaction lock with a lease, then idle in transaction.
my $xact = session();
my $xact_last = $xact->query_safe(q{
  BEGIN;
  SELECT fencing.acquire_xact('lease:xact', NULL, '1s') AS t \gset
  INSERT INTO work_log VALUES (2, 'uncommitted, xact lock');
  SELECT :t || ' ' || clock_timestamp()});
my ($t_xact, $xact_last_ts) = split / /, $xact_last, 2;

# Waiters, each blocked in fencing.acquire; each reports the token it got and
# the seconds since its holder's last statement.
my %waiter;
for my $w (['silent-xact', $silent_xact_last], ['silent-idle', $silent_idle_last], ['xact', $xact_last_ts])
{
	my ($name, $since) = @$w;
	my $s = session();
	send_nb($s, "SELECT fencing.acquire('lease:$name') || ' ' || "
		  . "round(extract(epoch FROM clock_timestamp() - '$since'::timestamptz)::numeric, 3)", 'got');
	$waiter{$name} = $s;
}

# talk: keeps talking for 3x its lease (statements and renew in turn).
my $talk = session();
my $t_talk = $talk->query_safe("SELECT fencing.acquire('lease:talk', lease => '1s')");
my ($talk_pid) = $talk->query_safe('SELECT pg_backend_pid()');

# busy: a 3 s statement with a 1 s lease.
my $busy = session();
my $t_busy = $busy->query_safe("SELECT fencing.acquire('lease:busy', lease => '1s')");
my ($busy_pid) = $busy->query_safe('SELECT pg_backend_pid()');
send_nb($busy, 'SELECT pg_sleep(3)', 'slept');

# While they run: fencing.locks shows the lease and when it runs out.
my $locks = $node->safe_psql('postgres', q{
  SELECT resource, lease, expires_at IS NOT NULL,
         expires_at > now() AND expires_at <= now() + interval '1 s 100 ms'
    FROM fencing.locks WHERE resource = 'lease:talk'});
is($locks, 'lease:talk|00:00:01|t|t', 'fencing.locks shows lease and expires_at of a leased lock');

my $talk_failures = 0;
my $talk_started = time;
for my $i (1 .. 12)
{
	pause 0.25;
	my (undef, $failed) = $talk->query($i % 2 ? 'SELECT 1' : "SELECT fencing.renew('lease:talk')");
	$talk_failures += $failed;
}
my $talked = time - $talk_started;
cmp_ok($talked, '>=', 3.0, 'the talking holder talked for 3x its lease');
is($talk_failures, 0, 'statements and renew of the talking holder all succeeded');
is(holder_of('lease:talk'), $talk_pid, 'a holder that keeps talking keeps its lock');
is($talk->query_safe("SELECT fencing.renew('lease:talk')"), '00:00:01', 'renew returns the lease left');
is($node->safe_psql('postgres', "SELECT fencing.try_acquire('lease:talk') IS NULL"),
	't', 'another session still cannot take the talking holder\'s lock');
is($talk->query_safe("SELECT fencing.release('lease:talk')"), 't', 'the talking holder releases');
my (undef, $renew_err) = q_err($talk, "\\set VERBOSITY verbose\nSELECT fencing.renew('lease:talk')");
like($renew_err, qr/ERROR:\s+23T01:/, 'renew after release raises 23T01');
finish($talk);

# The busy holder: not killed during its 3 s statement.
my ($slept, $slept_err) = wait_tag($busy, 'slept');
is($slept_err, '', 'a holder busy in pg_sleep(3) with a 1 s lease is not interrupted');
is($busy->query_safe('SELECT pg_backend_pid()'), $busy_pid, 'the busy holder\'s session is alive afterwards');
is(holder_of('lease:busy'), $busy_pid, 'and it still holds its lock');
$busy->query_safe("SELECT fencing.release('lease:busy')");

# The silent holders were ended, and their waiters got the locks.
for my $w (['silent-xact', $t_silent_xact, 'session lock, idle in transaction'],
	['silent-idle', $t_silent_idle, 'session lock, idle'],
	['xact', $t_xact, 'acquire_xact, idle in transaction'])
{
	my ($name, $token, $what) = @$w;
	my ($out, $err) = wait_tag($waiter{$name}, 'got');
	is($err, '', "$what: the waiter's acquire succeeded");
	my ($t2, $elapsed) = split / /, $out;
	ok(defined $t2 && $t2 =~ /^\d+$/ && $t2 > $token, "$what: the waiter got a greater token ($t2 > $token)");
	ok(defined $elapsed && $elapsed >= 0.95 && $elapsed <= 2.0,
		"$what: the lock changed hands within lease + 1 s of the holder's last statement ($elapsed s)");
	is(holder_of("lease:$name"), $waiter{$name}->query_safe('SELECT pg_backend_pid()'),
		"$what: fencing.locks shows the waiter as holder");
}
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $silent_xact_pid"),
	'0', 'the silent holder\'s session was terminated');
is($node->safe_psql('postgres', 'SELECT count(*) FROM work_log'), '0',
	'the silent holders\' uncommitted work was rolled back');
# Its client (psql) learns it at its next statement, and gives up.
$silent_xact->{stdin} .= "SELECT 1;\n";
eval { $silent_xact->{run}->finish; };
like($silent_xact->{stderr}, qr/terminating connection because its fencing lease of \d+ ms expired|connection to server was lost/,
	'the silent holder finds its connection ended by the server');
# The server names the lease in the FATAL error it sends and logs (SQLSTATE
# 25P03 when idle in a transaction, 57P05 when idle).
ok($node->log_contains('terminating connection because its fencing lease of 1000 ms expired'),
	'server log: the lease expiry is named');
ok($node->log_contains('The client sent and read nothing for longer than the lease while the session held'),
	'server log: the lease expiry explains itself');


# ---- renew ------------------------------------------------------------------

is(sqlstate_of("SELECT fencing.renew('lease:never-held')"), '23T01', 'renew of a lock not held raises 23T01');
is(sqlstate_of("SELECT fencing.renew('lease:silent-idle')"), '23T01',
	'renew of a lock held by another session raises 23T01');
is($node->safe_psql('postgres',
		"SELECT fencing.renew('lease:none') IS NULL FROM (SELECT fencing.acquire('lease:none')) a"),
	't', 'renew of a lock without a lease returns NULL');
finish($_) for ($silent_xact, $silent_idle, $xact, values %waiter, $busy);

# ---- the session's own timeouts are never touched -----------------------------

my $own = session();
$own->query_safe("SET idle_session_timeout = '5min'; SET idle_in_transaction_session_timeout = '10min'");
my $show = q{SELECT current_setting('idle_session_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout')};
is($own->query_safe($show), '5min 10min', 'own timeouts set');
$own->query_safe("SELECT fencing.acquire('lease:own-a', lease => '2s')");
is($own->query_safe($show), '5min 10min', 'a leased lock leaves both timeouts alone');
$own->query_safe("BEGIN; SELECT fencing.acquire_xact('lease:own-x', NULL, '3s')");
is($own->query_safe($show), '5min 10min', 'so does acquire_xact with a lease inside a transaction');
$own->query_safe('COMMIT');
$own->query_safe('SELECT fencing.release_all()');
is($own->query_safe($show), '5min 10min', 'and release');
finish($own);

$node->stop;
done_testing();

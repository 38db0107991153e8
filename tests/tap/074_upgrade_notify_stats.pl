# Upgrading a 1.0 database to 1.1 (notifications and statistics): the 1.1
# module serves a database still at 1.0 (locks, tokens, protection as before;
# the 1.1 functions and views are absent, and statistics are already counted
# when the module is preloaded); ALTER EXTENSION fencing UPDATE TO '1.1' runs
# while locks of both scopes, a lease and a validate() guard are held, and
# afterwards every lock is still held with its token, tokens continue,
# protection holds, the counts from before the update are there, and
# notifications can be enabled. A database updated from 1.0 has exactly the
# objects and privileges of one created at 1.1.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('upgrade_1_1');
$node->init;
$node->append_conf('postgresql.conf', qq(
log_min_messages = warning
shared_preload_libraries = 'fencing'
));
$node->start;

sub sqlstate { return (psql_sqlstate($node, 'postgres', $_[0]))[0]; }
sub session { return $node->background_psql('postgres', on_error_stop => 0); }

is($node->safe_psql('postgres', q{SELECT string_agg(source || '>' || target, ',' ORDER BY source)
  FROM pg_extension_update_paths('fencing') WHERE path IS NOT NULL AND target = '1.1'}), '1.0>1.1', 'one update path to 1.1: from 1.0');

# ---- a 1.0 database under the 1.1 module ---------------------------------------------

$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing VERSION '1.0';
  CREATE TABLE acct (id int PRIMARY KEY, balance int, fence_token fencing.token);
  SELECT fencing.protect('acct');
});
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"), '1.0',
	'the database is at 1.0');
is($node->safe_psql('postgres', 'SELECT fencing.version()'), '1.2', 'the module is 1.2');
my $t0 = $node->safe_psql('postgres', "SELECT fencing.acquire('u:w'); SELECT fencing.release('u:w')");
($t0) = split /\n/, $t0;
$node->safe_psql('postgres', "INSERT INTO acct VALUES (1, 100, $t0)");
is(sqlstate("UPDATE acct SET balance = 1, fence_token = $t0 WHERE id = 1"), '23T01',
	'1.0 database: a stale write is rejected');
is(sqlstate("SELECT fencing.set_notify('u:s')"), '42883', '1.0 database: set_notify does not exist yet');
is(sqlstate('SELECT * FROM fencing.stats'), '42P01', '1.0 database: fencing.stats does not exist yet');

my $holder = session();
my $ts = $holder->query_safe("SELECT fencing.acquire('u:s')");
my $tl = $holder->query_safe("SELECT fencing.acquire('u:l', lease => '10 min')");
my $xact = session();
my $tx = $xact->query_safe("BEGIN; SELECT fencing.acquire_xact('u:x')");
my $guard = session();
is($guard->query_safe("BEGIN; SELECT fencing.validate('u:s', $ts) = $ts"), 't', 'a validate() guard is held');

# ---- the update, with all of that held ---------------------------------------------------

$node->safe_psql('postgres', "ALTER EXTENSION fencing UPDATE TO '1.1'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"), '1.1', 'updated to 1.1');
is($node->safe_psql('postgres', q{SELECT string_agg(resource || ':' || scope || ':' || token, ',' ORDER BY resource)
  FROM fencing.locks WHERE granted}), "u:l:session:$tl,u:s:session:$ts,u:x:transaction:$tx",
	'every lock is still held, with its token and scope');
is($node->safe_psql('postgres', "SELECT fencing.validate('u:s', $ts) = $ts AND fencing.validate('u:x', $tx) = $tx"),
	't', 'validate() of the held grants succeeds');
is($holder->query_safe("SELECT fencing.renew('u:l')"), '00:10:00', 'the lease is still enforced for its holder');
is($node->safe_psql('postgres', "SELECT fencing.try_acquire('u:s') IS NULL"), 't', 'the held lock is still exclusive');
my $t1 = $node->safe_psql('postgres', "SELECT fencing.acquire_xact('u:new')");
cmp_ok($t1, '>', $tx, 'tokens continue above every earlier one');
is(sqlstate("UPDATE acct SET balance = 2, fence_token = $t0 WHERE id = 1"), '23T01', 'protection holds');
is(sqlstate("UPDATE acct SET balance = 2, fence_token = $t1 WHERE id = 1"), '', 'a newer token is accepted');
is($xact->query_safe('COMMIT; SELECT 1'), '1', 'the transaction holding a lock across the update commits');
is($guard->query_safe('COMMIT; SELECT 1'), '1', 'so does the guarded one');
is($node->safe_psql('postgres', "SELECT fencing.acquire_xact('u:x') > $t1"), 't', 'its lock was freed at its end');

# ---- the 1.1 objects --------------------------------------------------------------------

is($node->safe_psql('postgres', 'SELECT collecting, grants >= 6, stale_rejections FROM fencing.stats'), 't|t|2',
	'fencing.stats counts what happened before the update too');
is($node->safe_psql('postgres', 'SELECT tbl, stale_rejections FROM fencing.table_stats'), 'acct|2',
	'per table as well');

my $listener = session();
$listener->query_safe('LISTEN fencing');
$node->safe_psql('postgres', "SELECT fencing.set_notify('u:s')");
$holder->query_safe("SELECT fencing.release('u:s')");
my $t2 = $holder->query_safe("SELECT fencing.acquire('u:s')");
my ($got) = $listener->query('SELECT 1');
my @payloads = $got =~ /with payload "(.*)" received/g;
is(scalar(@payloads), 1, 'notifications: a grant from before enabling ends silently, a new one is notified');
like($payloads[0] // '', qr/^\{"resource":"u:s","event":"granted","token":$t2,/, 'granted, with its token');
$holder->query_safe('SELECT fencing.release_all()');
$_->quit for ($holder, $xact, $guard, $listener);

# The settings are part of pg_dump's output, and a restored database notifies.
$node->safe_psql('postgres', 'SELECT fencing.set_notify(NULL)');
my $dump = $node->basedir . '/upgraded.dump';
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-F', 'c', '-f', $dump ], 'pg_dump of the updated database');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ], 'pg_restore');
is($node->safe_psql('restored', q{SELECT string_agg(coalesce(resource, '(all)'), ',' ORDER BY resource NULLS FIRST)
  FROM fencing.notify_settings}), '(all),u:s', 'the notification settings are restored');
my $rl = $node->background_psql('restored', on_error_stop => 0);
$rl->query_safe('LISTEN fencing');
my $tr = $node->safe_psql('restored', "SELECT fencing.acquire_xact('u:restored')");
($got) = $rl->query('SELECT 1');
like($got, qr/"resource":"u:restored","event":"granted","token":$tr,/, 'and the restored database notifies');
$rl->quit;
$node->safe_psql('postgres', 'SELECT fencing.set_notify(NULL, false)');

# ---- updated = created at 1.1 -------------------------------------------------------------

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', q{CREATE EXTENSION fencing VERSION '1.1'});
my $objects = q{
  SELECT string_agg(pg_describe_object(d.classid, d.objid, 0) || ' ' || coalesce(
           (SELECT c.relacl::text FROM pg_class c WHERE d.classid = 'pg_class'::regclass AND c.oid = d.objid),
           (SELECT p.proacl::text FROM pg_proc p WHERE d.classid = 'pg_proc'::regclass AND p.oid = d.objid), '-'),
         E'\n' ORDER BY 1)
    FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
   WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'fencing' AND d.deptype = 'e'};
my $fresh = $node->safe_psql('fresh', $objects);
my $updated = $node->safe_psql('postgres', $objects);
is($updated, $fresh, 'the updated database has the objects and privileges of a fresh 1.1 one');
like($fresh, qr/view fencing\.stats /, 'which include fencing.stats');
is($node->safe_psql('postgres', q{SELECT array_length(extconfig, 1) FROM pg_extension WHERE extname = 'fencing'}),
	$node->safe_psql('fresh', q{SELECT array_length(extconfig, 1) FROM pg_extension WHERE extname = 'fencing'}),
	'and the same configuration tables for pg_dump');

$node->safe_psql('postgres', "SELECT fencing.unprotect('acct'); DROP TABLE acct; DROP EXTENSION fencing");
pass('the updated extension drops');

$node->stop;
done_testing();

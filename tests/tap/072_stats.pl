# Statistics (fencing.stats, fencing.table_stats, fencing.reset_stats) on a
# server that preloads fencing: exact counts after a scripted sequence of
# grants, waits that end in a grant, a timeout, lock_timeout, wait => 0 and a
# cancel, a lease expiry, a termination, a disconnection, stale writes
# rejected and skipped (a partitioned table's rolled up to it), forgets; per
# database; the reset and who may call it; temporary tables take no entries;
# the bound on tables kept (fencing.stats_max_tables): a table whose counts
# are not kept shows NULL, never a false 0; the pruning of dropped ones; a
# crash resets the counters. Then the same server without the preload: the
# views explain themselves instead of failing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(send_nb wait_tag psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('stats');
$node->init;
$node->append_conf('postgresql.conf', qq(
log_min_messages = warning
shared_preload_libraries = 'fencing'
fencing.stats_max_tables = 4
));
$node->start;

$node->safe_psql('postgres', q{
  CREATE EXTENSION fencing;
  CREATE ROLE stats_reader LOGIN;
  GRANT USAGE ON SCHEMA fencing TO stats_reader;
  CREATE TABLE p_err (id int PRIMARY KEY, fence_token bigint);
  CREATE TABLE p_skip (id int PRIMARY KEY, fence_token bigint);
  CREATE TABLE p_part (id int PRIMARY KEY, fence_token bigint) PARTITION BY RANGE (id);
  CREATE TABLE p_part_1 PARTITION OF p_part FOR VALUES FROM (0) TO (100);
  CREATE TABLE p_part_2 PARTITION OF p_part FOR VALUES FROM (100) TO (200);
  INSERT INTO p_err VALUES (1, 100), (2, 100);
  INSERT INTO p_skip VALUES (1, 100), (2, 100), (3, 100);
  INSERT INTO p_part VALUES (1, 100), (101, 100);
  SELECT fencing.protect('p_err');
  SELECT fencing.protect('p_skip', on_stale => 'skip');
  SELECT fencing.protect('p_part');
});

my @counters = qw(grants waits wait_timeouts lease_expiries lost stale_rejections stale_skips forgets
  notifications_dropped);

# stats([$db]): fencing.stats as a hash.
sub stats
{
	my ($db) = @_;
	my $cols = join(', ', @counters, 'total_wait_time', 'max_wait_time', 'stats_reset', 'collecting',
		"coalesce(note, '')");
	my @v = split /\|/, $node->safe_psql($db // 'postgres', "SELECT $cols FROM fencing.stats"), -1;
	my %h;
	@h{ @counters, qw(total_wait_time max_wait_time stats_reset collecting note) } = @v;
	return \%h;
}

sub counts
{
	my ($s) = @_;
	return join(' ', map { "$_=$s->{$_}" } @counters);
}

sub expect
{
	my (%e) = @_;
	return join(' ', map { "$_=" . ($e{$_} // 0) } @counters);
}

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

sub q_err
{
	my ($s, $sql) = @_;
	$s->{stderr} = '';
	my ($out) = $s->query("\\set VERBOSITY verbose\n$sql");
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

sub waiting
{
	my ($resource) = @_;
	for (1 .. 400)
	{
		return 1
		  if $node->safe_psql('postgres', "SELECT count(*) FROM fencing.locks WHERE resource = '$resource' AND NOT granted")
		  eq '1';
		sleep 0.025;
	}
	return 0;
}

# ---- a clean start ---------------------------------------------------------------

my $before = stats();
is($before->{collecting}, 't', 'preloaded: statistics are collected');
is($before->{note}, '', 'and the note is empty');
$node->safe_psql('postgres', 'SELECT fencing.reset_stats()');
my $start = stats();
is(counts($start), expect(), 'after reset_stats every counter is 0');
is($start->{total_wait_time} . ' ' . $start->{max_wait_time}, '0 0', 'and the wait times are 0');
is($node->safe_psql('postgres', "SELECT stats_reset > now() - interval '1 min' FROM fencing.stats"),
	't', 'stats_reset is the time of the reset');

# ---- grants --------------------------------------------------------------------

$node->safe_psql('postgres', q{
  SELECT fencing.acquire('g:1');
  SELECT fencing.acquire('g:2');
  SELECT fencing.acquire('g:1', reentrant => true);   -- nested: the same grant
  SELECT fencing.release('g:1'); SELECT fencing.release('g:1'); SELECT fencing.release('g:2');
  SELECT fencing.try_acquire('g:3'); SELECT fencing.release('g:3');
  BEGIN; SELECT fencing.acquire_xact('g:4'); COMMIT;
  BEGIN; SELECT fencing.acquire_xact('g:5'); ROLLBACK;   -- counted: statistics are not transactional
  SELECT fencing.try_acquire_xact('g:6');
});
is(counts(stats()), expect(grants => 6), 'six grants: nested holds are not grants, rolled back ones are');

# ---- waits -----------------------------------------------------------------------

my $a = session();
my $b = session();
$a->query_safe("SELECT fencing.acquire('w')");    # grant 7
is($b->query_safe("SELECT fencing.try_acquire('w') IS NULL"), 't', 'try_acquire of a busy resource');
my (undef, $err) = q_err($b, "SELECT fencing.acquire('w', wait => '200ms')");
like($err, qr/55P03/, 'a wait that elapses: 55P03');
(undef, $err) = q_err($b, "SET lock_timeout = '100ms'; SELECT fencing.acquire('w'); RESET lock_timeout");
like($err, qr/55P03/, 'lock_timeout: 55P03');
(undef, $err) = q_err($b, "SELECT fencing.acquire('w', wait => '0')");
like($err, qr/55P03/, 'wait => 0 on a busy resource: 55P03');
(undef, $err) = q_err($b, "SET statement_timeout = '150ms'; SELECT fencing.acquire('w'); RESET statement_timeout");
like($err, qr/57014/, 'statement_timeout during the wait: 57014');
is(counts(stats()), expect(grants => 7, waits => 4, wait_timeouts => 3),
	'four waits: try_acquire never waits; the wait, lock_timeout and wait => 0 are timeouts, a cancel is not');
send_nb($b, "SELECT fencing.acquire('w') IS NOT NULL", 'got');
ok(waiting('w'), 'a waiter queues behind the holder');
sleep 0.4;
$a->query_safe("SELECT fencing.release('w')");
my ($got, $got_err) = wait_tag($b, 'got');
is($got_err, '', 'the waiter is granted when the holder releases');
$b->query_safe("SELECT fencing.release('w')");
my $s = stats();
is(counts($s), expect(grants => 8, waits => 5, wait_timeouts => 3), 'a wait that ends in a grant counts as a wait and a grant');
cmp_ok($s->{max_wait_time}, '>=', 400, "max_wait_time covers the granted wait ($s->{max_wait_time} ms >= 400)");
cmp_ok($s->{total_wait_time}, '>=', $s->{max_wait_time} + 200 + 100 + 150,
	"total_wait_time adds every wait ($s->{total_wait_time} ms)");
finish($_) for ($a, $b);

# ---- sessions that end with their locks -------------------------------------------

my $leased = session();
$leased->query_safe("SELECT fencing.acquire('l', lease => '1s')");    # grant 9
my ($leased_pid) = $leased->query_safe('SELECT pg_backend_pid()');
my $killed = session();
$killed->query_safe("SELECT fencing.acquire('d')");                   # grant 10
$killed->query_safe("BEGIN; SELECT fencing.acquire_xact('dx')");      # grant 11, transaction-scoped
my ($killed_pid) = $killed->query_safe('SELECT pg_backend_pid()');
my $quitter = session();
$quitter->query_safe("SELECT fencing.acquire('e'); SELECT fencing.acquire('e2')");    # grants 12, 13
my ($quitter_pid) = $quitter->query_safe('SELECT pg_backend_pid()');
ok(gone($leased_pid), 'the silent leased holder is ended by its lease');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($killed_pid)");
ok(gone($killed_pid), 'a holder is terminated');
finish($quitter);
ok(gone($quitter_pid), 'a holder disconnects without releasing');
finish($_) for ($leased, $killed);
is(counts(stats()), expect(grants => 13, waits => 5, wait_timeouts => 3, lease_expiries => 1, lost => 4),
	'one lease expiry; four session-scoped grants ended with their sessions (a transaction-scoped one is not counted)');

# ---- stale writes ----------------------------------------------------------------

is((psql_sqlstate($node, 'postgres', 'UPDATE p_err SET fence_token = 5 WHERE id = 1'))[0], '23T01', 'a stale UPDATE');
is((psql_sqlstate($node, 'postgres', 'UPDATE p_err SET fence_token = 100 WHERE id = 2'))[0], '23T01', 'an equal token');
is((psql_sqlstate($node, 'postgres', 'DELETE FROM p_err WHERE id = 1'))[0], '23T01', 'a DELETE without a token');
is((psql_sqlstate($node, 'postgres', 'UPDATE p_err SET fence_token = 500 WHERE id = 1'))[0], '', 'a newer token is accepted');
is($node->safe_psql('postgres', 'UPDATE p_skip SET fence_token = 7 RETURNING id'), '', 'skip mode: three stale rows skipped');
is((psql_sqlstate($node, 'postgres', 'UPDATE p_part SET fence_token = 5 WHERE id = 1'))[0], '23T01', 'partition 1');
is((psql_sqlstate($node, 'postgres', 'UPDATE p_part SET fence_token = 5 WHERE id = 101'))[0], '23T01', 'partition 2');
is(counts(stats()),
	expect(grants => 13, waits => 5, wait_timeouts => 3, lease_expiries => 1, lost => 4, stale_rejections => 5,
		stale_skips => 3),
	'five rejections, three skips; accepted writes count nothing');
is($node->safe_psql('postgres', 'SELECT tbl, stale_rejections, stale_skips FROM fencing.table_stats ORDER BY tbl::text'),
	"p_err|3|0\np_part|2|0\np_skip|0|3", 'per protected table; a partitioned table sums its partitions');
is($node->safe_psql('postgres',
		"SET ROLE stats_reader; SELECT grants FROM fencing.stats; SELECT count(*) FROM fencing.table_stats"),
	"13\n3", 'a role with USAGE on the schema reads both views');

# ---- forget ----------------------------------------------------------------------

my $forgotten = $node->safe_psql('postgres', "SELECT fencing.forget('0')");
cmp_ok($forgotten, '>=', 10, "forget removed the idle resources ($forgotten)");
is(stats()->{forgets}, $forgotten, 'forgets counts the removed resources');

# ---- per database ----------------------------------------------------------------

$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', q{CREATE EXTENSION fencing; SELECT fencing.reset_stats();
  SELECT fencing.acquire('o:1'); SELECT fencing.acquire('o:2'); SELECT fencing.release_all();});
is(stats('other')->{grants}, '2', 'another database counts its own grants');
is(stats()->{grants}, '13', 'and not this one\'s');

# ---- reset, and who may ----------------------------------------------------------

is((psql_sqlstate($node, 'postgres', 'SET ROLE stats_reader; SELECT fencing.reset_stats()'))[0], '42501',
	'a role without EXECUTE may not reset');
my $reset_before = stats()->{stats_reset};
sleep 0.01;
$node->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION fencing.reset_stats() TO stats_reader');
is((psql_sqlstate($node, 'postgres', 'SET ROLE stats_reader; SELECT fencing.reset_stats()'))[0], '',
	'GRANT EXECUTE lets it');
$s = stats();
is(counts($s), expect(), 'every counter of this database is 0 again');
is($s->{total_wait_time} . ' ' . $s->{max_wait_time}, '0 0', 'so are the wait times');
is($node->safe_psql('postgres', "SELECT '$s->{stats_reset}'::timestamptz > '$reset_before'::timestamptz"), 't',
	'stats_reset moved');
is($node->safe_psql('postgres', q{SELECT string_agg(stale_rejections || ' / ' || stale_skips, ',') FROM fencing.table_stats}),
	'0 / 0,0 / 0,0 / 0', 'the tables\' counters are 0');
is(stats('other')->{grants}, '2', 'the other database keeps its counters');

# ---- temporary tables take no entries ---------------------------------------------

# Any role that may create temporary tables (PUBLIC may) can protect them, in
# any database. Were their stale writes counted per table, such a role could
# take every entry of the server and leave the tables that matter uncounted:
# they count for their database only, and fencing.table_stats shows NULL
# for them (their counts are not kept).
$node->safe_psql('other', 'GRANT USAGE ON SCHEMA fencing TO stats_reader');
my $tmp = $node->background_psql('other', on_error_stop => 0, extra_params => [ '-U', 'stats_reader' ]);
$tmp->query_safe(join("\n", map { qq{
  CREATE TEMP TABLE tt$_ (id int PRIMARY KEY, fence_token bigint);
  INSERT INTO tt$_ VALUES (1, 100);
  SELECT fencing.protect('tt$_', tombstones => false);} } 1 .. 4));
for my $t (1 .. 4)
{
	my (undef, $terr) = q_err($tmp, "UPDATE tt$t SET fence_token = 5");
	like($terr, qr/23T01/, "a stale write to temporary table tt$t");
}
is($tmp->query_safe('SELECT stale_rejections FROM fencing.stats'), '4', 'the database counts them');
is($tmp->query_safe(q{SELECT count(*), count(stale_rejections), count(stats_reset) FROM fencing.table_stats
  WHERE tbl::text LIKE 'tt%'}), '4|0|0', 'fencing.table_stats shows NULL for the temporary tables');
is($tmp->query_safe('SELECT table_stats_missed FROM fencing.stats'), '0',
	'they are not writes that went uncounted for want of an entry');
psql_sqlstate($node, 'postgres', 'UPDATE p_err SET fence_token = 5 WHERE id = 2');
is($node->safe_psql('postgres', "SELECT stale_rejections FROM fencing.table_stats WHERE tbl = 'p_err'::regclass"), '1',
	'they took no entry: a table of another database still gets one (fencing.stats_max_tables = 4)');
finish($tmp);
$node->safe_psql('postgres', 'SELECT fencing.reset_stats()');

# ---- the bound on tables, and dropped tables ---------------------------------------

# fencing.stats_max_tables = 4: p_part_1 and p_part_2 count as two.
$node->safe_psql('postgres', q{
  CREATE TABLE p_x (id int PRIMARY KEY, fence_token bigint); INSERT INTO p_x VALUES (1, 100); SELECT fencing.protect('p_x');
  CREATE TABLE p_y (id int PRIMARY KEY, fence_token bigint); INSERT INTO p_y VALUES (1, 100); SELECT fencing.protect('p_y');
  CREATE TABLE p_z (id int PRIMARY KEY, fence_token bigint); INSERT INTO p_z VALUES (1, 100); SELECT fencing.protect('p_z');
});
my $db_reset = stats()->{stats_reset};
for my $t (qw(p_err p_part p_x p_y))
{
	my $id = $t eq 'p_part' ? 101 : 1;
	psql_sqlstate($node, 'postgres', "UPDATE $t SET fence_token = 5 WHERE id = $id");
}
is($node->safe_psql('postgres', q{SELECT string_agg(tbl || '=' || coalesce(stale_rejections::text, 'null'), ',' ORDER BY tbl::text)
  FROM fencing.table_stats}), 'p_err=1,p_part=1,p_skip=0,p_x=1,p_y=1,p_z=0',
	'four entries taken; tables without a stale write show 0 while every write was counted');
is($node->safe_psql('postgres', 'SELECT table_stats_missed FROM fencing.stats'), '0', 'none went uncounted yet');
psql_sqlstate($node, 'postgres', 'UPDATE p_part SET fence_token = 5 WHERE id = 1');
psql_sqlstate($node, 'postgres', 'UPDATE p_z SET fence_token = 5 WHERE id = 1');
is($node->safe_psql('postgres', 'SELECT stale_rejections, table_stats_missed FROM fencing.stats'), '6|2',
	'the database counts every rejection, and the two its tables\' entries could not');
is($node->safe_psql('postgres', "SELECT coalesce(stale_rejections::text, 'null') FROM fencing.table_stats WHERE tbl = 'p_z'::regclass"),
	'null', 'a table rejected without an entry shows NULL, not 0');
is($node->safe_psql('postgres', q{SELECT string_agg(tbl || '=' || coalesce(stale_rejections::text, 'null'), ',' ORDER BY tbl::text)
  FROM fencing.table_stats}), 'p_err=1,p_part=null,p_skip=null,p_x=1,p_y=1,p_z=null',
	'so does every table without an entry (which may have missed one too), and a partitioned table with such a partition (p_part_1)');
is($node->safe_psql('postgres', "SELECT count(*) FROM fencing.table_stats WHERE stats_reset IS DISTINCT FROM '$db_reset'"), '3',
	'those show no stats_reset either; the counted tables count since the database\'s');
$node->safe_psql('postgres', 'DROP TABLE p_err');
sleep 1.1;    # pruning runs at most once a second
psql_sqlstate($node, 'postgres', 'UPDATE p_part SET fence_token = 5 WHERE id = 1');
is($node->safe_psql('postgres', "SELECT stale_rejections, stats_reset > '$db_reset' FROM fencing.table_stats WHERE tbl = 'p_part'::regclass"),
	'2|t', 'a dropped table\'s entry goes to the next table with a rejection, which counts from then on (its stats_reset)');
is($node->safe_psql('postgres', "SELECT coalesce(stale_rejections::text, 'null') FROM fencing.table_stats WHERE tbl = 'p_z'::regclass"),
	'null', 'a table still without an entry stays NULL');
$node->safe_psql('postgres', 'SELECT fencing.reset_stats()');
is($node->safe_psql('postgres', q{SELECT string_agg(tbl || '=' || coalesce(stale_rejections::text, 'null'), ',' ORDER BY tbl::text)
  FROM fencing.table_stats}), 'p_part=0,p_skip=0,p_x=0,p_y=0,p_z=0', 'reset_stats: every table counts again from 0');

# ---- a crash starts over -----------------------------------------------------------

$node->safe_psql('postgres', "SELECT fencing.acquire('c'); SELECT fencing.release('c')");
my $pre_crash = stats();
cmp_ok($pre_crash->{grants}, '>', 0, 'counted before the crash');
$node->stop('immediate');
$node->start;
$s = stats();
is(counts($s), expect(), 'after a crash every counter starts from 0');
is($node->safe_psql('postgres', "SELECT '$s->{stats_reset}'::timestamptz > '$pre_crash->{stats_reset}'::timestamptz"),
	't', 'and stats_reset is the restart');

# ---- without the preload ------------------------------------------------------------

$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->adjust_conf('postgresql.conf', 'fencing.stats_max_tables', undef);
$node->restart;
$s = stats();
is($s->{collecting}, 'f', 'not preloaded: collecting is false');
like($s->{note}, qr/shared_preload_libraries/, 'and the note says why');
is(join(',', map { $s->{$_} } @counters, 'stats_reset'), ',,,,,,,,,', 'the counters are NULL, not 0');
is($node->safe_psql('postgres', "SELECT count(*), count(stale_rejections) FROM fencing.table_stats"), '5|0',
	'fencing.table_stats lists the protected tables with NULL counters');
my ($rc, $out, $werr) = $node->psql('postgres', 'SELECT fencing.reset_stats()');
is($rc, 0, 'reset_stats does not fail');
like($werr, qr/WARNING:.*not collected/, 'it warns that nothing is collected');
$node->safe_psql('postgres', "SELECT fencing.acquire('np'); SELECT fencing.release('np')");
pass('acquisition works without the preload');

$node->stop;
done_testing();

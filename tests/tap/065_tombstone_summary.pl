# An INSERT into a table without tombstones skips the tombstone lookup
# (fencing preloaded): the server keeps, per database and table, whether
# the table has any. A database dropped and created again under its old OID,
# from a template in which the same table (same OID) has tombstones, must not
# inherit what the dropped database's table said: a stale INSERT of a key
# deleted in the template is rejected (23T01) in the new database.
#
#   app:  t, no tombstones; an INSERT there (the server notes "none")
#   tmpl: CREATE DATABASE tmpl TEMPLATE app; a fenced DELETE of key 1 (50)
#   DROP DATABASE app; CREATE DATABASE app TEMPLATE tmpl OID = <app's OID>
#   app:  INSERT of key 1 with token 20 -> 23T01
#
# Also: a row written into fencing.tombstones by SQL counts as a tombstone
# of the table it names, for INSERTs that come after it. And after a
# restart, the first look at a table with tombstones reads the greatest of
# their tokens: an INSERT with a token not above it looks its key up (a
# stale one is rejected), one with a newer token does not (its transaction
# is refused at commit if another records a tombstone with a token as
# great meanwhile); a table with more than 100,000 rows of tombstones then
# looks every key up, while (1.2) one whose 100,001 tombstones one DELETE
# recorded, most of them in a few rows of runs, is still tracked.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('summary');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'fencing'
log_min_messages = warning
});
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
  CREATE EXTENSION fencing;
  CREATE TABLE t (id int PRIMARY KEY, v text, fence_token fencing.token);
  SELECT fencing.protect('t');
  INSERT INTO t VALUES (1, 'one', 10);
});
my $oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'app'");
# An INSERT with no tombstone anywhere: the server notes that t has none.
$node->safe_psql('app', "INSERT INTO t VALUES (2, 'two', 10)");

$node->safe_psql('postgres', 'CREATE DATABASE tmpl TEMPLATE app');
$node->safe_psql('tmpl', "BEGIN; SET LOCAL fencing.token = '50'; DELETE FROM t WHERE id = 1; COMMIT");
is($node->safe_psql('tmpl', 'SELECT count(*) FROM fencing.tombstones'), '1', 'the template has a tombstone of key 1');

$node->safe_psql('postgres', 'DROP DATABASE app');
$node->safe_psql('postgres', "CREATE DATABASE app TEMPLATE tmpl OID = $oid");
is($node->safe_psql('app', q{SELECT count(*) FROM fencing.tombstones WHERE tbl = 't'::regclass}), '1',
	'the database created again under its old OID has the tombstone, under the same table OID');
my ($rc, $out, $err) = $node->psql('app', "INSERT INTO t VALUES (1, 'stale', 20)");
like($err, qr/stale fence token/, 'a stale INSERT of the deleted key is rejected there (23T01)');
is($node->safe_psql('app', 'SELECT count(*) FROM t WHERE id = 1'), '0', 'the stale row did not land');

# A tombstone written by SQL (as a restore would) counts for later INSERTs.
$node->safe_psql('app', q{
  CREATE TABLE u (id int PRIMARY KEY, fence_token fencing.token);
  SELECT fencing.protect('u');
  INSERT INTO u VALUES (1, 10);
});
# The key hash of id = 7 as the module computes it: from a fenced DELETE of
# it in a scratch table of the same key type, whose tombstone we copy.
$node->safe_psql('app', q{
  CREATE TABLE scratch (id int PRIMARY KEY, fence_token fencing.token);
  SELECT fencing.protect('scratch');
  INSERT INTO scratch VALUES (7, 10);
  BEGIN; SET LOCAL fencing.token = '70'; DELETE FROM scratch WHERE id = 7; COMMIT;
  INSERT INTO fencing.tombstones
  SELECT 'u'::regclass, key_hash, token, deleted_at FROM fencing.tombstones WHERE tbl = 'scratch'::regclass;
});
($rc, $out, $err) = $node->psql('app', "INSERT INTO u VALUES (7, 20)");
like($err, qr/stale fence token/, 'a tombstone written by SQL is met by a later INSERT (23T01)');

# ---- after a restart -------------------------------------------------------------

$node->safe_psql('app', q{
  CREATE TABLE r (id int PRIMARY KEY, fence_token fencing.token);
  SELECT fencing.protect('r');
  INSERT INTO r SELECT g, 10 FROM generate_series(1, 40) g;
  BEGIN; SET LOCAL fencing.token = '20'; DELETE FROM r WHERE id = 9; COMMIT;
  BEGIN; SET LOCAL fencing.token = '12'; DELETE FROM r WHERE id BETWEEN 10 AND 30; COMMIT;
  CREATE TABLE big (id int PRIMARY KEY, fence_token fencing.token);
  SELECT fencing.protect('big');
  INSERT INTO big SELECT g, 10 FROM generate_series(1, 100002) g;
  CREATE TABLE bigrun (id int PRIMARY KEY, fence_token fencing.token);
  SELECT fencing.protect('bigrun');
  INSERT INTO bigrun SELECT g, 10 FROM generate_series(1, 100002) g;
  BEGIN; SET LOCAL fencing.token = '20'; DELETE FROM bigrun WHERE id <= 100001; COMMIT;
});
# A row of fencing.tombstones per key: DELETEs of 64 rows each (a statement
# records its first 64 tombstones a row each).
$node->safe_psql('app', q{
  BEGIN; SET LOCAL fencing.token = '20';
  DO $$ BEGIN
    FOR i IN 0..1562 LOOP
      DELETE FROM big WHERE id > i * 64 AND id <= least((i + 1) * 64, 100001);
    END LOOP;
  END $$;
  COMMIT;
});
is($node->safe_psql('app', q{SELECT count(*) FROM fencing.tombstones WHERE tbl = 'big'::regclass}),
	'100001', 'big: a row of tombstones per deleted key');
ok($node->safe_psql('app', q{SELECT count(*) FROM fencing.tombstone_runs WHERE tbl = 'bigrun'::regclass}) < 1000,
	'bigrun: most of its tombstones in a few rows of runs');
$node->restart;
($rc, $out, $err) = $node->psql('app', "INSERT INTO r VALUES (9, 20)");
like($err, qr/stale fence token/, 'after a restart, an INSERT with the greatest tombstone token is judged (23T01)');
($rc, $out, $err) = $node->psql('app', "INSERT INTO r VALUES (9, 19)");
like($err, qr/stale fence token/, 'and so is one below it');
is($node->safe_psql('app', 'SELECT count(*) FROM r WHERE id = 9'), '0', 'neither row landed');

# An INSERT with a newer token skips the lookup: another transaction's
# tombstone with a token as great, recorded before its commit, refuses it.
sub refused_by_concurrent_delete
{
	my ($table, $insert_token, $delete_token, $delete_id) = @_;
	my $s1 = $node->background_psql('app', on_error_stop => 0);
	$s1->query_safe("BEGIN; INSERT INTO $table VALUES (1000000, $insert_token)");
	$node->safe_psql('app',
		"BEGIN; SET LOCAL fencing.token = '$delete_token'; DELETE FROM $table WHERE id = $delete_id; COMMIT");
	$s1->{stderr} = '';
	$s1->query('COMMIT');
	my $refused = $s1->{stderr} =~ /could not check the inserted keys/ ? 1 : 0;
	$s1->quit;
	return $refused;
}
is(refused_by_concurrent_delete('r', 30, 40, 1), 1,
	'after a restart, an INSERT with a newer token skipped its lookup (refused at commit by a DELETE at 40)');
is(refused_by_concurrent_delete('r', 50, 45, 2), 0, 'a DELETE with an older token than the INSERT\'s does not refuse it');
is($node->safe_psql('app', 'SELECT fence_token FROM r WHERE id = 1000000'), '50', 'that row landed');
is(refused_by_concurrent_delete('big', 30, 40, 100002), 0,
	'a table with more than 100,000 rows of tombstones looks every key up after a restart (no refusal at commit)');
is(refused_by_concurrent_delete('bigrun', 30, 40, 100002), 1,
	'one with 100,001 tombstones in fewer rows (runs) is tracked: its INSERT skipped the lookup, refused at commit');

$node->stop;
done_testing();

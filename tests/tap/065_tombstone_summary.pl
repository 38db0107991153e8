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
# (DELETE_TABLE: the table the DELETE is run on, TABLE's own by default.)
sub refused_by_concurrent_delete
{
	my ($table, $insert_token, $delete_token, $delete_id, $delete_table) = @_;
	$delete_table //= $table;
	my $s1 = $node->background_psql('app', on_error_stop => 0);
	$s1->query_safe("BEGIN; INSERT INTO $table VALUES (1000000, $insert_token)");
	$node->safe_psql('app',
		"BEGIN; SET LOCAL fencing.token = '$delete_token'; DELETE FROM $delete_table WHERE id = $delete_id; COMMIT");
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

# ---- tables without a usable primary key (1.2) ------------------------------------
# An INSERT that no tombstone could reject needs no key. The order of a
# parallel pg_restore: a partitioned table's check (cloned onto its
# partitions) before a partition's rows, whose primary key comes after them
# (pg_dump's statements). Nothing was deleted yet: the rows go in.
$node->safe_psql('app', q{
  CREATE TABLE ev (region text NOT NULL, id int NOT NULL, fence_token bigint) PARTITION BY LIST (region);
  CREATE TABLE ev_eu (region text NOT NULL, id int NOT NULL, fence_token bigint);
  CREATE TABLE ev_us (region text NOT NULL, id int NOT NULL, fence_token bigint);
  ALTER TABLE ONLY ev ATTACH PARTITION ev_eu FOR VALUES IN ('eu');
  ALTER TABLE ONLY ev ATTACH PARTITION ev_us FOR VALUES IN ('us');
  ALTER TABLE ONLY ev ADD CONSTRAINT ev_pkey PRIMARY KEY (region, id);
  CREATE TRIGGER "~fencing_enforce" BEFORE INSERT OR DELETE OR UPDATE ON ev
    FOR EACH ROW EXECUTE FUNCTION fencing.enforce('fence_token', 'false', 'error', 'true', 'true');
  ALTER TABLE ev ENABLE ALWAYS TRIGGER "~fencing_enforce";
});
($rc, $out, $err) = $node->psql('app', "COPY ev_eu FROM STDIN;\neu\t1\t40\neu\t2\t41\n\\.\n"
	  . "INSERT INTO ev_us SELECT 'us', g, 42 FROM generate_series(1, 100) g;");
is($err, '', 'restore order: COPY and INSERT into partitions without primary keys, under the check, go in');
is($node->safe_psql('app', 'SELECT count(*) FROM ev'), '102', 'restore order: every row landed');
$node->safe_psql('app', q{
  ALTER TABLE ONLY ev_eu ADD CONSTRAINT ev_eu_pkey PRIMARY KEY (region, id);
  ALTER INDEX ev_pkey ATTACH PARTITION ev_eu_pkey;
  ALTER TABLE ONLY ev_us ADD CONSTRAINT ev_us_pkey PRIMARY KEY (region, id);
  ALTER INDEX ev_pkey ATTACH PARTITION ev_us_pkey;
  BEGIN; SET LOCAL fencing.token = '100'; DELETE FROM ev WHERE region = 'eu' AND id = 1; COMMIT;
});
($rc, $out, $err) = $node->psql('app', "INSERT INTO ev VALUES ('eu', 1, 50)");
like($err, qr/stale fence token/, 'restore order: with the keys in place, a deleted key comes back only with a newer token (23T01)');
$node->safe_psql('app', "INSERT INTO ev VALUES ('eu', 1, 101)");

# A table whose primary key is dropped (in a transaction that then rolls
# back: the key change with tombstones is refused at commit), with a
# tombstone of 50: an INSERT with 60 goes in, one with 50 needs the key.
$node->safe_psql('app', q{
  CREATE TABLE kl (id int PRIMARY KEY, fence_token fencing.token);
  SELECT fencing.protect('kl');
  INSERT INTO kl VALUES (1, 10), (2, 10);
  BEGIN; SET LOCAL fencing.token = '50'; DELETE FROM kl WHERE id = 1; COMMIT;
});
is($node->safe_psql('app', q{BEGIN; ALTER TABLE kl DROP CONSTRAINT kl_pkey; INSERT INTO kl VALUES (9, 60);
	SELECT count(*) FROM kl WHERE id = 9; ROLLBACK;}), '1',
	'without its key, an INSERT that the table\'s tombstone (50) cannot reject goes in (60)');
($rc, $out, $err) = $node->psql('app', q{BEGIN; ALTER TABLE kl DROP CONSTRAINT kl_pkey; INSERT INTO kl VALUES (8, 50); ROLLBACK;});
like($err, qr/protected with tombstones but has no usable primary key/, 'one that it could reject (50) is refused (55000)');
($rc, $out, $err) = $node->psql('app', q{BEGIN; ALTER TABLE kl DROP CONSTRAINT kl_pkey; SET LOCAL fencing.token = '60';
	DELETE FROM kl; ROLLBACK;});
like($err, qr/protected with tombstones but has no usable primary key/, 'and so is a fenced DELETE (55000)');

# A keyless inheritance child whose INSERT skipped its lookup: a tombstone
# recorded meanwhile elsewhere in the hierarchy, with a token as great,
# refuses its transaction at commit (40001); an older one does not.
$node->safe_psql('app', q{
  CREATE TABLE kp (id int PRIMARY KEY, fence_token fencing.token);
  CREATE TABLE kc (PRIMARY KEY (id)) INHERITS (kp);
  SELECT fencing.protect('kp');
  INSERT INTO kp SELECT g, 10 FROM generate_series(1, 3) g;
  ALTER TABLE kc DROP CONSTRAINT kc_pkey;
});
is(refused_by_concurrent_delete('kc', 30, 40, 1, 'ONLY kp'), 1,
	'a keyless child\'s INSERT (30) is refused at commit by a DELETE at 40 in its hierarchy meanwhile');
is(refused_by_concurrent_delete('kc', 50, 45, 2, 'ONLY kp'), 0, 'not by one at 45 below its 50');
is($node->safe_psql('app', 'SELECT fence_token FROM kc WHERE id = 1000000'), '50', 'that row landed');
($rc, $out, $err) = $node->psql('app', "INSERT INTO kc VALUES (1, 40)");
like($err, qr/protected with tombstones but has no usable primary key/,
	'an INSERT that the tombstone of 40 could reject needs the key the child lacks (55000)');

$node->stop;
done_testing();

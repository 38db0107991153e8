# The entries of fencing.table_stats and fencing.stats go back only when
# their table or database is gone for good (fencing.stats_max_tables = 3):
# a table whose DROP (by the pruning session itself) or CREATE (by another
# session) is not committed keeps its entry, so that it never shows a false
# 0 afterwards; the entries of a dropped database, its tables' and its own,
# go to the databases that need them (a role with CREATEDB could otherwise
# take them until the restart: 256 CREATE DATABASE / DROP DATABASE cycles
# switched statistics off for every later database).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PostgreSQL::Test::Cluster->new('stats_entries');
$node->init;
$node->append_conf('postgresql.conf', qq(
log_min_messages = warning
shared_buffers = 2MB
shared_preload_libraries = 'fencing'
fencing.stats_max_tables = 3
));
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
for my $t (qw(t1 t2 t3 t4))
{
	$node->safe_psql('postgres', qq{CREATE TABLE $t (id int PRIMARY KEY, fence_token bigint);
	  INSERT INTO $t VALUES (1, 100), (2, 100); SELECT fencing.protect('$t');});
}

# rows(): fencing.table_stats as "tbl=rejections/skips", NULL as "null".
sub rows
{
	return $node->safe_psql('postgres', q{SELECT string_agg(tbl || '=' || coalesce(stale_rejections::text, 'null')
	  || '/' || coalesce(stale_skips::text, 'null'), ',' ORDER BY tbl::text) FROM fencing.table_stats});
}

sub missed { return $node->safe_psql('postgres', 'SELECT table_stats_missed FROM fencing.stats'); }

sub stale
{
	my ($db, $t) = @_;
	my ($rc, $out, $err) = $node->psql($db, "UPDATE $t SET fence_token = 5 WHERE id = 1");
	like($err, qr/stale fence token/, "a stale write to $t ($db)");
	return;
}

# ---- the pruning session's own DROP, rolled back -----------------------------------

$node->safe_psql('postgres', 'SELECT fencing.reset_stats()');
stale('postgres', 't1');
stale('postgres', 't1');
stale('postgres', 't2');
stale('postgres', 't3');
is(rows(), 't1=2/0,t2=1/0,t3=1/0,t4=0/0', 'three entries taken: t1, t2, t3');
sleep 1.1;    # pruning runs at most once a second
my ($rc, $out, $err) = $node->psql('postgres', q{BEGIN; DROP TABLE t1; SELECT 1 FROM t4;
  UPDATE t4 SET fence_token = 5 WHERE id = 1});
like($err, qr/stale fence token/, 'a stale write to t4 in the transaction that drops t1 (then rolled back)');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_class WHERE relname = 't1'"), '1', 't1 exists');
is(rows(), 't1=2/0,t2=1/0,t3=1/0,t4=null/null',
	't1 kept its entry: its DROP was not committed when the entries ran out; t4 shows NULL, not a false 0');
is(missed(), '1', 't4\'s rejection went uncounted for it');

# ---- another session's CREATE, not committed yet ----------------------------------

$node->safe_psql('postgres', 'SELECT fencing.reset_stats()');
my $creator = $node->background_psql('postgres', on_error_stop => 0);
$creator->query_safe(q{BEGIN;
  CREATE TABLE n1 (id int PRIMARY KEY, fence_token bigint);
  INSERT INTO n1 VALUES (1, 100), (2, 100), (3, 100);
  SELECT fencing.protect('n1', on_stale => 'skip');});
is($creator->query_safe('UPDATE n1 SET fence_token = 5 RETURNING id'), '', 'three stale writes to n1, skipped');
stale('postgres', 't2');
stale('postgres', 't3');
sleep 1.1;
stale('postgres', 't4');
$creator->query_safe('COMMIT');
$creator->quit;
is(rows(), 'n1=0/3,t1=null/null,t2=1/0,t3=1/0,t4=null/null',
	'n1 kept its entry while its CREATE was not committed: its three skips, not a false 0');
is(missed(), '1', 't4\'s rejection went uncounted for it');

# ---- a dropped database's table entries ------------------------------------------

$node->safe_psql('postgres', q{CREATE DATABASE tpl; });
$node->safe_psql('tpl', q{CREATE EXTENSION fencing;
  CREATE TABLE d1 (id int PRIMARY KEY, fence_token bigint); INSERT INTO d1 VALUES (1, 100); SELECT fencing.protect('d1');
  CREATE TABLE d2 (id int PRIMARY KEY, fence_token bigint); INSERT INTO d2 VALUES (1, 100); SELECT fencing.protect('d2');
  CREATE TABLE d3 (id int PRIMARY KEY, fence_token bigint); INSERT INTO d3 VALUES (1, 100); SELECT fencing.protect('d3');});
$node->safe_psql('postgres', q{ALTER DATABASE tpl IS_TEMPLATE true; ALTER DATABASE tpl ALLOW_CONNECTIONS false;
  CREATE ROLE maker LOGIN CREATEDB;});
$node->safe_psql('postgres', 'SELECT fencing.reset_stats()');
$node->safe_psql('postgres', 'CREATE DATABASE gone TEMPLATE tpl', extra_params => [ '-U', 'maker' ]);
stale('gone', $_) for qw(d1 d2 d3);
is($node->safe_psql('gone', q{SELECT string_agg(tbl || '=' || stale_rejections, ',' ORDER BY tbl::text)
  FROM fencing.table_stats}), 'd1=1,d2=1,d3=1', 'a database of a role with CREATEDB takes every entry of the server');
$node->safe_psql('postgres', 'DROP DATABASE gone', extra_params => [ '-U', 'maker' ]);
sleep 1.1;
stale('postgres', 't2');
is(rows(), 'n1=0/0,t1=0/0,t2=1/0,t3=0/0,t4=0/0', 'once it is dropped, its entries go to the tables that need them');
is(missed(), '0', 'and nothing went uncounted');

# ---- 256 dropped databases -------------------------------------------------------

# Each database that used fencing took one of the 256 database entries; a
# dropped one's goes to the next database that needs one.
my $t0 = time;
my $script = '';
for my $i (1 .. 256)
{
	$script .= qq{CREATE DATABASE cycle TEMPLATE tpl STRATEGY FILE_COPY;
\\c cycle
SELECT collecting FROM fencing.stats;
\\c postgres
DROP DATABASE cycle;
};
}
($rc, $out, $err) = $node->psql('postgres', $script, extra_params => [ '-U', 'maker' ]);
is($rc, 0, '256 databases created, used and dropped');
is(join(',', grep { $_ ne 't' } split /\n/, $out), '', 'each one collected statistics');
note(sprintf('%.1f s for 256 cycles', time - $t0));
$node->safe_psql('postgres', 'CREATE DATABASE later TEMPLATE tpl', extra_params => [ '-U', 'maker' ]);
is($node->safe_psql('later', q{SELECT collecting, coalesce(note, '') FROM fencing.stats}), 't|',
	'a database after them still gets statistics');
stale('later', 'd1');
is($node->safe_psql('later', q{SELECT string_agg(tbl || '=' || coalesce(stale_rejections::text, 'null'), ','
  ORDER BY tbl::text) FROM fencing.table_stats}), 'd1=1,d2=0,d3=0', 'and table entries');
is($node->safe_psql('postgres', 'SELECT collecting FROM fencing.stats'), 't', 'the database that had one keeps it');

$node->stop;
done_testing();

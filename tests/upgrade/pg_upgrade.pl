# pg_upgrade of a cluster with fencing to another major of PostgreSQL.
#
# The old cluster runs the installation whose bin directory is
# FENCING_UPGRADE_OLD_BIN (PostgreSQL 15 with fencing, from the main run of
# tests/scripts/test.sh); the new one the PostgreSQL on the PATH (17 or 18
# with fencing, a portability run). In the old cluster:
#   - database app: fence state, tables protected three ways (a plain one, a
#     bigint column with allow_equal and on_stale => 'skip', a partitioned
#     one), rows written with tokens, a token handed out but never written;
#   - database far: a protected table whose tokens are far ahead of the
#     clock (4e15, below 2^52), so that its counter runs there, outside the
#     clock bound, and tokens issued after it.
# The old cluster is shut down and upgraded with pg_upgrade (copy mode). When
# the new release does not know a column option the old one sets on every
# column (which makes pg_upgrade fail for any table), the upgrade is skipped,
# saying which. In the new cluster, in each database:
#   1. the extension has the same version, and its catalog equals a fresh
#      install in the new cluster (tests/upgrade/FencingUpgrade.pm);
#   2. the fence state is intact: every old resource's fencing.current is
#      what it was (whatever the keys are computed from), and so are the
#      protection settings and the rows;
#   3. new tokens of a new resource (first, so that only the counter vouches
#      for it) and of every old resource are above every token issued before
#      the upgrade;
#   4. protected writes are judged: stale writes rejected with 23T01 (also
#      directly into a partition), skipped with on_stale => 'skip', fresh
#      tokens accepted;
#   5. locks work: a held lock conflicts, shows in fencing.locks, validates.
use strict;
use warnings;

use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::Bin;
use lib "$FindBin::Bin/../tap";
use FencingTAP qw(psql_sqlstate);
use FencingUpgrade qw(bg_safe catalog catalog_differences);

my $old_bin = $ENV{FENCING_UPGRADE_OLD_BIN} or die "FENCING_UPGRADE_OLD_BIN is not set";
my $t0 = time;

my $old = PostgreSQL::Test::Cluster->new('old', install_path => dirname($old_bin));
$old->init;
$old->append_conf('postgresql.conf', "log_min_messages = warning\nshared_preload_libraries = 'fencing'\n");
$old->start;
my $old_major = $old->pg_version->major;

my $new = PostgreSQL::Test::Cluster->new('new');
# initdb of 18 and later enables data checksums, which the old cluster lacks.
$new->init(extra => ($new->pg_version >= 18 ? ['--no-data-checksums'] : []));
$new->append_conf('postgresql.conf', "log_min_messages = warning\nshared_preload_libraries = 'fencing'\n");
my $new_major = $new->pg_version->major;
note "pg_upgrade from PostgreSQL $old_major to $new_major";

# ---- the old cluster ---------------------------------------------------------------
$old->safe_psql('postgres', 'CREATE DATABASE app');
$old->safe_psql('postgres', 'CREATE DATABASE far');
$old->safe_psql('app', q{
CREATE EXTENSION fencing;
CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token);
SELECT fencing.protect('acct');
CREATE TABLE ext_rev (id int PRIMARY KEY, v text, rev bigint);
SELECT fencing.protect('ext_rev', token_column => 'rev', allow_equal => true, on_stale => 'skip');
CREATE TABLE events (region text NOT NULL, id int NOT NULL, payload text, fence_token fencing.token,
                     PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
CREATE TABLE events_rest PARTITION OF events DEFAULT;
SELECT fencing.protect('events');
DO $$
DECLARE t fencing.token; r text;
BEGIN
  FOR round IN 1..3 LOOP
    FOR i IN 1..4 LOOP
      t := fencing.acquire('acct:' || i, lease => '1 min');
      INSERT INTO acct VALUES (i, 100 * round + i, t)
        ON CONFLICT (id) DO UPDATE SET balance = excluded.balance, fence_token = excluded.fence_token;
      PERFORM fencing.release('acct:' || i);
    END LOOP;
    FOREACH r IN ARRAY ARRAY['eu', 'us'] LOOP
      t := fencing.acquire('events:' || r);
      INSERT INTO events SELECT r, g, 'round ' || round, t FROM generate_series(1, 3) g
        ON CONFLICT (region, id) DO UPDATE SET payload = excluded.payload, fence_token = excluded.fence_token;
      PERFORM fencing.release('events:' || r);
    END LOOP;
    t := fencing.acquire('ext:1');
    INSERT INTO ext_rev VALUES (1, 'round ' || round, t::bigint)
      ON CONFLICT (id) DO UPDATE SET v = excluded.v, rev = excluded.rev;
    PERFORM fencing.release('ext:1');
  END LOOP;
END $$;
});
$old->safe_psql('far', q{
CREATE EXTENSION fencing;
CREATE TABLE jobs (id int PRIMARY KEY, fence_token fencing.token);
INSERT INTO jobs VALUES (1, 4000000000000000);
-- A superuser takes the counter out of the clock bound first (protect()
-- alone moves it only within the bound).
SELECT fencing.advance_past('jobs', 4000000000000000);
SELECT fencing.protect('jobs');
DO $$
DECLARE t fencing.token;
BEGIN
  FOR i IN 1..3 LOOP
    t := fencing.acquire('job:1');
    UPDATE jobs SET fence_token = t WHERE id = 1;
    PERFORM fencing.release('job:1');
    PERFORM fencing.acquire('job:' || (i + 1));
    PERFORM fencing.release('job:' || (i + 1));
  END LOOP;
END $$;
});

my $fence_sql = q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state};
my $current_sql = q{SELECT string_agg(resource || '=' || fencing.current(resource)::bigint, ',' ORDER BY resource) FROM fencing.fence_state};
my $protected_sql = q{SELECT string_agg(format('%s|%s|%s|%s|%s', tbl, token_column, allow_equal, on_stale, fence_deletes), ',' ORDER BY tbl::text) FROM fencing.protected};
my %rows_sql = (
	app => q{SELECT (SELECT string_agg(format('%s', a), ';' ORDER BY id) FROM acct a) || '#' || (SELECT string_agg(format('%s', e), ';' ORDER BY region, id) FROM events e) || '#' || (SELECT string_agg(format('%s', x), ';' ORDER BY id) FROM ext_rev x)},
	far => q{SELECT string_agg(format('%s', j), ';' ORDER BY id) FROM jobs j});
my (%before, %top);
for my $db ('app', 'far')
{
	# The last token before the upgrade: handed out, never written.
	my $last = $old->safe_psql($db, q{SELECT fencing.acquire('inflight')});
	$before{$db} = {
		fence => $old->safe_psql($db, $fence_sql),
		current => $old->safe_psql($db, $current_sql),
		protected => $old->safe_psql($db, $protected_sql),
		rows => $old->safe_psql($db, $rows_sql{$db}),
		version => $old->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'fencing'}),
	};
	$top{$db} = $old->safe_psql($db, 'SELECT max(token) FROM fencing.fence_state');
	is($top{$db}, $last, "$db: the last token issued is the highest of the fence state");
}
cmp_ok($top{far}, '>', 4000000000000000, 'far: tokens run far ahead of the clock');
is($before{app}{protected}, 'acct|fence_token|f|error|t,events|fence_token|f|error|t,ext_rev|rev|t|skip|t',
	'app: three tables protected');

# Column options the old server sets that the new one does not know make
# pg_restore, and so pg_upgrade, fail for every database with a table, fencing
# or not (15.20 and 17.12 set pg_attver on every column; 18.6 does not know
# it): such a pair of releases cannot be upgraded at all, which is no finding
# about fencing. Each option is tried on the new server with a value the old
# one wrote.
my %opts = map { split /\|/, $_, 2 } split /\n/, $old->safe_psql('app', q{
  SELECT DISTINCT ON (split_part(o, '=', 1)) split_part(o, '=', 1) || '|' || o
    FROM pg_attribute a, unnest(a.attoptions) o ORDER BY split_part(o, '=', 1)});
$new->start;
my @unknown;
for my $name (sort keys %opts)
{
	my ($rc, $out, $err) = $new->psql('postgres',
		"CREATE TEMP TABLE probe (a int); ALTER TABLE probe ALTER COLUMN a SET ($opts{$name})", on_error_stop => 1);
	push @unknown, $name if $err =~ /unrecognized parameter/;
}
$new->stop;
$old->stop;
if (@unknown)
{
	SKIP:
	{
		skip(sprintf('%s rejects column option %s set by %s on every column: pg_upgrade fails for any table, fencing or not',
			$new->pg_version, join(', ', @unknown), $old->pg_version), 1);
	}
	done_testing();
	exit 0;
}

# ---- pg_upgrade --------------------------------------------------------------------
my $work = PostgreSQL::Test::Utils::tempdir;
chdir $work or die "chdir $work: $!";
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $old_bin, '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $old->port, '-P', $new->port,
		'--copy'
	],
	"pg_upgrade from $old_major to $new_major");
$new->start;

# ---- the new cluster ------------------------------------------------------------------
$new->safe_psql('postgres', 'CREATE DATABASE fresh');
$new->safe_psql('fresh', 'CREATE EXTENSION fencing');
my $fresh_catalog = catalog($new, 'fresh');
sub q1 { my ($db, $q) = @_; return $new->safe_psql($db, $q); }
for my $db ('app', 'far')
{
	is(q1($db, q{SELECT extversion FROM pg_extension WHERE extname = 'fencing'}), $before{$db}{version},
		"$db: the same version of fencing");
	my @diff = catalog_differences(catalog($new, $db), $fresh_catalog, "upgraded $db", 'fresh install');
	ok(!@diff, "$db: the catalog equals a fresh install on $new_major") or diag(join("\n", @diff));

	is(q1($db, $fence_sql), $before{$db}{fence}, "$db: the fence state is intact");
	is(q1($db, $current_sql), $before{$db}{current}, "$db: fencing.current of every old resource is unchanged");
	is(q1($db, $protected_sql), $before{$db}{protected}, "$db: fencing.protected lists the same tables and settings");
	is(q1($db, $rows_sql{$db}), $before{$db}{rows}, "$db: the rows are intact");

	# A new resource first: its token comes from the counter alone (an old
	# resource's stored token would move the counter past itself first).
	my $got = 'new:1=' . q1($db, q{SELECT fencing.acquire('new:1')});
	my @res = ('new:1', split /,/, q1($db, q{SELECT string_agg(resource, ',' ORDER BY resource) FROM fencing.fence_state WHERE resource <> 'new:1'}));
	$got .= ',' . q1($db, 'WITH t AS (SELECT r, fencing.acquire(r) AS tok FROM unnest(ARRAY['
		  . join(',', map { "'$_'" } @res[ 1 .. $#res ])
		  . ']) r) SELECT string_agg(r || \'=\' || tok, \',\' ORDER BY r) FROM t');
	my %tok = map { split /=/ } split /,/, $got;
	my @low = grep { $tok{$_} <= $top{$db} } sort keys %tok;
	ok(@res > 2 && keys %tok == @res && !@low,
		"$db: new tokens of all " . scalar(@res) . " resources (old and new) are above every earlier token ($top{$db})")
	  or diag("not above: @low\n$got");
}

# Protected writes, app.
{
	my $acct1 = q1('app', 'SELECT fence_token FROM acct WHERE id = 1');
	my ($st) = psql_sqlstate($new, 'app', qq{UPDATE acct SET balance = 0, fence_token = $acct1 - 1 WHERE id = 1});
	is($st, '23T01', 'app: a stale write is rejected (23T01)');
	($st) = psql_sqlstate($new, 'app', qq{UPDATE acct SET balance = 0, fence_token = $acct1 WHERE id = 1});
	is($st, '23T01', 'app: a write with the stored token is rejected (23T01)');
	my $eu = q1('app', q{SELECT fence_token FROM events WHERE region = 'eu' AND id = 1});
	($st) = psql_sqlstate($new, 'app', qq{UPDATE events_eu SET payload = 'stale', fence_token = $eu - 1 WHERE id = 1});
	is($st, '23T01', 'app: a stale write directly into a partition is rejected (23T01)');
	($st) = psql_sqlstate($new, 'app', qq{BEGIN; SELECT fencing.use($eu - 1); DELETE FROM events WHERE region = 'eu' AND id = 2; COMMIT;});
	is($st, '23T01', 'app: a stale DELETE is rejected (23T01)');
	my $rev = q1('app', 'SELECT rev FROM ext_rev WHERE id = 1');
	is(q1('app', qq{UPDATE ext_rev SET v = 'stale', rev = $rev - 1 WHERE id = 1 RETURNING id}), '',
		'app: on_stale => skip leaves the row');
	my $t = q1('app', q{SELECT fencing.acquire('acct:1')});
	is(q1('app', qq{UPDATE acct SET balance = 7, fence_token = $t WHERE id = 1 RETURNING balance}), '7',
		'app: a write with a new token is accepted');
	$t = q1('app', q{SELECT fencing.acquire('ext:1')});
	is(q1('app', qq{UPDATE ext_rev SET v = 'new', rev = $t WHERE id = 1 RETURNING v}), 'new',
		'app: a write with a new token is accepted (bigint column)');
	my $far1 = q1('far', 'SELECT fence_token FROM jobs WHERE id = 1');
	($st) = psql_sqlstate($new, 'far', qq{UPDATE jobs SET fence_token = $far1 - 1 WHERE id = 1});
	is($st, '23T01', 'far: a stale write is rejected (23T01)');
}

# Locks, app.
{
	my $h = $new->background_psql('app', on_error_stop => 0);
	my $t = bg_safe($h, q{SELECT fencing.acquire('held:1')});
	my $pid = bg_safe($h, 'SELECT pg_backend_pid()');
	cmp_ok($t, '>', $top{app}, 'app: a held lock\'s token is above every earlier token');
	is(q1('app', q{SELECT fencing.try_acquire('held:1') IS NULL}), 't', 'app: the held lock conflicts');
	is(q1('app', q{SELECT string_agg(resource || ' ' || pid || ' ' || scope, ',') FROM fencing.locks}),
		"held:1 $pid session", 'app: fencing.locks shows it');
	is(bg_safe($h, qq{SELECT fencing.validate('held:1', $t)}), $t, 'app: validate in the holding session');
	$h->quit;
}

$new->stop;
note sprintf('pg_upgrade test from %s to %s: %.0f s', $old_major, $new_major, time - $t0);
done_testing();

# ALTER EXTENSION fencing UPDATE from an earlier release, under live state.
#
# tests/scripts/test.sh builds the earlier release from its commit (the
# releases CHANGELOG.md names, tests/scripts/releases.sh) and the current
# tree, each staged as a package (lib/fencing.so, extension/...), and a
# private PostgreSQL installation whose fencing files the test may replace.
# Environment:
#   FENCING_UPGRADE_INSTALL      that installation (the directory holding bin/)
#   FENCING_UPDATE_FROM_VERSION  the earlier release's version
#   FENCING_UPDATE_FROM_COMMIT   its commit
#   FENCING_UPDATE_FROM_PKG      its package
#   FENCING_CURRENT_PKG          the current tree's package
#   FENCING_ROOT                 the current tree
#
# With the earlier release installed, a database gets the extension at that
# version and live state: fence state, a protected table and one protected
# with a bigint column (on_stale => 'skip'), rows written with tokens, and a
# session holding two locks (one with a lease). Then the current build is
# installed under the running server, as a package upgrade does, and:
#   1. the new build is what new sessions load, the holding session keeps the
#      old one; the current package installs every released script
#      (sql/fencing--*.sql) and the install script of the current version
#      (fencing--<version>.sql, the build's copy of sql/fencing.sql);
#   2. before the update, the new module with the database not yet updated
#      works or refuses clearly (an error naming ALTER EXTENSION fencing
#      UPDATE): locks conflict across the two modules, tokens continue,
#      stale writes are rejected;
#   3. ALTER EXTENSION fencing UPDATE brings the database to the current
#      version;
#   4. after it, the held locks still hold (validate in the holding session,
#      try_acquire elsewhere, fencing.locks), still conflict, and new tokens
#      of every resource are above every earlier token, also of the lock
#      held across the update once it is released; protected writes are
#      still judged (23T01, skip, fresh tokens accepted), also by the
#      session that loaded the old module; the fence state and the
#      protection settings are as before;
#   5. the extension's catalog after the update equals a direct install of
#      the current version: CREATE EXTENSION fencing running
#      fencing--<version>.sql alone (every other script set aside, so that
#      no update path can stand in for it). Compared: every member's
#      definition, owner, privileges, initial privileges, comment;
#      functions' arguments, volatility, security, SET options; tables'
#      columns, constraints, indexes, triggers (arguments, enabled state);
#      views' queries; sequences; event triggers; the extension's
#      configuration tables; the schema's contents (FencingUpgrade::catalog);
#   6. control: the comparison finds each of eight deliberate changes of a
#      fresh install (a privilege, a function attribute, a column's storage,
#      a comment, a foreign object in the schema, a member dropped, a
#      trigger's enabled state, an event trigger's enabled state).
use strict;
use warnings;

use File::Basename qw(basename);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use lib "$FindBin::Bin/../tap";
use FencingTAP qw(psql_sqlstate quietly);
use FencingUpgrade qw(bg_safe catalog catalog_differences install_package package_scripts);

my $inst = $ENV{FENCING_UPGRADE_INSTALL} or die "FENCING_UPGRADE_INSTALL is not set";
my $from = $ENV{FENCING_UPDATE_FROM_VERSION} or die "FENCING_UPDATE_FROM_VERSION is not set";
my $from_commit = $ENV{FENCING_UPDATE_FROM_COMMIT} // '?';
my $from_pkg = $ENV{FENCING_UPDATE_FROM_PKG} or die "FENCING_UPDATE_FROM_PKG is not set";
my $cur_pkg = $ENV{FENCING_CURRENT_PKG} or die "FENCING_CURRENT_PKG is not set";
my $root = $ENV{FENCING_ROOT} or die "FENCING_ROOT is not set";

sub control_version
{
	my ($file) = @_;
	open my $fh, '<', $file or die "$file: $!";
	while (<$fh>) { return $1 if /^default_version\s*=\s*'([^']*)'/; }
	die "no default_version in $file";
}
my $to = control_version("$root/fencing.control");
note "updating from $from (commit $from_commit) to $to";

# ---- the packages ----------------------------------------------------------------
is(control_version("$cur_pkg/extension/fencing.control"), $to, "the current package installs version $to");
is(control_version("$from_pkg/extension/fencing.control"), $from, "the earlier package installs version $from");
# The released scripts of the tree, and the install script of the current
# version, which the build makes from sql/fencing.sql (a copy in the tree,
# from a build there, is no released script).
my $install_script = "fencing--$to.sql";
is_deeply([ package_scripts($cur_pkg) ],
	[ sort((grep { $_ ne $install_script } map { basename($_) } glob("$root/sql/fencing--*.sql")), $install_script) ],
	"the current package installs every released script of the tree and $install_script");
is(slurp_file("$cur_pkg/extension/$install_script"), slurp_file("$root/sql/fencing.sql"),
	"the current package's $install_script is sql/fencing.sql");

# ---- the earlier release, with live state ---------------------------------------------
install_package($from_pkg, $inst);
my $node = PostgreSQL::Test::Cluster->new('update', install_path => $inst);
$node->init;
$node->append_conf('postgresql.conf', "log_min_messages = warning\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');

sub sql { return $node->safe_psql('app', $_[0]); }

# max_token(): the highest token of the fence state.
sub max_token { return sql('SELECT max(token) FROM fencing.fence_state'); }

sql("CREATE EXTENSION fencing VERSION '$from'");
is(sql(q{SELECT extversion FROM pg_extension WHERE extname = 'fencing'}), $from, "the database has fencing $from");
sql(q{
CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token);
SELECT fencing.protect('acct');
CREATE TABLE ext_rev (id int PRIMARY KEY, v text, rev bigint);
SELECT fencing.protect('ext_rev', token_column => 'rev', allow_equal => true, on_stale => 'skip');
DO $$
DECLARE t fencing.token;
BEGIN
  FOR round IN 1..3 LOOP
    FOR i IN 1..4 LOOP
      t := fencing.acquire('acct:' || i);
      INSERT INTO acct VALUES (i, 100 * round + i, t)
        ON CONFLICT (id) DO UPDATE SET balance = excluded.balance, fence_token = excluded.fence_token;
      PERFORM fencing.release('acct:' || i);
    END LOOP;
    t := fencing.acquire('ext:1');
    INSERT INTO ext_rev VALUES (1, 'round ' || round, t::bigint)
      ON CONFLICT (id) DO UPDATE SET v = excluded.v, rev = excluded.rev;
    PERFORM fencing.release('ext:1');
  END LOOP;
END $$;
});
my $old_acct1 = sql('SELECT fence_token FROM acct WHERE id = 1');
my $old_rev = sql('SELECT rev FROM ext_rev WHERE id = 1');

# A session holding two locks, one with a lease, across the update.
my $holder = $node->background_psql('app', on_error_stop => 0);
my $t_held = bg_safe($holder, q{SELECT fencing.acquire('held:1')});
my $t_leased = bg_safe($holder, q{SELECT fencing.acquire('held:2', lease => '1 hour')});
my $holder_pid = bg_safe($holder, 'SELECT pg_backend_pid()');
like($t_held, qr/^\d+$/, 'a session holds held:1');

my $before_max = max_token();
my $fence_before = sql(q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state});
my $protected_sql = q{SELECT string_agg(format('%s|%s|%s|%s|%s', tbl, token_column, allow_equal, on_stale, fence_deletes), ',' ORDER BY tbl::text) FROM fencing.protected};
my $protected_before = sql($protected_sql);
my $rows_sql = q{SELECT (SELECT string_agg(format('%s', a), ';' ORDER BY id) FROM acct a) || '#' || (SELECT string_agg(format('%s', x), ';' ORDER BY id) FROM ext_rev x)};
my $rows_before = sql($rows_sql);
is($protected_before, 'acct|fence_token|f|error|t,ext_rev|rev|t|skip|t', 'two tables protected');

# ---- the current build, installed under the running server ----------------------------
install_package($cur_pkg, $inst);

# The fencing.so a backend has mapped: its inode and whether it was deleted.
sub mapped_module
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/maps" or return 'unreadable';
	while (my $l = <$fh>)
	{
		next unless $l =~ m{\s(\d+)\s+(/\S*/fencing\.so)( \(deleted\))?\s*$};
		return "$1" . ($3 ? ' deleted' : '');
	}
	return 'none';
}
my ($libdir) = `"$inst/bin/pg_config" --pkglibdir` =~ /(\S+)/;
my $new_inode = (stat "$libdir/fencing.so")[1];
my $probe = $node->background_psql('app', on_error_stop => 0);
bg_safe($probe, 'SELECT fencing.version()');
my $probe_pid = bg_safe($probe, 'SELECT pg_backend_pid()');
is(mapped_module($probe_pid), "$new_inode", 'a new session loads the current build');
like(mapped_module($holder_pid), qr/^\d+ deleted$/, 'the holding session keeps the earlier build it loaded');
$probe->quit;

# ---- 2. the new module, the database not yet updated ------------------------------------
# works_or_refuses($what, $sql, $expect): $sql in a new session gives $expect
# (its output, or 'ERROR <sqlstate>'), or fails with an error that names ALTER
# EXTENSION fencing UPDATE (not an internal error).
sub works_or_refuses
{
	my ($what, $q, $expect) = @_;
	my ($state, $out, $err) = psql_sqlstate($node, 'app', $q);
	my $got = $state eq '' ? $out : "ERROR $state";
	if ($got eq $expect)
	{
		pass("not yet updated: $what");
	}
	elsif ($state ne '' && $state ne 'XX000' && $err =~ /ALTER EXTENSION fencing UPDATE/)
	{
		pass("not yet updated: $what (refused: $state, naming ALTER EXTENSION fencing UPDATE)");
	}
	else
	{
		fail("not yet updated: $what");
		diag("expected $expect, got $got\n$err");
	}
	return $got;
}
works_or_refuses('held:1 conflicts with the lock the earlier module holds',
	q{SELECT fencing.try_acquire('held:1') IS NULL}, 't');
works_or_refuses('a new token is above every earlier one',
	qq{SELECT fencing.acquire('pre:1') > $before_max AND fencing.release('pre:1')}, 't');
works_or_refuses('a stale write is rejected',
	qq{UPDATE acct SET balance = 0, fence_token = $old_acct1 - 1 WHERE id = 1}, 'ERROR 23T01');
works_or_refuses('fencing.locks shows the held locks',
	q{SELECT string_agg(resource || ':' || scope, ',' ORDER BY resource) FROM fencing.locks}, 'held:1:session,held:2:session');
works_or_refuses('fencing.current of an old resource',
	q{SELECT fencing.current('acct:1') = (SELECT fence_token FROM acct WHERE id = 1)}, 't');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'not yet updated: the server is up');

# ---- 3. the update ---------------------------------------------------------------------
my ($ustate, $uout, $uerr) = psql_sqlstate($node, 'app', 'ALTER EXTENSION fencing UPDATE');
is($ustate, '', "ALTER EXTENSION fencing UPDATE from $from") or diag($uerr);
is(sql(q{SELECT extversion FROM pg_extension WHERE extname = 'fencing'}), $to, "the database has fencing $to");

# ---- 4. after the update ------------------------------------------------------------------
is(bg_safe($holder, qq{SELECT fencing.validate('held:1', $t_held)}), $t_held,
	'the holding session (earlier module) still holds held:1: validate');
is(sql(q{SELECT fencing.try_acquire('held:1') IS NULL}), 't', 'held:1 still conflicts');
is(sql(q{SELECT fencing.try_acquire('held:2') IS NULL}), 't', 'held:2 still conflicts');
is(sql(q{SELECT string_agg(format('%s %s %s %s', resource, pid, scope, lease), ',' ORDER BY resource) FROM fencing.locks}),
	"held:1 $holder_pid session ,held:2 $holder_pid session 01:00:00",
	'fencing.locks shows both held locks, with the lease');

if ($from eq '1.0')
{
	# The acquire family of 1.1 takes options the 1.0 module does not know:
	# under it, the call is refused, not run without them.
	quietly(sub { $holder->query(q{\set VERBOSITY verbose
SELECT fencing.acquire('held:3', permits => 2)}) });
	like($holder->{stderr}, qr/42883: could not find function "fencing_acquire_with_options"/,
		'the session of the 1.0 module refuses the acquire family of the update (42883)');
	$holder->{stderr} = '';
}
quietly(sub { $holder->query(qq{UPDATE acct SET balance = 0, fence_token = $old_acct1 - 1 WHERE id = 1}) });
like($holder->{stderr}, qr/stale fence token/, 'the session of the earlier module: a stale write is rejected');
$holder->{stderr} = '';

my ($st) = psql_sqlstate($node, 'app', qq{UPDATE acct SET balance = 0, fence_token = $old_acct1 WHERE id = 1});
is($st, '23T01', 'a write with the stored token is rejected (23T01)');
is(sql(qq{UPDATE ext_rev SET v = 'stale', rev = $old_rev - 1 WHERE id = 1 RETURNING id}), '',
	'on_stale => skip: a stale write leaves the row');
is(sql($rows_sql), $rows_before, 'the rows are as before');
is(sql($protected_sql), $protected_before, 'fencing.protected lists the same tables and settings');
is(sql(q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state WHERE resource <> 'pre:1'}),
	$fence_before, 'the fence state is as before');
is(sql(q{SELECT string_agg(resource || '=' || fencing.current(resource)::bigint, ',' ORDER BY resource) FROM fencing.fence_state WHERE resource <> 'pre:1'}),
	$fence_before, 'fencing.current of every old resource is as before');

my $top = max_token();
# A new resource first: its token comes from the counter alone (an old
# resource's stored token would move the counter past itself first).
my $fresh = 'new:1=' . sql(q{SELECT fencing.acquire('new:1')}) . ',' . sql(q{
  WITH t AS (SELECT r, fencing.acquire(r) AS tok FROM unnest(ARRAY['acct:1', 'acct:2', 'ext:1']) r)
  SELECT string_agg(r || '=' || tok, ',' ORDER BY r) FROM t});
my @fresh = map { (split /=/)[1] } split /,/, $fresh;
is(scalar(grep { $_ > $top } @fresh), 4, "new tokens of old and new resources are above every earlier token ($top)")
  or diag($fresh);
my %tok = map { split /=/ } split /,/, $fresh;
is(sql(qq{UPDATE acct SET balance = 1, fence_token = $tok{'acct:1'} WHERE id = 1 RETURNING balance}), '1',
	'a write with a new token is accepted');
is(sql(qq{UPDATE ext_rev SET v = 'new', rev = $tok{'ext:1'} WHERE id = 1 RETURNING v}), 'new',
	'a write with a new token is accepted (bigint column)');

is(bg_safe($holder, q{SELECT fencing.release('held:1')}), 't', 'the holding session releases held:1');
my $after = sql(q{SELECT fencing.acquire('held:1')});
cmp_ok($after, '>', $t_held, 'held:1: the next token is above the one held across the update');
cmp_ok($after, '>', $top, 'held:1: the next token is above every earlier token');
$holder->quit;

# ---- 5. the catalog equals a direct install -----------------------------------------------
# CREATE EXTENSION fencing with fencing--$to.sql the only script there: the
# direct install, never a chain of the released scripts.
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
my ($extdir) = map { "$_/extension" } `"$inst/bin/pg_config" --sharedir` =~ /(\S+)/;
my @aside = grep { basename($_) ne $install_script } glob("$extdir/fencing--*.sql");
cmp_ok(scalar(@aside), '>=', 1, 'the released scripts are installed beside ' . $install_script);
rename($_, "$_.aside") or die "cannot set $_ aside: $!" for @aside;
my ($fstate, $fout, $ferr) = psql_sqlstate($node, 'fresh', 'CREATE EXTENSION fencing');
rename("$_.aside", $_) or die "cannot restore $_: $!" for @aside;
ok($fstate eq '' && $ferr !~ /ERROR/, "CREATE EXTENSION fencing from $install_script alone") or diag($ferr);
my $updated = catalog($node, 'app');
my $installed = catalog($node, 'fresh');
my @diff = catalog_differences($updated, $installed, "updated from $from", "direct install of $to");
ok(!@diff, "the catalog after the update from $from equals a direct install of $to ($install_script)")
  or diag(join("\n", @diff));
cmp_ok(scalar(keys %$installed), '>=', 20, 'the catalog comparison sees the extension\'s objects');

# ---- 6. control: the comparison finds deliberate changes -----------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE altered');
$node->safe_psql('altered', q{
CREATE EXTENSION fencing;
GRANT EXECUTE ON FUNCTION fencing.forget(interval) TO PUBLIC;
ALTER FUNCTION fencing.version() VOLATILE;
ALTER TABLE fencing.fence_state ALTER COLUMN resource SET STORAGE EXTENDED;
COMMENT ON FUNCTION fencing.release(text) IS 'changed';
CREATE FUNCTION fencing.foreign_object() RETURNS int LANGUAGE sql AS 'SELECT 1';
ALTER EXTENSION fencing DROP FUNCTION fencing.renew(text);
ALTER TABLE fencing.key_secret ENABLE TRIGGER key_secret_local;
ALTER EVENT TRIGGER fencing_sql_drop DISABLE;
});
my @found = catalog_differences(catalog($node, 'altered'), $installed, 'altered', 'fresh install');
my $found = join("\n", @found);
for my $change (
	[ 'a privilege', qr/^function fencing\.forget\(interval\): differs/m ],
	[ 'a function attribute', qr/^function fencing\.version\(\): differs/m ],
	[ 'a column\'s storage', qr/^table fencing\.fence_state: differs.*\n.*column resource/m ],
	[ 'a comment', qr/^function fencing\.release\(text\): differs/m ],
	[ 'a foreign object in the schema', qr/function fencing\.foreign_object\(\) \(not a member\)/ ],
	[ 'a member dropped', qr/^function fencing\.renew\(text\): only in fresh install/m ],
	[ 'a trigger\'s enabled state', qr/^table fencing\.key_secret: differs.*\n(?:.*\n)*.*trigger CREATE TRIGGER key_secret_local .* enabled O/m ],
	[ 'an event trigger\'s enabled state', qr/^event trigger fencing_sql_drop: differs.*\n(?:.*\n)*.*enabled D/m ])
{
	like($found, $change->[1], "control: the comparison finds $change->[0]");
}

$node->stop;
done_testing();

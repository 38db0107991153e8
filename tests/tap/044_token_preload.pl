# Where a bad fencing.token value raises its error.
#
# 1. In a session that has not loaded the module, PostgreSQL keeps fencing.token
#    as a placeholder and accepts any text; the module discards an invalid one
#    with a WARNING when it loads, and writes then judge without a token.
# 2. Once the module is loaded in the session (LOAD 'fencing', or any call of
#    a fencing function), a bad value is an error where it is set.
# 3. With fencing in session_preload_libraries (per database here, as
#    ALTER DATABASE ... SET does it; postgresql.conf alike) or in
#    shared_preload_libraries, every session has the module loaded before its
#    first statement: a bad value is an error where it is set, whatever
#    statement sets it (SET, SET LOCAL, set_config, a function's SET clause,
#    ALTER ROLE ... SET). A bad value in the connection's options (PGOPTIONS)
#    is applied before session_preload_libraries loads the module, so it is
#    discarded with a WARNING at the connection; with shared_preload_libraries
#    it fails the connection.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('token_preload');
$node->init;
# Not preloaded until the last part (the test runner preloads by default).
$node->append_conf('postgresql.conf', "log_statement = none\nshared_preload_libraries = ''\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE DATABASE plain;
CREATE DATABASE preloaded;
CREATE ROLE fencing_app LOGIN;
});
for my $db ('plain', 'preloaded')
{
	$node->safe_psql($db, q{
CREATE EXTENSION fencing;
CREATE TABLE acct (id int PRIMARY KEY, balance int, fence_token fencing.token);
SELECT fencing.protect('acct');
INSERT INTO acct VALUES (1, 0, 1);
GRANT USAGE ON SCHEMA fencing TO fencing_app;
GRANT SELECT, UPDATE ON acct TO fencing_app;
});
}
$node->safe_psql('postgres', q{ALTER DATABASE preloaded SET session_preload_libraries = 'fencing'});

# state($db, $sql, @psql_args): SQLSTATE of the first error ('' when none),
# stdout, stderr, of $sql run in a new session.
sub state
{
	my ($db, $sql, %args) = @_;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql", on_error_stop => 1, %args);
	my ($s) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($s // '', $out, $err);
}

# ---- 1. before the module is loaded: a placeholder ------------------------------------

my ($s, $out, $err) = state('plain', q{
SELECT count(*) FROM pg_settings WHERE name = 'fencing.token';
SET fencing.token = 'abc';
SHOW fencing.token;
SELECT fencing.version();
SHOW fencing.token;});
is($s, '', 'not loaded: SET fencing.token = \'abc\' raises no error');
like($out, qr/^0\nabc\n\d+\.\d+\n$/, 'not loaded: the placeholder keeps the text; once the module loads the value is gone');
like($err, qr/WARNING:\s+22P02: invalid value for fencing.token: "abc"/,
	'not loaded: the module discards it with a WARNING (22P02) when it loads');
($s) = state('plain', q{
BEGIN;
SET LOCAL fencing.token = 'abc';
UPDATE acct SET balance = 1 WHERE id = 1;
COMMIT;});
is($s, '23T01', 'not loaded: the write that follows judges without a token and is rejected (23T01)');

# ---- 2. loaded in the session ---------------------------------------------------------

($s) = state('plain', q{LOAD 'fencing'; SET fencing.token = 'abc';});
is($s, '22P02', "after LOAD 'fencing': SET of a bad value raises 22P02 where it is set");
($s) = state('plain', q{SELECT fencing.version(); BEGIN; SET LOCAL fencing.token = '0';});
is($s, '23514', 'after a fencing function was called: SET LOCAL of 0 raises 23514');

# ---- 3. preloaded ----------------------------------------------------------------------

my @forms = (
	[ q{SET fencing.token = 'abc'},                                        '22P02', 'SET' ],
	[ q{BEGIN; SET LOCAL fencing.token = '12x'},                            '22P02', 'SET LOCAL' ],
	[ q{SELECT set_config('fencing.token', '9223372036854775808', true)},   '22003', 'set_config' ],
	[ q{SET fencing.token = '-5'},                                         '23514', 'SET of a negative value' ],
	[ q{CREATE FUNCTION f() RETURNS int LANGUAGE sql SET fencing.token = 'abc' AS 'SELECT 1'},
		'22P02', 'a function\'s SET clause' ],
	[ q{ALTER ROLE fencing_app IN DATABASE preloaded SET fencing.token = 'abc'}, '22P02', 'ALTER ROLE ... SET' ],
);
for my $f (@forms)
{
	my ($sql, $want, $what) = @$f;
	($s, undef, $err) = state('preloaded', $sql);
	is($s, $want, "session_preload_libraries: $what of a bad value raises $want in the first statement");
}
($s, $out) = state('preloaded', q{BEGIN; SET LOCAL fencing.token = '35'; SHOW fencing.token;});
is("$s|$out", '|35', 'session_preload_libraries: a good value is accepted');
{
	# Connection options are applied before session_preload_libraries loads
	# the module: as a placeholder, discarded with a WARNING at the load.
	local $ENV{PGOPTIONS} = '-c fencing.token=abc';
	my ($rc, $pout, $perr) = $node->psql('preloaded', 'SHOW fencing.token', on_error_stop => 1);
	is("$rc|$pout", '0|', 'session_preload_libraries: a bad value in the connection options is discarded');
	like($perr, qr/WARNING:\s+invalid value for fencing.token: "abc"/, '... with a WARNING at the connection');
}

# shared_preload_libraries: every database.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
$node->restart;
is($node->safe_psql('plain', q{SHOW shared_preload_libraries}), 'fencing', 'shared_preload_libraries = fencing');
($s) = state('plain', q{SET fencing.token = 'abc'});
is($s, '22P02', 'shared_preload_libraries: SET of a bad value raises 22P02 in the first statement');
($s) = state('postgres', q{BEGIN; SET LOCAL fencing.token = '0'});
is($s, '23514', 'shared_preload_libraries: also in a database without the extension');
{
	local $ENV{PGOPTIONS} = '-c fencing.token=abc';
	# The query on the command line, not on stdin: the server ends the
	# connection at once, and writing psql's stdin after it exited raised
	# SIGPIPE in this script now and then.
	my ($pout, $perr) = ('', '');
	my $ok = IPC::Run::run([ 'psql', '-X', '-d', $node->connstr('plain'), '-c', 'SELECT 1' ],
		'<', '/dev/null', '>', \$pout, '2>', \$perr);
	my $rc = $ok ? 0 : 1;
	isnt($rc, 0, 'shared_preload_libraries: a bad value in the connection options fails the connection');
	like($perr, qr/FATAL:\s+invalid value for fencing.token: "abc"/, '... with a FATAL error naming it');
}
($s, $out) = state('plain', q{
BEGIN;
SELECT fencing.use(fencing.acquire_xact('acct:1')) > 0;
UPDATE acct SET balance = 2 WHERE id = 1;
COMMIT;
SELECT balance FROM acct WHERE id = 1;});
is("$s|$out", "|t\n2", 'shared_preload_libraries: acquisition and protected writes work as usual');

$node->stop;
done_testing();

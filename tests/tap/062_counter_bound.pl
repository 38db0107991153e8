# The token counter's bound against table owners: nothing a role other than a
# superuser does moves the counter past the clock bound, so that restored
# copies of the cluster (which start at the clock + 2 s) never issue a token
# again, and no table can exhaust the counter.
#
# 1. The owner of a database (not a superuser) tries to move the counter far
#    ahead: protect() of a table holding tokens 60 s past the clock or 2^52,
#    advance_past() (granted to pg_database_owner for restores) with such a
#    floor, and a row with such a token inserted into fencing.fence_state
#    (what a restore does). Each is refused with its documented SQLSTATE and
#    message, and leaves the counter where it was.
# 2. At the bound: protect() of a table holding a token 3.5 s past the clock
#    is accepted (the counter waits for the clock rather than run past its
#    bound). A base backup is taken right after, the original issues more
#    tokens (fencing.log_ahead = 16: past what the backup's WAL covers), and
#    the restored backup issues tokens above every one of them.
# 3. The owner's pg_dump and pg_restore keep working afterwards, and tokens
#    of the restored database continue above the old ones.
# 4. What a superuser may do differently: move the counter past the bound
#    with advance_past(), after which protect() of a table holding tokens
#    below the counter is accepted; protect() itself never moves the counter
#    past the bound, for a superuser either.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $lead = 2_000_000;    # core::kClockLead, microseconds

my $node = PostgreSQL::Test::Cluster->new('bound');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', qq{
fencing.log_ahead = 16
log_min_messages = warning
log_statement = none
});
$node->start;
$node->safe_psql('postgres', q{
CREATE ROLE app_owner LOGIN;
CREATE DATABASE app OWNER app_owner;
CREATE DATABASE app_copy OWNER app_owner;
});
$node->safe_psql($_, 'CREATE EXTENSION fencing') for ('app', 'app_copy');

sub as_owner
{
	my ($n, $db, $q) = @_;
	return $n->safe_psql($db, $q, extra_params => [ '-U', 'app_owner' ]);
}

# owner_state($sql): the SQLSTATE and stderr of $sql run by the owner in app.
sub owner_state
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $node->psql('app', "\\set VERBOSITY verbose\n$sql",
		on_error_stop => 1, extra_params => [ '-U', 'app_owner' ]);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($state // '', $err);
}

my $clock_sql = q{(extract(epoch FROM clock_timestamp()) * 1000000)::bigint};
sub clock_us { return $node->safe_psql('app', "SELECT $clock_sql"); }

# Tokens with the clock read right after each: every one is within the clock
# bound, at most 2 s past the clock at its issue.
sub tokens_within_bound
{
	my ($n, $prefix, $count, $what) = @_;
	my @rows = map { [ split /\|/ ] } split /\n/, $n->safe_psql('app', qq{
	  SELECT fencing.acquire_xact('$prefix:' || g)::bigint, $clock_sql FROM generate_series(1, $count) g});
	my @over = grep { $_->[0] > $_->[1] + $lead } @rows;
	is(scalar(@over), 0, "$what: no token is more than 2 s past the clock at its issue"
		  . (@over ? " (token - clock: " . ($over[0][0] - $over[0][1]) . " us)" : ''));
	return map { $_->[0] } @rows;
}

my @issued;

# ---- 1. the owner's attempts to move the counter far ahead ----------------------------

my $before = as_owner($node, 'app', q{SELECT fencing.acquire_xact('probe:before')});
my $far = clock_us() + 60_000_000;
my ($state, $err) = owner_state(qq{
CREATE TABLE zk (id int PRIMARY KEY, zxid bigint);
INSERT INTO zk VALUES (1, $far);
SELECT fencing.protect('zk', token_column => 'zxid')});
is($state, '22003', 'protect() of a table holding a token 60 s past the clock: refused with 22003');
like($err, qr/table "zk" holds fence token $far, beyond (\d+)/, '... naming the table, its token and the bound');
my ($bound) = $err =~ /beyond (\d+)/;
# The clock was read before the statement: the bound is at least that + 4 s.
my $clock_before = $far - 60_000_000;
ok(defined $bound && $bound >= $clock_before + 2 * $lead - 1 && $bound < $clock_before + 2 * $lead + 10_000_000,
	'... the bound is the clock + 4 s (' . (defined $bound ? $bound - $clock_before : 'none') . ' us past the clock read before)');
like($err, qr/DETAIL:\s+fencing moves the token counter past a protected table's tokens only up to the clock/,
	'... and the detail says why');

($state, $err) = owner_state(q{
CREATE TABLE big (id int PRIMARY KEY, fence_token bigint);
INSERT INTO big VALUES (1, 4503599627370496);
SELECT fencing.protect('big')});
is($state, '22003', 'protect() of a table holding 2^52: refused with 22003');

($state, $err) = owner_state(qq{
CREATE TABLE mine (id int PRIMARY KEY, fence_token bigint);
SELECT fencing.advance_past('mine', $far)});
is($state, '42501', 'advance_past() by the owner past the bound: refused with 42501');
like($err, qr/only a superuser may move the fence token counter past \d+/, '... with its message');

($state, $err) = owner_state(qq{
INSERT INTO fencing.fence_state VALUES (fencing.resource_key('planted'), $far, 0, 0, 'planted')});
is($state, '42501', 'a fence state row 60 s past the clock inserted by the owner (the restore path): refused with 42501');
is(as_owner($node, 'app', q{SELECT count(*) FROM fencing.fence_state WHERE resource = 'planted'}), '0',
	'... and the row is not there');
($state, $err) = owner_state(q{
INSERT INTO fencing.fence_state VALUES (fencing.resource_key('planted'), 9223372036854775806, 0, 0, 'planted')});
is($state, '42501', 'a fence state row holding 2^63 - 2: refused with 42501');

my $after = as_owner($node, 'app', q{SELECT fencing.acquire_xact('probe:after')});
cmp_ok($after, '>', $before, "the counter still counts up ($after > $before)");
cmp_ok($after, '<=', clock_us() + $lead, 'and is within the clock bound after every attempt');
push @issued, $before, $after;

# ---- 2. at the bound, then a base backup restored -------------------------------------

my $near = clock_us() + 3_500_000;
($state, $err) = owner_state(qq{
CREATE TABLE edge (id int PRIMARY KEY, fence_token bigint);
INSERT INTO edge VALUES (1, $near);
SELECT fencing.protect('edge')});
is($state, '', 'protect() of a table holding a token 3.5 s past the clock: accepted' . ($err ? " ($err)" : ''));
my $first = as_owner($node, 'app', q{SELECT fencing.acquire_xact('edge:1')});
cmp_ok($first, '>', $near, "the next token is above the table's ($first > $near)");
push @issued, $first, tokens_within_bound($node, 'edge', 30, 'at the bound');

$node->backup('at_bound');
push @issued, tokens_within_bound($node, 'after-backup', 200, 'after the backup');
my $top = (sort { $b <=> $a } @issued)[0];

my $copy = PostgreSQL::Test::Cluster->new('bound_copy');
$copy->init_from_backup($node, 'at_bound');
$copy->start;
$copy->poll_query_until('app', 'SELECT NOT pg_is_in_recovery()') or die;
my @copy_tokens = split /\n/, $copy->safe_psql('app', q{
  SELECT fencing.acquire_xact('copy:' || g)::bigint FROM generate_series(1, 50) g});
my %original = map { $_ => 1 } @issued;
is(scalar(grep { $original{$_} } @copy_tokens), 0, 'the restored backup issues no token the original issued');
my $lowest = (sort { $a <=> $b } @copy_tokens)[0];
cmp_ok($lowest, '>', $top, "every token of the restored backup exceeds every token of the original ($lowest > $top)");
$copy->stop;

# ---- 3. the owner's dump and restore ---------------------------------------------------

my $dir = PostgreSQL::Test::Utils::tempdir;
my $src = $node->connstr('app') . ' user=app_owner';
my $dst = $node->connstr('app_copy') . ' user=app_owner';
$node->command_ok([ 'pg_dump', '-d', $src, '-F', 'c', '-f', "$dir/app.dump" ], 'the owner dumps the database');
my $toc = `pg_restore -l $dir/app.dump`;
open my $fh, '>', "$dir/owner.list" or die $!;
print $fh join("\n", grep { !/ (SCHEMA - fencing|EXTENSION - fencing|COMMENT - EXTENSION fencing) / } split /\n/, $toc), "\n";
close $fh;
$node->command_ok([ 'pg_restore', '--exit-on-error', '-L', "$dir/owner.list", '-d', $dst, "$dir/app.dump" ],
	'the owner restores it');
my $state_max = as_owner($node, 'app', q{SELECT max(token) FROM fencing.fence_state});
is(as_owner($node, 'app_copy', q{SELECT max(token) FROM fencing.fence_state}), $state_max,
	'restored: the fence state is there');
my $restored = as_owner($node, 'app_copy', q{SELECT fencing.acquire_xact('edge:1')});
cmp_ok($restored, '>', $top, "restored: a new token exceeds every old one ($restored > $top)");

# ---- 4. a superuser ------------------------------------------------------------------

$node->safe_psql('app', qq{
CREATE TABLE su_far (id int PRIMARY KEY, fence_token bigint);
INSERT INTO su_far VALUES (1, $far)});
my ($s_state, undef, $s_err) = psql_sqlstate($node, 'app', q{SELECT fencing.protect('su_far')});
is($s_state, '22003', 'protect() by a superuser of a table holding a token 60 s past the clock: refused too');
my $moved = $node->safe_psql('app', qq{SELECT fencing.advance_past('su_far', $far)});
cmp_ok($moved, '>', $far, 'a superuser may move the counter past the bound with advance_past()');
($s_state, undef, $s_err) = psql_sqlstate($node, 'app', q{SELECT fencing.protect('su_far')});
is($s_state, '', 'protect() of that table is accepted once the counter is past its tokens' . ($s_err ? " ($s_err)" : ''));
cmp_ok(as_owner($node, 'app', q{SELECT fencing.acquire_xact('su:1')}), '>', $moved,
	'tokens continue above the floor the superuser set');

$node->stop;
done_testing();

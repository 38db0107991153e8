# The resource key secret (fencing.key_secret): a resource's lock key is
# SipHash-2-4 of its name under a per-database random secret.
#   - Two databases where the extension was created separately have different
#     secrets, and no name has the same key in both.
#   - An ordinary role can read the secret in neither (42501), cannot compute
#     the other database's keys (no USAGE there; its own database's keys are
#     unrelated), and cannot replace it; the database's owner can read it (a
#     dump needs it) but not update or delete it.
#   - CREATE DATABASE copies it (same keys, same fence state), and a new
#     random secret can then be given to the copy: every row is rekeyed and
#     keeps its token.
#   - A backend that cached the secret sees a replacement, and DROP/CREATE
#     EXTENSION, at its next call; CREATE EXTENSION is refused while locks of
#     an earlier installation are still held.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('key_secret');
$node->init;
$node->append_conf('postgresql.conf', "log_statement = none\n");
$node->start;

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }
sub state_of { my ($db, $q, @o) = @_; my ($s) = psql_sqlstate($node, $db, $q, @o); return $s; }
sub as_role
{
	my ($db, $role, $q) = @_;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$q", on_error_stop => 1,
		extra_params => [ '-U', $role ]);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($state // '', $out);
}

$node->safe_psql('postgres', q{
CREATE ROLE key_app LOGIN;
CREATE ROLE key_dbo LOGIN;
CREATE DATABASE ka OWNER key_dbo;
CREATE DATABASE kb;
});
for my $db ('ka', 'kb') { sql($db, 'CREATE EXTENSION fencing'); }
sql('ka', 'GRANT USAGE ON SCHEMA fencing TO key_app');

# ---- two databases, two secrets ------------------------------------------------------
my $sa = sql('ka', q{SELECT encode(secret, 'hex') FROM fencing.key_secret});
my $sb = sql('kb', q{SELECT encode(secret, 'hex') FROM fencing.key_secret});
like($sa, qr/^[0-9a-f]{32}$/, 'the secret is 16 bytes');
isnt($sa, $sb, 'two databases have different secrets');
my $keys_sql = q{SELECT string_agg(fencing.resource_key('r:' || g)::text, ',' ORDER BY g) FROM generate_series(1, 1000) g};
my @ka = split /,/, sql('ka', $keys_sql);
my @kb = split /,/, sql('kb', $keys_sql);
is(scalar(grep { $ka[$_] eq $kb[$_] } 0 .. 999), 0, 'no name has the same key in both databases');
is(sql('ka', q{SELECT count(DISTINCT fencing.resource_key('r:' || g)) FROM generate_series(1, 1000) g}), '1000',
	'keys within a database are distinct');

# ---- who can read it ------------------------------------------------------------------
my ($st, $out) = as_role('ka', 'key_app', 'SELECT * FROM fencing.key_secret');
is($st, '42501', 'an ordinary role with USAGE on schema fencing cannot read the secret');
($st) = as_role('ka', 'key_app', 'COPY fencing.key_secret TO STDOUT');
is($st, '42501', 'nor COPY it out');
($st) = as_role('ka', 'key_app', 'INSERT INTO fencing.key_secret DEFAULT VALUES');
is($st, '42501', 'nor replace it');
($st) = as_role('ka', 'key_app', q{SELECT pg_read_binary_file(pg_relation_filepath('fencing.key_secret'))});
is($st, '42501', 'nor read its file');
($st, $out) = as_role('ka', 'key_app', q{SELECT fencing.resource_key('r:1')});
is("$st/$out", "/$ka[0]", 'it computes keys of its own database');
($st) = as_role('kb', 'key_app', q{SELECT fencing.resource_key('r:1')});
is($st, '42501', 'but not of another database where it has no USAGE on schema fencing');
($st) = as_role('kb', 'key_app', 'SELECT * FROM fencing.key_secret');
is($st, '42501', 'nor read that database\'s secret');
($st, $out) = as_role('ka', 'key_dbo', q{SELECT encode(secret, 'hex') FROM fencing.key_secret});
is("$st/$out", "/$sa", 'the database owner reads the secret (pg_dump needs it)');
($st) = as_role('ka', 'key_dbo', q{UPDATE fencing.key_secret SET secret = NULL});
is($st, '42501', 'but cannot update it');
($st) = as_role('ka', 'key_dbo', q{DELETE FROM fencing.key_secret});
is($st, '42501', 'nor delete it');

# ---- CREATE DATABASE copies it ----------------------------------------------------
sql('ka', q{SELECT fencing.acquire('copy:' || g) FROM generate_series(1, 20) g; SELECT fencing.release_all();});
my $state_sql = q{SELECT string_agg(resource || '=' || token || '/' || (key = fencing.resource_key(resource))::text, ',' ORDER BY resource) FROM fencing.fence_state};
my $cur_sql = q{SELECT string_agg(resource || '=' || fencing.current(resource)::bigint, ',' ORDER BY resource) FROM fencing.fence_state};
my $ka_state = sql('ka', $state_sql);
unlike($ka_state, qr/false/, 'source: every row carries its resource\'s key');
my $ka_current = sql('ka', $cur_sql);
my $ka_max = sql('ka', 'SELECT max(token) FROM fencing.fence_state');
$node->safe_psql('postgres', 'CREATE DATABASE kc TEMPLATE ka');
is(sql('kc', q{SELECT encode(secret, 'hex') FROM fencing.key_secret}), $sa, 'CREATE DATABASE copies the secret');
is(join(',', split /,/, sql('kc', $keys_sql)), join(',', @ka), 'the copy computes the same keys');
is(sql('kc', $state_sql), $ka_state, 'the copy has the same fence state, each row with its key');
is(sql('kc', $cur_sql), $ka_current, 'current() in the copy is the source\'s');

# The copy gets a secret of its own.
sql('kc', 'INSERT INTO fencing.key_secret DEFAULT VALUES');
my $sc = sql('kc', q{SELECT encode(secret, 'hex') FROM fencing.key_secret});
isnt($sc, $sa, 'INSERT INTO fencing.key_secret DEFAULT VALUES makes a new secret');
is(sql('kc', 'SELECT count(*) FROM fencing.key_secret'), '1', 'one secret row');
my @kc = split /,/, sql('kc', $keys_sql);
is(scalar(grep { $ka[$_] eq $kc[$_] } 0 .. 999), 0, 'the copy\'s keys are now unrelated to the source\'s');
unlike(sql('kc', $state_sql), qr/false/, 'every row of the copy was rekeyed');
is(sql('kc', $cur_sql), $ka_current, 'and every resource kept its tokens');
cmp_ok(sql('kc', q{SELECT fencing.acquire('copy:1')}), '>', $ka_max, 'the next token is above every old one');

# ---- a backend that cached the secret ------------------------------------------------
my $bg = $node->background_psql('ka', on_error_stop => 0);
my $k1 = $bg->query_safe(q{SELECT fencing.resource_key('cache:1')});
sql('ka', 'INSERT INTO fencing.key_secret DEFAULT VALUES');
my $fresh = sql('ka', q{SELECT fencing.resource_key('cache:1')});
isnt($fresh, $k1, 'a new secret changes the key');
is($bg->query_safe(q{SELECT fencing.resource_key('cache:1')}), $fresh, 'a backend that had the old secret uses the new one');
my $pid = $bg->query_safe(q{SELECT pg_backend_pid()});
$bg->query_safe(q{SELECT fencing.acquire('cache:1')});
is(sql('ka', qq{SELECT string_agg(resource, ',') FROM fencing.locks WHERE pid = $pid}), 'cache:1',
	'its lock carries the new key (fencing.locks names it)');
is(state_of('ka', 'INSERT INTO fencing.key_secret DEFAULT VALUES'), '55006',
	'a new secret is refused while another session holds a fencing lock');
$bg->query_safe(q{SELECT fencing.release('cache:1')});
sql('ka', 'DROP EXTENSION fencing; CREATE EXTENSION fencing');
$fresh = sql('ka', q{SELECT fencing.resource_key('cache:1')});
is($bg->query_safe(q{SELECT fencing.resource_key('cache:1')}), $fresh,
	'after DROP/CREATE EXTENSION, the backend uses the new installation\'s secret');
isnt(sql('ka', q{SELECT encode(secret, 'hex') FROM fencing.key_secret}), $sa, 'which is a new one');

# A lock of the old installation still held: no new installation meanwhile.
$bg->query_safe(q{SELECT fencing.acquire('cache:2')});
sql('ka', 'DROP EXTENSION fencing');
is(state_of('ka', 'CREATE EXTENSION fencing'), '55006',
	'CREATE EXTENSION is refused while a lock of the dropped installation is held');
$bg->query_safe(q{SELECT pg_advisory_unlock_all()});
is(state_of('ka', 'CREATE EXTENSION fencing'), '', 'and works once it is released');
$bg->quit;

$node->stop;
done_testing();

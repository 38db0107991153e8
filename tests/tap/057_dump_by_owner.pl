# The database owner, not a superuser, dumps and restores a database that has
# fencing (pg_database_owner may read the fence state and the counter, load
# the fence state back, and use schema fencing). A superuser creates the
# extension in both databases (CREATE EXTENSION fencing needs one); the owner
# does everything else. After the restore, fencing.current() returns the old
# tokens, the table is protected, and new tokens are greater than every old
# one. The restored resource key secret replaces the one the target's CREATE
# EXTENSION made (so every name keeps its key), and rows the target recorded
# before the restore get their keys under it. A role that does not own the
# database still cannot read the state or the secret. The notification
# settings are restored at their bound, which the owner cannot exceed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;

my $node = PostgreSQL::Test::Cluster->new('owner_dump');
$node->init;
$node->append_conf('postgresql.conf', "log_statement = none\n");
$node->start;

$node->safe_psql('postgres', q{
CREATE ROLE fencing_dbo LOGIN;
CREATE ROLE fencing_other LOGIN;
CREATE DATABASE src OWNER fencing_dbo;
CREATE DATABASE dst OWNER fencing_dbo;
});
$node->safe_psql('src', 'CREATE EXTENSION fencing');
$node->safe_psql('dst', 'CREATE EXTENSION fencing');

sub as_owner
{
	my ($db, $q) = @_;
	return $node->safe_psql($db, $q, extra_params => [ '-U', 'fencing_dbo' ]);
}

as_owner('src', q{
CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token);
SELECT fencing.protect('acct');
DO $$
DECLARE t fencing.token;
BEGIN
  FOR i IN 1..5 LOOP
    t := fencing.acquire('acct:' || i);
    INSERT INTO acct VALUES (i, 100 + i, t);
    PERFORM fencing.release('acct:' || i);
  END LOOP;
END $$;
});
my $old_current = as_owner('src', q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state});
my $keys_sql = q{SELECT string_agg(fencing.resource_key(r)::text, ',' ORDER BY r) FROM unnest(ARRAY['acct:1', 'acct:5', 'brand:new', 'pre:1']) r};
my $old_keys = as_owner('src', $keys_sql);
my $old_secret = as_owner('src', q{SELECT encode(secret, 'hex') FROM fencing.key_secret});
like($old_secret, qr/^[0-9a-f]{32}$/, 'the database owner reads the resource key secret');
my $old_max = as_owner('src', q{SELECT max(token) FROM fencing.fence_state});
like($old_current, qr/^acct:1=\d+,acct:2=\d+/, 'the database owner reads fencing.fence_state');

my ($rc, $out, $err) = $node->psql('src', 'SELECT count(*) FROM fencing.fence_state', extra_params => [ '-U', 'fencing_other' ]);
isnt($rc, 0, 'a role that does not own the database cannot read fencing.fence_state');
($rc, $out, $err) = $node->psql('src', 'SELECT count(*) FROM fencing.key_secret', extra_params => [ '-U', 'fencing_other' ]);
like($err, qr/permission denied/, 'nor fencing.key_secret');

# The target was used before the restore: a row under the secret its CREATE
# EXTENSION made.
my $pre = as_owner('dst', q{SELECT fencing.acquire('pre:1')});
isnt(as_owner('dst', q{SELECT encode(secret, 'hex') FROM fencing.key_secret}), $old_secret,
	'the target\'s CREATE EXTENSION made a secret of its own');

# Notification settings at their bound (1000 resources by name, and the
# database-wide row): the owner may load notify_settings, but not past the
# bound set_notify keeps (54000, the whole statement); a restore of a
# database at the bound loads every row.
as_owner('src', q{INSERT INTO fencing.notify_settings SELECT 'n:' || g FROM generate_series(1, 1000) g});
as_owner('src', q{INSERT INTO fencing.notify_settings VALUES (NULL)});
($rc, $out, $err) = $node->psql('src', "\\set VERBOSITY verbose\nINSERT INTO fencing.notify_settings VALUES ('n:1001')",
	extra_params => [ '-U', 'fencing_dbo' ]);
like($err, qr/ERROR:\s+54000:/, 'the owner may not insert a 1001st resource into notify_settings: 54000');
($rc, $out, $err) = $node->psql('dst',
	"\\set VERBOSITY verbose\nINSERT INTO fencing.notify_settings SELECT 'n:' || g FROM generate_series(1, 3000) g",
	extra_params => [ '-U', 'fencing_dbo' ]);
like($err, qr/ERROR:\s+54000:/, 'nor 3000 at once');
is(as_owner('dst', 'SELECT count(*) FROM fencing.notify_settings'), '0', 'and nothing of them stays');
my $old_settings = as_owner('src', 'SELECT count(*), count(resource) FROM fencing.notify_settings');
is($old_settings, '1001|1000', 'the source is at the bound');

my $dir = PostgreSQL::Test::Utils::tempdir;
my $src = $node->connstr('src') . ' user=fencing_dbo';
my $dst = $node->connstr('dst') . ' user=fencing_dbo';
$node->command_ok([ 'pg_dump', '-d', $src, '-F', 'c', '-f', "$dir/src.dump" ], 'the database owner runs pg_dump -Fc');
$node->command_ok([ 'pg_dump', '-d', $src, '-F', 'p', '-f', "$dir/src.sql" ], 'the database owner runs pg_dump -Fp');
# The superuser created the extension (and with it schema fencing) in dst:
# the owner restores everything else, leaving out the schema, the extension
# and its comment (a table of contents edited as usual with -l / -L).
my $toc = `pg_restore -l $dir/src.dump`;
my @kept = grep { !/ (SCHEMA - fencing|EXTENSION - fencing|COMMENT - EXTENSION fencing) / } split /\n/, $toc;
cmp_ok(scalar(split /\n/, $toc) - scalar(@kept), '>=', 2, 'the list names the schema and the extension');
open my $fh, '>', "$dir/owner.list" or die $!;
print $fh join("\n", @kept), "\n";
close $fh;
$node->command_ok([ 'pg_restore', '--exit-on-error', '-L', "$dir/owner.list", '-d', $dst, "$dir/src.dump" ],
	'the database owner runs pg_restore into a database where a superuser created the extension');

is(as_owner('dst', q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state WHERE resource <> 'pre:1'}),
	$old_current, 'restored: the fence state is the source\'s');
is(as_owner('dst', q{SELECT encode(secret, 'hex') FROM fencing.key_secret}), $old_secret,
	'restored: the source\'s secret replaced the target\'s');
is(as_owner('dst', $keys_sql), $old_keys, 'restored: every name has the key it had in the source');
is(as_owner('dst', q{SELECT count(*) FROM fencing.fence_state WHERE key <> fencing.resource_key(resource)}), '0',
	'restored: every fence state row carries its resource\'s key, the one recorded before the restore too');
is(as_owner('dst', q{SELECT fencing.current('pre:1')}), $pre, 'restored: the resource used before the restore kept its token');
is(as_owner('dst', q{SELECT string_agg(resource || '=' || fencing.current(resource)::bigint, ',' ORDER BY resource) FROM fencing.fence_state WHERE resource <> 'pre:1'}),
	$old_current, 'restored: fencing.current() returns the old tokens');
is(as_owner('dst', q{SELECT count(*) FROM fencing.protected WHERE tbl = 'acct'::regclass}), '1',
	'restored: acct is protected');
is(as_owner('dst', 'SELECT count(*), count(resource) FROM fencing.notify_settings'), $old_settings,
	'restored: the notification settings at their bound');
my $new = as_owner('dst', q{SELECT fencing.acquire('acct:1')});
cmp_ok($new, '>', $old_max, "restored: a new token is greater than every old one ($new > $old_max)");
my $brand = as_owner('dst', q{SELECT fencing.acquire('brand:new')});
cmp_ok($brand, '>', $old_max, "restored: a new resource's first token too ($brand > $old_max)");
($rc, $out, $err) = $node->psql('dst', "UPDATE acct SET balance = 0, fence_token = $old_max WHERE id = 5",
	extra_params => [ '-U', 'fencing_dbo' ]);
like($err, qr/stale fence token/, 'restored: an old token is rejected');

$node->stop;
done_testing();

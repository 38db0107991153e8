# Logical replication between two databases that both have fencing: a
# publisher and a subscriber, each with its own counter, secret, fence state
# and tombstones.
#
#  (a) a publication FOR ALL TABLES, which carries fencing's own tables too:
#      the subscription synchronises every table (the copy of
#      fencing.key_secret's one row does not fail it), and none of the
#      publisher's fence state, secret, tombstones or notification settings
#      lands beside the subscriber's, neither in the initial copy nor
#      replicated later;
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->append_conf('postgresql.conf', q{
log_min_messages = warning
log_statement = none
});
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->append_conf('postgresql.conf', q{
log_min_messages = warning
log_statement = none
wal_retrieve_retry_interval = 200ms
});
$sub->start;

my $schema = q{
  CREATE EXTENSION fencing;
  CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token);
  SELECT fencing.protect('accounts');
};
$pub->safe_psql('postgres', $schema);
$sub->safe_psql('postgres', $schema);

sub tok { my ($node, $res) = @_; return $node->safe_psql('postgres', "SELECT fencing.acquire_xact('$res')"); }

# ---- (a) FOR ALL TABLES --------------------------------------------------------------

# State on both sides before the subscription: fence state, a tombstone, a
# notification setting.
for my $node ($pub, $sub)
{
	my $t = tok($node, 'acct:1');
	$node->safe_psql('postgres', "INSERT INTO accounts VALUES (1, 100, $t), (2, 200, $t), (3, 300, $t)");
	$node->safe_psql('postgres', "BEGIN; SELECT fencing.use(fencing.acquire_xact('acct:3')); DELETE FROM accounts WHERE id = 3; COMMIT");
	tok($node, $node eq $pub ? 'only-on-publisher' : 'only-on-subscriber');
	$node->safe_psql('postgres', $node eq $pub ? q{SELECT fencing.set_notify('pub-note')} : q{SELECT fencing.set_notify('sub-note')});
}
# The subscriber's copy of the publisher's rows starts from scratch.
$sub->safe_psql('postgres', 'TRUNCATE accounts');

my $state = q{
  SELECT (SELECT string_agg(resource, ',' ORDER BY resource) FROM fencing.fence_state),
         (SELECT encode(secret, 'hex') FROM fencing.key_secret),
         (SELECT count(*) FROM fencing.tombstones),
         (SELECT string_agg(resource, ',' ORDER BY resource) FROM fencing.notify_settings)};
my $sub_before = $sub->safe_psql('postgres', $state);

$pub->safe_psql('postgres', 'CREATE PUBLICATION pub_all FOR ALL TABLES');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres', "CREATE SUBSCRIPTION sub_all CONNECTION '$connstr' PUBLICATION pub_all");
$sub->wait_for_subscription_sync($pub, 'sub_all');
is($sub->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE srsubstate NOT IN ('r', 's')), count(*)
  FROM pg_subscription_rel}), '0|5', 'FOR ALL TABLES: every table of the publication is synchronised');
is($sub->safe_psql('postgres', 'SELECT id, balance FROM accounts ORDER BY id'), "1|100\n2|200",
	'FOR ALL TABLES: the protected table is copied');
is($sub->safe_psql('postgres', $state), $sub_before,
	'FOR ALL TABLES: the initial copy leaves the subscriber\'s fence state, secret, tombstones and settings as they were');

# Replicated later: new fence state rows, a tombstone, a setting.
$pub->safe_psql('postgres', q{
  BEGIN; SELECT fencing.use(fencing.acquire_xact('acct:2')); DELETE FROM accounts WHERE id = 2; COMMIT;
  SELECT fencing.acquire_xact('later-on-publisher');
  SELECT fencing.set_notify('later-note');
  INSERT INTO accounts VALUES (4, 400, fencing.acquire_xact('acct:4'));
});
$pub->wait_for_catchup('sub_all');
is($sub->safe_psql('postgres', 'SELECT id, balance FROM accounts ORDER BY id'), "1|100\n4|400",
	'FOR ALL TABLES: changes of the protected table are applied');
is($sub->safe_psql('postgres', $state), $sub_before,
	'FOR ALL TABLES: replicated changes leave the subscriber\'s fence state, secret, tombstones and settings as they were');
ok(!$sub->log_contains('duplicate key value violates unique constraint "key_secret_one_row"'),
	'FOR ALL TABLES: the copy of fencing.key_secret never failed');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub_all');
$pub->safe_psql('postgres', 'DROP PUBLICATION pub_all');

$sub->stop;
$pub->stop;
done_testing();

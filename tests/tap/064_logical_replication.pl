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
#  (b) a publication of the protected table (the recipe), the subscriber
#      protecting it too: replicated writes are judged there. A worker whose
#      token came from the publisher writes there after a newer token wrote
#      the row on the subscriber: the publisher accepts it, the subscriber
#      skips it and counts it (fencing.stats, fencing.table_stats, a LOG
#      line), and the apply worker goes on with the next change;
#  (c) a fenced DELETE on the publisher leaves a tombstone on the subscriber
#      (with the deleted row's token), which a stale INSERT there meets;
#  (d) the cut-over of the operations page: the old primary's writers
#      fenced off, the subscriber caught up and its subscription disabled,
#      the old primary's database closed to all but superusers, the new
#      primary's tables given
#      the old primary's last token as their floor; then the old primary
#      issues no token (also after a restart), no stale write through it
#      lands (refused there; and, when the subscription is enabled again,
#      skipped on the subscriber), no write with any of its tokens lands on
#      the new primary (an INSERT of a key it deleted, before or after the
#      subscription existed, an UPDATE of a row older than the stale token),
#      and new tokens exceed every token of the old primary;
#  (e) a superuser's session_replication_role = replica on the subscriber
#      does not get a stale write past the check either;
#  (e2) a replication connection (which CONNECTION LIMIT 0 lets in) to the
#      old primary acquires nothing;
#  (g) a subscription whose owner lost superuser: its tokenless DELETEs fail
#      the apply (42501), its other changes are judged;
#  (f) (PostgreSQL 16 on) a role that may write the table, create
#      subscriptions (pg_create_subscription) and CREATE in the database:
#      its own stale write gets 23T01, and so does nothing through a
#      subscription of its own, running as itself (run_as_owner), to a
#      publisher it controls: the stale change is skipped.
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
shared_preload_libraries = 'fencing'
log_min_messages = warning
log_statement = none
wal_retrieve_retry_interval = 200ms
});
$sub->start;

my $schema = q{
  CREATE EXTENSION fencing;
  CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token);
  SELECT fencing.protect('accounts');
  CREATE ROLE app LOGIN;
  GRANT USAGE ON SCHEMA fencing TO app;
  GRANT SELECT, INSERT, UPDATE, DELETE ON accounts TO app;
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
# (1.2) The publisher's runs too: a DELETE of many rows records most of its
# tombstones in fencing.tombstone_runs.
my $bulk = tok($pub, 'bulk');
$pub->safe_psql('postgres', "INSERT INTO accounts SELECT g, 0, $bulk FROM generate_series(1000, 1099) g");
$pub->safe_psql('postgres',
	"BEGIN; SELECT fencing.use(fencing.acquire_xact('bulk')); DELETE FROM accounts WHERE id >= 1000; COMMIT");
my $runs = 'SELECT count(*) FROM fencing.tombstone_runs';
ok($pub->safe_psql('postgres', $runs) > 0, 'FOR ALL TABLES: the publisher has runs');
# The subscriber's copy of the publisher's rows starts from scratch.
$sub->safe_psql('postgres', 'TRUNCATE accounts');

my $state = q{
  SELECT (SELECT string_agg(resource, ',' ORDER BY resource) FROM fencing.fence_state),
         (SELECT encode(secret, 'hex') FROM fencing.key_secret),
         (SELECT string_agg(resource, ',' ORDER BY resource) FROM fencing.notify_settings)};
my $tombs = 'SELECT count(*) FROM fencing.tombstones';
my $sub_before = $sub->safe_psql('postgres', $state);
my $sub_tombs = $sub->safe_psql('postgres', $tombs);

$pub->safe_psql('postgres', 'CREATE PUBLICATION pub_all FOR ALL TABLES');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres', "CREATE SUBSCRIPTION sub_all CONNECTION '$connstr' PUBLICATION pub_all");
$sub->wait_for_subscription_sync($pub, 'sub_all');
is($sub->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE srsubstate NOT IN ('r', 's')), count(*)
  FROM pg_subscription_rel}), '0|7', 'FOR ALL TABLES: every table of the publication is synchronised');
is($sub->safe_psql('postgres', 'SELECT id, balance FROM accounts ORDER BY id'), "1|100\n2|200",
	'FOR ALL TABLES: the protected table is copied');
is($sub->safe_psql('postgres', $state), $sub_before,
	'FOR ALL TABLES: the initial copy leaves the subscriber\'s fence state, secret and settings as they were');
is($sub->safe_psql('postgres', $tombs), $sub_tombs, 'FOR ALL TABLES: the initial copy brings no tombstone');
is($sub->safe_psql('postgres', $runs), '0', 'FOR ALL TABLES: the initial copy brings no run');

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
	'FOR ALL TABLES: replicated changes leave the subscriber\'s fence state, secret and settings as they were');
# One tombstone more: the subscriber's own, of the replicated DELETE (c).
is($sub->safe_psql('postgres', $tombs), $sub_tombs + 1,
	'FOR ALL TABLES: no tombstone of the publisher arrives (one of the subscriber\'s own, for the replicated DELETE)');
$pub->safe_psql('postgres', "INSERT INTO accounts SELECT g, 0, $bulk FROM generate_series(2000, 2099) g");
$pub->safe_psql('postgres',
	"BEGIN; SELECT fencing.use(fencing.acquire_xact('bulk')); DELETE FROM accounts WHERE id >= 2000; COMMIT");
$pub->wait_for_catchup('sub_all');
is($sub->safe_psql('postgres', $runs), '0',
	'FOR ALL TABLES: no run of the publisher arrives (the replicated DELETEs record a tombstone each)');
is($sub->safe_psql('postgres', $tombs), $sub_tombs + 101, 'FOR ALL TABLES: the subscriber records its own');
ok(!$sub->log_contains('duplicate key value violates unique constraint "key_secret_one_row"'),
	'FOR ALL TABLES: the copy of fencing.key_secret never failed');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub_all');
$pub->safe_psql('postgres', 'DROP PUBLICATION pub_all');

# ---- (b) replicated writes judged on the subscriber ------------------------------------

# A key the publisher deletes while no subscription exists (pub_all is
# gone): the subscriber never learns of it. A worker holds an older token.
my $s7 = tok($pub, 'acct:7');
$pub->safe_psql('postgres', "INSERT INTO accounts VALUES (7, 700, fencing.acquire_xact('acct:7'))");
$pub->safe_psql('postgres',
	"BEGIN; SELECT fencing.use(fencing.acquire_xact('acct:7')); DELETE FROM accounts WHERE id = 7; COMMIT");

# The recipe: a publication of the application's tables.
$pub->safe_psql('postgres', 'CREATE PUBLICATION pub_app FOR TABLE accounts');
$sub->safe_psql('postgres', 'TRUNCATE accounts');
$sub->safe_psql('postgres', "CREATE SUBSCRIPTION sub_app CONNECTION '$connstr' PUBLICATION pub_app");
$sub->wait_for_subscription_sync($pub, 'sub_app');
is($sub->safe_psql('postgres', 'SELECT id, balance FROM accounts ORDER BY id'), "1|100\n4|400",
	'publication of the protected table: copied');
is($sub->safe_psql('postgres', q{SELECT tgenabled FROM pg_trigger WHERE tgrelid = 'accounts'::regclass
  AND tgname = '~fencing_enforce'}), 'A', 'the check is enabled ALWAYS: it fires for the apply worker');

sub app_psql
{
	my ($node, $q) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $q, extra_params => [ '-U', 'app' ]);
	return ($rc, $out, $err);
}
sub skips { return $sub->safe_psql('postgres', q{SELECT stale_skips FROM fencing.stats}); }
sub table_skips
{
	return $sub->safe_psql('postgres',
		q{SELECT coalesce(sum(stale_skips), 0) FROM fencing.table_stats WHERE tbl = 'accounts'::regclass});
}

my $stale = tok($pub, 'acct:1');    # a worker on the publisher; its lock is lost later
my $newer = $stale + 1000;          # the row's token on the subscriber, written after the move
$sub->safe_psql('postgres', "UPDATE accounts SET balance = 111, fence_token = $newer WHERE id = 1");
my ($skips0, $tskips0) = (skips(), table_skips());
# The publisher accepts the stale worker's write: its row is older.
my ($rc) = app_psql($pub, "UPDATE accounts SET balance = 999, fence_token = $stale WHERE id = 1");
is($rc, 0, 'the publisher accepts the worker\'s write (its row is older there)');
my $t4 = tok($pub, 'acct:4');
$pub->safe_psql('postgres', "UPDATE accounts SET balance = 444, fence_token = $t4 WHERE id = 4");
$pub->wait_for_catchup('sub_app');
is($sub->safe_psql('postgres', 'SELECT id, balance, fence_token FROM accounts ORDER BY id'),
	"1|111|$newer\n4|444|$t4",
	'the stale replicated change is skipped on the subscriber; the next change is applied');
is(skips(), $skips0 + 1, 'the skipped change counts in fencing.stats (stale_skips)');
is(table_skips(), $tskips0 + 1, 'and in fencing.table_stats for the table');
ok($sub->log_contains('skipped a stale replicated change of relation "accounts"'), 'the skip is logged');
ok(!$sub->log_contains('stale fence token'), 'the apply worker never failed with 23T01');

# ---- (c) a replicated fenced DELETE leaves a tombstone ---------------------------------

my $r5 = tok($pub, 'acct:5');
$pub->safe_psql('postgres', "INSERT INTO accounts VALUES (5, 500, $r5)");
my $s5 = tok($pub, 'acct:5');    # a worker that will be stale
my $d5 = tok($pub, 'acct:5');    # the one that deletes the row
$pub->safe_psql('postgres', "BEGIN; SELECT fencing.use($d5); DELETE FROM accounts WHERE id = 5; COMMIT");
$pub->wait_for_catchup('sub_app');
is($sub->safe_psql('postgres', "SELECT count(*) FROM accounts WHERE id = 5"), '0', 'the fenced DELETE is replicated');
is($sub->safe_psql('postgres', "SELECT count(*) FROM fencing.tombstones WHERE token = $r5"), '1',
	'the subscriber keeps a tombstone of the key, with the deleted row\'s token');
my ($rc5, $o5, $e5) = app_psql($sub, "INSERT INTO accounts VALUES (5, 5, $r5)");
like($e5, qr/stale fence token/, 'a stale INSERT of the key on the subscriber meets the tombstone (23T01)');

# ---- (d) the cut-over ---------------------------------------------------------------

# 1. The old primary's writers are fenced off; 2. the subscriber catches up
# and stops following; 3. the old primary stops issuing tokens; 4. the new
# primary's table gets a floor at the old primary's last token.
# A worker on the old primary holds a token newer than row 4's, and loses
# its lock in the cut-over without having written.
my $s4 = tok($pub, 'acct:4');
$pub->safe_psql('postgres', 'REVOKE INSERT, UPDATE, DELETE ON accounts FROM app');
$pub->wait_for_catchup('sub_app');
$sub->safe_psql('postgres', 'ALTER SUBSCRIPTION sub_app DISABLE');
# 3. The old primary's database is retired (no acquisition succeeds in it,
# nor in copies of it, whoever asks), and the newest counter record is read
# once every other session (one may be in the middle of an acquisition)
# has ended.
my $floor = $pub->safe_psql('postgres', q{
  SELECT fencing.retire() \gset
  SELECT bool_and(pg_terminate_backend(pid, 10000)) IS NOT FALSE AS ended FROM pg_stat_activity
   WHERE datname = current_database() AND pid <> pg_backend_pid() \gset
  SELECT last_value + log_cnt FROM fencing.token_seq WHERE :'ended'});
# 4. Every token up to it is stale on the new primary.
is($sub->safe_psql('postgres', "SELECT fencing.raise_floor('accounts', $floor)"), $floor,
	'raise_floor returns the floor');
is($sub->safe_psql('postgres', "SELECT floor FROM fencing.protected WHERE tbl = 'accounts'::regclass"), $floor,
	'fencing.protected shows the floor');
cmp_ok(tok($sub, 'acct:0'), '>', $floor, 'raise_floor moved the counter past the floor');

isnt($floor, '', 'every other session of the old primary ended before the floor was read');
# The old primary hands out no token any more: not to a superuser either,
# not after a restart, not in a copy of the database made by its owner, and
# the database owner cannot undo it.
(my $rc9, my $o9, my $e9) = app_psql($pub, "SELECT fencing.acquire_xact('acct:9')");
like($e9, qr/issues no fencing tokens any more/, 'after the cut-over: the old primary issues no token (55000)');
($rc9, $o9, $e9) = $pub->psql('postgres', "SELECT fencing.try_acquire('acct:9')");
like($e9, qr/issues no fencing tokens any more/, 'after the cut-over: not to a superuser either');
$pub->restart;
($rc9, $o9, $e9) = app_psql($pub, "SELECT fencing.acquire_xact('acct:9')");
like($e9, qr/issues no fencing tokens any more/, 'after the cut-over: nor after a restart');
$pub->safe_psql('postgres', q{
  CREATE ROLE dbo LOGIN CREATEDB;
  CREATE DATABASE old_app OWNER dbo;
});
$pub->safe_psql('old_app', q{
  CREATE EXTENSION fencing;
  SELECT fencing.retire();
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'old_app' AND pid <> pg_backend_pid();
});
($rc9, $o9, $e9) = $pub->psql('old_app', 'DELETE FROM fencing.retired', extra_params => [ '-U', 'dbo' ]);
like($e9, qr/permission denied/, 'the database owner cannot take the retirement back');
$pub->safe_psql('postgres', 'CREATE ROLE writer LOGIN; GRANT pg_write_all_data TO writer');
($rc9, $o9, $e9) = $pub->psql('old_app', 'DELETE FROM fencing.retired', extra_params => [ '-U', 'writer' ]);
like($e9, qr/only a superuser may change or remove rows of fencing.retired/,
	'nor a member of pg_write_all_data (42501)');
$pub->safe_psql('postgres', 'CREATE DATABASE old_app_copy TEMPLATE old_app', extra_params => [ '-U', 'dbo' ]);
($rc9, $o9, $e9) = $pub->psql('old_app_copy', "SELECT fencing.acquire_xact('acct:9')", extra_params => [ '-U', 'dbo' ]);
like($e9, qr/issues no fencing tokens any more/, 'a copy of a retired database issues no token either');
($rc, my $o, my $e) = app_psql($pub, "UPDATE accounts SET balance = 888, fence_token = $s5 WHERE id = 4");
like($e, qr/permission denied/, 'after the cut-over: the old primary refuses the application\'s writes');
# Stale writes through the new primary: the INSERT of the key the old
# primary deleted (with a token newer than the stale one), an UPDATE.
($rc, $o, $e) = app_psql($sub, "INSERT INTO accounts VALUES (5, 55, $s5)");
like($e, qr/stale fence token/,
	'after the cut-over: a stale INSERT of a key the old primary deleted is rejected on the new one (23T01)');
($rc, $o, $e) = app_psql($sub, "UPDATE accounts SET balance = 44, fence_token = $stale WHERE id = 4");
like($e, qr/stale fence token/, 'after the cut-over: a stale UPDATE is rejected on the new primary (23T01)');
# Every token of the old primary is stale on the new one: also that of a
# key the old primary deleted before the subscription existed, and that of
# a worker newer than the row it writes (nobody rewrote row 4 since).
($rc, $o, $e) = app_psql($sub, "INSERT INTO accounts VALUES (7, 77, $s7)");
like($e, qr/stale fence token/,
	'after the cut-over: a stale INSERT of a key deleted before the subscription existed is rejected (23T01)');
($rc, $o, $e) = app_psql($sub, "UPDATE accounts SET balance = 45, fence_token = $s4 WHERE id = 4");
like($e, qr/stale fence token/,
	'after the cut-over: an old-primary token newer than the row it writes is rejected (23T01)');
is($sub->safe_psql('postgres', 'SELECT balance FROM accounts WHERE id = 4'), '444', 'row 4 is unchanged');
# New tokens on the new primary exceed every token of the old one.
my $new = tok($sub, 'acct:5');
cmp_ok($new, '>', $floor, 'after the cut-over: new tokens exceed every token the old primary issued');
($rc, $o, $e) = app_psql($sub, "INSERT INTO accounts VALUES (5, 56, $new)");
is($rc, 0, 'after the cut-over: a write with a new token is accepted');
# A superuser's stale write on the old primary (with the greatest token it
# could have issued), replicated when the subscription is enabled again
# after a worker wrote the row on the new primary: skipped on the subscriber.
my $t1 = tok($sub, 'acct:1');
($rc) = app_psql($sub, "UPDATE accounts SET balance = 111, fence_token = $t1 WHERE id = 1");
$pub->safe_psql('postgres', "UPDATE accounts SET balance = 777, fence_token = $floor WHERE id = 1");
# And its DELETEs, which carry no token: of a row the new primary rewrote
# (1, before the UPDATE above arrives) and of one nobody rewrote (4).
$pub->safe_psql('postgres', "BEGIN; SELECT fencing.use($floor + 1); DELETE FROM accounts WHERE id IN (1, 4); COMMIT");
my $sk = skips();
$sub->safe_psql('postgres', 'ALTER SUBSCRIPTION sub_app ENABLE');
$pub->wait_for_catchup('sub_app');
is($sub->safe_psql('postgres', 'SELECT balance, fence_token FROM accounts WHERE id = 1'), "111|$t1",
	'after the cut-over: a stale change through the old primary, replicated later, is skipped');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM accounts WHERE id IN (1, 4)'), '2',
	'after the cut-over: replicated DELETEs from the old primary are skipped on a table with a floor');
is(skips(), $sk + 3, 'the UPDATE and both DELETEs count as stale skips');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub_app');

# ---- (e) replica mode on the subscriber ----------------------------------------------

($rc, $o, $e) = $sub->psql('postgres',
	"SET session_replication_role = replica; UPDATE accounts SET balance = 1, fence_token = $stale WHERE id = 4");
like($e, qr/stale fence token/, 'a superuser\'s session_replication_role = replica does not bypass the check');

# ---- (e2) the old primary's replication connections acquire nothing -------------------

$pub->safe_psql('postgres', 'CREATE ROLE rep LOGIN REPLICATION; GRANT USAGE ON SCHEMA fencing TO rep');
my ($rrc, $ro, $re) = $pub->psql('postgres', "SELECT fencing.acquire_xact('acct:1')",
	connstr => $pub->connstr('postgres') . ' user=rep replication=database');
like($re, qr/cannot acquire a fencing lock in a replication connection/,
	'a replication connection (replication=database, which CONNECTION LIMIT 0 does not stop) acquires nothing');

# ---- (g) a subscription whose owner is no superuser any more ---------------------------

# Its replicated DELETEs, which carry no token, are skipped (the role could
# not delete without a token itself); its INSERTs and UPDATEs are judged.
my $notes = q{
  CREATE TABLE notes (id int PRIMARY KEY, v text, fence_token fencing.token);
  SELECT fencing.protect('notes');
};
$pub->safe_psql('postgres', $notes . 'CREATE PUBLICATION pub_notes FOR TABLE notes');
$sub->safe_psql('postgres', $notes . q{
  CREATE ROLE eve LOGIN SUPERUSER;
  GRANT SELECT, INSERT, UPDATE, DELETE ON notes TO eve;
});
# (16 on: a subscription of a non-superuser owner must log in with a
# password unless password_required is off, which a superuser may set; it
# runs as its owner, which may not become the table's owner otherwise.)
my $eve_with = $sub->pg_version >= 16 ? ' WITH (password_required = false, run_as_owner = true)' : '';
$sub->safe_psql('postgres', "SET ROLE eve; CREATE SUBSCRIPTION sub_eve CONNECTION '$connstr' PUBLICATION pub_notes$eve_with");
$sub->wait_for_subscription_sync($pub, 'sub_eve');
$sub->safe_psql('postgres', 'ALTER ROLE eve NOSUPERUSER');
$pub->safe_psql('postgres', "INSERT INTO notes VALUES (1, 'kept', 100), (2, 'two', 100)");
$pub->wait_for_catchup('sub_eve');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM notes'), '2', 'demoted owner: its INSERTs with tokens are applied');
my $offset = -s $sub->logfile;
$pub->safe_psql('postgres', "BEGIN; SELECT fencing.use(200); DELETE FROM notes WHERE id = 1; COMMIT");
$sub->wait_for_log(qr/replicated DELETE on protected relation "notes" needs a subscription owned by a superuser/,
	$offset);
pass('demoted owner: its replicated DELETE fails the apply (42501), which says why');
is($sub->safe_psql('postgres', 'SELECT id, v FROM notes ORDER BY id'), "1|kept\n2|two",
	'demoted owner: the row it would have deleted without a token stays');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub_eve');

# ---- (f) a subscription owned by a non-superuser ---------------------------------------

SKIP:
{
	skip 'subscriptions owned by non-superusers come with PostgreSQL 16', 5 if $sub->pg_version < 16;
	my $ddl = q{
	  CREATE TABLE ledger (id int PRIMARY KEY, v text, fence_token fencing.token);
	  SELECT fencing.protect('ledger');
	};
	$pub->safe_psql('postgres', $ddl . q{
	  CREATE ROLE repl_user LOGIN REPLICATION PASSWORD 'secret';
	  GRANT SELECT ON ledger TO repl_user;
	  CREATE PUBLICATION pub_ledger FOR TABLE ledger;
	  INSERT INTO ledger VALUES (1, 'old', 1);
	});
	# A subscription owned by a non-superuser must log in with a password.
	my $hba = $pub->data_dir . '/pg_hba.conf';
	my $lines = PostgreSQL::Test::Utils::slurp_file($hba);
	open my $fh, '>', $hba or die "$hba: $!";
	print $fh "local all repl_user scram-sha-256\n$lines";
	close $fh;
	$pub->reload;
	$sub->safe_psql('postgres', $ddl . q{
	  CREATE ROLE mallory LOGIN;
	  GRANT pg_create_subscription TO mallory;
	  GRANT CREATE ON DATABASE postgres TO mallory;
	  GRANT SELECT, INSERT, UPDATE, DELETE ON ledger TO mallory;
	});
	my $t = tok($sub, 'ledger:1');
	$sub->safe_psql('postgres', "INSERT INTO ledger VALUES (1, 'new', $t)");
	my ($frc, $fo, $fe) = $sub->psql('postgres', "UPDATE ledger SET v = 'stale', fence_token = 2 WHERE id = 1",
		extra_params => [ '-U', 'mallory' ]);
	like($fe, qr/stale fence token/, 'non-superuser: its own stale write is rejected (23T01)');
	my $conn = $pub->connstr . " dbname=postgres user=repl_user password=secret";
	($frc, $fo, $fe) = $sub->psql('postgres',
		"CREATE SUBSCRIPTION sub_mallory CONNECTION '$conn' PUBLICATION pub_ledger WITH (run_as_owner = true, copy_data = false)",
		extra_params => [ '-U', 'mallory' ]);
	is($frc, 0, 'non-superuser: creates a subscription of its own, running as itself') or diag($fe);
	$pub->wait_for_catchup('sub_mallory');
	$pub->safe_psql('postgres', "UPDATE ledger SET v = 'stale', fence_token = 2 WHERE id = 1");
	$pub->safe_psql('postgres', "INSERT INTO ledger VALUES (2, 'next', 3)");
	$pub->wait_for_catchup('sub_mallory');
	is($sub->safe_psql('postgres', 'SELECT id, v, fence_token FROM ledger ORDER BY id'), "1|new|$t\n2|next|3",
		'non-superuser: the stale change through its subscription is skipped, the next one applied');
	my $moff = -s $sub->logfile;
	$pub->safe_psql('postgres', "BEGIN; SELECT fencing.use(4); DELETE FROM ledger WHERE id = 1; COMMIT");
	$sub->wait_for_log(qr/replicated DELETE on protected relation "ledger" needs a subscription owned by a superuser/,
		$moff);
	is($sub->safe_psql('postgres', 'SELECT count(*) FROM ledger WHERE id = 1'), '1',
		'non-superuser: a DELETE through its subscription (no token) fails the apply; the row stays');
	ok(!$sub->log_contains('relation "ledger".*stale fence token'), 'non-superuser: the apply worker never failed');
	$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub_mallory');
}

$sub->stop;
$pub->stop;
done_testing();

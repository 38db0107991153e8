# Dump, restore, upgrade with protected tables (tests/tap/010_durability.pl
# covers the fence state alone).
#
# A database with fence state and protected tables (a plain one, one fenced
# with a bigint column and non-default settings, a partitioned one with
# fence_deletes) is dumped with pg_dump (custom and plain format) and
# restored into new databases. In each restored database:
#   - fencing.current() returns the old tokens, new tokens of every resource
#     are greater than every old token of that resource, and greater than
#     every token the protected tables hold;
#   - fencing.protected lists the same tables with the same settings, the
#     rows are identical, and protection is in place: stale writes (through
#     the partitioned parent and directly into a partition too) are rejected
#     with 23T01 (or skipped with on_stale = 'skip'), fresh ones accepted.
# Then DROP EXTENSION is refused while protected tables exist (and while
# columns of type fencing.token exist); after unprotect + DROP EXTENSION +
# CREATE EXTENSION the counter does not restart at 1: new tokens are greater
# than the old ones (also with the tables protected again).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "log_statement = none\n");
$node->start;

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# psql_state(db, sql): the SQLSTATE of the first error ('' when none), and stdout.
sub psql_state { my ($db, $q) = @_; return psql_sqlstate($node, $db, $q); }

# ---- the source database ----------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE src');
sql('src', q{
CREATE EXTENSION fencing;

CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token);
SELECT fencing.protect('acct');

-- Tokens of another coordinator in a bigint column, equal tokens allowed,
-- stale writes skipped.
CREATE TABLE ext_rev (id int PRIMARY KEY, v text, etcd_rev bigint);
SELECT fencing.protect('ext_rev', token_column => 'etcd_rev', allow_equal => true, on_stale => 'skip');

CREATE TABLE events (region text NOT NULL, id int NOT NULL, payload text, fence_token fencing.token,
                     PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us');
CREATE TABLE events_rest PARTITION OF events DEFAULT;
SELECT fencing.protect('events', fence_deletes => true);

CREATE TABLE unprotected (id int PRIMARY KEY, fence_token fencing.token);

-- Coverage that DDL set up: an inheritance child created after its parent
-- was protected, and a partition detached from a protected table; each
-- carries a check of its own.
CREATE TABLE ledger (id int PRIMARY KEY, amount bigint, fence_token fencing.token);
SELECT fencing.protect('ledger');
CREATE TABLE ledger_2026 (PRIMARY KEY (id)) INHERITS (ledger);
CREATE TABLE events_old PARTITION OF events FOR VALUES IN ('old');
ALTER TABLE events DETACH PARTITION events_old;
});

# Writes with tokens: each row written several times, with fresh tokens.
sql('src', q{
DO $$
DECLARE t fencing.token; r record;
BEGIN
  FOR round IN 1..3 LOOP
    FOR i IN 1..5 LOOP
      t := fencing.acquire('acct:' || i);
      INSERT INTO acct VALUES (i, 100 * round + i, t)
        ON CONFLICT (id) DO UPDATE SET balance = excluded.balance, fence_token = excluded.fence_token;
      PERFORM fencing.release('acct:' || i);
    END LOOP;
    FOR r IN SELECT unnest(ARRAY['eu', 'us', 'ap']) AS region LOOP
      t := fencing.acquire('events:' || r.region);
      INSERT INTO events SELECT r.region, g, 'round ' || round, t FROM generate_series(1, 4) g
        ON CONFLICT (region, id) DO UPDATE SET payload = excluded.payload, fence_token = excluded.fence_token;
      PERFORM fencing.release('events:' || r.region);
    END LOOP;
    t := fencing.acquire('ext:1');
    INSERT INTO ext_rev VALUES (1, 'round ' || round, t::bigint)
      ON CONFLICT (id) DO UPDATE SET v = excluded.v, etcd_rev = excluded.etcd_rev;
    PERFORM fencing.release('ext:1');
  END LOOP;
  INSERT INTO unprotected VALUES (1, 1);
  t := fencing.acquire('ledger');
  INSERT INTO ledger_2026 VALUES (1, 10, t);
  INSERT INTO events_old VALUES ('old', 1, 'old', t);
  PERFORM fencing.release('ledger');
  -- A deleted key: its tombstone stays in this database (not dumped).
  PERFORM set_config('fencing.token', fencing.acquire_xact('acct:5')::text, true);
  DELETE FROM acct WHERE id = 5;
END $$;
});
# A token that was handed out but never written (its holder is still out there).
my $inflight = sql('src', q{SELECT fencing.acquire('acct:1')::bigint || ' ' || fencing.release('acct:1')});
($inflight) = split / /, $inflight;

my %src;
$src{current} = sql('src', q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state});
$src{protected} = sql('src', q{SELECT string_agg(format('%s|%s|%s|%s|%s', tbl, token_column, allow_equal, on_stale, fence_deletes), ',' ORDER BY tbl::text) FROM fencing.protected});
$src{rows} = sql('src', q{SELECT (SELECT string_agg(format('%s', a), ';' ORDER BY id) FROM acct a) || '#' ||
	(SELECT string_agg(format('%s', e), ';' ORDER BY region, id) FROM events e) || '#' ||
	(SELECT string_agg(format('%s', x), ';' ORDER BY id) FROM ext_rev x)});
$src{max_state} = sql('src', 'SELECT max(token) FROM fencing.fence_state');
$src{secret} = sql('src', q{SELECT encode(secret, 'hex') FROM fencing.key_secret});
my $keys_sql = q{SELECT string_agg(r || '=' || fencing.resource_key(r), ',' ORDER BY r)
	FROM (SELECT resource FROM fencing.fence_state UNION SELECT 'brand:new') x(r)};
$src{keys} = sql('src', $keys_sql);
$src{max_rows} = sql('src', q{SELECT greatest((SELECT max(fence_token::bigint) FROM acct), (SELECT max(fence_token::bigint) FROM events),
	(SELECT max(etcd_rev) FROM ext_rev))});
is($src{protected}, 'acct|fence_token|f|error|t,events|fence_token|f|error|t,events_old|fence_token|f|error|t,ext_rev|etcd_rev|t|skip|t,ledger|fence_token|f|error|t,ledger_2026|fence_token|f|error|t',
	'source: three tables protected with their settings, a child and a detached partition with theirs');
is(sql('src', q{SELECT count(*) FROM fencing.tombstones}), '1', 'source: one tombstone');
cmp_ok($inflight, '>', $src{max_rows}, 'source: an in-flight token above every written one');
is(sql('src', q{SELECT count(*) FROM pg_trigger WHERE tgname = '~fencing_enforce'}), '9',
	'source: the trigger is on acct, ext_rev, events and its 3 partitions, events_old, ledger and ledger_2026');

# ---- dump and restore ---------------------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-d', $node->connstr('src'), '-F', 'c', '-f', "$dir/src.dump" ], 'pg_dump -Fc');
$node->command_ok([ 'pg_dump', '-d', $node->connstr('src'), '-F', 'p', '-f', "$dir/src.sql" ], 'pg_dump -Fp');

my @restored;
for my $how ('custom', 'custom-jobs', 'custom-sections', 'plain')
{
	my $db = "dst_$how" =~ s/-/_/gr;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	if ($how eq 'custom')
	{
		$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr($db), "$dir/src.dump" ],
			"$how: pg_restore");
	}
	elsif ($how eq 'custom-jobs')
	{
		# (1.2) In one run: pg_restore -j may create a partitioned table's
		# check (cloned onto the partitions) before it loads a partition,
		# whose primary key does not exist yet. Its rows go in all the same
		# (nothing was deleted yet); before 1.2 that failed with 55000, now
		# and then.
		$node->command_ok([ 'pg_restore', '--exit-on-error', '-j', '4', '-d', $node->connstr($db), "$dir/src.dump" ],
			"$how: pg_restore -j 4");
	}
	elsif ($how eq 'custom-sections')
	{
		# In sections, as operations.md shows for a server without the
		# preload (whose INSERTs cannot tell that no tombstone exists): the
		# rows go in before any check exists.
		$node->command_ok(
			[ 'pg_restore', '--exit-on-error', "--section=$_", '-j', '2', '-d', $node->connstr($db), "$dir/src.dump" ],
			"$how: pg_restore --section=$_ -j 2")
		  for ('pre-data', 'data', 'post-data');
	}
	else
	{
		$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db), '-f', "$dir/src.sql" ],
			"$how: psql -f");
	}
	push @restored, $db;
}

for my $db (@restored)
{
	is(sql($db, q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state}),
		$src{current}, "$db: the fence state is the source's");
	is(sql($db, q{SELECT string_agg(resource || '=' || fencing.current(resource)::bigint, ',' ORDER BY resource) FROM fencing.fence_state}),
		$src{current}, "$db: fencing.current() returns the old tokens");
	is(sql($db, q{SELECT string_agg(encode(secret, 'hex'), ',') FROM fencing.key_secret}), $src{secret},
		"$db: the resource key secret is the source's (it replaced the one CREATE EXTENSION made)");
	is(sql($db, $keys_sql), $src{keys}, "$db: every name has the key it had in the source");
	is(sql($db, q{SELECT count(*) FROM fencing.fence_state WHERE key <> fencing.resource_key(resource)}), '0',
		"$db: every fence state row carries its resource's key");
	is(sql($db, q{SELECT string_agg(format('%s|%s|%s|%s|%s', tbl, token_column, allow_equal, on_stale, fence_deletes), ',' ORDER BY tbl::text) FROM fencing.protected}),
		$src{protected}, "$db: fencing.protected lists the same tables with the same settings");
	is(sql($db, q{SELECT count(*) FROM pg_trigger WHERE tgname = '~fencing_enforce'}), '9',
		"$db: the trigger is on every table and partition");
	is(sql($db, q{SELECT string_agg(e.evtname || ':' || e.evtenabled::text, ',' ORDER BY e.evtname) FROM pg_event_trigger e
		JOIN pg_depend d ON d.classid = 'pg_event_trigger'::regclass AND d.objid = e.oid AND d.deptype = 'e'}),
		'fencing_ddl_command_end:O,fencing_ddl_command_start:O,fencing_sql_drop:O', "$db: the extension's event triggers, once each");
	is(sql($db, q{SELECT count(*) FROM fencing.tombstones}), '0', "$db: tombstones are not dumped");
	my $l = sql($db, q{SELECT fence_token FROM ledger_2026 WHERE id = 1});
	my ($st) = psql_state($db, "UPDATE ledger SET amount = 0, fence_token = $l WHERE id = 1");
	is($st, '23T01', "$db: ledger_2026: a stale write through its parent is rejected");
	($st) = psql_state($db, "UPDATE events_old SET payload = 'stale', fence_token = $l");
	is($st, '23T01', "$db: events_old (detached): a stale write is rejected");
	($st) = psql_state($db, "CREATE TABLE ledger_2027 (PRIMARY KEY (id)) INHERITS (ledger); INSERT INTO ledger_2027 VALUES (2, 1, NULL)");
	is($st, '23T01', "$db: a child created after the restore is checked too");
	is(sql($db, q{SELECT (SELECT string_agg(format('%s', a), ';' ORDER BY id) FROM acct a) || '#' ||
		(SELECT string_agg(format('%s', e), ';' ORDER BY region, id) FROM events e) || '#' ||
		(SELECT string_agg(format('%s', x), ';' ORDER BY id) FROM ext_rev x)}),
		$src{rows}, "$db: the rows are the source's");

	# Protection in place: stale writes.
	my $acct1 = sql($db, 'SELECT fence_token FROM acct WHERE id = 1');
	my ($state) = psql_state($db, "UPDATE acct SET balance = 0, fence_token = $acct1 WHERE id = 1");
	is($state, '23T01', "$db: acct: a write with the stored token is rejected");
	($state) = psql_state($db, "UPDATE acct SET balance = 0, fence_token = $inflight WHERE id = 1");
	is($state, '', "$db: acct: the old in-flight token (newer than the row's) is still accepted, as in the source");
	($state) = psql_state($db, "UPDATE acct SET balance = 0, fence_token = $inflight WHERE id = 1");
	is($state, '23T01', "$db: acct: ... but only once");
	($state) = psql_state($db, "UPDATE acct SET balance = 0 WHERE id = 2");
	is($state, '23T01', "$db: acct: a write without a token is rejected");
	my $eu = sql($db, q{SELECT fence_token FROM events WHERE region = 'eu' AND id = 1});
	($state) = psql_state($db, "UPDATE events SET payload = 'stale', fence_token = $eu - 1 WHERE region = 'eu' AND id = 1");
	is($state, '23T01', "$db: events: a stale write through the partitioned table is rejected");
	($state) = psql_state($db, "UPDATE events_eu SET payload = 'stale', fence_token = $eu WHERE id = 2");
	is($state, '23T01', "$db: events_eu: a stale write straight into a partition is rejected");
	($state) = psql_state($db, "UPDATE events SET payload = 'stale', fence_token = $eu WHERE region = 'ap' AND id = 1");
	is($state, '23T01', "$db: events_rest (default partition): a stale write is rejected");
	($state) = psql_state($db, "DELETE FROM events WHERE region = 'us'");
	is($state, '23T01', "$db: events: DELETE without a token is rejected (fence_deletes)");
	($state) = psql_state($db, "INSERT INTO events VALUES ('eu', 99, 'no token', NULL)");
	is($state, '23T01', "$db: events: INSERT without a token is rejected");
	my $rev = sql($db, 'SELECT etcd_rev FROM ext_rev WHERE id = 1');
	my ($s2, $out) = psql_state($db, "UPDATE ext_rev SET v = 'stale', etcd_rev = $rev - 1 WHERE id = 1 RETURNING id");
	is("$s2/$out", '/', "$db: ext_rev: a stale write is skipped (on_stale = 'skip')");
	($s2, $out) = psql_state($db, "UPDATE ext_rev SET v = 'equal', etcd_rev = $rev WHERE id = 1 RETURNING id");
	is("$s2/$out", '/1', "$db: ext_rev: an equal token is accepted (allow_equal)");
	is(sql($db, q{SELECT string_agg(format('%s', x), ';' ORDER BY id) FROM ext_rev x WHERE v = 'stale'}), '',
		"$db: ext_rev: the stale write left nothing");

	# New tokens: greater than every old token of the resource, and than the rows.
	my $new = sql($db, q{SELECT string_agg(resource || '=' || (fencing.acquire_xact(resource)::bigint > token)::text
		|| ',' || (fencing.acquire_xact(resource, reentrant => true)::bigint > } . $src{max_rows} . q{)::text, ' ' ORDER BY resource)
		FROM fencing.fence_state});
	unlike($new, qr/false/, "$db: every resource's next token is greater than its old ones and than every stored row token")
	  or diag $new;
	my $t = sql($db, q{SELECT fencing.acquire('acct:1')});
	cmp_ok($t, '>', $inflight, "$db: acct:1's next token is greater than the in-flight one ($t > $inflight)");
	($state) = psql_state($db, "UPDATE acct SET balance = 1, fence_token = $t WHERE id = 1");
	is($state, '', "$db: acct: a write with the new token is accepted");
	$t = sql($db, q{SELECT fencing.acquire('events:eu')});
	($state) = psql_state($db, "UPDATE events SET payload = 'fresh', fence_token = $t WHERE region = 'eu'");
	is($state, '', "$db: events: a write with the new token is accepted through the parent");
	($state) = psql_state($db, "BEGIN; SET LOCAL fencing.token = '$t'; DELETE FROM events WHERE region = 'eu' AND id = 4; COMMIT;");
	is($state, '23T01', "$db: events: DELETE with fencing.token equal to the stored token is rejected");
	$t = sql($db, q{SELECT fencing.acquire('events:eu')});
	($state) = psql_state($db, "BEGIN; SET LOCAL fencing.token = '$t'; DELETE FROM events WHERE region = 'eu' AND id = 4; COMMIT;");
	is($state, '', "$db: events: DELETE with a newer fencing.token is accepted");
	is(sql($db, q{SELECT count(*) FROM fencing.locks WHERE pid <> pg_backend_pid()}), '0', "$db: no lock came with the dump");
}

# ---- (1.2) pg_restore --clean --single-transaction over the database itself -----------
# It drops the tables (first the primary key of one with tombstones, then
# the table), then the extension, in the transaction that creates them
# again and loads the fence state (which moves the new counter). Before,
# the primary key's drop was refused (0A000), and so was DROP EXTENSION in
# a transaction that had used the tombstones (55006). (Partitioned tables
# cannot take part: pg_restore --clean drops a partition's inherited key,
# which PostgreSQL refuses.)
$node->safe_psql('postgres', 'CREATE DATABASE cln');
sql('cln', q{
CREATE EXTENSION fencing;
CREATE TABLE jobs (id int PRIMARY KEY, v text, fence_token fencing.token);
SELECT fencing.protect('jobs');
});
sql('cln', q{BEGIN; SELECT fencing.use(fencing.acquire_xact('jobs')); INSERT INTO jobs VALUES (1, 'a'), (2, 'b'); COMMIT;});
sql('cln', q{BEGIN; SELECT fencing.use(fencing.acquire_xact('jobs')); DELETE FROM jobs WHERE id = 1; COMMIT;});
my $cln_state = sql('cln', q{SELECT string_agg(resource || '=' || token, ',') FROM fencing.fence_state});
my $cln_rows = sql('cln', q{SELECT string_agg(id || ':' || fence_token, ',' ORDER BY id) FROM jobs});
is(sql('cln', q{SELECT count(*) FROM fencing.tombstones}), '1', 'clean: the source has a tombstone');
$node->command_ok([ 'pg_dump', '-d', $node->connstr('cln'), '-F', 'c', '-f', "$dir/cln.dump" ], 'clean: pg_dump -Fc');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '--clean', '--single-transaction', '-d', $node->connstr('cln'), "$dir/cln.dump" ],
	'clean: pg_restore --clean --single-transaction over the database itself');
is(sql('cln', q{SELECT string_agg(resource || '=' || token, ',') FROM fencing.fence_state}), $cln_state,
	'clean: the fence state is the dump\'s');
is(sql('cln', q{SELECT string_agg(id || ':' || fence_token, ',' ORDER BY id) FROM jobs}), $cln_rows,
	'clean: the rows are the dump\'s');
is(sql('cln', q{SELECT count(*) FROM fencing.tombstones}), '0', 'clean: tombstones are not dumped');
my ($cln_st) = psql_state('cln', q{BEGIN; SET LOCAL fencing.token = '5'; UPDATE jobs SET v = 'stale' WHERE id = 2; COMMIT;});
is($cln_st, '23T01', 'clean: a stale write is rejected');
my $next = sql('cln', q{SELECT fencing.acquire('jobs')});
cmp_ok($next, '>', (split /=/, $cln_state)[1], 'clean: the next token is above the restored one');

# (1.2) Under wal_level = minimal (this node's), a counter created by the
# transaction that draws from it writes no WAL (the restore above, the
# migration below): written out at commit, it resumes above its tokens
# after a crash. Before, it was refused (XX001, "fencing.token_seq is not a
# logged sequence"), and so was such a restore.
is(sql('postgres', 'SHOW wal_level'), 'minimal', 'minimal: the node runs with wal_level = minimal');
$node->safe_psql('postgres', 'CREATE DATABASE mini');
my $adv = sql('mini', q{
BEGIN;
CREATE EXTENSION fencing;
CREATE TABLE m (id int PRIMARY KEY, fence_token fencing.token);
SELECT fencing.protect('m');
SELECT fencing.advance_past('m', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + 1000000);
COMMIT;
});
$node->stop('immediate');
$node->start;
my $after = sql('mini', q{SELECT fencing.acquire('m')});
cmp_ok($after, '>', $adv, "minimal: after a crash the counter is above advance_past's token ($after > $adv)");

# ---- DROP EXTENSION and CREATE EXTENSION ------------------------------------------------
my $db = 'dst_custom';
sql($db, q{DROP TABLE ledger CASCADE; DROP TABLE events_old});
my $old_max = sql($db, q{SELECT max(token) FROM fencing.fence_state});
my ($state, $out, $err) = psql_state($db, 'DROP EXTENSION fencing');
is($state, '2BP01', 'DROP EXTENSION is refused while tables are protected and use the type');
like($err, qr/acct|events|ext_rev/, 'the error names dependent objects');

# Only bigint token columns left, still protected: still refused.
sql($db, q{
ALTER TABLE acct ALTER COLUMN fence_token TYPE bigint;
ALTER TABLE events ALTER COLUMN fence_token TYPE bigint;
ALTER TABLE unprotected ALTER COLUMN fence_token TYPE bigint;
});
($state, $out, $err) = psql_state($db, 'DROP EXTENSION fencing');
is($state, '2BP01', 'DROP EXTENSION is refused while tables are protected (bigint columns)');
like($err, qr/trigger/, 'the error names the fencing triggers');
is(sql($db, q{SELECT count(*) FROM fencing.protected}), '3', 'nothing was dropped');
($state) = psql_state($db, "UPDATE acct SET fence_token = 1 WHERE id = 2");
is($state, '23T01', 'the bigint acct is still protected');

# Unprotect everything, drop, create: the counter does not start at 1.
sql($db, q{SELECT fencing.unprotect(tbl) FROM fencing.protected});
is(sql($db, q{SELECT count(*) FROM fencing.protected}), '0', 'unprotected');
($state, $out, $err) = psql_state($db, 'DROP EXTENSION fencing');
is($state, '', 'DROP EXTENSION works once nothing is protected') or diag $err;
sql($db, 'CREATE EXTENSION fencing');
my $fresh = sql($db, q{SELECT fencing.acquire('acct:1')::bigint || ' ' || fencing.acquire('brand:new')::bigint});
my ($f1, $f2) = split / /, $fresh;
cmp_ok($f1, '>', $old_max, "after DROP/CREATE EXTENSION: a resource's next token is greater than every old token ($f1 > $old_max)");
cmp_ok($f2, '>', $old_max, "after DROP/CREATE EXTENSION: a new resource's first token too ($f2 > $old_max)");
cmp_ok($f1, '>', 1_000_000, 'the counter did not restart at 1');
sql($db, q{SELECT fencing.protect('acct'); SELECT fencing.protect('events', fence_deletes => true);});
($state) = psql_state($db, "UPDATE acct SET balance = 7, fence_token = $inflight WHERE id = 1");
is($state, '23T01', 'protected again: an old token is rejected');
my $f3 = sql($db, q{SELECT fencing.acquire('acct:3')});
($state) = psql_state($db, "UPDATE acct SET balance = 7, fence_token = $f3 WHERE id = 3");
is($state, '', 'protected again: a new token is accepted');

# The same with a counter far ahead of the clock (a superuser moved it past a
# table's large tokens from another coordinator with advance_past, so that
# protect() accepts the table): after DROP/CREATE the counter starts from the
# clock again; protect() of that table is refused until a superuser moves the
# counter past its tokens again, after which new tokens are greater.
$node->safe_psql('postgres', 'CREATE DATABASE ahead');
sql('ahead', q{
CREATE EXTENSION fencing;
CREATE TABLE zk (id int PRIMARY KEY, zxid bigint);
INSERT INTO zk VALUES (1, 4000000000000000);  -- far ahead of the clock
SELECT fencing.advance_past('zk', 4000000000000000);
SELECT fencing.protect('zk', token_column => 'zxid');
});
my $ahead = sql('ahead', q{SELECT fencing.acquire('zk:1')});
cmp_ok($ahead, '>', '4000000000000000', "counter ahead: protect() moved the counter past the table's tokens ($ahead)");
sql('ahead', qq{UPDATE zk SET zxid = $ahead WHERE id = 1; SELECT fencing.release('zk:1');
	SELECT fencing.unprotect('zk'); DROP EXTENSION fencing; CREATE EXTENSION fencing;});
($state) = psql_state('ahead', q{SELECT fencing.protect('zk', token_column => 'zxid')});
is($state, '22003', 'counter ahead: after DROP/CREATE, protect() of the table beyond the clock bound is refused');
sql('ahead', qq{SELECT fencing.advance_past('zk', $ahead); SELECT fencing.protect('zk', token_column => 'zxid');});
my $after = sql('ahead', q{SELECT fencing.acquire('zk:1')});
cmp_ok($after, '>', $ahead, "counter ahead: after DROP/CREATE and protect(), new tokens are greater ($after > $ahead)");
($state) = psql_state('ahead', "UPDATE zk SET zxid = $ahead WHERE id = 1");
is($state, '23T01', 'counter ahead: the old token is rejected');

{
	# Without protecting the table again, nothing remembers the old counter:
	# tokens restart from the clock bound, below the old ones. This is the
	# documented cost of a superuser's advance_past past the clock bound (no
	# other role can move the counter there): a later CREATE EXTENSION starts
	# above the old tokens only for a counter that stayed within the bound.
	$node->safe_psql('postgres', 'CREATE DATABASE ahead2');
	sql('ahead2', q{CREATE EXTENSION fencing; CREATE TABLE big (t bigint);
		SELECT fencing.advance_past('big', 4000000000000000000); SELECT fencing.acquire('r'), fencing.release('r');});
	my $before = sql('ahead2', q{SELECT fencing.current('r')});
	sql('ahead2', q{DROP EXTENSION fencing; CREATE EXTENSION fencing;});
	my ($next, $clock) = split /\|/,
	  sql('ahead2', q{SELECT fencing.acquire('r'), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint});
	ok($next < $before && $next <= $clock + 2_000_000,
		"counter a superuser moved past the clock bound, no table to protect again: after DROP/CREATE the counter starts at the clock bound, below the old tokens, as documented ($next vs $before)");
}

$node->stop;
done_testing();

# Failover.
#
# Synchronous replication, twice (synchronous_commit = on, then remote_apply;
# the second round fails over again from the promoted node to a new standby;
# the long profile does both twice):
# an acquisition storm on the primary (clients with synchronous_commit = off
# among them, transactions that abort, first acquisitions of new resources),
# the primary dies (immediate shutdown) at a random moment, the synchronous
# standby is promoted and work continues on it. Then:
#   - every token the new primary hands out is greater than every token the
#     old primary handed out (per resource and overall);
#   - every write whose commit a synchronous client saw succeed is there
#     (a commit the primary's death interrupted was never acknowledged: it
#     is in doubt, and not counted), and fencing.current(r) >= the token of
#     every committed fenced write;
#   - a writer still holding an old-primary token is rejected (23T01) on the
#     new primary, by validate() and by a protected table.
#
# Asynchronous replication, and what can go wrong with it:
#   A standby that is asynchronous (or that lags) has not necessarily received
#   the WAL record covering the tokens the primary handed out, nor the fence
#   state rows and fenced writes. Promoted, it cannot resume the counter above
#   those tokens from its WAL; the clock bound does it instead: no token is
#   ever more than 2 s ahead of the clock at its issue, and the promoted
#   standby's counter starts at its clock + 2 s. The case below checks that
#   its first token exceeds the old primary's last (while the clocks agree)
#   and that a stale writer holding the old primary's token is then rejected;
#   what stays lost is the standby's missing WAL itself (fencing.current() of
#   a resource goes back to what the standby had). Against that, and against
#   clocks that disagree: fencing.require_sync_standby = on refuses to issue
#   any token (SQLSTATE 55000) while no synchronous standby is configured;
#   with one configured, acquisition waits for the standby's flush, and a
#   canceled wait hands out no token (an error instead, and no lock is left
#   held).
#
# The counter runs with a 16-token window (fencing.log_ahead), so that its WAL
# records, and the hand-over from one to the next, come often during the
# storms; and so that the asynchronous case can outrun what the standby has.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use List::Util qw(max min);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(quietly storm_script run_storm pause);

my $profile = $ENV{FENCING_PROFILE} // 'quick';
my $seed = $ENV{FENCING_FAILOVER_SEED} // int(time() * 1000) % 1_000_000_007;
srand($seed);
note "profile $profile, seed $seed";
my $db = 'postgres';

# ---- storm clients (FencingTAP, as in 050_crash_cycles.pl) ------------------------------
my @shared = map { "r$_" } 0 .. 5;

# Session blocks and transaction blocks that commit, roll back or fail
# (FencingTAP::storm_script).
my %script_opts = (shared => \@shared, new_if_granted => 1);
my @kinds = ('sync', 'async', 'xact', 'async-xact', 'new');

# storm(node, label): runs the clients against the node, kills the node
# (immediate shutdown) at a random moment, returns what the clients saw.
sub storm
{
	my ($node, $tag) = @_;
	my $r = run_storm(node => $node, db => $db, dir => $node->basedir . "/storm", kinds => \@kinds,
		script => sub { my ($c, $kind) = @_; return storm_script($kind, 1500, %script_opts, new_prefix => "new:$tag"); },
		pause => [ 0.3, 1.2 ], crash => sub { $node->stop('immediate') });
	# Expected: the intended division by zero, a shutdown, and the sync-rep
	# wait canceled by the shutdown (a warning, then 57014 or 57P01 from acquire: the
	# token was not handed out).
	$r->{unexpected} = [ map { $_->[1] } grep { $_->[0] !~ /^(22012|57P01|57P02|57P03|25P02|57014)$/ } @{ $r->{errors} } ];
	return $r;
}

sub setup_schema
{
	my ($node, $dbname) = @_;
	$node->safe_psql($dbname // $db, q{
CREATE EXTENSION fencing;
CREATE TABLE fenced (res text PRIMARY KEY, fence_token fencing.token, writes bigint NOT NULL DEFAULT 0);
SELECT fencing.protect('fenced');
CREATE TABLE fenced_log (res text NOT NULL, token fencing.token NOT NULL, PRIMARY KEY (res, token));
SELECT fencing.protect('fenced_log', token_column => 'token');
INSERT INTO fenced (res, fence_token) SELECT 'r' || g, 1 FROM generate_series(0, 5) g;
});
}

sub new_standby
{
	my ($primary, $name) = @_;
	$primary->backup("for_$name");
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, "for_$name", has_streaming => 1);
	$standby->start;
	return $standby;
}

sub wait_sync
{
	my ($primary, $name) = @_;
	return $primary->poll_query_until($db,
		"SELECT sync_state FROM pg_stat_replication WHERE application_name = '$name'", 'sync');
}

sub promote
{
	my ($standby) = @_;
	$standby->promote;
	$standby->poll_query_until($db, 'SELECT NOT pg_is_in_recovery()') or die 'promotion did not finish';
	# Settings copied from the old primary must not make the new one wait for
	# a standby it does not have.
	$standby->safe_psql($db, q{ALTER SYSTEM RESET synchronous_standby_names; ALTER SYSTEM RESET synchronous_commit;
		SELECT pg_reload_conf();});
	$standby->poll_query_until($db, q{SELECT current_setting('synchronous_standby_names') = ''});
}

# ---- the synchronous rounds ---------------------------------------------------------------
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq(
log_statement = none
log_min_messages = warning
max_connections = 30
wal_writer_delay = 10ms
fencing.log_ahead = 16
));
$primary->start;
setup_schema($primary);

# ---- what the clients count as committed ---------------------------------------------------
# A write counts as committed only when its client saw the commit succeed. A
# commit the crash interrupts (the primary died before the COMMIT reached it,
# or while the commit waited for the standby) was never acknowledged:
# synchronous replication promises nothing about it, and the write may or may
# not be on the promoted standby. When the primary is gone before the COMMIT
# is sent, psql reports the COMMIT as failed and goes on with the script, the
# token of the write made before still set: the clients must not count that
# write. Here every commit fails (a deferred constraint trigger raises at
# commit) and no client may count a committed write.
{
	my $label = 'storm clients';
	my $bdb = 'bookkeeping';
	$primary->safe_psql($db, "CREATE DATABASE $bdb");
	setup_schema($primary, $bdb);
	$primary->safe_psql($bdb, q{
CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'commit refused'; END$$;
CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON fenced_log DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION refuse_commit();
});
	my $r = run_storm(node => $primary, db => $bdb, dir => $primary->basedir . "/bookkeeping", kinds => [ 'sync', 'xact', 'new' ],
		script => sub { my ($c, $kind) = @_; return storm_script($kind, 200, %script_opts, new_prefix => "bk:$c"); },
		pause => [ 0, 0 ], crash => sub { });
	my $failed_commits = grep { $_->[0] eq 'P0001' } @{ $r->{errors} };
	cmp_ok($failed_commits, '>', 20, "$label: writes whose commit failed ($failed_commits)");
	is($primary->safe_psql($bdb, 'SELECT count(*) FROM fenced_log'), '0', "$label: ... none of them is in the table");
	is($r->{n_commit}, 0, "$label: ... and no client counts one of them as committed")
	  or diag join(', ', map { "$_=$r->{sync_commits}{$_}" } sort keys %{ $r->{sync_commits} });
	cmp_ok($r->{n_doubt}, '>', 0, "$label: ... those of transaction blocks are reported in doubt ($r->{n_doubt})");
	$primary->safe_psql($db, "DROP DATABASE $bdb");
}

my (%max_old, %all_old);
my $max_old_all = 0;
my ($promotions, $total_received) = (0, 0);

# Quick: one round of each; long: two of each (four promotions in a row).
my @modes = $profile eq 'long' ? ('on', 'remote_apply', 'on', 'remote_apply') : ('on', 'remote_apply');
my $round = 0;
for my $mode (@modes)
{
	$round++;
	my $name = ($mode eq 'on' ? 'standby_on' : 'standby_apply') . "_$round";
	my $label = "round $round, synchronous_commit=$mode";
	my $standby = new_standby($primary, $name);
	$primary->safe_psql($db, "ALTER SYSTEM SET synchronous_standby_names = '$name'; ALTER SYSTEM SET synchronous_commit = '$mode'; SELECT pg_reload_conf();");
	ok(wait_sync($primary, $name), "$label: $name is the synchronous standby");
	is($primary->safe_psql($db, 'SHOW synchronous_commit'), $mode, "$label: set");

	my $r = storm($primary, "round$round");
	$total_received += $r->{n_recv};
	ok($r->{n_recv} > 20 && $r->{n_commit} > 5,
		sprintf("%s: storm of %.1f s on the primary: %d tokens received, %d writes committed, %d rolled back, then the primary died (%d commits in doubt)",
			$label, $r->{elapsed}, $r->{n_recv}, $r->{n_commit}, $r->{n_abort}, $r->{n_doubt}));
	is(scalar(@{ $r->{unexpected} }), 0, "$label: no unexpected error in the clients")
	  or diag join('', @{ $r->{unexpected} }[ 0 .. min(9, $#{ $r->{unexpected} }) ]);
	for my $res (keys %{ $r->{received} })
	{
		$max_old{$res} = $r->{received}{$res} if !defined $max_old{$res} || $r->{received}{$res} > $max_old{$res};
		$max_old_all = $max_old{$res} if $max_old{$res} > $max_old_all;
	}

	promote($standby);
	$promotions++;
	my $old_primary = $primary;
	$primary = $standby;

	# New tokens on the new primary.
	my @resources = sort keys %max_old;
	my $list = join(',', map { "'$_'" } @resources);
	my %new = map { split /=/ } split / /,
	  $primary->safe_psql($db, qq{SELECT string_agg(r || '=' || fencing.acquire_xact(r)::bigint, ' ') FROM unnest(ARRAY[$list]) r});
	my @bad = grep { $new{$_} <= $max_old{$_} } @resources;
	is(scalar(@bad), 0, "$label: after promotion every resource's new token is greater than every old-primary token of it")
	  or diag join("\n", map { "$_: new $new{$_}, old up to $max_old{$_}" } @bad[ 0 .. min(9, $#bad) ]);
	my $min_new = min(values %new);
	cmp_ok($min_new, '>', $max_old_all, "$label: every new token is greater than every token of the old primaries ($min_new > $max_old_all)");
	my $fresh = $primary->safe_psql($db, q{SELECT fencing.acquire_xact('brand-new')});
	cmp_ok($fresh, '>', $max_old_all, "$label: a brand-new resource's first token too");

	# Committed writes survived and the fence state is not behind them.
	my %in_log = map { $_ => 1 } split / /, $primary->safe_psql($db, q{SELECT string_agg(res || '=' || token::bigint, ' ') FROM fenced_log});
	my @lost = grep { !$in_log{"$_=$r->{sync_commits}{$_}"} } keys %{ $r->{sync_commits} };
	is(scalar(@lost), 0, "$label: every write whose commit a synchronous client saw succeed is on the new primary")
	  or diag join(', ', @lost);
	is($primary->safe_psql($db, q{SELECT count(*) FROM (SELECT res, max(token::bigint) m FROM fenced_log GROUP BY res) l
		WHERE coalesce(fencing.current(res)::bigint, 0) < m}), '0',
		"$label: fencing.current(r) >= every committed fenced write's token");

	# A writer still holding an old-primary token.
	my $res = 'r0';
	my $old = $max_old{$res};
	my ($rc, $o, $e) = $primary->psql($db, "\\set VERBOSITY verbose\nSELECT fencing.validate('$res', $old)");
	like($e, qr/23T01/, "$label: validate() of the old primary's last token of $res is 23T01 on the new primary");
	my $t_new = $primary->safe_psql($db, qq{SELECT fencing.acquire('$res') AS t \\gset
UPDATE fenced SET fence_token = :t, writes = writes + 1 WHERE res = '$res';
SELECT fencing.release('$res') AS released \\gset
SELECT :t;});
	($rc, $o, $e) = $primary->psql($db, "\\set VERBOSITY verbose\nUPDATE fenced SET fence_token = $old, writes = writes + 1 WHERE res = '$res'");
	like($e, qr/23T01/, "$label: the stale writer's write with token $old is rejected (23T01) after a new holder wrote with $t_new");
	($rc, $o, $e) = $primary->psql($db, "\\set VERBOSITY verbose\nINSERT INTO fenced VALUES ('$res', $old, 0) ON CONFLICT (res) DO UPDATE SET fence_token = excluded.fence_token");
	like($e, qr/23T01/, "$label: also as an upsert");
	is($primary->safe_psql($db, "SELECT fence_token FROM fenced WHERE res = '$res'"), $t_new, "$label: the row keeps the new holder's token");

	$old_primary->teardown_node;
}

# ---- a session that flushed ahead before synchronous replication was configured ----------
# A backend remembers how far the counter is known to be durable and skips
# the flush (and the standby wait) below that. Tokens it hands out after
# synchronous_standby_names is set must still wait for the standby.
{
	my $label = 'sync configured later';
	my $standby = new_standby($primary, 'standby_late');
	$primary->wait_for_catchup('standby_late');
	my $s = quietly(sub { $primary->background_psql($db, on_error_stop => 0) });
	quietly(sub { $s->query_safe(q{SELECT fencing.acquire_xact('late:warm')}) });    # flushed ahead, no standby wait
	$standby->stop('immediate');
	$primary->safe_psql($db, "ALTER SYSTEM SET synchronous_standby_names = 'standby_late'; SELECT pg_reload_conf();");
	$primary->poll_query_until($db, q{SELECT current_setting('synchronous_standby_names') = 'standby_late'});
	pause 1;    # the checkpointer publishes the new setting to the backends
	# synchronous_commit = local: only the acquisition itself may wait for
	# the standby, not the commit of its transaction.
	my ($out, $ret) = quietly(sub { $s->query(q{SET synchronous_commit = local; SET statement_timeout = '2s'; SELECT fencing.acquire_xact('late:a');}) });
	my $err = $s->{stderr};
	$s->{stderr} = '';
	ok($err =~ /ERROR/ || $out !~ /^\d+$/m,
		"$label: with the synchronous standby down, an acquisition in an old session does not return a token without the standby's flush")
	  or diag "got token: $out";
	my ($o2) = quietly(sub { $s->query(q{SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'}) });
	$s->{stderr} = '';
	is($o2, '0', "$label: and holds no lock afterwards");
	my ($rc, $o, $e) = $primary->psql($db, "SET synchronous_commit = local; SET statement_timeout = '1s'; SELECT fencing.acquire('late:b')");
	ok($rc != 0 && $o eq '', "$label: a new session's acquisition waits for the standby and, canceled, returns no token");
	like($e, qr/not confirmed|canceling/, "$label: ... with a clear error") or diag $e;
	is($primary->safe_psql($db, q{SELECT count(*) FROM fencing.locks}), '0', "$label: no lock is left held by the canceled acquisitions");
	quietly(sub { $s->quit });
	$primary->safe_psql($db, q{ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf();});
	$primary->poll_query_until($db, q{SELECT current_setting('synchronous_standby_names') = ''});
	$standby->teardown_node;
}

# ---- asynchronous replication ----------------------------------------------------------------
{
	my $label = 'async';
	my $standby = new_standby($primary, 'standby_async');
	$primary->wait_for_catchup('standby_async');
	is($primary->safe_psql($db, q{SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby_async'}),
		'async', "$label: the standby is asynchronous");

	# require_sync_standby refuses to issue tokens without a synchronous standby.
	# ALTER SYSTEM knows fencing's settings once the module is loaded.
	$primary->safe_psql($db, q{LOAD 'fencing'; ALTER SYSTEM SET fencing.require_sync_standby = on; SELECT pg_reload_conf();});
	$primary->poll_query_until($db, q{SELECT fencing.version() IS NOT NULL AND current_setting('fencing.require_sync_standby') = 'on'});
	my ($rc, $o, $e) = $primary->psql($db, "\\set VERBOSITY verbose\nSELECT fencing.acquire('async:r')");
	like($e, qr/55000/, "$label: with fencing.require_sync_standby = on and no synchronous standby, acquire fails with 55000");
	like($e, qr/synchronous/, "$label: ... saying why") or diag $e;
	for my $fn ('try_acquire', 'acquire_xact', 'try_acquire_xact')
	{
		($rc, $o, $e) = $primary->psql($db, "\\set VERBOSITY verbose\nSELECT fencing.$fn('async:r')");
		like($e, qr/55000/, "$label: ... and so does $fn");
	}
	is($primary->safe_psql($db, q{SELECT count(*) FROM fencing.locks}), '0', "$label: the refused acquisitions hold nothing");
	$primary->safe_psql($db, q{ALTER SYSTEM SET synchronous_standby_names = 'standby_async'; SELECT pg_reload_conf();});
	ok(wait_sync($primary, 'standby_async'), "$label: made synchronous");
	my $t = $primary->safe_psql($db, q{SELECT fencing.acquire_xact('async:r')});
	like($t, qr/^\d+$/, "$label: with a synchronous standby, acquisition works under require_sync_standby");
	$primary->safe_psql($db, q{LOAD 'fencing'; ALTER SYSTEM RESET synchronous_standby_names; ALTER SYSTEM RESET fencing.require_sync_standby; SELECT pg_reload_conf();});
	$primary->poll_query_until($db, q{SELECT current_setting('synchronous_standby_names') = ''});
	$primary->wait_for_catchup('standby_async');

	# The hazard: the standby falls behind (here: it is down), the primary keeps
	# handing out tokens, then dies; the standby is promoted.
	my $res = 'r1';
	$standby->stop('fast');
	my $old = $primary->safe_psql($db, qq{
		DO \$\$
		DECLARE
		  covered bigint := (SELECT last_value + log_cnt FROM fencing.token_seq);  -- what the standby's WAL covers
		  t bigint := 0;
		BEGIN
		  FOR i IN 1..1000000 LOOP
		    t := fencing.acquire('async:filler');
		    PERFORM fencing.release('async:filler');
		    EXIT WHEN t > covered + 100;
		  END LOOP;
		END \$\$;
		SELECT fencing.acquire('$res');});
	$primary->stop('immediate');
	$standby->start;
	promote($standby);
	$promotions++;
	my $new = $standby->safe_psql($db, qq{SELECT fencing.acquire('$res')});
	note "async: old primary's last token of $res: $old; first token of the promoted asynchronous standby: $new";
	cmp_ok($new, '>', $old,
		"$label: a promoted asynchronous standby that missed WAL still issues above the old primary's tokens, by the clock bound ($new > $old)");
	# A new holder writes with its token; the stale holder of the old
	# primary's token is then rejected.
	($rc, $o, $e) = $standby->psql($db, "UPDATE fenced SET fence_token = $new WHERE res = '$res'");
	is($rc, 0, "$label: the new holder writes with its token");
	($rc, $o, $e) = $standby->psql($db, "UPDATE fenced SET fence_token = $old WHERE res = '$res'");
	ok($rc != 0 && $standby->safe_psql($db, "SELECT fence_token FROM fenced WHERE res = '$res'") eq $new,
		"$label: ... and the stale writer's older grant is rejected, the new holder's write stays");
	$standby->teardown_node;
}

note "promotions: $promotions, tokens received from the storms: $total_received";
done_testing();

# Crash recovery under load: FENCING_PROFILE=long runs 24 cycles, quick 3.
#
# Each cycle: an acquisition storm from several concurrent psql clients
# (session acquire/release with fenced writes; acquire_xact in transactions
# that commit, that ROLLBACK and that fail; sessions with synchronous_commit =
# off; first acquisitions of new resources; fencing.token set for a
# transaction; a client that evicts buffers and generates WAL), every token a
# client *received* written to a client-side log; then, at a random moment, an
# immediate shutdown or a SIGKILL of the postmaster (alternating); restart.
# Cycles alternate full_page_writes on and off. After each restart:
#   - every new token of every resource is greater than every token any
#     client received before the crash (per resource, and overall);
#   - fencing.current(r) >= the token of every committed fenced write of r
#     (the fence state is never torn), and every write a synchronous client
#     saw committed is there;
#   - the fenced rows are intact: each row's token is the highest token of
#     its committed writes (the table and its write log agree), a token some
#     client received; indexes and heap pass amcheck;
#   - no client ever had a fenced write rejected (23T01) during the storms:
#     a holder's fresh token is always newer than the row's;
#   - a stale write is rejected.
# A deterministic case first: the counter's page written out between two of
# its WAL records (buffer eviction) and then a crash, with full_page_writes on
# and off.
#
# Most cycles (and the deterministic case once) run with fencing.log_ahead =
# 16: the counter then writes its next WAL record every 8 tokens, ahead of
# need, and hands out tokens covered by the record before it, so crashes land
# at every point of that hand-over. The others keep the default (2^20).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use List::Util qw(max min);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(quietly proc_state restart_after_crash higher storm_script run_storm);

my $profile = $ENV{FENCING_PROFILE} // 'quick';
my $cycles = $profile eq 'long' ? 24 : 3;
my $seed = $ENV{FENCING_CRASH_SEED} // int(time() * 1000) % 1_000_000_007;
srand($seed);
note "profile $profile, $cycles cycles, seed $seed";

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', qq(
log_statement = none
log_min_messages = warning
log_min_error_statement = panic
shared_buffers = 1MB
max_connections = 30
wal_writer_delay = 10ms
checkpoint_timeout = 30s
max_wal_size = 32MB
min_wal_size = 32MB
full_page_writes = on
fencing.log_ahead = 1048576
));
$node->start;

my $db = 'postgres';
sub sql { return $node->safe_psql($db, $_[0]); }

sql(q{
CREATE EXTENSION fencing;
CREATE EXTENSION amcheck;
CREATE EXTENSION pg_buffercache;
CREATE TABLE fenced (res text PRIMARY KEY, fence_token fencing.token, writes bigint NOT NULL DEFAULT 0);
SELECT fencing.protect('fenced');
CREATE TABLE fenced_log (res text NOT NULL, token fencing.token NOT NULL, PRIMARY KEY (res, token));
SELECT fencing.protect('fenced_log', token_column => 'token');
CREATE TABLE big (id int PRIMARY KEY, pad text);
INSERT INTO big SELECT g, repeat('x', 400) FROM generate_series(1, 20000) g;
CREATE TABLE junk (id bigserial PRIMARY KEY, pad text);
});

my @shared = map { "r$_" } 0 .. 7;
sql("INSERT INTO fenced (res, fence_token) SELECT 'r' || g, 1 FROM generate_series(0, 7) g");

# ---- crashes and restarts -------------------------------------------------------

# Children of the postmaster (the backends must go before a restart).
sub children_of
{
	my ($ppid) = @_;
	my @kids;
	opendir my $dh, '/proc' or return ();
	for my $p (grep { /^\d+$/ } readdir $dh)
	{
		open my $fh, '<', "/proc/$p/stat" or next;
		my $stat = <$fh>;
		close $fh;
		my @f = split / /, ($stat =~ s/^.*\) //r);
		push @kids, $p if ($f[1] // 0) == $ppid;
	}
	closedir $dh;
	return @kids;
}

# crash('immediate' | 'kill9'): returns once the server is down and its
# processes are gone.
sub crash
{
	my ($how) = @_;
	if ($how eq 'immediate')
	{
		$node->stop('immediate');
		return;
	}
	my $pm = $node->{_pid};
	my @kids = children_of($pm);
	$node->kill9;
	# Orphaned backends notice the postmaster's death when they next wait;
	# they may hand out a few more tokens first (their clients log them).
	my $deadline = time + 60;
	while (time < $deadline)
	{
		my $alive = grep { my $s = proc_state($_); $s ne '' && $s ne 'Z' } ($pm, @kids);
		last unless $alive;
		sleep 0.05;
	}
	kill 'KILL', grep { my $s = proc_state($_); $s ne '' && $s ne 'Z' } @kids;
	unlink $node->data_dir . '/postmaster.pid' if proc_state($pm) eq 'Z' || proc_state($pm) eq '';
	return;
}

sub set_fpw
{
	my ($on) = @_;
	$node->adjust_conf('postgresql.conf', 'full_page_writes', $on ? 'on' : 'off');
}

sub set_log_ahead
{
	my ($n) = @_;
	$node->adjust_conf('postgresql.conf', 'fencing.log_ahead', $n);
}

sub bq { my ($s, $q) = @_; return quietly(sub { $s->query_safe($q) }); }

# ---- 1. deterministic: the counter page evicted between two WAL records ------------
#
# The counter logs 4096 values ahead and then hands out values without WAL.
# When its page is written to disk (here: evicted by a scan through a small
# buffer pool) after the record that covers those values, and the server
# crashes before the next checkpoint, recovery must still come back above
# every value handed out.
for my $case ([ 1, 1048576 ], [ 0, 1048576 ], [ 0, 16 ])
{
	my ($fpw, $ahead) = @$case;
	my $label = 'evicted counter page, full_page_writes=' . ($fpw ? 'on' : 'off') . ", log_ahead=$ahead";
	set_fpw($fpw);
	set_log_ahead($ahead);
	$node->restart;
	is(sql(q{LOAD 'fencing'; SELECT current_setting('full_page_writes') || ',' || current_setting('fencing.log_ahead')}),
		($fpw ? 'on' : 'off') . ",$ahead", "$label: set");
	my $s = quietly(sub { $node->background_psql($db, on_error_stop => 1) });
	bq($s, 'SET enable_seqscan = off; SET enable_bitmapscan = off;');
	bq($s, 'CHECKPOINT');
	my @before;
	push @before, bq($s, "SELECT fencing.acquire_xact('evict:a')") for 1 .. 3;
	my $cached = 1;
	for my $try (1 .. 10)
	{
		bq($s, q{SELECT count(*) FROM big WHERE id > 0 AND pad <> ''});
		$cached = bq($s, q{SELECT count(*) FROM pg_buffercache
			WHERE relfilenode = pg_relation_filenode('fencing.token_seq')
			  AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())});
		last if $cached eq '0';
	}
	is($cached, '0', "$label: the counter's page was written out and evicted");
	push @before, bq($s, "SELECT fencing.acquire_xact('evict:a')") for 1 .. 5;
	push @before, bq($s, "SELECT fencing.acquire_xact('evict:b')");
	quietly(sub { $s->quit });
	crash('immediate');
	ok(restart_after_crash($node), "$label: restarted after the crash");
	my $max_before = max(@before);
	my $after_a = sql(q{SELECT fencing.acquire_xact('evict:a')});
	my $after_other = sql(q{SELECT fencing.acquire_xact('evict:other')});
	cmp_ok($after_a, '>', $max_before, "$label: the resource's next token is greater than all before the crash ($after_a > $max_before)");
	cmp_ok($after_other, '>', $max_before, "$label: another resource's first token too ($after_other > $max_before)");
}
set_fpw(1);
$node->restart;

# ---- 2. crash cycles under a storm -------------------------------------------------

# The storm clients (FencingTAP::storm_script): fenced writes through session
# locks (with leases, nested acquisitions and validate now and then) and
# through transaction locks (written with SET LOCAL fencing.token now and
# then) that commit, roll back or fail.
my %script_opts = (shared => \@shared, lease => 0.2, nested => 0.1, validate => 1, set_local => 0.3,
	mixed_rollback => 1);
my @kinds = ('sync', 'sync', 'async', 'xact', 'async-xact', 'new', 'evictor');

# All-time client-side knowledge.
my (%max_received, %max_committed_sync, %received_set);
my $max_received_all = 0;
my ($total_received, $total_committed, $total_aborted, $total_fn001, $total_unexpected) = (0, 0, 0, 0, 0);
my @cycle_notes;
my $fpw_off_cycles = 0;
my $small_window_cycles = 0;

for my $cycle (1 .. $cycles)
{
	my $how = $cycle % 2 ? 'immediate' : 'kill9';
	my $fpw = ($cycle % 4 == 3 || $cycle % 4 == 0) ? 0 : 1;
	my $ahead = $cycle % 3 == 2 ? 1048576 : 16;
	$fpw_off_cycles++ unless $fpw;
	$small_window_cycles++ if $ahead == 16;
	set_fpw($fpw);
	set_log_ahead($ahead);
	$node->reload;
	$node->poll_query_until($db, 'SHOW full_page_writes', $fpw ? 'on' : 'off');
	for (1 .. 100) { last if sql(q{LOAD 'fencing'; SHOW fencing.log_ahead}) eq $ahead; sleep 0.1; }
	my $label = "cycle $cycle ($how, full_page_writes=" . ($fpw ? 'on' : 'off') . ", log_ahead=$ahead)";
	is(sql(q{LOAD 'fencing'; SHOW fencing.log_ahead}), $ahead, "$label: set");

	# The storm: once every token client has received tokens, a random moment
	# later, the crash.
	my $r = run_storm(node => $node, db => $db, dir => $node->basedir . "/cycle$cycle", kinds => \@kinds,
		script => sub { my ($c, $kind) = @_; return storm_script($kind, 2500, %script_opts, new_prefix => "new:$cycle:$c"); },
		pause => [ 0.2, 1.5 ], crash => sub { crash($how) });

	# What the clients saw.
	my ($storm, $n_recv, $n_commit, $n_abort) = @$r{qw(elapsed n_recv n_commit n_abort)};
	my %recv = %{ $r->{received} };
	my %sync_commits = %{ $r->{sync_commits} };
	my %new_res = map { $_ => 1 } grep { /^new:/ } keys %{ $r->{resources} };
	for my $res (keys %{ $r->{received_set} })
	{
		$received_set{$res}{$_} = 1 for keys %{ $r->{received_set}{$res} };
	}
	my $n_fn001 = grep { $_->[0] eq '23T01' } @{ $r->{errors} };
	# Expected: the intended division by zero, and what a crash does to a
	# session (admin shutdown / crash of another process).
	my @unexpected = map { $_->[1] } grep { $_->[0] !~ /^(22012|57P0[123]|25P02)$/ } @{ $r->{errors} };
	for my $res (keys %recv)
	{
		$max_received{$res} = higher($max_received{$res}, $recv{$res});
		$max_received_all = higher($max_received_all, $recv{$res});
	}
	for my $res (keys %sync_commits)
	{
		$max_committed_sync{$res} = higher($max_committed_sync{$res}, $sync_commits{$res});
	}
	$total_received += $n_recv;
	$total_committed += $n_commit;
	$total_aborted += $n_abort;
	$total_fn001 += $n_fn001;
	$total_unexpected += @unexpected;

	ok($n_recv > 20 && $n_commit > 5 && $n_abort > 0,
		"$label: storm of " . sprintf('%.1f', $storm) . " s: $n_recv tokens received, $n_commit writes committed, $n_abort rolled back");
	is($n_fn001, 0, "$label: no fenced write of a lock holder was rejected during the storm");
	is(scalar(@unexpected), 0, "$label: no unexpected error in the clients") or diag join('', @unexpected[ 0 .. min(9, $#unexpected) ]);

	ok(restart_after_crash($node), "$label: the server restarts");

	# New tokens, per resource, in fresh sessions.
	my @resources = (@shared, sort keys %new_res);
	my $list = join(',', map { "'$_'" } @resources);
	my $after = sql(qq{SELECT string_agg(r || '=' || fencing.acquire_xact(r)::bigint, ' ') FROM unnest(ARRAY[$list]) r});
	my %new = map { split /=/ } split / /, $after;
	my @bad = grep { defined $max_received{$_} && $new{$_} <= $max_received{$_} } @resources;
	is(scalar(@bad), 0, "$label: every resource's new token is greater than every token received for it before the crash")
	  or diag join("\n", map { "$_: new $new{$_}, received up to $max_received{$_}" } @bad[ 0 .. min(9, $#bad) ]);
	my $min_new = min(values %new);
	cmp_ok($min_new, '>', $max_received_all, "$label: every new token is greater than every token received before ($min_new > $max_received_all)");

	# The fence state agrees with the committed fenced writes.
	my $state = sql(q{SELECT string_agg(res || '=' || coalesce(fencing.current(res)::bigint, 0) || ',' || max_token || ',' || coalesce(row_token, 0), ' ')
		FROM (SELECT l.res, max(l.token::bigint) AS max_token, max(f.fence_token::bigint) AS row_token
		        FROM fenced_log l LEFT JOIN fenced f USING (res) GROUP BY l.res) x});
	my (@torn, @lost, @row_mismatch, @row_unknown);
	for my $item (split / /, $state)
	{
		my ($res, $vals) = split /=/, $item;
		my ($cur, $max_log, $row) = split /,/, $vals;
		push @torn, "$res: current $cur < committed write $max_log" if $cur < $max_log;
		push @row_mismatch, "$res: row token $row, highest logged write $max_log" if $res !~ /^new:/ && $row != $max_log;
		push @row_unknown, "$res: row token $row was never received by a client"
		  if $res !~ /^new:/ && $row != 1 && !$received_set{$res}{$row};
	}
	my $logged = sql(q{SELECT string_agg(res || '=' || token::bigint, ' ') FROM fenced_log});
	my %in_log;
	$in_log{$_} = 1 for split / /, $logged;
	for my $res (keys %sync_commits)
	{
		push @lost, "$res: committed write $sync_commits{$res} (seen by a synchronous client) is missing"
		  unless $in_log{"$res=$sync_commits{$res}"};
	}
	is(scalar(@torn), 0, "$label: fencing.current(r) >= the token of every committed fenced write of r")
	  or diag join("\n", @torn[ 0 .. min(9, $#torn) ]);
	is(scalar(@lost), 0, "$label: every write a synchronous client saw committed survived")
	  or diag join("\n", @lost[ 0 .. min(9, $#lost) ]);
	is(scalar(@row_mismatch), 0, "$label: each fenced row holds the token of its latest committed write")
	  or diag join("\n", @row_mismatch[ 0 .. min(9, $#row_mismatch) ]);
	is(scalar(@row_unknown), 0, "$label: each fenced row holds a token a client received")
	  or diag join("\n", @row_unknown[ 0 .. min(9, $#row_unknown) ]);

	# Structures intact. The fence state's index is checked for its structure
	# only: a crash between the two WAL records of a resource's first grant
	# (its row, then the row's index entry) can leave a row that only a full
	# scan sees, which heapallindexed reports (documented in the operations
	# page; grants never use it, a restore keeps the newest row of a key).
	my $check = sql(q{
		SELECT bt_index_check('fenced_pkey', true), bt_index_check('fenced_log_pkey', true),
		       bt_index_check('fencing.fence_state_pkey', false);
		SELECT count(*) FROM verify_heapam('fencing.fence_state');
		SELECT count(*) FROM verify_heapam('fenced');
		SELECT count(*) FROM verify_heapam('fenced_log');
		SELECT count(*) FROM fencing.fence_state WHERE key <> fencing.resource_key(resource) OR token <= 0;
		SELECT count(*) FROM (SELECT key FROM fencing.fence_state GROUP BY key HAVING count(*) > 1) d;
		SELECT count(*) FROM fenced;
		SELECT count(*) FROM fencing.locks;
	});
	my @c = split /\n/, $check;
	is(join(',', @c[ 1 .. 7 ]), '0,0,0,0,0,8,0',
		"$label: amcheck clean, fence_state consistent, all fenced rows there, no lock survived");

	# A stale write is rejected.
	my $row = sql(q{SELECT fence_token FROM fenced WHERE res = 'r0'});
	my ($rc, $o, $e) = $node->psql($db, "\\set VERBOSITY verbose\nUPDATE fenced SET fence_token = $row WHERE res = 'r0'");
	like($e, qr/23T01/, "$label: a write with the row's own token is rejected");

	push @cycle_notes, sprintf('%s: storm %.1f s, %d received, %d committed, %d rolled back', $label, $storm, $n_recv, $n_commit, $n_abort);
}

note $_ for @cycle_notes;
note "total: $cycles crashes ($fpw_off_cycles with full_page_writes=off, $small_window_cycles with log_ahead=16), $total_received tokens received, "
  . "$total_committed writes committed, $total_aborted rolled back, $total_fn001 23T01, $total_unexpected unexpected errors";

$node->stop;
done_testing();

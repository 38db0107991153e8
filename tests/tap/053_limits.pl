# Limits: one session acquiring 10,000 distinct resources (with the default
# max_locks_per_transaction and with a raised one), and 1,000,000 (quick
# profile: 100,000) acquire/release cycles in one backend without memory
# growth.
#
# Each held resource uses two slots of the shared lock table (the resource and
# its token). With max_locks_per_transaction = 64 the table cannot hold 20,000
# slots: acquisition must then fail with SQLSTATE 53200 and a hint naming
# max_locks_per_transaction, never crash, and leave the session consistent:
# pg_locks shows as many token locks as resource locks, fencing.locks agrees
# with pg_locks, release_all() releases exactly what is held, and new
# acquisitions work. With a large enough max_locks_per_transaction all 10,000
# are granted.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(quietly);

my $profile = $ENV{FENCING_PROFILE} // 'quick';
my $cycles = $profile eq 'long' ? 1_000_000 : 100_000;
my $nres = 10_000;

my $node = PostgreSQL::Test::Cluster->new('limits');
$node->init;
$node->append_conf('postgresql.conf', qq(
log_statement = none
log_min_messages = warning
max_connections = 20
max_locks_per_transaction = 64
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# One statement (or several) in a background session; returns its stdout and
# the SQLSTATE of the last statement ('00000' on success), and the stderr.
sub run_in
{
	my ($s, $sql) = @_;
	$s->{stderr} = '';
	my $out = quietly(sub { scalar $s->query("SELECT 1 \\g /dev/null\n$sql\n\\echo __SQLSTATE :SQLSTATE") });
	my $err = $s->{stderr};
	$s->{stderr} = '';
	my $state = '';
	$state = $1 if $out =~ s/\n?__SQLSTATE (\S+)\s*$//;
	return ($out, $state, $err);
}

sub one
{
	my ($s, $sql) = @_;
	my ($out, $state, $err) = run_in($s, $sql);
	die "query failed ($state): $sql\n$err" if $state ne '00000';
	return $out;
}

# my_lock_counts(session): (resource locks, token locks, other advisory locks)
# of the session's own backend, from pg_locks.
sub my_lock_counts
{
	my ($s) = @_;
	my $out = one($s, q{SELECT count(*) FILTER (WHERE objsubid = 32257) || ',' ||
		count(*) FILTER (WHERE objsubid = 32258) || ',' ||
		count(*) FILTER (WHERE objsubid NOT IN (32257, 32258))
		FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND granted;});
	return split /,/, $out;
}

sub check_consistency
{
	my ($s, $label, $expect_held) = @_;
	my ($res, $tok, $other) = my_lock_counts($s);
	is($res, $expect_held, "$label: pg_locks shows $expect_held resource locks");
	is($tok, $res, "$label: one token lock per resource lock");

	# fencing.locks joins pg_locks with shared catalogs; with the lock table
	# full it may itself need a slot. Give some back first when it is full.
	my $released = 0;
	if ($res > 100)
	{
		# Release 100 known names (lim:1 .. lim:100 are held when anything is).
		my $n = one($s, q{SELECT count(*) FILTER (WHERE fencing.release('lim:' || i)) FROM generate_series(1, 100) i;});
		is($n, 100, "$label: 100 individual releases succeed");
		$released = 100;
		($res, $tok, $other) = my_lock_counts($s);
		is($res, $expect_held - 100, "$label: pg_locks shows the releases");
		is($tok, $res, "$label: token locks released with them");
	}
	my ($out, $state, $err) = run_in($s, q{SELECT count(*) || ',' || count(token) || ',' ||
		count(*) FILTER (WHERE scope = 'session' AND granted)
		FROM fencing.locks WHERE pid = pg_backend_pid();});
	is($state, '00000', "$label: fencing.locks readable") or diag $err;
	is($out, join(',', $res, $res, $res),
		"$label: fencing.locks agrees with pg_locks (rows, tokens, session scope)");
	($out, $state, $err) = run_in($s, q{SELECT count(*) FROM fencing.locks l
		WHERE l.pid = pg_backend_pid() AND l.token::bigint IS DISTINCT FROM fencing.current(l.resource)::bigint;});
	is($out, '0', "$label: every listed token is the resource's current token") or diag "$state $err";

	$out = one($s, 'SELECT fencing.release_all();');
	is($out, $res, "$label: release_all() releases every held resource");
	($res, $tok, $other) = my_lock_counts($s);
	is("$res,$tok,$other", '0,0,0', "$label: nothing left in pg_locks");
	$out = one($s, q{SELECT count(*) FROM fencing.locks WHERE pid = pg_backend_pid();});
	is($out, '0', "$label: nothing left in fencing.locks");

	# New acquisitions work (including ones of names held before) and give
	# newer tokens than everything issued so far.
	my $max_before = one($s, q{SELECT max(token) FROM fencing.fence_state;});
	$out = one($s, q{SELECT fencing.acquire('lim:1')::bigint || ',' || fencing.acquire('lim:fresh')::bigint ||
		',' || fencing.release('lim:1') || ',' || fencing.release('lim:fresh');});
	my ($t1, $t2, $r1, $r2) = split /,/, $out;
	ok($t1 > $max_before && $t2 > $t1 && $r1 eq 'true' && $r2 eq 'true',
		"$label: new acquisitions work after the failure and give newer tokens")
	  or diag "max before $max_before, got $out";
	($res, $tok, $other) = my_lock_counts($s);
	is("$res,$tok", '0,0', "$label: and release cleanly");
}

# Acquire $nres distinct session-scoped resources in one DO block; returns
# (granted count from pg_locks, sqlstate, stderr).
sub acquire_many
{
	my ($s, $fn) = @_;
	my ($out, $state, $err) = run_in($s, qq{DO \$\$ BEGIN FOR i IN 1..$nres LOOP PERFORM fencing.$fn('lim:' || i); END LOOP; END \$\$;});
	return ($state, $err);
}

sub the_many_cases
{
	my ($label, $expect_all) = @_;
	my $s = quietly(sub { $node->background_psql('postgres', on_error_stop => 0) });
	run_in($s, '\set VERBOSITY verbose');
	my $mlpt = one($s, 'SHOW max_locks_per_transaction;');
	note "$label: max_locks_per_transaction = $mlpt";

	# 1. Session scope, one DO block.
	my $t0 = time;
	my ($state, $err) = acquire_many($s, 'acquire');
	my ($held) = my_lock_counts($s);
	note sprintf("%s: DO block: %s, %d resources held, %.2f s", $label, $state, $held, time - $t0);
	if ($expect_all)
	{
		is($state, '00000', "$label: all $nres acquisitions granted") or diag $err;
		is($held, $nres, "$label: $nres resources held");
	}
	else
	{
		ok($state eq '00000' || $state eq '53200',
			"$label: $nres acquisitions either all granted or 53200 (got $state)") or diag $err;
		if ($state eq '53200')
		{
			like($err, qr/HINT:.*max_locks_per_transaction/,
				"$label: 53200 comes with a hint about max_locks_per_transaction");
			ok($held > 0 && $held < $nres, "$label: part of them granted before the error ($held)");

			# Another session meanwhile: a clear error too (or success), never a crash.
			my ($rc, $o, $e) = $node->psql('postgres',
				"\\set VERBOSITY verbose\nSELECT fencing.acquire('lim:other');");
			ok($rc == 0 || $e =~ /53200|out of shared memory/, "$label: another session gets a grant or 53200 while the table is full")
			  or diag $e;
		}
		else
		{
			is($held, $nres, "$label: $nres resources held");
		}
	}
	my ($alive) = one($s, 'SELECT 1;');
	is($alive, '1', "$label: the session is alive after the DO block");
	check_consistency($s, "$label, session scope", $held);

	# 2. Session scope, one statement per resource (errors do not accumulate
	#    state: each failing statement gives its locks back). Each statement
	#    ends a transaction, which costs time linear in the locks held (the
	#    lock manager scans the session's locks, as for pg_advisory_lock): with
	#    all 10,000 granted this takes half a minute, so only in the long
	#    profile.
	if (!$expect_all || $profile eq 'long')
	{
		my $script = $node->basedir . '/many.sql';
		PostgreSQL::Test::Utils::append_to_file($script, join('', map { "SELECT fencing.acquire('lim:$_');\n" } 1 .. $nres))
		  unless -e $script;
		($state, $err) = (run_in($s, "\\o /dev/null\n\\i $script\n\\o"))[1, 2];
		($held) = my_lock_counts($s);
		my @errs = $err =~ /ERROR:\s+(\w{5}):/g;
		my %kinds;
		$kinds{$_}++ for @errs;
		note "$label: single statements: $held held, errors: " . join(', ', map { "$_ x$kinds{$_}" } sort keys %kinds);
		if ($expect_all)
		{
			is(scalar(@errs), 0, "$label: $nres single-statement acquisitions without error");
		}
		else
		{
			ok((!@errs || (keys(%kinds) == 1 && $kinds{'53200'})),
				"$label: single-statement acquisitions fail only with 53200");
		}
		is($held + scalar(@errs), $nres, "$label: every statement either granted or failed");
		check_consistency($s, "$label, single statements", $held);
	}

	# 3. Transaction scope: the whole transaction fails (or commits), then
	#    nothing is held.
	($state, $err) = (run_in($s, qq{BEGIN; DO \$\$ BEGIN FOR i IN 1..$nres LOOP PERFORM fencing.acquire_xact('limx:' || i); END LOOP; END \$\$;}))[1, 2];
	my ($xheld) = $state eq '00000' ? my_lock_counts($s) : (-1);
	run_in($s, 'COMMIT;');
	if ($expect_all)
	{
		is($state, '00000', "$label: $nres transaction-scoped acquisitions granted") or diag $err;
		is($xheld, $nres, "$label: $nres transaction-scoped resources held inside the transaction");
	}
	else
	{
		ok($state eq '00000' || $state eq '53200', "$label: transaction scope: all or 53200 (got $state)")
		  or diag $err;
	}
	my ($r2, $t2, $o2) = my_lock_counts($s);
	is("$r2,$t2,$o2", '0,0,0', "$label: transaction-scoped locks gone with the transaction");
	my $o = one($s, q{SELECT count(*) FROM fencing.locks WHERE pid = pg_backend_pid();});
	is($o, '0', "$label: fencing.locks empty after the transaction");
	$o = one($s, q{BEGIN; SELECT fencing.acquire_xact('limx:1') IS NOT NULL; COMMIT;});
	like($o, qr/^t$/m, "$label: transaction-scoped acquisition works afterwards");

	# 4. Mixed: session holds of the first half inside a transaction that
	#    then fails (session locks outlive the aborted transaction, as
	#    PostgreSQL's advisory locks do).
	($state, $err) = (run_in($s, qq{BEGIN; DO \$\$ BEGIN FOR i IN 1..$nres LOOP PERFORM fencing.acquire('lim:' || i); PERFORM fencing.acquire_xact('limx:' || i); END LOOP; END \$\$;}))[1, 2];
	run_in($s, 'ROLLBACK;');
	($held) = my_lock_counts($s);
	ok($state eq '00000' || $state eq '53200', "$label: mixed scopes: all or 53200 (got $state)") or diag $err;
	$o = one($s, q{SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND mode = 'ShareRowExclusiveLock';});
	is($o, '0', "$label: mixed scopes: no transaction-scoped lock survives the rollback");
	check_consistency($s, "$label, mixed scopes", $held);

	quietly(sub { $s->quit });
}

the_many_cases('max_locks_per_transaction=64', 0);

# Raised: 2048 * (max_connections + workers) slots are plenty for 20,000.
$node->append_conf('postgresql.conf', 'max_locks_per_transaction = 2048');
$node->restart;
the_many_cases('max_locks_per_transaction=2048', 1);

# ---------------------------------------------------------------------------
# Memory: $cycles acquire/release cycles in one backend.
# ---------------------------------------------------------------------------
my $s = quietly(sub { $node->background_psql('postgres', on_error_stop => 0, timeout => 3600) });
$s->set_query_timer_restart();
my $pid = one($s, 'SELECT pg_backend_pid();');

sub rss_anon
{
	my $status = slurp_file("/proc/$pid/status");
	return $status =~ /^RssAnon:\s+(\d+)\s+kB/m ? $1 * 1024 : -1;
}

sub ctx_bytes { return one($s, 'SELECT sum(total_bytes) FROM pg_backend_memory_contexts;'); }

# One batch: 10,000 cycles of a mix of every acquisition form, committed in
# chunks of 1,000 (a DO block may COMMIT). Resource names cycle over 64.
my $batch = q{DO $$
DECLARE t fencing.token; r text;
BEGIN
  FOR i IN 1..10000 LOOP
    r := 'mem:' || (i % 64);
    CASE i % 8
      WHEN 0, 1, 2 THEN
        t := fencing.acquire(r);
        PERFORM fencing.release(r);
      WHEN 3 THEN
        t := fencing.acquire(r, '1s', '1h');          -- with a wait and a lease
        PERFORM fencing.renew(r);
        BEGIN  -- validate()'s guard ends with this subtransaction: r comes back in this transaction
          PERFORM fencing.validate(r, t);
          RAISE EXCEPTION USING ERRCODE = 'P0001';
        EXCEPTION WHEN SQLSTATE 'P0001' THEN
          NULL;
        END;
        PERFORM fencing.release(r);
      WHEN 4 THEN
        t := fencing.try_acquire(r);
        t := fencing.acquire(r, reentrant => true);   -- nested
        PERFORM fencing.release(r);
        PERFORM fencing.release(r);
      WHEN 5 THEN
        t := fencing.acquire_xact(r, reentrant => true);  -- ends with the chunk's COMMIT
        PERFORM fencing.current(r);
      WHEN 6 THEN
        t := fencing.try_acquire_xact(r, reentrant => true);
      ELSE
        t := fencing.acquire(r, NULL, '10 min');
        PERFORM fencing.release_all();
    END CASE;
    IF i % 1000 = 0 THEN COMMIT; END IF;
  END LOOP;
END $$;};

my $nbatches = int($cycles / 10_000);
one($s, $batch) for 1 .. 2;    # warm-up: caches, plan, first rows
my $state_size0 = one($s, q{SELECT pg_relation_size('fencing.fence_state');});
my ($c0, $r0) = (ctx_bytes(), rss_anon());
my $t0 = time;
my @trace;
for my $b (1 .. $nbatches)
{
	one($s, $batch);
	push @trace, ctx_bytes() if $b % int($nbatches / 5 || 1) == 0;
}
my $elapsed = time - $t0;
my ($c1, $r1) = (ctx_bytes(), rss_anon());
my $state_size1 = one($s, q{SELECT pg_relation_size('fencing.fence_state');});
my $pid_after = one($s, 'SELECT pg_backend_pid();');
is($pid_after, $pid, 'memory: same backend throughout');
note sprintf("memory: %d cycles in %.1f s (%.0f/s); memory contexts %d -> %d bytes (%+d); RssAnon %d -> %d (%+d); trace %s",
	$nbatches * 10_000, $elapsed, $nbatches * 10_000 / $elapsed, $c0, $c1, $c1 - $c0, $r0, $r1, $r1 - $r0,
	join(' ', @trace));
cmp_ok($c1 - $c0, '<', 1024 * 1024,
	"memory: $cycles acquire/release cycles grow the backend's memory contexts by < 1 MiB ("
	  . ($c1 - $c0) . " bytes)");
# malloc'd memory (the C++ ledger) is not in pg_backend_memory_contexts;
# anonymous RSS covers it too (with some allocator noise).
cmp_ok($r1 - $r0, '<', 2 * 1024 * 1024,
	"memory: anonymous RSS of the backend grows by < 2 MiB (" . ($r1 - $r0) . " bytes)")
  if $r0 >= 0;
is($state_size1, $state_size0, 'memory: fence_state does not grow (grants are recorded in place)');
my ($res, $tok, $other) = my_lock_counts($s);
is("$res,$tok,$other", '0,0,0', 'memory: nothing held after the cycles');
quietly(sub { $s->quit });

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|TRAP:/, 'no backend crashed');

$node->stop;
done_testing();

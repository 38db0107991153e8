# Durability, monotonicity, exclusion and release on session end, where they need a server that crashes,
# restarts or is dumped:
#
#  (a) a token handed out under synchronous_commit = off, in a transaction
#      that never commits, is never handed out again after an immediate
#      shutdown, nor after kill -9 of the postmaster;
#  (b) the same after many acquisitions in aborted transactions;
#  (c) 100,000 distinct resources: none waits on another (try_acquire_xact
#      never returns NULL, also while another session holds other 25,000);
#  (d) pg_dump + restore into a new database carries the fence state:
#      current() returns the old tokens and new tokens are greater than all;
#  (e) a holder whose session ends releases at once: disconnect,
#      pg_terminate_backend, and a backend killed with SIGKILL (crash restart).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(send_nb wait_tag proc_state restart_after_crash);

my $node = PostgreSQL::Test::Cluster->new('durability');
$node->init;
# WAL reaches disk only when someone flushes it: no commit flushes
# (synchronous_commit = off), a WAL writer that sleeps, no background writer,
# no checkpoints. Whatever fencing does not flush itself is lost in a crash.
$node->append_conf('postgresql.conf', q{
fsync = on
synchronous_commit = off
wal_writer_delay = 10s
wal_writer_flush_after = 1GB
bgwriter_lru_maxpages = 0
checkpoint_timeout = 1h
max_wal_size = 4GB
restart_after_crash = on
max_locks_per_transaction = 1024
log_min_messages = warning
log_statement = none
});
$node->start;
# The setup is made durable by a checkpoint: a crash loses only what comes
# after it, so that a token handed out again is caught by the assertions
# below, not by a setup step that vanished.
$node->safe_psql('postgres', 'CREATE EXTENSION fencing; CREATE SEQUENCE ctl_seq; CHECKPOINT;');

# ---- helpers -------------------------------------------------------------------

sub session { return $node->background_psql('postgres', on_error_stop => 0); }

# Ends a background psql whatever state its server is in.
sub abandon
{
	my ($s) = @_;
	eval { $s->{run}->kill_kill; };
	return;
}

sub sql { return $node->safe_psql('postgres', $_[0]); }

# Whether $name is blocked waiting for a lock (pid $pid).
sub waiting
{
	my ($pid) = @_;
	return sql("SELECT count(*) > 0 FROM pg_locks WHERE pid = $pid AND NOT granted") eq 't';
}

sub wait_until_waiting
{
	my ($pid) = @_;
	my $deadline = time + 60;
	sleep 0.02 until waiting($pid) || time > $deadline;
	return waiting($pid);
}

# Starts the node after the postmaster was killed with SIGKILL. The dead
# postmaster's pid must be gone (or a zombie nobody reaps: then its lock file
# is stale), and its children must have noticed and exited (until then the
# shared memory is in use and a new postmaster refuses to start).
sub start_after_kill9
{
	my ($old_pid) = @_;
	my $pidfile = $node->data_dir . '/postmaster.pid';
	my $deadline = time + 120;
	while (time < $deadline)
	{
		my $state = proc_state($old_pid);
		last if $state eq '';
		if ($state eq 'Z') { unlink $pidfile; last; }
		sleep 0.1;
	}
	return restart_after_crash($node, $deadline);
}

sub wait_ready
{
	# poll_query_until writes its query to psql's stdin: a psql that gives up
	# on the restarting server before reading it makes IPC::Run die on the
	# broken pipe (seen under load right after a SIGKILL). That is one more
	# try, not the end of the test.
	my $deadline = time + 180;
	while (time < $deadline)
	{
		my $ready = eval { $node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') };
		return $ready if defined $ready;
		sleep 0.2;
	}
	return 0;
}

# ---- (a) a token from an uncommitted transaction, then a crash -----------------

for my $crash ('immediate shutdown', 'kill -9 of the postmaster')
{
	my $tag = $crash =~ /kill/ ? 'kill9' : 'immediate';
	# Some history first, so the resource has a committed row.
	sql("SELECT fencing.acquire('dur:a:$tag'); SELECT fencing.release_all();");

	my $s = session();
	is($s->query_safe('SHOW synchronous_commit'), 'off', "$crash: the holder runs with synchronous_commit = off");
	$s->query_safe('BEGIN');
	my $t1 = $s->query_safe("SELECT fencing.acquire('dur:a:$tag')");
	my $t_new = $s->query_safe("SELECT fencing.acquire_xact('dur:new:$tag')");
	my $t_x = $s->query_safe("SELECT fencing.acquire_xact('dur:a:x:$tag')");
	# Unflushed work after the last token: a sequence of our own, nextval'd in
	# the same transaction (its WAL is not flushed by anyone).
	my $ctl = $s->query_safe('SELECT max(nextval(\'ctl_seq\')) FROM generate_series(1, 100)');
	ok($t1 =~ /^\d+$/ && $t_new =~ /^\d+$/ && $t_x =~ /^\d+$/, "$crash: tokens handed out in an open transaction");

	if ($tag eq 'kill9')
	{
		my $pm = $node->{_pid};
		$node->kill9;
		abandon($s);
		ok(start_after_kill9($pm), "$crash: the server starts again");
	}
	else
	{
		$node->stop('immediate');
		abandon($s);
		$node->start;
	}
	wait_ready();

	note "$crash: the control sequence restarted at "
	  . sql("SELECT nextval('ctl_seq')")
	  . " (before the crash it was at $ctl; unflushed WAL is lost)";

	is(sql("SELECT count(*) FROM fencing.locks"), '0', "$crash: no fencing lock survives");
	# current() may lag behind a token that reached no durable write (the
	# grant record is not flushed on its own; the counter is).
	note "$crash: current() after the crash: " . sql("SELECT coalesce(fencing.current('dur:a:$tag')::text, 'NULL')")
	  . " (the token handed out before it: $t1)";
	my $t2 = sql("SELECT fencing.acquire('dur:a:$tag')");
	cmp_ok($t2, '>', $t1, "$crash: the next token of the resource is greater ($t2 > $t1)");
	my $t_new2 = sql("SELECT fencing.acquire_xact('dur:new:$tag')");
	cmp_ok($t_new2, '>', $t_new, "$crash: a resource first acquired in the lost transaction: greater ($t_new2 > $t_new)");
	my $t_x2 = sql("SELECT fencing.try_acquire_xact('dur:a:x:$tag')");
	cmp_ok($t_x2, '>', $t_x, "$crash: transaction-scoped: greater ($t_x2 > $t_x)");
	my $any = sql("SELECT fencing.acquire_xact('dur:other:$tag')");
	cmp_ok($any, '>', $t_x, "$crash: any new token is greater than every token before the crash");
	sql('SELECT fencing.release_all()');
}

# ---- (b) many acquisitions in aborted transactions, then a crash ----------------

{
	my $s = session();
	# 2,000 acquisitions over 20 resources in aborted subtransactions, then 500
	# in one transaction left open; the largest token seen is reported.
	my $max_aborted = $s->query_safe(q{
	  DO $$
	  DECLARE t bigint; best bigint := 0;
	  BEGIN
	    FOR i IN 1..2000 LOOP
	      BEGIN
	        t := fencing.acquire_xact('dur:b:' || (i % 20));
	        best := greatest(best, t);
	        RAISE EXCEPTION 'abort' USING ERRCODE = 'P0001';
	      EXCEPTION WHEN SQLSTATE 'P0001' THEN
	        NULL;
	      END;
	    END LOOP;
	    PERFORM set_config('dur.best', best::text, false);
	  END $$;
	  SELECT current_setting('dur.best');
	});
	$s->query_safe('BEGIN');
	my $max_open = $s->query_safe(
		q{SELECT max(fencing.acquire_xact('dur:b:open:' || g)::bigint) FROM generate_series(1, 500) g});
	# And a few thousand in transactions that rolled back.
	my $max_rolled_back = $node->safe_psql('postgres', q{
	  BEGIN;
	  SELECT max(fencing.acquire_xact('dur:b:rb:' || g)::bigint) FROM generate_series(1, 3000) g;
	  ROLLBACK;
	});
	ok($max_aborted > 0 && $max_open > 0 && $max_rolled_back > 0, 'aborted: tokens were handed out');

	my $pm = $node->{_pid};
	$node->kill9;
	abandon($s);
	ok(start_after_kill9($pm), 'aborted: the server starts again after kill -9');
	wait_ready();

	my $before = (sort { $b <=> $a } ($max_aborted, $max_open, $max_rolled_back))[0];
	my $min_after = sql(q{
	  SELECT min(t) FROM (
	    SELECT fencing.acquire_xact('dur:b:' || g)::bigint AS t FROM generate_series(0, 19) g
	    UNION ALL SELECT fencing.acquire_xact('dur:b:open:' || g)::bigint FROM generate_series(1, 500) g
	    UNION ALL SELECT fencing.acquire_xact('dur:b:rb:' || g)::bigint FROM generate_series(1, 3000) g) s});
	cmp_ok($min_after, '>', $before,
		"aborted: every token after the crash is greater than every token before ($min_after > $before)");
}

# ---- (b2) a crash at every point of the counter's log-ahead window --------------
#
# With fencing.log_ahead = 16 the counter writes its next WAL record when 8 of a
# record's 16 values are used, and hands out the rest under the older record.
# The WAL writer is stopped (SIGSTOP), so WAL that fencing does not flush
# itself stays in shared memory, not even in the kernel's page cache; two
# sessions take turns in a random order, n tokens in all; then the stopped WAL
# writer is killed with SIGKILL, and the postmaster reinitialises everything
# (a crash). Whatever the point in the window, every token after is greater.
#
# A counter within the clock bound would survive a lost record even so: after
# the crash it starts at the clock + 2 s, above every token it issued. So the
# crashes run a second time in a database whose counter a superuser moved far
# past the clock bound (advance_past), where nothing but the WAL record that
# fencing flushes before a token leaves protects that token.

$node->append_conf('postgresql.conf', 'fencing.log_ahead = 16');
$node->reload;
is(sql(q{LOAD 'fencing'; SHOW fencing.log_ahead}), '16', 'window: fencing.log_ahead = 16');
$node->safe_psql('postgres', 'CREATE DATABASE ahead');
$node->safe_psql('ahead', q{CREATE EXTENSION fencing; CREATE TABLE far (t bigint);
  SELECT fencing.advance_past('far', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + 1000000000000);
  CHECKPOINT;});
for my $pass ([ 'postgres', 'window', 1, 2, 8, 9, 10, 16, 17, 18, 25, 33, 40 ],
	[ 'ahead', 'window, counter past the clock bound', 1, 2, 8, 9, 16, 17, 25 ])
{
	my ($db, $what, @ns) = @$pass;
	my $clock = $node->safe_psql($db, q{SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint});
	my $from = $node->safe_psql($db, q{SELECT fencing.acquire_xact('dur:w:probe')});
	note "$what: the counter is " . ($from - $clock) . ' us past the clock';
	for my $n (@ns)
	{
		my $ww = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'});
		ok($ww =~ /^\d+$/ && kill('STOP', $ww), "$what, $n tokens: WAL writer $ww stopped");
		my @s = map { $node->background_psql($db, on_error_stop => 0) } 1 .. 2;
		my $max = 0;
		$s[$_]->query_safe('BEGIN') for 0, 1;
		for my $i (1 .. $n)
		{
			my $t = $s[ int(rand(2)) ]->query_safe("SELECT fencing.acquire_xact('dur:w:$n:$i')");
			$max = $t if $t > $max;
		}
		kill('KILL', $ww);
		abandon($_) for @s;
		# The postmaster notices, ends every backend and restarts.
		my $back = 0;
		for (1 .. 600)
		{
			# (eval: psql may die before it reads its input while the server restarts)
			my ($rc, $out) = eval { $node->psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'}) };
			if ($rc == 0 && $out =~ /^\d+$/ && $out ne $ww) { $back = 1; last; }
			sleep 0.1;
		}
		ok($back, "$what, $n tokens: the server restarted after the crash");
		wait_ready();
		my @after = split /\n/, $node->safe_psql($db, qq{SELECT fencing.acquire_xact('dur:w:$n:' || g) FROM generate_series(1, $n) g});
		my $lowest = (sort { $a <=> $b } @after)[0];
		cmp_ok($lowest, '>', $max, "$what, $n tokens then a crash: no token is handed out again ($lowest > $max)");
	}
}
$node->adjust_conf('postgresql.conf', 'fencing.log_ahead', '1048576');
$node->reload;

# ---- (c) 100,000 distinct resources -----------------------------------------------

{
	my $started = time;
	# Session A holds 10,000 resources in an open transaction.
	my $a = session();
	$a->query_safe('BEGIN');
	my $a_got = $a->query_safe(
		q{SELECT count(fencing.try_acquire_xact('dur:c:' || g)) FROM generate_series(1, 10000) g});
	is($a_got, '10000', 'distinct: session A holds 10,000 resources, none refused');

	# Session B, meanwhile, takes the other 90,000 in nine transactions.
	my $b_got = 0;
	for my $batch (1 .. 9)
	{
		my ($lo, $hi) = (10000 * $batch + 1, 10000 * ($batch + 1));
		$b_got += sql(qq{
		  BEGIN;
		  SELECT count(fencing.try_acquire_xact('dur:c:' || g)) FROM generate_series($lo, $hi) g;
		  COMMIT;});
	}
	is($b_got, 90000, 'distinct: session B got all 90,000 others while A held its 10,000');

	# A's resources really are held: B cannot have them.
	is(sql(q{SELECT count(*) FROM generate_series(1, 10000, 397) g WHERE fencing.try_acquire('dur:c:' || g) IS NULL}),
		'26', 'distinct: A\'s resources are held (try_acquire NULL for a sample of them)');
	$a->query_safe('COMMIT');
	$a->quit;

	is(sql(q{SELECT count(DISTINCT fencing.resource_key('dur:c:' || g)) FROM generate_series(1, 100000) g}),
		'100000', 'distinct: 100,000 resources, 100,000 distinct 64-bit keys');
	is(sql(q{SELECT count(*) FROM fencing.fence_state WHERE resource LIKE 'dur:c:%'}),
		'100000', 'distinct: 100,000 fence sequences exist');
	note sprintf('distinct: 100,000 acquisitions took %.1f s', time - $started);
}

# ---- (d) pg_dump and restore into a new database ----------------------------------

{
	$node->safe_psql('postgres', 'CREATE DATABASE dump_src');
	$node->safe_psql('dump_src', q{
	  CREATE EXTENSION fencing;
	  SELECT fencing.acquire('dump:' || g) FROM generate_series(1, 50) g;
	  SELECT fencing.release_all();
	  SELECT fencing.acquire_xact('dump:' || g) FROM generate_series(1, 50, 3) g;
	  BEGIN; SELECT fencing.acquire_xact('dump:aborted'); ROLLBACK;
	});
	# A holder still holds one resource while the dump is taken.
	my $holder = $node->background_psql('dump_src', on_error_stop => 0);
	my $held = $holder->query_safe("SELECT fencing.acquire('dump:held')");
	my $old = $node->safe_psql('dump_src',
		q{SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.fence_state});
	my $old_max = $node->safe_psql('dump_src', 'SELECT max(token) FROM fencing.fence_state');
	cmp_ok($old_max, '>=', $held, 'dump: the source has fence state');

	my $dir = PostgreSQL::Test::Utils::tempdir;
	for my $format ('custom', 'plain')
	{
		my $db = "dump_dst_$format";
		my $file = "$dir/dump_src.$format";
		$node->command_ok(
			[ 'pg_dump', '-d', $node->connstr('dump_src'), '-F', substr($format, 0, 1), '-f', $file ],
			"dump: pg_dump ($format)");
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		if ($format eq 'custom')
		{
			$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr($db), $file ],
				"dump: pg_restore into a new database");
		}
		else
		{
			$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db), '-f', $file ],
				"dump: psql restores the plain dump into a new database");
		}
		my $restored = $node->safe_psql($db,
			q{SELECT string_agg(resource || '=' || fencing.current(resource), ',' ORDER BY resource) FROM fencing.fence_state});
		is($restored, $old, "dump ($format): current() returns the old tokens for every resource");
		is($node->safe_psql($db, "SELECT fencing.current('dump:held')"), $held,
			"dump ($format): the token of a lock held during the dump");
		my $min_new = $node->safe_psql($db, q{
		  SELECT min(t) FROM (
		    SELECT fencing.acquire_xact(resource)::bigint AS t FROM fencing.fence_state
		    UNION ALL SELECT fencing.acquire_xact('dump:brand-new')::bigint) s});
		cmp_ok($min_new, '>', $old_max,
			"dump ($format): every new token is greater than every old one ($min_new > $old_max)");
		is($node->safe_psql($db, q{SELECT count(*) FROM fencing.locks}), '0',
			"dump ($format): no lock comes with the dump");
	}
	$holder->quit;
}

# A source whose counter was moved far ahead (fencing.advance_past, as
# fencing.protect does for a table holding large tokens): the restored
# database must still hand out greater tokens than the dumped ones.
{
	$node->safe_psql('postgres', 'CREATE DATABASE dump_adv');
	$node->safe_psql('dump_adv', q{
	  CREATE EXTENSION fencing;
	  CREATE TABLE big_tokens (t bigint);
	  SELECT fencing.advance_past('big_tokens', 4000000000000000000);
	  SELECT fencing.acquire('adv:' || g) FROM generate_series(1, 5) g;
	  SELECT fencing.release_all();
	});
	my $old_max = $node->safe_psql('dump_adv', 'SELECT max(token) FROM fencing.fence_state');
	cmp_ok($old_max, '>', '4000000000000000000', 'dump (advanced counter): the source issued tokens above 4e18');
	my $file = PostgreSQL::Test::Utils::tempdir . '/dump_adv.custom';
	$node->command_ok([ 'pg_dump', '-d', $node->connstr('dump_adv'), '-F', 'c', '-f', $file ],
		'dump (advanced counter): pg_dump');
	$node->safe_psql('postgres', 'CREATE DATABASE dump_adv_dst');
	$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dump_adv_dst'), $file ],
		'dump (advanced counter): pg_restore');
	is($node->safe_psql('dump_adv_dst', q{SELECT max(fencing.current(resource)::bigint) FROM fencing.fence_state}),
		$old_max, 'dump (advanced counter): current() returns the old tokens');
	my $min_new = $node->safe_psql('dump_adv_dst',
		q{SELECT min(fencing.acquire_xact('adv:' || g)::bigint) FROM generate_series(1, 5) g});
	cmp_ok($min_new, '>', $old_max,
		"dump (advanced counter): new tokens are greater than the old ones ($min_new > $old_max)");
}

# ---- (e) a holder whose session ends releases at once -----------------------------

# disconnect and pg_terminate_backend: the waiter is granted at once.
for my $how ('disconnect', 'pg_terminate_backend')
{
	my $res = "dur:e:$how";
	my $h = session();
	my $t_h = $h->query_safe("SELECT fencing.acquire('$res')");
	my $t_hx = $h->query_safe("BEGIN; SELECT fencing.acquire_xact('$res:x')");
	my ($h_pid) = $h->query_safe('SELECT pg_backend_pid()');

	my $w = session();
	my ($w_pid) = $w->query_safe('SELECT pg_backend_pid()');
	send_nb($w, "SELECT fencing.acquire('$res')", 'got');
	my $wx = session();
	my ($wx_pid) = $wx->query_safe('SELECT pg_backend_pid()');
	send_nb($wx, "SELECT fencing.acquire_xact('$res:x')", 'gotx');
	ok(wait_until_waiting($w_pid) && wait_until_waiting($wx_pid), "$how: the waiters wait for the holder");

	my $t0 = time;
	if ($how eq 'disconnect') { $h->quit; }
	else
	{
		is(sql("SELECT pg_terminate_backend($h_pid)"), 't', "$how: the holder is terminated");
		abandon($h);
	}
	my ($out, $err) = wait_tag($w, 'got');
	my ($outx, $errx) = wait_tag($wx, 'gotx');
	my $elapsed = time - $t0;
	is($err . $errx, '', "$how: the waiters' acquire succeeded");
	cmp_ok($out, '>', $t_h, "$how: the session waiter got a greater token ($out > $t_h)");
	cmp_ok($outx, '>', $t_hx, "$how: the transaction waiter got a greater token ($outx > $t_hx)");
	cmp_ok($elapsed, '<', 5, sprintf('%s: the locks changed hands at once (%.2f s)', $how, $elapsed));
	is(sql("SELECT count(*) FROM fencing.locks WHERE pid = $h_pid"), '0', "$how: nothing left of the holder");
	$w->query_safe('SELECT fencing.release_all()');
	$w->quit;
	$wx->quit;
}

# A holder backend killed with SIGKILL: the postmaster restarts after the crash
# (every session ends, the waiter's too); the resources are free and the next
# tokens greater.
{
	my $h = session();
	my $t_h = $h->query_safe("SELECT fencing.acquire('dur:e:sigkill')");
	my $t_hx = $h->query_safe("BEGIN; SELECT fencing.acquire_xact('dur:e:sigkill:x')");
	my ($h_pid) = $h->query_safe('SELECT pg_backend_pid()');
	my $w = session();
	my ($w_pid) = $w->query_safe('SELECT pg_backend_pid()');
	send_nb($w, "SELECT fencing.acquire('dur:e:sigkill')", 'got');
	ok(wait_until_waiting($w_pid), 'SIGKILL: a waiter waits for the holder');

	my $t0 = time;
	kill 'KILL', $h_pid;
	abandon($h);
	abandon($w);
	wait_ready();
	my $t_after = sql("SELECT fencing.try_acquire('dur:e:sigkill')");
	my $t_afterx = sql("SELECT fencing.try_acquire_xact('dur:e:sigkill:x')");
	my $elapsed = time - $t0;
	ok($t_after ne '' && $t_afterx ne '', 'SIGKILL: the resources are free after the crash restart');
	cmp_ok($t_after, '>', $t_h, "SIGKILL: the next token is greater ($t_after > $t_h)");
	cmp_ok($t_afterx, '>', $t_hx, "SIGKILL: transaction-scoped: greater ($t_afterx > $t_hx)");
	cmp_ok($elapsed, '<', 30, sprintf('SIGKILL: free again %.2f s after the kill', $elapsed));
	ok($node->log_contains('terminated by signal 9'), 'SIGKILL: the server log shows the crash');
}

$node->stop;
done_testing();

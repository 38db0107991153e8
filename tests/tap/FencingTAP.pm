# Helpers shared by the TAP tests in this directory. A test loads them with
#
#   use FindBin;
#   use lib $FindBin::Bin;
#   use FencingTAP qw(send_nb wait_tag ...);
#
# (FindBin: the test's own directory, wherever the tree was copied.)
package FencingTAP;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Utils ();
use Test::More ();
use Time::HiRes qw(time sleep);

our @EXPORT_OK = qw(
  send_nb wait_tag quietly psql_sqlstate pause
  proc_state restart_after_crash
  higher storm_script run_storm
);

# ---- time -------------------------------------------------------------------------

# pause($seconds): sleeps the full time. Time::HiRes::sleep returns early when
# a signal handler runs, and from PostgreSQL 17 on PostgreSQL::Test::Utils
# installs one for SIGCHLD, which the kernel sends whenever a child process
# (a psql started with IPC::Run) exits, stops or continues: a test that stops
# and continues its clients would otherwise sleep for a fraction of the time.
sub pause
{
	my ($seconds) = @_;
	my $until = time + $seconds;
	while ((my $left = $until - time) > 0) { sleep $left; }
	return;
}

# ---- background psql sessions ---------------------------------------------------

# send_nb($s, $sql, $tag): sends $sql to the background psql $s without waiting
# for it; wait_tag($s, $tag) later waits for it and returns what it printed
# (stdout, stderr).
sub send_nb
{
	my ($s, $sql, $tag) = @_;
	$s->{stdin} .= "$sql\n;\n\\echo '<<$tag>>'\n\\warn '<<$tag>>'\n";
	$s->{run}->pump_nb;
	return;
}

sub wait_tag
{
	my ($s, $tag) = @_;
	my $m = qr/<<\Q$tag\E>>\r?\n/;
	$s->{run}->pump until ($s->{stdout} =~ $m && $s->{stderr} =~ $m) || $s->{timeout}->is_expired;
	die "timed out waiting for $tag" if $s->{timeout}->is_expired;
	my ($out, $err) = ($s->{stdout}, $s->{stderr});
	$out =~ s/\r?\n?<<\Q$tag\E>>\r?\n//;
	$err =~ s/\r?\n?<<\Q$tag\E>>\r?\n//;
	$s->{stdout} = '';
	$s->{stderr} = '';
	return ($out, $err);
}

# Runs CODE without BackgroundPsql's notes (every query and its output) in the
# TAP stream.
sub quietly
{
	my ($code) = @_;
	my $tb = Test::More->builder;
	my $saved = $tb->output;
	open my $null, '>', '/dev/null' or die;
	$tb->output($null);
	my @r = eval { $code->() };
	my $err = $@;
	$tb->output($saved);
	die $err if $err;
	return wantarray ? @r : $r[0];
}

# psql_sqlstate($node, $db, $sql): runs $sql in a new psql (ON_ERROR_STOP);
# returns the SQLSTATE of its first error ('' when none), its stdout and its
# stderr.
sub psql_sqlstate
{
	my ($node, $db, $sql) = @_;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql", on_error_stop => 1);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($state // '', $out, $err);
}

# ---- crashes ----------------------------------------------------------------------

# proc_state($pid): the state letter of process $pid from /proc ('Z' for a
# zombie), '' when there is no such process.
sub proc_state
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return '';
	my $stat = <$fh>;
	close $fh;
	return (split / /, ($stat =~ s/^.*\) //r))[0] // '';
}

# restart_after_crash($node[, $deadline]): starts $node again after its
# postmaster died, retrying until $deadline (time() value; default 120 s from
# now) while the old processes still hold the shared memory. True when it
# started.
sub restart_after_crash
{
	my ($node, $deadline) = @_;
	$deadline //= time + 120;
	while (time < $deadline)
	{
		$node->{_pid} = undef;    # start() refuses while it thinks the node runs
		return 1 if $node->start(fail_ok => 1);
		sleep 0.5;
	}
	return 0;
}

# ---- acquisition storms (050_crash_cycles.pl, 051_failover.pl) --------------------
#
# A storm client is a psql script (psql -X -q -At) of random blocks that
# acquire shared resources and write with their tokens to
#   fenced (res text PRIMARY KEY, fence_token fencing.token, writes bigint)
#   fenced_log (res text, token fencing.token, PRIMARY KEY (res, token))
# both protected (fencing.protect; fenced_log on its token column). Output
# lines of a client:
#   A <res> <token>   a token the client received (acquire*, try_acquire)
#   C <res> <token>   a fenced write committed with that token: the client saw
#                     its commit succeed
#   U <res> <token>   a fenced write whose commit failed or whose outcome the
#                     client does not know (the connection broke on the COMMIT):
#                     it may or may not have committed
#   X <res> <token>   a fenced write whose transaction was rolled back
#
# What counts is psql's ERROR variable after the statement that commits, never
# that the write's row came back: after a crash psql reports the COMMIT (or
# the autocommit INSERT) as failed and goes on with the script, with the
# token of the write it made before still set.

# higher($x, $y): the greater of two numbers, $y when $x is undefined.
sub higher { my ($x, $y) = @_; return !defined $x ? $y : ($y > $x ? $y : $x); }

# The script lines after the statement that commits a write whose token the
# variable wtok holds (set by the write's \gset): C when that statement
# succeeded, U when it failed.
sub echo_commit
{
	my ($res) = @_;
	return "\\if :{?wtok}\n\\if :ERROR\n\\echo U $res :wtok\n\\else\n\\echo C $res :wtok\n\\endif\n\\endif\n";
}

# A session-scoped block: acquire (20 %: try_acquire), write, release.
sub block_session
{
	my ($res, %o) = @_;
	my $try = rand() < 0.2;
	my $lease = $o{lease} && rand() < $o{lease} ? ", NULL, '1 min'" : '';
	my $call = $try ? "fencing.try_acquire('$res')" : "fencing.acquire('$res'$lease)";
	my $nested = $o{nested} && rand() < $o{nested}
	  ? "SELECT fencing.acquire('$res', reentrant => true) = :'tok' AS same \\gset\nSELECT fencing.release('$res') AS released \\gset\n"
	  : '';
	my $validate = $o{validate} ? "SELECT fencing.validate('$res', :tok) IS NOT NULL AS valid \\gset\n" : '';
	my $outcome = echo_commit($res);
	return <<"EOS";
\\unset tok
\\unset wtok
SELECT $call AS tok \\gset
\\if :{?tok}
\\echo A $res :tok
${nested}${validate}WITH u AS (UPDATE fenced SET fence_token = :tok, writes = writes + 1 WHERE res = '$res' RETURNING res, fence_token)
INSERT INTO fenced_log SELECT res, fence_token FROM u RETURNING token::bigint AS wtok \\gset
${outcome}SELECT fencing.release('$res') AS released \\gset
\\endif
EOS
}

# A transaction-scoped block: acquire_xact (20 %: try_acquire_xact), write,
# then $outcome: 'commit', 'rollback' or 'error' (a division by zero).
sub block_xact
{
	my ($res, $outcome, %o) = @_;
	my $fn = rand() < 0.2 ? 'try_acquire_xact' : 'acquire_xact';
	my $end = $outcome eq 'commit' ? 'COMMIT;' : $outcome eq 'rollback' ? 'ROLLBACK;' : "SELECT 1/0;\nROLLBACK;";
	my $write = $o{set_local} && rand() < $o{set_local}
	  ? "SET LOCAL fencing.token = :'tok';\nWITH u AS (UPDATE fenced SET writes = writes + 1 WHERE res = '$res' RETURNING res, fence_token)"
	  : "WITH u AS (UPDATE fenced SET fence_token = :tok, writes = writes + 1 WHERE res = '$res' RETURNING res, fence_token)";
	my $echo = $outcome eq 'commit' ? echo_commit($res) : "\\if :{?wtok}\n\\echo X $res :wtok\n\\endif\n";
	return <<"EOS";
\\unset tok
\\unset wtok
BEGIN;
SELECT fencing.$fn('$res') AS tok \\gset
\\if :{?tok}
\\echo A $res :tok
$write
INSERT INTO fenced_log SELECT res, fence_token FROM u RETURNING token::bigint AS wtok \\gset
\\endif
$end
$echo
EOS
}

# The first acquisition of a new resource, and a write to fenced_log.
sub block_new
{
	my ($res, %o) = @_;
	my $body = "\\echo A $res :tok\n"
	  . "INSERT INTO fenced_log VALUES ('$res', :tok) RETURNING token::bigint AS wtok \\gset\n"
	  . echo_commit($res)
	  . "SELECT fencing.release('$res') AS released \\gset\n";
	$body = "\\if :{?tok}\n$body\\endif\n" if $o{new_if_granted};
	return "\\unset tok\n\\unset wtok\nSELECT fencing.acquire('$res') AS tok \\gset\n$body";
}

# storm_script($kind, $nblocks, %opt): the script of one storm client, of
# $nblocks random blocks. Kinds:
#   sync, async   70 % session blocks, 30 % transaction blocks that commit
#                 (async: synchronous_commit = off)
#   ...xact...    transaction blocks only: 50 % commit, 30 % rollback, 20 % error
#   new           60 % first acquisitions of new resources, else session blocks
#   evictor       no tokens: index scans of a table big (id int, pad text; ids
#                 1 to 20,000) and inserts into junk (id bigserial, pad text),
#                 which evict buffers and generate WAL, now and then a CHECKPOINT
# %opt:
#   shared          the resources the blocks acquire (array ref; required)
#   new_prefix      a new resource of block $i is named "$new_prefix:$i"
#   lease           probability that a session acquire takes a 1 min lease
#   nested          probability that a session block acquires its resource again
#                   (nested) and releases it once before writing
#   validate        session blocks call fencing.validate before writing
#   set_local       probability that a transaction block writes through
#                   SET LOCAL fencing.token instead of the token column
#   mixed_rollback  sync/async clients roll back half of their transaction
#                   blocks (15 % of all blocks)
#   new_if_granted  a new-resource block writes only when acquire returned
sub storm_script
{
	my ($kind, $nblocks, %o) = @_;
	my @shared = @{ $o{shared} };
	my $s = "\\set VERBOSITY verbose\n\\set ON_ERROR_STOP 0\nSET lock_timeout = '5s';\n";
	$s .= "SET synchronous_commit = off;\n" if $kind =~ /async/;
	if ($kind eq 'evictor')
	{
		$s .= "SET enable_seqscan = off; SET enable_bitmapscan = off;\n";
		for my $i (1 .. $nblocks)
		{
			my $lo = 1 + int(rand(15000));
			$s .= "SELECT count(*) > 0 AS x FROM big WHERE id BETWEEN $lo AND $lo + 5000 AND pad <> '' \\gset\n";
			$s .= "INSERT INTO junk (pad) SELECT repeat('j', 300) FROM generate_series(1, 200);\n";
			$s .= "DELETE FROM junk WHERE id < (SELECT max(id) - 20000 FROM junk);\n" if $i % 20 == 0;
			$s .= "CHECKPOINT;\n" if rand() < 0.02;
		}
		return $s;
	}
	for my $i (1 .. $nblocks)
	{
		my $res = $shared[ int(rand(@shared)) ];
		my $r = rand();
		if ($kind eq 'new')
		{
			$s .= $r < 0.6 ? block_new("$o{new_prefix}:$i", %o) : block_session($res, %o);
		}
		elsif ($kind =~ /xact/)
		{
			$s .= block_xact($res, $r < 0.5 ? 'commit' : $r < 0.8 ? 'rollback' : 'error', %o);
		}
		else
		{
			$s .= $r < 0.7
			  ? block_session($res, %o)
			  : block_xact($res, !$o{mixed_rollback} || $r < 0.85 ? 'commit' : 'rollback', %o);
		}
	}
	return $s;
}

# run_storm(node => $node, db => $db, dir => $dir, kinds => [...],
#           script => sub { my ($client, $kind) = @_; ... },
#           pause => [$min, $spread], crash => sub { ... })
#
# Starts one psql client per kind against $db of $node, with the script
# script->(client number, kind) (written to $dir/client<n>.sql; its output
# goes to $dir/client<n>.out and .err). Waits (at most 30 s) until every
# client but the evictors has printed a few tokens, then $min + rand($spread)
# seconds more, calls crash->(), and ends the clients. Returns what they saw:
#   elapsed        seconds from the start to the crash
#   n_recv, n_commit, n_doubt, n_abort   counts of A, C, U and X lines
#   received       { res => the highest token received }
#   received_set   { res => { token => 1 } }, every token received
#   sync_commits   { res => the highest token of a write whose commit a
#                  client with synchronous commit saw succeed (C) }
#   resources      { res => 1 }, every resource in the output
#   errors         [ [ SQLSTATE, line ], ... ]: the ERROR, FATAL and PANIC
#                  lines of the clients' stderr
sub run_storm
{
	my (%a) = @_;
	my ($node, $dir, @kinds) = ($a{node}, $a{dir}, @{ $a{kinds} });
	mkdir $dir;
	my @clients;
	for my $c (0 .. $#kinds)
	{
		my $file = "$dir/client$c.sql";
		unlink $file;
		PostgreSQL::Test::Utils::append_to_file($file, $a{script}->($c, $kinds[$c]));
		my ($out, $err) = ("$dir/client$c.out", "$dir/client$c.err");
		my $h = IPC::Run::start([ 'psql', '-X', '-q', '-At', '-d', $node->connstr($a{db}), '-f', $file ],
			'>', $out, '2>', $err);
		push @clients, { h => $h, out => $out, err => $err, kind => $kinds[$c] };
	}
	my $t0 = time;
	while (time - $t0 < 30)
	{
		my $ready = grep { $_->{kind} eq 'evictor' || (-s $_->{out} // 0) > 200 } @clients;
		last if $ready == @clients;
		sleep 0.05;
	}
	sleep($a{pause}[0] + rand($a{pause}[1]));
	my $elapsed = time - $t0;
	$a{crash}->();
	for my $c (@clients)
	{
		eval { $c->{h}->finish; };
		eval { $c->{h}->kill_kill; };
	}

	my %r = (elapsed => $elapsed, n_recv => 0, n_commit => 0, n_doubt => 0, n_abort => 0, received => {}, received_set => {},
		sync_commits => {}, resources => {}, errors => []);
	for my $c (@clients)
	{
		my $sync = $c->{kind} !~ /async/;
		open my $fh, '<', $c->{out} or die;
		while (my $line = <$fh>)
		{
			next unless $line =~ /^([ACUX]) (\S+) (\d+)$/;
			my ($k, $res, $tok) = ($1, $2, $3);
			$r{resources}{$res} = 1;
			if ($k eq 'A')
			{
				$r{n_recv}++;
				$r{received}{$res} = higher($r{received}{$res}, $tok);
				$r{received_set}{$res}{$tok} = 1;
			}
			elsif ($k eq 'C')
			{
				$r{n_commit}++;
				$r{sync_commits}{$res} = higher($r{sync_commits}{$res}, $tok) if $sync;
			}
			elsif ($k eq 'U') { $r{n_doubt}++; }
			else { $r{n_abort}++; }
		}
		close $fh;
		open $fh, '<', $c->{err} or die;
		while (my $line = <$fh>)
		{
			push @{ $r{errors} }, [ $2, $line ] if $line =~ /(ERROR|FATAL|PANIC):\s+([0-9A-Z]{5}):/;
		}
		close $fh;
	}
	return \%r;
}

1;

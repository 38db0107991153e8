# The token counter belongs to the database's incarnation, not to its place:
# a database created again under an old OID, from a copy of itself taken
# earlier, holds a counter page whose stamp names that very OID, file,
# timeline and server run, and whose records were written by the server
# itself. It must not count down from there: its next token exceeds every
# token the dropped incarnation issued.
#
# A role with CREATEDB that owns the database does it all itself:
#
#   CREATE DATABASE snap TEMPLATE app STRATEGY ...;   -- a snapshot
#   (tokens in app)
#   DROP DATABASE app;
#   CREATE DATABASE app TEMPLATE snap STRATEGY ... [OID = <app's old OID>];
#
# with each strategy for the snapshot and for the new database, with and
# without OID =, with nothing, a restart, an immediate shutdown or a crash of
# one backend (the postmaster restarts the others) between the last tokens
# and the DROP; also a database created again from the template the first
# one came from, a snapshot of a snapshot, and ALTER DATABASE ... RENAME and
# SET TABLESPACE (with a crash after them), which must not lower tokens
# either.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time sleep);

my $node = PostgreSQL::Test::Cluster->new('incarnation');
$node->init;
$node->append_conf('postgresql.conf', q{
autovacuum = off
restart_after_crash = on
checkpoint_timeout = 1h
max_wal_size = 4GB
log_min_messages = warning
log_statement = none
});
$node->start;
$node->safe_psql('postgres', 'CREATE ROLE own LOGIN CREATEDB');

# As the superuser, or as the role "own".
sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }
sub own { my ($db, $q) = @_; return $node->safe_psql($db, $q, extra_params => [ '-U', 'own' ]); }

sub max_of { my $m = shift; for (@_) { $m = $_ if $_ > $m; } return $m; }
sub min_of { my $m = shift; for (@_) { $m = $_ if $_ < $m; } return $m; }

# $n tokens in $db for "job:1" and "$prefix:2" ... (as "own").
sub tokens
{
	my ($db, $prefix, $n) = @_;
	my @t = split /\n/, own($db, qq{
	  SELECT fencing.acquire_xact('job:1')::bigint
	  UNION ALL
	  SELECT fencing.acquire_xact('$prefix:' || g)::bigint FROM generate_series(2, $n) g});
	return @t;
}

sub wait_ready
{
	my $deadline = time + 120;
	while (time < $deadline)
	{
		my ($rc, $out) = eval { $node->psql('postgres', 'SELECT 1') };
		return 1 if defined $rc && $rc == 0 && $out eq '1';
		sleep 0.2;
	}
	return 0;
}

# What happens between the last tokens of the old incarnation and its DROP.
sub between
{
	my ($what) = @_;
	if ($what eq 'restart') { $node->restart; }
	elsif ($what eq 'immediate shutdown') { $node->stop('immediate'); $node->start; }
	elsif ($what eq 'backend crash')
	{
		# A backend killed: the postmaster ends the others and recovers,
		# without a restart of its own.
		my ($in, $out, $err) = ('', '', '');
		my $h = IPC::Run::start([ 'psql', '-X', '-d', $node->connstr('postgres'), '-c', 'SELECT pg_sleep(600)' ],
			\$in, \$out, \$err);
		my $pid = '';
		for (1 .. 200)
		{
			$pid = sql('postgres', q{SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'});
			last if $pid ne '';
			sleep 0.05;
		}
		die 'no backend to kill' if $pid eq '';
		kill 'KILL', $pid or die "kill $pid: $!";
		$h->finish;
		wait_ready() or die 'the server did not come back after the crash';
	}
}

my $n = 0;

# A database "app$n" owned by "own" with fencing and tokens; a snapshot of it
# with $snap_strategy; more tokens in it; $between; DROP; CREATE again from
# the snapshot with $re_strategy (and the old OID when $same_oid). Every token
# of the new incarnation must exceed every token of the old one.
sub recreate_case
{
	my ($snap_strategy, $re_strategy, $same_oid, $what) = @_;
	$n++;
	my ($app, $snap) = ("app$n", "snap$n");
	sql('postgres', "CREATE DATABASE $app OWNER own");
	sql($app, 'CREATE EXTENSION fencing; GRANT USAGE ON SCHEMA fencing TO own');
	my @old = tokens($app, 'a', 5);
	own('postgres', "CREATE DATABASE $snap TEMPLATE $app STRATEGY $snap_strategy");
	push @old, tokens($app, 'b', 200);
	between($what);
	my $oid = sql('postgres', "SELECT oid FROM pg_database WHERE datname = '$app'");
	own('postgres', "DROP DATABASE $app");
	own('postgres',
		"CREATE DATABASE $app TEMPLATE $snap STRATEGY $re_strategy" . ($same_oid ? " OID = $oid" : ''));
	my $new_oid = sql('postgres', "SELECT oid FROM pg_database WHERE datname = '$app'");
	my @new = tokens($app, 'c', 5);
	my $label = sprintf('snapshot %s, %s, DROP, CREATE %s%s: ', $snap_strategy,
		$what eq 'nothing' ? 'nothing' : "$what", $re_strategy, $same_oid ? " OID = $oid" : ' (new OID)');
	is($new_oid, $same_oid ? $oid : $new_oid, $label . 'the database has the OID asked for') if $same_oid;
	cmp_ok(min_of(@new), '>', max_of(@old),
		$label . 'every new token exceeds every token of the dropped database (' . min_of(@new) . ' > ' . max_of(@old) . ')');
	own('postgres', "DROP DATABASE $app");
	own('postgres', "DROP DATABASE $snap");
}

for my $what ('nothing', 'restart', 'immediate shutdown', 'backend crash')
{
	for my $strategy ('FILE_COPY', 'WAL_LOG')
	{
		recreate_case($strategy, $strategy, 1, $what);
	}
}
# Mixed strategies, and no OID =.
recreate_case('FILE_COPY', 'WAL_LOG', 1, 'nothing');
recreate_case('WAL_LOG', 'FILE_COPY', 1, 'nothing');
recreate_case('FILE_COPY', 'FILE_COPY', 0, 'nothing');
recreate_case('WAL_LOG', 'WAL_LOG', 0, 'nothing');

# A snapshot of a snapshot; and the template the database came from.
{
	sql('postgres', 'CREATE DATABASE tpl OWNER own');
	sql('tpl', 'CREATE EXTENSION fencing; GRANT USAGE ON SCHEMA fencing TO own');
	my @old = tokens('tpl', 't', 10);
	own('postgres', 'CREATE DATABASE app TEMPLATE tpl STRATEGY FILE_COPY');
	push @old, tokens('app', 'a', 10);
	own('postgres', 'CREATE DATABASE s1 TEMPLATE app STRATEGY FILE_COPY');
	push @old, tokens('app', 'b', 50);
	own('postgres', 'CREATE DATABASE s2 TEMPLATE s1 STRATEGY FILE_COPY');
	my $oid = sql('postgres', q{SELECT oid FROM pg_database WHERE datname = 'app'});
	own('postgres', 'DROP DATABASE app');
	own('postgres', "CREATE DATABASE app TEMPLATE s2 STRATEGY FILE_COPY OID = $oid");
	my @new = tokens('app', 'c', 5);
	cmp_ok(min_of(@new), '>', max_of(@old), 'a snapshot of a snapshot, CREATE with the old OID: new tokens are greater');
	push @old, @new;
	own('postgres', 'DROP DATABASE app');
	own('postgres', "CREATE DATABASE app TEMPLATE tpl STRATEGY FILE_COPY OID = $oid");
	@new = tokens('app', 'd', 5);
	cmp_ok(min_of(@new), '>', max_of(@old), 'CREATE again from its template with the old OID: new tokens are greater');
	push @old, @new;
	# The old incarnation's page back again, while the new one has issued
	# tokens: from s2 a second time.
	own('postgres', 'DROP DATABASE app');
	own('postgres', "CREATE DATABASE app TEMPLATE s2 STRATEGY FILE_COPY OID = $oid");
	@new = tokens('app', 'e', 5);
	cmp_ok(min_of(@new), '>', max_of(@old), 'the same snapshot a second time with the old OID: new tokens are greater');
	push @old, @new;

	# ---- RENAME and SET TABLESPACE -----------------------------------------------
	my $dir = PostgreSQL::Test::Utils::tempdir_short . '/ts';
	mkdir $dir or die "mkdir $dir: $!";
	sql('postgres', "CREATE TABLESPACE moved LOCATION '$dir' ; GRANT CREATE ON TABLESPACE moved TO own");
	own('postgres', 'ALTER DATABASE app RENAME TO app_renamed');
	@new = tokens('app_renamed', 'f', 5);
	cmp_ok(min_of(@new), '>', max_of(@old), 'ALTER DATABASE RENAME: new tokens are greater');
	push @old, @new;
	own('postgres', 'ALTER DATABASE app_renamed RENAME TO app');
	$node->stop('immediate');
	$node->start;
	@new = tokens('app', 'g', 5);
	cmp_ok(min_of(@new), '>', max_of(@old), 'ALTER DATABASE RENAME back, immediate shutdown: new tokens are greater');
	push @old, @new;
	own('postgres', 'ALTER DATABASE app SET TABLESPACE moved');
	@new = tokens('app', 'h', 5);
	cmp_ok(min_of(@new), '>', max_of(@old), 'ALTER DATABASE SET TABLESPACE: new tokens are greater');
	push @old, @new;
	sql('postgres', 'ALTER DATABASE app SET TABLESPACE pg_default');
	own('postgres', 'ALTER DATABASE app RENAME TO app2');
	$node->stop('immediate');
	$node->start;
	@new = tokens('app2', 'i', 5);
	cmp_ok(min_of(@new), '>', max_of(@old),
		'SET TABLESPACE back, RENAME, immediate shutdown: new tokens are greater');
	push @old, @new;
	# And a snapshot taken before the moves, under the old OID again.
	own('postgres', 'DROP DATABASE app2');
	own('postgres', "CREATE DATABASE app TEMPLATE s1 STRATEGY FILE_COPY OID = $oid");
	@new = tokens('app', 'j', 5);
	cmp_ok(min_of(@new), '>', max_of(@old), 'after the moves, the first snapshot with the old OID: new tokens are greater');
}

# The incarnation does not stop a counter from counting down: after its first
# token, a database's tokens follow one another (a counter that took every
# page for a copy would start fresh at the clock bound for each).
{
	tokens('app', 'k', 3);
	my @t = tokens('app', 'l', 100);
	my $steps = 0;
	for my $i (1 .. $#t) { $steps++ if $t[$i] == $t[ $i - 1 ] + 1; }
	is($steps, $#t, 'a counter of the current incarnation counts down: 100 tokens in a row are consecutive');
}

$node->stop;
done_testing();

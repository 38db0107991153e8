# Counted locks, what needs timing: the waiter at the head of a counted
# resource's queue waits in the lock manager for the permit granted longest
# ago, and sees the release of any other permit within a round (160 ms at
# most); a leased permit whose holder goes silent goes to the next waiter; a
# cycle of permit waits is not a deadlock PostgreSQL detects, and a bounded
# wait ends it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use FindBin;
use lib $FindBin::Bin;
use IPC::Run;
use FencingTAP qw(send_nb wait_tag psql_sqlstate);

my $node = PostgreSQL::Test::Cluster->new('permits');
$node->init;
$node->append_conf('postgresql.conf', "log_min_messages = warning\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

sub session { return $node->background_psql('postgres', on_error_stop => 0); }
sub sql { return $node->safe_psql('postgres', $_[0]); }
sub finish
{
	my ($s) = @_;
	eval { $s->quit; };
	eval { $s->{run}->kill_kill; };
	return;
}
sub waiting
{
	my ($resource, $n) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) >= $n FROM fencing.locks WHERE resource = '$resource' AND NOT granted")
	  or die "no waiter for $resource";
	return;
}

# ---- the release of a permit other than the oldest ----------------------------------

my ($a, $b, $w) = (session(), session(), session());
$a->query_safe("SELECT fencing.acquire('pm:pool', permits => 2)");   # permit 1, the oldest
$b->query_safe("SELECT fencing.acquire('pm:pool', permits => 2)");   # permit 2
send_nb($w, "SELECT (SELECT permit FROM fencing.locks WHERE pid = pg_backend_pid() AND granted) "
	  . "FROM (SELECT fencing.acquire('pm:pool', permits => 2)) x", 'got');
waiting('pm:pool', 1);
sleep 1;    # the head's rounds have grown to their longest
my $released_at = time;
$b->query_safe("SELECT fencing.release('pm:pool')");
my ($permit, $err) = wait_tag($w, 'got');
my $took = time - $released_at;
is($err, '', 'the waiter is granted a permit released after it began to wait');
is($permit, '2', 'the one released (not the oldest, which it waited for in the lock manager)');
cmp_ok($took, '<', 1.0, "within a round ($took s)");
$a->query_safe('SELECT fencing.release_all()');
$w->query_safe('SELECT fencing.release_all()');

# ---- a leased permit of a silent holder ---------------------------------------------------

$a->query_safe("SELECT fencing.acquire('pm:lease', permits => 1, lease => '1 s')");
my $a_pid = $a->query_safe('SELECT pg_backend_pid()');
my $t0 = time;
send_nb($w, "SELECT fencing.acquire('pm:lease', permits => 1) IS NOT NULL", 'got');
my ($got, $err2) = wait_tag($w, 'got');
is($got, 't', 'a silent leased holder loses its permit to the waiter');
cmp_ok(time - $t0, '<', 5, 'within its lease and a round');
is(sql("SELECT count(*) FROM pg_stat_activity WHERE pid = $a_pid"), '0', 'the silent holder was ended');
finish($a);
$w->query_safe('SELECT fencing.release_all()');

# ---- a cycle of permit waits: bounded by wait ---------------------------------------------

my ($c, $d) = (session(), session());
$c->query_safe("SELECT fencing.acquire('pm:x', permits => 1)");
$d->query_safe("SELECT fencing.acquire('pm:y', permits => 1)");
send_nb($c, "SELECT fencing.acquire('pm:y', permits => 1, wait => '2 s')", 'c');
send_nb($d, "SELECT fencing.acquire('pm:x', permits => 1, wait => '3 s')", 'd');
my (undef, $err_c) = wait_tag($c, 'c');
like($err_c, qr/could not acquire fencing lock on resource "pm:y"/, 'the first bounded wait of the cycle ends (55P03)');
$c->query_safe('SELECT fencing.release_all()');
my ($out_d, $err_d) = wait_tag($d, 'd');
is($err_d, '', 'and the other waiter is then granted');
finish($_) for ($b, $c, $d, $w);

# ---- many sessions taking and giving back permits: never a false 55T01 ------------------
#
# Holders give their permits back while the head of the queue checks the
# count; a transaction's end releases a holder's marks in no particular order.
for my $case (['session', q{SELECT fencing.acquire('pm:hot', permits => 4);
SELECT fencing.release('pm:hot');}],
	['transaction', q{BEGIN;
SELECT fencing.acquire_xact('pm:hotx', permits => 1);
COMMIT;}])
{
	my ($scope, $script) = @$case;
	my $file = "${PostgreSQL::Test::Utils::tmp_check}/permits_$scope.sql";
	PostgreSQL::Test::Utils::append_to_file($file, "$script\n");
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'pgbench', '-n', '-c', '8', '-T', '4', '-f', $file, '-d', $node->connstr('postgres') ],
		'>', \$out, '2>', \$err);
	my ($done) = $out =~ /number of transactions actually processed: (\d+)/;
	unlike($err, qr/another count of permits|55T01/, "$scope scope, 8 sessions: no false count mismatch");
	ok(defined $done && $done > 100, "$scope scope: the sessions took and gave back permits (" . ($done // 'none') . ' times)');
	unlike($out . $err, qr/aborted|error/i, "$scope scope: no client aborted");
}

$node->stop;
done_testing();

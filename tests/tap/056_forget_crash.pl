# fencing.forget -> acquire -> crash -> restart.
#
# Resources are acquired and released, forgotten (in a transaction with
# synchronous_commit = off, so its commit may not be flushed), acquired again
# by another session (new fence state rows), and the server crashes at once.
# After the restart, in every round: no resource has two fence state rows
# (the new row implies the deletion of the old one), the fence state's index
# agrees with its heap (amcheck), and each resource's next token is greater
# than every token handed out before the crash, with current() returning it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('forget_crash');
$node->init;
$node->append_conf('postgresql.conf', qq(
log_statement = none
log_min_messages = warning
fencing.log_ahead = 16
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing; CREATE EXTENSION amcheck;');

my $n = 20;
for my $round (1 .. 3)
{
	my $top = $node->safe_psql('postgres', qq{
SELECT max(t) FROM (SELECT fencing.acquire('f$round:' || g)::bigint AS t FROM generate_series(1, $n) g) x;
SELECT fencing.release_all();
});
	($top) = split /\n/, $top;
	my $forgotten = $node->safe_psql('postgres', q{SET synchronous_commit = off; SELECT fencing.forget('0');});
	cmp_ok($forgotten, '>=', $n, "round $round: forget removed the idle resources ($forgotten)");
	# Another session acquires half of them again, then the server crashes.
	my $again = $node->safe_psql('postgres', qq{
SELECT max(t) FROM (SELECT fencing.acquire('f$round:' || g)::bigint AS t FROM generate_series(1, $n / 2) g) x;
});
	$top = $again if $again > $top;
	$node->stop('immediate');
	$node->start;

	is($node->safe_psql('postgres', q{SELECT count(*) FROM (SELECT key FROM fencing.fence_state GROUP BY key HAVING count(*) > 1) d}),
		'0', "round $round: no resource has two fence state rows after the crash");
	is($node->safe_psql('postgres', q{SELECT bt_index_check('fencing.fence_state_pkey', true)::text}), '',
		"round $round: the fence state's index agrees with its heap");
	my $next = $node->safe_psql('postgres', qq{
SELECT min(t) FROM (SELECT fencing.acquire('f$round:' || g)::bigint AS t FROM generate_series(1, $n) g) x;
});
	cmp_ok($next, '>', $top, "round $round: every next token is greater than every token before the crash ($next > $top)");
	is($node->safe_psql('postgres', qq{
SELECT count(*) FROM generate_series(1, $n) g
 WHERE fencing.current('f$round:' || g) IS NULL OR fencing.current('f$round:' || g) <= $top}), '0',
		"round $round: current() returns the new tokens");
	$node->safe_psql('postgres', 'SELECT fencing.release_all()');
}

$node->stop;
done_testing();

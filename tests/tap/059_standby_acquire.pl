# Acquisition on a standby always answers 25006 (read-only), whatever the
# standby's synchronous_standby_names and fencing.require_sync_standby say.
#
# An HA manager such as Patroni runs its replicas with an empty
# synchronous_standby_names and the same fencing settings as the primary
# (fencing.require_sync_standby = on): a client that lands on a replica must
# get the read-only answer (retry on the primary), not the hint to configure a
# synchronous standby. Every form of acquisition is tried, with the setting on
# and off, with synchronous_standby_names empty and '*', and no lock is left
# held on the standby afterwards.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::Bin;
use FencingTAP qw(psql_sqlstate);

my $db = 'postgres';
my $primary = PostgreSQL::Test::Cluster->new('ro_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "log_min_messages = warning\n");
$primary->start;
$primary->safe_psql($db, 'CREATE EXTENSION fencing');
$primary->safe_psql($db, "SELECT fencing.acquire('ro:seen'), fencing.release('ro:seen')");
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('ro_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

my @forms = (
	[ 'acquire',          "SELECT fencing.acquire('ro:1')" ],
	[ 'acquire (wait)',   "SELECT fencing.acquire('ro:1', wait => '1 s')" ],
	[ 'acquire (lease)',  "SELECT fencing.acquire('ro:1', lease => '5 s')" ],
	[ 'acquire reentrant', "SELECT fencing.acquire('ro:seen', reentrant => true)" ],
	[ 'try_acquire',      "SELECT fencing.try_acquire('ro:1')" ],
	[ 'acquire_xact',     "BEGIN; SELECT fencing.acquire_xact('ro:1'); COMMIT" ],
	[ 'try_acquire_xact', "BEGIN; SELECT fencing.try_acquire_xact('ro:1'); COMMIT" ],
);

for my $conf ([ 'on', '' ], [ 'on', '*' ], [ 'off', '' ], [ 'off', '*' ])
{
	my ($require, $names) = @$conf;
	$standby->append_conf('postgresql.conf',
		"fencing.require_sync_standby = $require\nsynchronous_standby_names = '$names'\n");
	$standby->reload;
	my $shown = $standby->safe_psql($db,
		"LOAD 'fencing'; SELECT current_setting('fencing.require_sync_standby') || '/' || current_setting('synchronous_standby_names')");
	is($shown, "$require/$names", "standby settings: require_sync_standby = $require, synchronous_standby_names = '$names'");
	for my $f (@forms)
	{
		my ($label, $sql) = @$f;
		my ($state, $out, $err) = psql_sqlstate($standby, $db, $sql);
		is($state, '25006',
			"standby, require_sync_standby = $require, synchronous_standby_names = '$names': $label raises 25006")
		  or diag($err);
	}
	is($standby->safe_psql($db, 'SELECT count(*) FROM fencing.locks'), '0',
		"standby ($require, '$names'): no fencing lock is left held");
}

# The primary still issues tokens.
my $t = $primary->safe_psql($db, "SELECT fencing.acquire('ro:1') > fencing.current('ro:seen')");
is($t, 't', 'the primary still issues tokens');

done_testing();

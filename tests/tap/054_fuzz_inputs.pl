# Bad input: generated inputs for the token input function (text and binary)
# and for the resource argument of acquire / try_acquire_xact / current /
# validate / resource_key, over one connection (tests/fuzz/input_fuzz.cpp, a
# libpq program with prepared statements). No backend may crash, the same
# connection keeps working, every failure has a SQLSTATE of the expected set,
# and where the server sees the bytes as sent the outcome agrees with a model
# of the documented rules. Then the pure C++ core runs under libFuzzer
# (tests/fuzz/run.sh: 5 s in the quick profile, 60 s in the long one).
#
# FENCING_FUZZ_SEED fixes the seed (printed either way) to reproduce a run.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $profile = $ENV{FENCING_PROFILE} // 'quick';
my $count = $profile eq 'long' ? 1_000_000 : 100_000;
my $seed = $ENV{FENCING_FUZZ_SEED} // (time() * 1000 % 1_000_000_007);
$seed = int($seed);
my $fuzzdir = "$FindBin::Bin/../fuzz";

my $node = PostgreSQL::Test::Cluster->new('fuzz');
$node->init;
# No statement logging: the inputs include multi-megabyte strings. LOG level
# keeps crash reports ("terminated by signal") in the log.
$node->append_conf('postgresql.conf', qq(
log_statement = none
log_min_messages = log
log_min_error_statement = panic
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# Build the client.
my $bin = $node->basedir . '/input_fuzz';
my $incdir = `pg_config --includedir`;
chomp $incdir;
my $cxx = $ENV{CXX} // 'g++';
my ($stdout, $stderr);
my $built = IPC::Run::run([ $cxx, '-std=c++17', '-O2', "-I$incdir", '-o', $bin, "$fuzzdir/input_fuzz.cpp", '-lpq' ],
	'>', \$stdout, '2>', \$stderr);
ok($built, 'input_fuzz builds') or diag $stderr;

SKIP:
{
	skip 'input_fuzz did not build', 9 unless $built;
	note "seed $seed, $count inputs";
	my $t0 = time;
	my $rc = IPC::Run::run([ $bin, $node->connstr('postgres'), $count, $seed ], '>', \$stdout, '2>', \$stderr);
	my $elapsed = time - $t0;
	note $stdout;
	diag $stderr if $stderr ne '';
	my %r = $stdout =~ /^(\w+) (\S+)/mg;
	note sprintf("%d inputs in %.1f s", $r{inputs} // 0, $elapsed);
	cmp_ok($r{inputs} // 0, '>=', $count, "$count generated inputs sent (seed $seed)");
	is($r{connection_lost}, '0', 'the connection never broke');
	is($r{same_backend}, '1', 'the same backend answered from first to last input, and still acquires');
	is($r{unexpected}, '0', 'every failure has an expected SQLSTATE')
	  or diag join("\n", $stdout =~ /^note (.*)$/mg);
	is($r{mismatches}, '0', 'every outcome agrees with the documented rules')
	  or diag join("\n", $stdout =~ /^note (.*)$/mg);
	is($r{advisory_locks_left}, '0', 'no lock left behind');
	ok($rc, 'input_fuzz exit status 0');
	my @states = $stdout =~ /^sqlstate (\S+)/mg;
	ok(scalar(@states) >= 6, 'failures of several kinds were provoked (' . join(' ', @states) . ')');
	my $log = slurp_file($node->logfile);
	unlike($log, qr/terminated by signal|was terminated|PANIC|TRAP:|server process .* exited with exit code [^0]/,
		'the server log reports no crashed backend');
}

# The server is still up and consistent.
is($node->safe_psql('postgres', q{SELECT count(*) FROM fencing.fence_state WHERE token <= 0 OR resource = ''}),
	'0', 'fence_state holds no invalid row');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM (SELECT key FROM fencing.fence_state GROUP BY key HAVING count(*) > 1) d}),
	'0', 'fence_state holds one row per key');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM fencing.fence_state WHERE key <> fencing.resource_key(resource)}),
	'0', 'every fence_state key is the key of its resource');

# The pure core under libFuzzer.
my $fuzz_tmp = $node->basedir . '/libfuzzer';
mkdir $fuzz_tmp;
my $t0 = time;
my $rc = IPC::Run::run([ 'bash', "$fuzzdir/run.sh" ], '>', \$stdout, '2>', \$stderr,
	init => sub { $ENV{FENCING_TMP} = $fuzz_tmp; $ENV{FENCING_PROFILE} = $profile; });
my ($last) = $stdout =~ /(token_fuzz: [^\n]*)\s*$/;
$last //= '(no summary)';
note sprintf("%s (%.0f s with the build)", $last, time - $t0);
if ($last =~ /skipped/)
{
	SKIP: { skip $last, 1; }
}
else
{
	ok($rc && $last =~ /: ok$/, "libFuzzer over the core: $last") or diag "$stdout\n$stderr";
}

$node->stop;
done_testing();

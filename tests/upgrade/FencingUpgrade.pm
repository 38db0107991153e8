# Helpers of the upgrade tests in this directory (update.pl: ALTER EXTENSION
# fencing UPDATE from an earlier release; pg_upgrade.pl: a major upgrade of
# PostgreSQL with fencing in it).
#
#   catalog($node, $db)            the extension as the catalogs see it
#   catalog_differences($a, $b)    what differs between two of those
#   install_package($pkg, $inst)   puts a build of fencing into an installation
#   package_scripts($pkg)          the extension scripts of a build
#   bg_safe($session, $sql)        a query in a background psql, without its notes
package FencingUpgrade;

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(basename);
use File::Copy qw(copy);
use JSON::PP ();
use FencingTAP ();

our @EXPORT_OK = qw(bg_safe catalog catalog_differences install_package package_scripts);

# bg_safe($session, $sql): query_safe of a BackgroundPsql session, without the
# notes it writes into the TAP stream for every query.
sub bg_safe
{
	my ($s, $q) = @_;
	return FencingTAP::quietly(sub { $s->query_safe($q) });
}

# What an installation of the extension consists of, one entry per object:
# every member of the extension (pg_describe_object) with its definition, its
# owner, its privileges and initial privileges (pg_init_privs, what pg_dump
# compares against) and its comment; for functions their whole definition
# (pg_get_functiondef: arguments and defaults, result, language and symbol or
# body, volatility, strictness, security, parallel safety, cost and rows,
# SET options); for tables their columns in order (and their comments),
# constraints, indexes, triggers (definition with arguments, enabled state)
# with their comments, and options; for views their query; for sequences
# their parameters (not their value); for the domain its base type, default
# and constraints; for event triggers their event, tags, function and enabled
# state. Plus the extension's own row (version, schema, configuration tables
# and their conditions) and the list of everything in the schema fencing
# with whether it is a member. OIDs never appear, so two databases (or
# clusters) compare.
my $catalog_sql = <<'SQL';
WITH ext AS (
  SELECT e.oid, e.extversion, e.extrelocatable, e.extnamespace, e.extowner, e.extconfig, e.extcondition
    FROM pg_catalog.pg_extension e WHERE e.extname = 'fencing'),
m AS (
  SELECT d.classid, d.objid, d.objsubid
    FROM pg_catalog.pg_depend d JOIN ext ON d.refobjid = ext.oid
   WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'),
detail AS (
  SELECT pg_catalog.pg_describe_object(m.classid, m.objid, m.objsubid) AS obj,
    pg_catalog.concat_ws(E'\n',
      CASE m.classid
      WHEN 'pg_catalog.pg_proc'::pg_catalog.regclass THEN (
        SELECT pg_catalog.concat_ws(E'\n',
                 CASE WHEN p.prokind = 'a' THEN 'aggregate' ELSE pg_catalog.pg_get_functiondef(p.oid) END,
                 'owner ' || p.proowner::pg_catalog.regrole,
                 'acl ' || coalesce(p.proacl::text, 'default'))
          FROM pg_catalog.pg_proc p WHERE p.oid = m.objid)
      WHEN 'pg_catalog.pg_class'::pg_catalog.regclass THEN (
        SELECT pg_catalog.concat_ws(E'\n',
                 pg_catalog.format('relkind %s persistence %s owner %s acl %s options %s rowsecurity %s replident %s',
                        c.relkind, c.relpersistence, c.relowner::pg_catalog.regrole,
                        coalesce(c.relacl::text, 'default'), coalesce(c.reloptions::text, 'none'),
                        c.relrowsecurity, c.relreplident),
                 (SELECT pg_catalog.string_agg(pg_catalog.format('column %s %s notnull %s collation %s storage %s default %s identity %s generated %s acl %s',
                          a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
                          CASE WHEN a.attcollation = 0 THEN '-' ELSE a.attcollation::pg_catalog.regcollation::text END,
                          a.attstorage, coalesce(pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), '-'),
                          a.attidentity, a.attgenerated, coalesce(a.attacl::text, 'default')), E'\n' ORDER BY a.attnum)
                    FROM pg_catalog.pg_attribute a
                    LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                 (SELECT pg_catalog.string_agg(pg_catalog.format('comment on column %s %s', a.attname, de.description), E'\n' ORDER BY a.attnum)
                    FROM pg_catalog.pg_attribute a
                    JOIN pg_catalog.pg_description de ON de.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass
                                                     AND de.objoid = a.attrelid AND de.objsubid = a.attnum
                   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                 (SELECT pg_catalog.string_agg('constraint ' || co.conname || ' ' || pg_catalog.pg_get_constraintdef(co.oid)
                                               || coalesce(' comment ' || pg_catalog.obj_description(co.oid, 'pg_constraint'), ''),
                                               E'\n' ORDER BY co.conname)
                    FROM pg_catalog.pg_constraint co WHERE co.conrelid = c.oid),
                 (SELECT pg_catalog.string_agg('index ' || pg_catalog.pg_get_indexdef(i.indexrelid)
                                               || coalesce(' comment ' || pg_catalog.obj_description(i.indexrelid, 'pg_class'), ''),
                                               E'\n' ORDER BY 1)
                    FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid),
                 (SELECT pg_catalog.string_agg('trigger ' || pg_catalog.pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
                                               || coalesce(' comment ' || pg_catalog.obj_description(t.oid, 'pg_trigger'), ''),
                                               E'\n' ORDER BY t.tgname)
                    FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal),
                 (SELECT pg_catalog.string_agg('policy ' || po.polname, E'\n' ORDER BY po.polname)
                    FROM pg_catalog.pg_policy po WHERE po.polrelid = c.oid),
                 CASE WHEN c.relkind IN ('v', 'm') THEN 'query ' || pg_catalog.pg_get_viewdef(c.oid) END,
                 (SELECT pg_catalog.format('sequence %s start %s increment %s min %s max %s cache %s cycle %s',
                          pg_catalog.format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
                          s.seqcache, s.seqcycle)
                    FROM pg_catalog.pg_sequence s WHERE s.seqrelid = c.oid))
          FROM pg_catalog.pg_class c WHERE c.oid = m.objid)
      WHEN 'pg_catalog.pg_type'::pg_catalog.regclass THEN (
        SELECT pg_catalog.concat_ws(E'\n',
                 pg_catalog.format('type %s base %s notnull %s default %s collation %s owner %s acl %s',
                        t.typtype, pg_catalog.format_type(t.typbasetype, t.typtypmod), t.typnotnull,
                        coalesce(t.typdefault, '-'),
                        CASE WHEN t.typcollation = 0 THEN '-' ELSE t.typcollation::pg_catalog.regcollation::text END,
                        t.typowner::pg_catalog.regrole, coalesce(t.typacl::text, 'default')),
                 (SELECT pg_catalog.string_agg('constraint ' || co.conname || ' ' || pg_catalog.pg_get_constraintdef(co.oid), E'\n' ORDER BY co.conname)
                    FROM pg_catalog.pg_constraint co WHERE co.contypid = t.oid))
          FROM pg_catalog.pg_type t WHERE t.oid = m.objid)
      WHEN 'pg_catalog.pg_event_trigger'::pg_catalog.regclass THEN (
        SELECT pg_catalog.format('event %s tags %s function %s enabled %s owner %s',
                      et.evtevent, coalesce(et.evttags::text, 'all'), et.evtfoid::pg_catalog.regprocedure,
                      et.evtenabled, et.evtowner::pg_catalog.regrole)
          FROM pg_catalog.pg_event_trigger et WHERE et.oid = m.objid)
      WHEN 'pg_catalog.pg_namespace'::pg_catalog.regclass THEN (
        SELECT pg_catalog.format('owner %s acl %s', n.nspowner::pg_catalog.regrole, coalesce(n.nspacl::text, 'default'))
          FROM pg_catalog.pg_namespace n WHERE n.oid = m.objid)
      ELSE 'catalog ' || m.classid::pg_catalog.regclass
      END,
      (SELECT 'comment ' || de.description FROM pg_catalog.pg_description de
        WHERE de.classoid = m.classid AND de.objoid = m.objid AND de.objsubid = 0),
      (SELECT pg_catalog.string_agg(pg_catalog.format('initial privileges (%s) %s %s', ip.objsubid, ip.privtype, ip.initprivs),
                                    E'\n' ORDER BY ip.objsubid)
         FROM pg_catalog.pg_init_privs ip WHERE ip.classoid = m.classid AND ip.objoid = m.objid)) AS detail
    FROM m
  UNION ALL
  SELECT 'extension fencing',
         pg_catalog.format('version %s relocatable %s schema %s owner %s configuration %s conditions %s',
                ext.extversion, ext.extrelocatable, ext.extnamespace::pg_catalog.regnamespace,
                ext.extowner::pg_catalog.regrole,
                (SELECT pg_catalog.string_agg(cfg::pg_catalog.regclass::text, ',' ORDER BY cfg::pg_catalog.regclass::text)
                   FROM pg_catalog.unnest(ext.extconfig) cfg),
                coalesce(ext.extcondition::text, '-'))
    FROM ext
  UNION ALL
  SELECT 'contents of schema fencing',
         pg_catalog.string_agg(o.what || CASE WHEN o.member THEN ' (member)' ELSE ' (not a member)' END, E'\n' ORDER BY o.what)
    FROM (
      SELECT pg_catalog.pg_describe_object(x.classid, x.objid, 0) AS what,
             EXISTS (SELECT 1 FROM m WHERE m.classid = x.classid AND m.objid = x.objid) AS member
        FROM (SELECT 'pg_catalog.pg_class'::pg_catalog.regclass AS classid, c.oid AS objid
                FROM pg_catalog.pg_class c WHERE c.relnamespace = 'fencing'::pg_catalog.regnamespace
                  AND c.relkind NOT IN ('i', 'I', 't')
              UNION ALL
              SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid
                FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'fencing'::pg_catalog.regnamespace
              UNION ALL
              SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid
                FROM pg_catalog.pg_type t WHERE t.typnamespace = 'fencing'::pg_catalog.regnamespace
                  AND t.typtype = 'd'
              UNION ALL
              SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass, o.oid
                FROM pg_catalog.pg_operator o WHERE o.oprnamespace = 'fencing'::pg_catalog.regnamespace) x) o)
SELECT coalesce(pg_catalog.json_object_agg(obj, detail ORDER BY obj), '{}')::text FROM detail
SQL

# catalog($node, $db): { object => its definition } of fencing in $db.
sub catalog
{
	my ($node, $db) = @_;
	my $json = $node->safe_psql($db, $catalog_sql);
	return JSON::PP::decode_json($json);
}

# catalog_differences($a, $b, $name_a, $name_b): one text per object whose
# entries differ (an object only on one side, or its definition's lines that
# differ); none when the two are the same.
sub catalog_differences
{
	my ($a, $b, $na, $nb) = @_;
	$na //= 'first';
	$nb //= 'second';
	my @out;
	my %keys = map { $_ => 1 } (keys %$a, keys %$b);
	for my $k (sort keys %keys)
	{
		if (!exists $b->{$k}) { push @out, "$k: only in $na"; next; }
		if (!exists $a->{$k}) { push @out, "$k: only in $nb"; next; }
		my ($x, $y) = ($a->{$k} // '', $b->{$k} // '');
		next if $x eq $y;
		my @xl = split /\n/, $x;
		my @yl = split /\n/, $y;
		my %in_y = map { $_ => 1 } @yl;
		my %in_x = map { $_ => 1 } @xl;
		my @d = ((map { "  - $_" } grep { !$in_y{$_} } @xl), (map { "  + $_" } grep { !$in_x{$_} } @yl));
		@d = ('  (the same lines in another order)') unless @d;
		push @out, join("\n", "$k: differs (- $na, + $nb)", @d);
	}
	return @out;
}

# The directories of an installation: its module directory and its
# extension directory (pg_config of the installation at $inst).
sub _dirs
{
	my ($inst) = @_;
	my $pg_config = "$inst/bin/pg_config";
	chomp(my $libdir = `"$pg_config" --pkglibdir`);
	chomp(my $sharedir = `"$pg_config" --sharedir`);
	die "pg_config of $inst failed" unless $libdir && $sharedir;
	return ($libdir, "$sharedir/extension");
}

# package_scripts($pkg): the extension scripts (file names) of the build in $pkg.
sub package_scripts
{
	my ($pkg) = @_;
	return sort map { basename($_) } glob("$pkg/extension/fencing--*.sql");
}

# install_package($pkg, $inst): replaces the fencing of the installation at
# $inst (its fencing.so, control file and every script) with the build in
# $pkg (lib/ and extension/, as tests/scripts/releases.sh stages it), as a
# package upgrade does under a running server: the old files are unlinked, not
# overwritten, so backends that loaded the old module keep it.
sub install_package
{
	my ($pkg, $inst) = @_;
	my ($libdir, $extdir) = _dirs($inst);
	for my $f (glob("$libdir/fencing.so"), glob("$extdir/fencing.control"), glob("$extdir/fencing--*.sql"))
	{
		unlink $f or die "cannot remove $f: $!";
	}
	my @lib = glob("$pkg/lib/*");
	my @ext = glob("$pkg/extension/*");
	die "no fencing.so in $pkg/lib" unless grep { basename($_) eq 'fencing.so' } @lib;
	die "no fencing.control in $pkg/extension" unless grep { basename($_) eq 'fencing.control' } @ext;
	for my $f (@lib)
	{
		copy($f, "$libdir/" . basename($f)) or die "cannot copy $f: $!";
		chmod 0755, "$libdir/" . basename($f);
	}
	for my $f (@ext)
	{
		copy($f, "$extdir/" . basename($f)) or die "cannot copy $f: $!";
		chmod 0644, "$extdir/" . basename($f);
	}
	return;
}

1;

// Which tables a protected table's check covers, kept true by DDL: the
// event triggers fencing_ddl_command_start and fencing_ddl_command_end.
//
// A write through a table reaches its partitions and its inheritance
// children. PostgreSQL clones a partitioned table's row triggers into each
// partition (existing, created or attached later) and drops the clone when a
// partition is detached; it gives inheritance children nothing. So:
//
//  * A table that becomes an inheritance child of a protected table (CREATE
//    TABLE ... INHERITS, ALTER TABLE ... INHERIT) gets the parent's check as
//    its own trigger, and so do its own children; the counter moves past the
//    tokens it holds. Refused: a foreign table, a table protected with other
//    settings, a table whose protected parents differ.
//  * A table ATTACHed as a partition of a protected table: the counter moves
//    past the tokens it holds (beyond the clock bound the ATTACH is refused, as protect()
//    refuses such a table). If it is protected on its own, its own check is
//    dropped first (ddl_command_start), so that the clone, which has the
//    same name, can take its place.
//  * A partition DETACHed from a protected table keeps the check as its own
//    trigger until someone unprotects it.
//  * Tombstones are kept under the hierarchy's owner (tombstones.hpp): a
//    table that joins it (ATTACH, INHERIT) brings its own along; one that
//    leaves it (DETACH, NO INHERIT) leaves those of the keys deleted while
//    it belonged to it behind, and records its own from then on.
//
// The triggers run with the rights of the role that runs the DDL, which owns
// the tables concerned (PostgreSQL requires it) but needs nothing of fencing:
// the check is installed by the OID of fencing.enforce, without a lookup in
// schema fencing. What they cannot do is refused with the DDL.
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/inheritance.hpp"
#include "pg/rejections.hpp"
#include "pg/tombstones.hpp"

extern "C" {
#include "catalog/dependency.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "tcop/deparse_utility.h"
#include "utils/fmgroids.h"
}

extern "C" PGDLLEXPORT Datum fencing_advance_past_table(PG_FUNCTION_ARGS);

using namespace fencing;
using namespace fencing::pg;

namespace {

constexpr const char* kCheckName = "~fencing_enforce";

// A table's fencing check: its trigger "~fencing_enforce" on fencing.enforce.
struct Check {
    bool found;
    Oid oid;
    Oid parent;   // the partitioned table's trigger it is a clone of, or InvalidOid
    bytea* args;  // pg_trigger.tgargs (the arguments, each ended by a NUL)
};

Check check_of(Oid relid, Oid enforce) {
    Check c{false, InvalidOid, InvalidOid, nullptr};
    Relation tgrel = table_open(TriggerRelationId, AccessShareLock);
    ScanKeyData key[2];
    ScanKeyInit(&key[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    ScanKeyInit(&key[1], Anum_pg_trigger_tgname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum(kCheckName));
    SysScanDesc scan = systable_beginscan(tgrel, TriggerRelidNameIndexId, true, nullptr, 2, key);
    HeapTuple tup = systable_getnext(scan);
    if (HeapTupleIsValid(tup)) {
        Form_pg_trigger t = reinterpret_cast<Form_pg_trigger>(GETSTRUCT(tup));
        if (t->tgfoid == enforce) {
            bool isnull = false;
            Datum args = heap_getattr(tup, Anum_pg_trigger_tgargs, RelationGetDescr(tgrel), &isnull);
            c.found = true;
            c.oid = t->oid;
            c.parent = t->tgparentid;
            c.args = isnull ? nullptr : DatumGetByteaPCopy(args);
        }
    }
    systable_endscan(scan);
    table_close(tgrel, AccessShareLock);
    return c;
}

bool same_settings(const bytea* a, const bytea* b) {
    if (a == nullptr || b == nullptr) return a == b;
    return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
           memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

const char* name_of(Oid relid) {
    const char* n = get_rel_name(relid);
    return n != nullptr ? n : "?";
}

// The N-th (from 0) argument of a check, or "".
const char* check_arg(const bytea* args, int n) {
    if (args == nullptr) return "";
    const char* p = VARDATA_ANY(args);
    const int len = VARSIZE_ANY_EXHDR(args);
    for (int i = 0, start = 0, k = 0; i < len; ++i) {
        if (p[i] != '\0') continue;
        if (k++ == n) return pnstrdup(p + start, i - start);
        start = i + 1;
    }
    return "";
}

// Installs the check with the given arguments on a table, as CREATE TRIGGER
// would (a partitioned table's partitions get their clones).
void install_check(Oid relid, const bytea* args, Oid enforce) {
    // With tombstones, the table needs a primary key to remember deleted
    // rows by (a child of legacy inheritance does not inherit its parent's),
    // and must not be temporary (PostgreSQL drops a temporary table at the
    // end of its session without event triggers, so its tombstones would
    // stay behind).
    if (strcmp(check_arg(args, 4), "true") == 0 && get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("temporary table \"%s\" cannot carry the check of a table protected with tombstones",
                               name_of(relid)),
                        errdetail("PostgreSQL drops a temporary table at the end of its session without running event "
                                  "triggers, so its tombstones would outlive it."),
                        errhint("Use a permanent table, or protect the parent with tombstones => false.")));
    if (strcmp(check_arg(args, 4), "true") == 0)
        if (const char* problem = tombstones::key_problem(relid))
            ereport(ERROR,
                    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                     errmsg("table \"%s\" cannot carry the check of a table protected with tombstones", name_of(relid)),
                     errdetail("%s Tombstones remember deleted rows by their primary key.", problem),
                     errhint("Give it a primary key (CREATE TABLE ... (PRIMARY KEY (...)) INHERITS (...)), or "
                             "protect the parent with tombstones => false.")));
    if (strcmp(check_arg(args, 4), "true") == 0)
        tombstones::refuse_other_key(relid, tombstones::owner_of(relid, enforce));
    CreateTrigStmt* stmt = makeNode(CreateTrigStmt);
    stmt->replace = false;
    stmt->isconstraint = false;
    stmt->trigname = pstrdup(kCheckName);
    stmt->relation = makeRangeVar(get_namespace_name(get_rel_namespace(relid)), pstrdup(name_of(relid)), -1);
    stmt->funcname = list_make2(makeString(pstrdup("fencing")), makeString(pstrdup("enforce")));
    stmt->args = NIL;
    if (args != nullptr) {
        const char* p = VARDATA_ANY(args);
        const int len = VARSIZE_ANY_EXHDR(args);
        for (int i = 0, start = 0; i < len; ++i) {
            if (p[i] != '\0') continue;
            stmt->args = lappend(stmt->args, makeString(pnstrdup(p + start, i - start)));
            start = i + 1;
        }
    }
    stmt->row = true;
    stmt->timing = TRIGGER_TYPE_BEFORE;
    stmt->events = TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE;
    stmt->columns = NIL;
    stmt->whenClause = nullptr;
    stmt->transitionRels = NIL;
    stmt->deferrable = false;
    stmt->initdeferred = false;
    stmt->constrrel = nullptr;
    // Enabled ALWAYS, as protect() enables it (1.2): it fires in replica
    // mode too, for logical replication's apply workers.
    (void)CreateTriggerFiringOn(stmt, "", relid, InvalidOid, InvalidOid, InvalidOid, enforce, InvalidOid, nullptr,
                                false, false, TRIGGER_FIRES_ALWAYS);
    CommandCounterIncrement();
}

// (1.2) No table that carries the check may be unlogged: crash recovery
// empties an unlogged table without firing triggers and leaves no
// tombstones, so a stale write could create its rows again. RELID and every
// table a write through it reaches (its partitions and inheritance
// children, which carry the check when it does).
void refuse_unlogged(Oid relid, Oid enforce, bool made_unlogged) {
    ListCell* lc;
    foreach (lc, find_all_inheritors(relid, NoLock, nullptr)) {
        const Oid rel = lfirst_oid(lc);
        if (get_rel_persistence(rel) != RELPERSISTENCE_UNLOGGED || !check_of(rel, enforce).found) continue;
        if (made_unlogged && rel == relid)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                            errmsg("protected table \"%s\" cannot be made unlogged", name_of(rel)),
                            errdetail("Crash recovery empties an unlogged table without firing triggers and leaves "
                                      "no tombstones, so a stale write could create its rows again."),
                            errhint("Keep it logged, or unprotect it first with fencing.unprotect.")));
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("unlogged table \"%s\" cannot be protected", name_of(rel)),
                        errdetail("Crash recovery empties an unlogged table without firing triggers and leaves no "
                                  "tombstones, so a stale write could create its rows again."),
                        errhint("Make it a logged table first: ALTER TABLE ... SET LOGGED.")));
    }
}

// Moves the counter past the largest token of a protected table (and of
// everything a scan of it reads), as protect() does; 22003 beyond the clock bound.
void advance_past_tokens(Oid relid) {
    LOCAL_FCINFO(fcinfo, 1);
    InitFunctionCallInfoData(*fcinfo, nullptr, 1, InvalidOid, nullptr, nullptr);
    fcinfo->args[0].value = ObjectIdGetDatum(relid);
    fcinfo->args[0].isnull = false;
    (void)fencing_advance_past_table(fcinfo);
}

// What the DDL was doing, for the context line of an error raised here.
struct Doing {
    const char* what;
    Oid rel;
    Oid other;
};

void doing_context(void* arg) {
    const Doing* d = static_cast<const Doing*>(arg);
    errcontext("fencing: %s \"%s\" %s protected table \"%s\"", d->what, name_of(d->rel),
               strcmp(d->what, "detaching") == 0 ? "from" : "to", name_of(d->other));
}

// A table that is (or just became) an inheritance child: if a parent is
// protected, the table and its own children must carry the parent's check.
void cover_child(Oid relid, bool advance, Oid enforce) {
    const char relkind = get_rel_relkind(relid);
    if (relkind != RELKIND_RELATION && relkind != RELKIND_FOREIGN_TABLE) return;
    if (get_rel_relispartition(relid)) return;  // PostgreSQL clones the check into partitions
    const bytea* args = nullptr;
    Oid from = InvalidOid;
    ListCell* lc;
    foreach (lc, inheritance_parents(relid)) {
        const Oid parent = lfirst_oid(lc);
        Check pc = check_of(parent, enforce);
        if (!pc.found) continue;
        if (args == nullptr) {
            args = pc.args;
            from = parent;
        } else if (!same_settings(args, pc.args)) {
            ereport(ERROR,
                    (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                     errmsg("table \"%s\" inherits from protected tables with different settings", name_of(relid)),
                     errdetail("\"%s\" and \"%s\" are protected with different settings; a write through either "
                               "reaches the rows of \"%s\", which can carry one check only.",
                               name_of(from), name_of(parent), name_of(relid)),
                     errhint("Protect the parent tables with the same settings.")));
        }
    }
    if (from == InvalidOid) return;
    // With tombstones, its writes are judged under one hierarchy's owner.
    if (strcmp(check_arg(args, 4), "true") == 0)
        if (const Oid other = tombstones::other_owner_of(relid, enforce); OidIsValid(other))
            rejections::two_hierarchies(relid, tombstones::owner_of(relid, enforce), other);
    if (relkind == RELKIND_FOREIGN_TABLE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("foreign table \"%s\" cannot inherit from protected table \"%s\"", name_of(relid),
                               name_of(from)),
                        errdetail("Writes through \"%s\" would reach the foreign table, which cannot be protected.",
                                  name_of(from)),
                        errhint("Use a table, or unprotect \"%s\" first.", name_of(from))));
    Check own = check_of(relid, enforce);
    if (own.found) {
        if (!same_settings(own.args, args))
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("table \"%s\" is protected with other settings than its parent \"%s\"",
                                   name_of(relid), name_of(from)),
                            errdetail("Writes through \"%s\" reach the rows of \"%s\", which must be checked with the "
                                      "settings of \"%s\".",
                                      name_of(from), name_of(relid), name_of(from)),
                            errhint("Protect \"%s\" with the same settings first, or unprotect it.", name_of(relid))));
    } else {
        if (pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER) != ACLCHECK_OK)
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                            errmsg("permission denied to protect table \"%s\"", name_of(relid)),
                            errdetail("Writes through protected table \"%s\" reach the rows of \"%s\": its check must "
                                      "be installed, which needs the TRIGGER privilege on it.",
                                      name_of(from), name_of(relid)),
                            errhint("Run the command as the owner of \"%s\".", name_of(relid))));
        install_check(relid, args, enforce);
    }
    foreach (lc, find_inheritance_children(relid, NoLock)) cover_child(lfirst_oid(lc), false, enforce);
    if (advance) advance_past_tokens(relid);
}

// A table that just joined a protected hierarchy (ATTACH PARTITION,
// INHERIT), with its own partitions or children: the tombstones they kept
// under themselves (protected alone, or detached before) join those of the
// hierarchy's owner, under which their writes look from now on. Writers of
// the tables are waited for first, so that no tombstone is recorded under
// its old owner behind the move.
void join_tombstones(Oid relid, Oid enforce) {
    const Oid owner = tombstones::owner_of(relid, enforce);
    if (owner == relid) return;
    List* tables = find_all_inheritors(relid, ShareLock, nullptr);
    const bool with_tombstones = strcmp(check_arg(check_of(owner, enforce).args, 4), "true") == 0;
    ListCell* lc;
    foreach (lc, tables) {
        if (with_tombstones) tombstones::refuse_other_key(lfirst_oid(lc), owner);
        (void)tombstones::move_table(lfirst_oid(lc), owner);
    }
}

// A table just removed from a hierarchy (NO INHERIT, DETACH PARTITION), with
// its own partitions or children (which NO INHERIT does not lock): a
// statement writing into them that began before judged its rows under the
// hierarchy's owner and records its tombstones there. Such writers are
// waited for, so that none is still at it once the change commits, when
// the tables record and judge their keys under their new owner.
void wait_for_leavers(Oid relid, Oid enforce) {
    const Check c = check_of(relid, enforce);
    if (!c.found || strcmp(check_arg(c.args, 4), "true") != 0) return;
    (void)find_all_inheritors(relid, ShareLock, nullptr);
}

// A partition just detached from PARENT: it keeps the check, as its own.
void keep_detached(Oid parent, Oid part, Oid enforce) {
    Check pc = check_of(parent, enforce);
    if (!pc.found || check_of(part, enforce).found) return;
    if (pg_class_aclcheck(part, GetUserId(), ACL_TRIGGER) != ACLCHECK_OK)
        ereport(ERROR,
                (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                 errmsg("cannot detach partition \"%s\" from protected table \"%s\"", name_of(part), name_of(parent)),
                 errdetail("A partition detached from a protected table stays protected until it is "
                           "unprotected itself; its check must be installed, which needs the TRIGGER "
                           "privilege on it."),
                 errhint("Detach it as its owner, or unprotect \"%s\" first.", name_of(parent))));
    install_check(part, pc.args, enforce);
}

// The primary keys an ALTER TABLE that may change one found at its start
// (ddl_command_start), for its end to compare (ddl_command_end): tombstones
// are kept by a hash of the key's values that depends on the primary key's
// columns, their order, collations and hash functions, so that under another
// primary key an INSERT of a key deleted before would not meet its
// tombstone. Reset by every ALTER TABLE's start.
struct KeyBefore {
    Oid relid;
    char* fingerprint;
};
MemoryContext keys_cxt = nullptr;
List* keys_before = NIL;  // of KeyBefore*, in keys_cxt

bool may_change_key(const AlterTableStmt* stmt) {
    ListCell* lc;
    foreach (lc, stmt->cmds) {
        const AlterTableCmd* at = static_cast<const AlterTableCmd*>(lfirst(lc));
        if (!IsA(at, AlterTableCmd)) return true;
        switch (at->subtype) {
            case AT_AddConstraint:
            case AT_AddIndex:
            case AT_AddIndexConstraint:
            case AT_AlterColumnType:
            case AT_DropConstraint:
            case AT_DropColumn:
                return true;
            default:
                break;
        }
    }
    return false;
}

void record_key(Oid t) {
    const char relkind = get_rel_relkind(t);
    if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE) return;
    char* fingerprint = tombstones::key_fingerprint(t);
    MemoryContext old = MemoryContextSwitchTo(keys_cxt);
    KeyBefore* kb = static_cast<KeyBefore*>(palloc(sizeof(KeyBefore)));
    kb->relid = t;
    kb->fingerprint = pstrdup(fingerprint);
    keys_before = lappend(keys_before, kb);
    MemoryContextSwitchTo(old);
}

void reset_keys() {
    if (keys_cxt == nullptr)
        keys_cxt =
            AllocSetContextCreate(TopMemoryContext, "fencing primary keys before ALTER TABLE", ALLOCSET_SMALL_SIZES);
    keys_before = NIL;
    MemoryContextReset(keys_cxt);
}

// Every table with tombstones, and those of its hierarchy.
void record_all_with_tombstones() {
    for (Oid t = tombstones::next_table_with_tombstones(InvalidOid); OidIsValid(t);
         t = tombstones::next_table_with_tombstones(t)) {
        if (get_rel_name(t) == nullptr) continue;
        ListCell* lc;
        foreach (lc, find_all_inheritors(t, NoLock, nullptr)) record_key(lfirst_oid(lc));
    }
}

// Whether RELID's row type, or an array of it, is used (by a column, a
// composite type's attribute, a domain, a range): a change of RELID's
// columns changes how a key of that type hashes.
bool rowtype_used(Oid relid) {
    const Oid type = get_rel_type_id(relid);
    if (!OidIsValid(type)) return false;
    const Oid types[2] = {type, get_array_type(type)};
    Relation dep = table_open(DependRelationId, AccessShareLock);
    bool used = false;
    for (int i = 0; i < 2 && !used; ++i) {
        if (!OidIsValid(types[i])) continue;
        ScanKeyData key[2];
        ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
                    ObjectIdGetDatum(TypeRelationId));
        ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(types[i]));
        SysScanDesc scan = systable_beginscan(dep, DependReferenceIndexId, true, nullptr, 2, key);
        HeapTuple tup;
        while (!used && HeapTupleIsValid(tup = systable_getnext(scan)))
            used = reinterpret_cast<Form_pg_depend>(GETSTRUCT(tup))->deptype == DEPENDENCY_NORMAL;
        systable_endscan(scan);
    }
    table_close(dep, AccessShareLock);
    return used;
}

// Whether a DROP may drop what a key depends on beyond the key's own table:
// an operator class or family, or anything with CASCADE (DROP OWNED drops
// what it drops); not DROP EXTENSION fencing.
bool drop_may_change_keys(const Node* tree) {
    if (IsA(tree, DropOwnedStmt)) return true;
    const DropStmt* drop = reinterpret_cast<const DropStmt*>(tree);
    // A key type's hash function goes with its operator class or family.
    if (drop->removeType == OBJECT_OPCLASS || drop->removeType == OBJECT_OPFAMILY) return true;
    if (drop->behavior != DROP_CASCADE) return false;
    if (drop->removeType == OBJECT_EXTENSION) {
        ListCell* lc;
        foreach (lc, drop->objects)
            if (IsA(lfirst(lc), String) && strcmp(strVal(lfirst(lc)), "fencing") == 0) return false;
    }
    return true;
}

// What an ALTER TABLE, ALTER FOREIGN TABLE or ALTER TYPE may change the
// primary key of. ALTER TABLE: the tables it reaches, when it has a command
// that may change a primary key. ALTER TYPE of a composite type's
// attributes (CASCADE reaches the tables using the type, typed tables among
// them), and a change of the columns of a table whose row type is used
// (possibly as a key column's type): every table with tombstones, and those
// of its hierarchy.
void record_keys(const AlterTableStmt* stmt, ObjectType type) {
    reset_keys();
    if (type == OBJECT_TYPE) {
        record_all_with_tombstones();
        return;
    }
    if (stmt->relation == nullptr) return;
    const Oid target = RangeVarGetRelid(stmt->relation, NoLock, true);
    if (!OidIsValid(target)) return;
    // (A column added to or dropped from TARGET reaches its inheritors too.)
    ListCell* lc;
    foreach (lc, find_all_inheritors(target, NoLock, nullptr)) {
        if (!rowtype_used(lfirst_oid(lc))) continue;
        record_all_with_tombstones();
        break;
    }
    if (type != OBJECT_TABLE || !may_change_key(stmt) || get_rel_relkind(target) == RELKIND_FOREIGN_TABLE) return;
    foreach (lc, find_all_inheritors(target, NoLock, nullptr)) record_key(lfirst_oid(lc));
}

// (1.2) Primary keys changed in the current transaction, each with the
// fingerprint it had before the transaction's first change of it, judged
// when the transaction commits or prepares: a table dropped by then (as
// pg_restore --clean drops its key, then the table) keeps nothing to
// refuse, nor one given its old key back, if no tombstone was written
// since that first change (one hashed under a key in between would not
// meet its key's INSERTs; any tombstone counts). In TopTransactionContext.
struct KeyChanged {
    Oid relid;
    char* fingerprint;
    std::uint64_t tombstone_writes;
};
List* keys_changed = NIL;  // of KeyChanged*
bool keys_callback_registered = false;

void judge_changed_keys() {
    List* changed = keys_changed;
    keys_changed = NIL;
    const Oid enforce = changed != NIL ? enforce_function() : InvalidOid;
    ListCell* lc;
    foreach (lc, changed) {
        const KeyChanged* kb = static_cast<const KeyChanged*>(lfirst(lc));
        if (get_rel_name(kb->relid) == nullptr) continue;
        if (strcmp(tombstones::key_fingerprint(kb->relid), kb->fingerprint) == 0 &&
            tombstones::writes() == kb->tombstone_writes)
            continue;
        const Oid owner = OidIsValid(enforce) ? tombstones::owner_of(kb->relid, enforce) : kb->relid;
        if (tombstones::has_tombstones(owner) || (owner != kb->relid && tombstones::has_tombstones(kb->relid)))
            rejections::key_changed(kb->relid, owner);
    }
    // What the judgement opened (the transaction's own handle may have been
    // closed for the commit already).
    tombstones::close_before_utility();
}

void keys_xact_callback(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            if (keys_changed != NIL) judge_changed_keys();
            break;
        default:
            keys_changed = NIL;  // with TopTransactionContext
            break;
    }
}

// At the end of an ALTER TABLE: a primary key it changed (dropped, made
// again otherwise, a column's type or collation changed, or one given to a
// table without, whose tombstones were hashed under a primary key no longer
// known) is judged at commit (judge_changed_keys): refused there if the
// table still exists with tombstones of its own or its hierarchy's, and
// another key or a tombstone written since the change.
void check_keys(Oid) {
    List* before = keys_before;
    keys_before = NIL;
    ListCell* lc;
    foreach (lc, before) {
        const KeyBefore* kb = static_cast<const KeyBefore*>(lfirst(lc));
        if (get_rel_name(kb->relid) == nullptr) continue;
        if (strcmp(tombstones::key_fingerprint(kb->relid), kb->fingerprint) == 0) continue;
        bool known = false;
        ListCell* lc2;
        foreach (lc2, keys_changed) known = known || static_cast<const KeyChanged*>(lfirst(lc2))->relid == kb->relid;
        if (known) continue;
        if (!keys_callback_registered) {
            RegisterXactCallback(keys_xact_callback, nullptr);
            keys_callback_registered = true;
        }
        MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
        KeyChanged* kept = static_cast<KeyChanged*>(palloc(sizeof(KeyChanged)));
        kept->relid = kb->relid;
        kept->fingerprint = pstrdup(kb->fingerprint);
        kept->tombstone_writes = tombstones::writes();
        keys_changed = lappend(keys_changed, kept);
        MemoryContextSwitchTo(old);
    }
}

// Whether a statement can add a table to, or remove one from, what writes
// through a table reach: CREATE [FOREIGN] TABLE ... INHERITS, ALTER TABLE
// ... [NO] INHERIT / ATTACH PARTITION / DETACH PARTITION, anything in CREATE
// SCHEMA. (CREATE TABLE ... PARTITION OF needs nothing: PostgreSQL clones
// the check.) Other DDL is left at that, without reading its commands.
bool may_change_coverage(const Node* parsetree) {
    if (parsetree == nullptr) return true;
    if (IsA(parsetree, ViewStmt) || IsA(parsetree, DropStmt) || IsA(parsetree, DropOwnedStmt) ||
        IsA(parsetree, AlterOpFamilyStmt) || IsA(parsetree, AlterDomainStmt) || IsA(parsetree, CreateOpClassStmt) ||
        IsA(parsetree, CreateFunctionStmt))
        return false;
    if (IsA(parsetree, CreateStmt) || IsA(parsetree, CreateForeignTableStmt)) {
        const CreateStmt* c = reinterpret_cast<const CreateStmt*>(parsetree);
        // (1.2) An unlogged table, also a partition: it may carry the check.
        if (c->relation != nullptr && c->relation->relpersistence == RELPERSISTENCE_UNLOGGED) return true;
        return c->inhRelations != NIL && c->partbound == nullptr;
    }
    if (IsA(parsetree, AlterTableStmt)) {
        const AlterTableStmt* a = reinterpret_cast<const AlterTableStmt*>(parsetree);
        ListCell* lc;
        foreach (lc, a->cmds) {
            const AlterTableCmd* at = static_cast<const AlterTableCmd*>(lfirst(lc));
            if (!IsA(at, AlterTableCmd)) return true;
            if (at->subtype == AT_AddInherit || at->subtype == AT_DropInherit || at->subtype == AT_AttachPartition ||
                at->subtype == AT_DetachPartition || at->subtype == AT_DetachPartitionFinalize ||
                at->subtype == AT_SetUnLogged)
                return true;
        }
        return false;
    }
    return true;
}

void ddl_command_end(FunctionCallInfo fcinfo) {
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("fencing.ddl_command_end() was not called by the event trigger manager")));
    if (const Node* tree = reinterpret_cast<const EventTriggerData*>(fcinfo->context)->parsetree;
        keys_before != NIL && tree != nullptr &&
        (IsA(tree, AlterTableStmt) || IsA(tree, ViewStmt) || IsA(tree, DropStmt) || IsA(tree, DropOwnedStmt) ||
         IsA(tree, AlterOpFamilyStmt) || IsA(tree, AlterTypeStmt) || IsA(tree, AlterDomainStmt) ||
         IsA(tree, CreateOpClassStmt) || IsA(tree, CreateFunctionStmt)))
        check_keys(enforce_function());
    if (!may_change_coverage(reinterpret_cast<const EventTriggerData*>(fcinfo->context)->parsetree)) return;
    const Oid enforce = enforce_function();
    if (!OidIsValid(enforce)) return;

    // The commands of this DDL, by the relation they altered or created.
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
    if (SPI_execute("SELECT classid, objid, command FROM pg_catalog.pg_event_trigger_ddl_commands()", true, 0) !=
        SPI_OK_SELECT)
        elog(ERROR, "could not read the commands of the event");
    const int n = static_cast<int>(SPI_processed);
    Oid* objid = static_cast<Oid*>(SPI_palloc(sizeof(Oid) * (n + 1)));
    CollectedCommand** cmds = static_cast<CollectedCommand**>(SPI_palloc(sizeof(CollectedCommand*) * (n + 1)));
    int m = 0;
    for (int i = 0; i < n; ++i) {
        HeapTuple row = SPI_tuptable->vals[i];
        TupleDesc d = SPI_tuptable->tupdesc;
        bool n1 = true, n2 = true, n3 = true;
        const Oid classid = DatumGetObjectId(SPI_getbinval(row, d, 1, &n1));
        const Oid obj = DatumGetObjectId(SPI_getbinval(row, d, 2, &n2));
        const Datum cmd = SPI_getbinval(row, d, 3, &n3);
        if (n1 || n2 || n3 || classid != RelationRelationId) continue;
        objid[m] = obj;
        cmds[m] = reinterpret_cast<CollectedCommand*>(DatumGetPointer(cmd));
        ++m;
    }
    SPI_finish();

    for (int i = 0; i < m; ++i) {
        const CollectedCommand* cmd = cmds[i];
        Doing doing{nullptr, objid[i], InvalidOid};
        ErrorContextCallback cb;
        cb.callback = doing_context;
        cb.arg = &doing;
        if (cmd->type == SCT_Simple) {
            // CREATE [FOREIGN] TABLE: INHERITS makes it a child at once.
            cover_child(objid[i], false, enforce);
            // An unlogged partition has the clone of the check already.
            refuse_unlogged(objid[i], enforce, false);
            continue;
        }
        if (cmd->type != SCT_AlterTable) continue;
        ListCell* lc;
        foreach (lc, cmd->d.alterTable.subcmds) {
            const CollectedATSubcmd* sub = static_cast<const CollectedATSubcmd*>(lfirst(lc));
            if (sub->parsetree == nullptr || !IsA(sub->parsetree, AlterTableCmd)) continue;
            const AlterTableCmd* at = reinterpret_cast<const AlterTableCmd*>(sub->parsetree);
            const bool has_rel = sub->address.classId == RelationRelationId && OidIsValid(sub->address.objectId);
            // ATTACH and DETACH report the partition as the subcommand's
            // object from 16 on; before, it is found by the name given.
            Oid part = has_rel ? sub->address.objectId : InvalidOid;
            if (!OidIsValid(part) && at->def != nullptr && IsA(at->def, PartitionCmd) &&
                reinterpret_cast<const PartitionCmd*>(at->def)->name != nullptr)
                part = RangeVarGetRelid(reinterpret_cast<const PartitionCmd*>(at->def)->name, NoLock, true);
            switch (at->subtype) {
                case AT_AddInherit:  // objid: the child; address: the parent
                    doing = Doing{"adding", objid[i], has_rel ? sub->address.objectId : InvalidOid};
                    if (!OidIsValid(doing.other) && at->def != nullptr && IsA(at->def, RangeVar))
                        doing.other = RangeVarGetRelid(reinterpret_cast<const RangeVar*>(at->def), NoLock, true);
                    cb.previous = error_context_stack;
                    error_context_stack = &cb;
                    cover_child(objid[i], true, enforce);
                    refuse_unlogged(objid[i], enforce, false);
                    join_tombstones(objid[i], enforce);
                    error_context_stack = cb.previous;
                    break;
                case AT_AttachPartition:  // objid: the partitioned table
                    if (!OidIsValid(part) || !check_of(part, enforce).found) break;
                    doing = Doing{"attaching", part, objid[i]};
                    cb.previous = error_context_stack;
                    error_context_stack = &cb;
                    refuse_unlogged(part, enforce, false);
                    advance_past_tokens(part);
                    join_tombstones(part, enforce);
                    error_context_stack = cb.previous;
                    break;
                case AT_DetachPartition:
                case AT_DetachPartitionFinalize:
                    if (!OidIsValid(part)) break;
                    doing = Doing{"detaching", part, objid[i]};
                    cb.previous = error_context_stack;
                    error_context_stack = &cb;
                    keep_detached(objid[i], part, enforce);
                    wait_for_leavers(part, enforce);
                    error_context_stack = cb.previous;
                    break;
                case AT_DropInherit:  // objid: the child
                    wait_for_leavers(objid[i], enforce);
                    break;
                case AT_SetUnLogged:  // objid: the table made unlogged
                    refuse_unlogged(objid[i], enforce, true);
                    break;
                default:
                    break;
            }
        }
    }
}

// ALTER TABLE ... ATTACH PARTITION to a protected table: the partition's own
// checks (its own, or of its partitions) make way for the clones of the
// partitioned table's check, which have the same name. Only where the role
// owns the table (ATTACH needs that anyway, and fails without it).
void ddl_command_start(FunctionCallInfo fcinfo) {
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("fencing.ddl_command_start() was not called by the event trigger manager")));
    const EventTriggerData* ev = reinterpret_cast<const EventTriggerData*>(fcinfo->context);
    if (ev->parsetree != nullptr && (IsA(ev->parsetree, AlterTypeStmt) || IsA(ev->parsetree, AlterDomainStmt) ||
                                     IsA(ev->parsetree, CreateOpClassStmt) ||
                                     (IsA(ev->parsetree, CreateFunctionStmt) &&
                                      reinterpret_cast<const CreateFunctionStmt*>(ev->parsetree)->replace))) {
        // (1.2) ALTER TYPE ... SET (a support function), ALTER DOMAIN (a
        // default) and CREATE OR REPLACE FUNCTION (a body that reads a
        // temporary table) may make a key depend on a temporary object,
        // which would change the key unseen when PostgreSQL drops it: the
        // key becomes unusable, a change judged as any other. CREATE
        // OPERATOR CLASS ... DEFAULT may give a key type another hash
        // function.
        reset_keys();
        record_all_with_tombstones();
        return;
    }
    if (ev->parsetree != nullptr && IsA(ev->parsetree, AlterOpFamilyStmt)) {
        // ALTER OPERATOR FAMILY ... ADD | DROP FUNCTION may change a key
        // type's hash function.
        reset_keys();
        record_all_with_tombstones();
        return;
    }
    if (ev->parsetree != nullptr && (IsA(ev->parsetree, DropStmt) || IsA(ev->parsetree, DropOwnedStmt))) {
        // A DROP ... CASCADE (or DROP OWNED) may drop a column of a composite
        // type or table whose type a key column is of, or a key column.
        reset_keys();
        if (drop_may_change_keys(ev->parsetree)) record_all_with_tombstones();
        return;
    }
    if (ev->parsetree != nullptr && IsA(ev->parsetree, ViewStmt)) {
        // CREATE OR REPLACE VIEW may add columns to its row type.
        const ViewStmt* view = reinterpret_cast<const ViewStmt*>(ev->parsetree);
        reset_keys();
        const Oid target = view->replace ? RangeVarGetRelid(view->view, NoLock, true) : InvalidOid;
        if (OidIsValid(target) && rowtype_used(target)) record_all_with_tombstones();
        return;
    }
    if (ev->parsetree == nullptr || !IsA(ev->parsetree, AlterTableStmt)) return;
    const AlterTableStmt* stmt = reinterpret_cast<const AlterTableStmt*>(ev->parsetree);
    const ObjectType type = compat::alter_table_object_type(stmt);
    record_keys(stmt, type);
    if (type != OBJECT_TABLE || stmt->relation == nullptr) return;
    Oid enforce = InvalidOid;
    ListCell* lc;
    foreach (lc, stmt->cmds) {
        const AlterTableCmd* at = static_cast<const AlterTableCmd*>(lfirst(lc));
        if (!IsA(at, AlterTableCmd) || at->subtype != AT_AttachPartition || at->def == nullptr ||
            !IsA(at->def, PartitionCmd))
            continue;
        const PartitionCmd* pc = reinterpret_cast<const PartitionCmd*>(at->def);
        if (!OidIsValid(enforce)) enforce = enforce_function();
        if (!OidIsValid(enforce)) return;
        const Oid parent = RangeVarGetRelid(stmt->relation, NoLock, true);
        const Oid part = pc->name != nullptr ? RangeVarGetRelid(pc->name, NoLock, true) : InvalidOid;
        if (!OidIsValid(parent) || !OidIsValid(part) || get_rel_relkind(parent) != RELKIND_PARTITIONED_TABLE) continue;
        if (!check_of(parent, enforce).found) continue;
        ListCell* rc;
        foreach (rc, find_all_inheritors(part, NoLock, nullptr)) {
            const Oid rel = lfirst_oid(rc);
            Check c = check_of(rel, enforce);
            if (!c.found || OidIsValid(c.parent) || !compat::is_relation_owner(rel, GetUserId())) continue;
            ObjectAddress addr;
            ObjectAddressSet(addr, TriggerRelationId, c.oid);
            performDeletion(&addr, DROP_RESTRICT, 0);
            CommandCounterIncrement();
        }
    }
}

}  // namespace

FENCING_FUNCTION(fencing_ddl_command_end) {
    return pg::guarded("fencing.ddl_command_end", [&]() -> Datum {
        ddl_command_end(fcinfo);
        PG_RETURN_VOID();
    });
}

FENCING_FUNCTION(fencing_ddl_command_start) {
    return pg::guarded("fencing.ddl_command_start", [&]() -> Datum {
        ddl_command_start(fcinfo);
        PG_RETURN_VOID();
    });
}

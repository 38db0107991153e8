// The cache of fencing's catalog objects and the checks of its tables'
// layouts: see catalog_ids.hpp.
#include "pg/catalog_ids.hpp"

extern "C" {
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
}

namespace fencing::pg {

namespace {

constexpr int kRels = static_cast<int>(FencingRel::tombstone_runs_key) + 1;
constexpr const char* kRelNames[kRels] = {"fence_state",     "fence_state_pkey",  "token_seq",       "key_secret",
                                          "notify_settings", "tombstones",        "tombstones_pkey", "retired",
                                          "tombstone_runs",  "tombstone_runs_key"};

Oid namespace_oid = InvalidOid;
Oid extension_oid = InvalidOid;
Oid rel_oid[kRels] = {};
// The xmin of each relation's membership row in pg_depend, as found.
TransactionId member_xmin[kRels] = {};
// The table each index was found on.
Oid index_table[kRels] = {};
std::uint64_t rel_generation[kRels] = {};
std::uint64_t any_relcache_generation = 0;
Oid enforce_oid = InvalidOid;
Oid token_type_oid = InvalidOid;

FenceOids fence;
std::uint64_t fence_generation = 0;

bool callbacks_registered = false;

void forget_relation(int i) {
    rel_oid[i] = InvalidOid;
    member_xmin[i] = InvalidTransactionId;
    index_table[i] = InvalidOid;
    ++rel_generation[i];
}

void forget_fence() {
    if (OidIsValid(fence.state)) ++fence_generation;
    fence = FenceOids{};
}

void relcache_callback(Datum, Oid relid) {
    ++any_relcache_generation;
    for (int i = 0; i < kRels; ++i)
        if (relid == InvalidOid || (OidIsValid(rel_oid[i]) && relid == rel_oid[i])) forget_relation(i);
    if (relid == InvalidOid || relid == fence.state || relid == fence.index || relid == fence.seq) forget_fence();
}

// A schema renamed, dropped or created: every OID found through it goes.
void namespace_callback(Datum, compat::SyscacheId, uint32) {
    namespace_oid = InvalidOid;
    extension_oid = InvalidOid;
    for (int i = 0; i < kRels; ++i) forget_relation(i);
    forget_fence();
    enforce_oid = InvalidOid;
    token_type_oid = InvalidOid;
}

void proc_callback(Datum, compat::SyscacheId, uint32) { enforce_oid = InvalidOid; }
void type_callback(Datum, compat::SyscacheId, uint32) { token_type_oid = InvalidOid; }

void register_callbacks() {
    if (callbacks_registered) return;
    CacheRegisterRelcacheCallback(relcache_callback, (Datum)0);
    CacheRegisterSyscacheCallback(NAMESPACEOID, namespace_callback, (Datum)0);
    CacheRegisterSyscacheCallback(PROCOID, proc_callback, (Datum)0);
    CacheRegisterSyscacheCallback(TYPEOID, type_callback, (Datum)0);
    callbacks_registered = true;
}

[[noreturn]] void not_installed() {
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("fencing extension is not installed in this database"), errhint("Run CREATE EXTENSION fencing.")));
    pg_unreachable();
}

[[noreturn]] void unexpected_layout(const char* table) {
    ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("fencing.%s has an unexpected layout", table),
                    errhint("The table was altered by hand; reinstall the fencing extension.")));
    pg_unreachable();
}

Oid att_type(TupleDesc d, int attno) { return TupleDescAttr(d, attno - 1)->atttypid; }

// The extension RELID is a member of (as getExtensionOfObject finds it),
// and the xmin of that membership row of pg_depend.
Oid membership_of(Oid relid, TransactionId* xmin) {
    Oid ext = InvalidOid;
    *xmin = InvalidTransactionId;
    Relation rel = table_open(DependRelationId, AccessShareLock);
    ScanKeyData key[2];
    ScanKeyInit(&key[0], Anum_pg_depend_classid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(RelationRelationId));
    ScanKeyInit(&key[1], Anum_pg_depend_objid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(rel, DependDependerIndexId, true, nullptr, 2, key);
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        const Form_pg_depend dep = reinterpret_cast<Form_pg_depend>(GETSTRUCT(tup));
        if (dep->refclassid == ExtensionRelationId && dep->deptype == DEPENDENCY_EXTENSION) {
            ext = dep->refobjid;
            *xmin = HeapTupleHeaderGetXmin(tup->t_data);
            break;
        }
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return ext;
}

// The versions of fencing's pg_extension row, by OID when EXT is valid and
// by name otherwise, that any transaction wrote, whatever their state.
struct ExtensionVersions {
    int before = 0;      // inserted before the current transaction
    int ended_here = 0;  // of those, deleted or updated by it (DROP, UPDATE)
};

ExtensionVersions extension_versions(Oid ext) {
    Relation rel = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    if (OidIsValid(ext))
        ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ext));
    else
        ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum("fencing"));
    SysScanDesc scan = systable_beginscan(rel, OidIsValid(ext) ? ExtensionOidIndexId : ExtensionNameIndexId, true,
                                          SnapshotAny, 1, &key);
    ExtensionVersions v;
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        const HeapTupleHeader h = tup->t_data;
        if (TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(h))) continue;
        ++v.before;
        if (!(h->t_infomask & HEAP_XMAX_INVALID) && !HEAP_XMAX_IS_LOCKED_ONLY(h->t_infomask) &&
            TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetUpdateXid(h)))
            ++v.ended_here;
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return v;
}

// Whether the relation was created by the current transaction.
bool created_here(Oid relid) {
    Relation rel = RelationIdGetRelation(relid);
    if (rel == nullptr) return false;
    const bool created = rel->rd_createSubid != InvalidSubTransactionId;
    RelationClose(rel);
    return created;
}

}  // namespace

// The extension's own schema (whatever it is named now), not a schema that
// took the name fencing: a transaction that renamed schemas would otherwise
// have the module record grants in relations its rollback takes away.
Oid fencing_namespace() {
    register_callbacks();
    if (!OidIsValid(namespace_oid)) {
        Relation rel = table_open(ExtensionRelationId, AccessShareLock);
        ScanKeyData key;
        ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum("fencing"));
        SysScanDesc scan = systable_beginscan(rel, ExtensionNameIndexId, true, nullptr, 1, &key);
        if (const HeapTuple tup = systable_getnext(scan); HeapTupleIsValid(tup)) {
            const Form_pg_extension ext = reinterpret_cast<Form_pg_extension>(GETSTRUCT(tup));
            extension_oid = ext->oid;
            namespace_oid = ext->extnamespace;
        }
        systable_endscan(scan);
        table_close(rel, AccessShareLock);
    }
    return namespace_oid;
}

// A relation of the extension's schema with that name, and a member of the
// extension: one put in its place (renamed, created) is not the module's.
Oid fencing_relation(FencingRel which) {
    const int i = static_cast<int>(which);
    // An index belongs to the extension through its table: it is taken
    // again when the table found is another one (a table put in the place
    // of the extension's, with an index of its own, leaves the old index
    // under the name without a relcache invalidation of it).
    const FencingRel table = which == FencingRel::fence_state_pkey     ? FencingRel::fence_state
                             : which == FencingRel::tombstones_pkey    ? FencingRel::tombstones
                             : which == FencingRel::tombstone_runs_key ? FencingRel::tombstone_runs
                                                                       : which;
    const Oid table_oid = table != which ? fencing_relation(table) : InvalidOid;
    if (OidIsValid(rel_oid[i])) {
        if (table == which || index_table[i] == table_oid) return rel_oid[i];
        forget_relation(i);
    }
    const Oid nsp = fencing_namespace();
    Oid relid = OidIsValid(nsp) ? get_relname_relid(kRelNames[i], nsp) : InvalidOid;
    if (OidIsValid(relid)) {
        if (table != which) {
            if (!OidIsValid(table_oid) || IndexGetRelation(relid, true) != table_oid) relid = InvalidOid;
            index_table[i] = table_oid;
        } else if (membership_of(relid, &member_xmin[i]) != extension_oid) {
            relid = InvalidOid;
        }
    }
    rel_oid[i] = relid;
    return rel_oid[i];
}

Oid required_fencing_relation(FencingRel which) {
    const Oid relid = fencing_relation(which);
    if (!OidIsValid(relid)) not_installed();
    return relid;
}

std::uint64_t fencing_relation_generation(FencingRel which) { return rel_generation[static_cast<int>(which)]; }

std::uint64_t relcache_generation() { return any_relcache_generation; }

Oid enforce_function() {
    if (OidIsValid(enforce_oid)) return enforce_oid;
    const Oid nsp = fencing_namespace();
    if (!OidIsValid(nsp)) return InvalidOid;
    oidvector* noargs = buildoidvector(nullptr, 0);
    enforce_oid = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum("enforce"),
                                  PointerGetDatum(noargs), ObjectIdGetDatum(nsp));
    pfree(noargs);
    return enforce_oid;
}

Oid token_type() {
    if (OidIsValid(token_type_oid)) return token_type_oid;
    const Oid nsp = fencing_namespace();
    if (!OidIsValid(nsp)) return InvalidOid;
    token_type_oid = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("token"), ObjectIdGetDatum(nsp));
    return token_type_oid;
}

const FenceOids& fence_oids() {
    if (OidIsValid(fence.state)) return fence;
    const Oid state = fencing_relation(FencingRel::fence_state);
    const Oid index = fencing_relation(FencingRel::fence_state_pkey);
    const Oid seq = fencing_relation(FencingRel::token_seq);
    if (!OidIsValid(state) || !OidIsValid(index) || !OidIsValid(seq)) not_installed();
    ++fence_generation;
    fence = FenceOids{state, index, seq};
    return fence;
}

std::uint64_t fence_oids_generation() { return fence_generation; }

Oid state_index() { return fence_oids().index; }

bool made_here(Oid relid) {
    Relation rel = RelationIdGetRelation(relid);
    if (rel == nullptr) return false;
    const bool made = compat::storage_replaced_in_xact(rel);
    RelationClose(rel);
    return made;
}

void refuse_if_made_here(Oid relid) {
    if (!made_here(relid)) return;
    const char* nsp = get_namespace_name(get_rel_namespace(relid));
    const char* name = get_rel_name(relid);
    ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                    errmsg("cannot use fencing locks or tokens in a transaction that rewrote \"%s.%s\"", nsp, name),
                    errdetail("This transaction gave \"%s.%s\" new storage (TRUNCATE, CLUSTER, REINDEX, ALTER ... SET "
                              "TABLESPACE, ALTER SEQUENCE ... RESTART). Tokens and grants are recorded outside the "
                              "transaction, and its rollback would bring the old storage back without them.",
                              nsp, name),
                    errhint("Commit or roll back the transaction first.")));
}

void refuse_if_fence_made_here() {
    if (!TransactionIdIsValid(GetTopTransactionIdIfAny())) return;
    static constexpr FencingRel kMade[] = {FencingRel::fence_state, FencingRel::fence_state_pkey, FencingRel::token_seq,
                                           FencingRel::key_secret};
    for (const FencingRel which : kMade)
        if (const Oid relid = fencing_relation(which); OidIsValid(relid)) refuse_if_made_here(relid);
    // A member made by ALTER EXTENSION ... ADD in this transaction. The
    // members CREATE EXTENSION makes (new relations of an extension whose
    // row, by its OID, is new) go with the extension's own rollback.
    static constexpr FencingRel kMembers[] = {FencingRel::fence_state, FencingRel::token_seq, FencingRel::key_secret};
    for (const FencingRel which : kMembers) {
        const int i = static_cast<int>(which);
        const Oid relid = fencing_relation(which);
        if (!OidIsValid(relid) || !TransactionIdIsValid(member_xmin[i]) ||
            !TransactionIdIsCurrentTransactionId(member_xmin[i]))
            continue;
        if (created_here(relid) && extension_versions(extension_oid).before == 0) continue;
        const char* nsp = get_namespace_name(get_rel_namespace(relid));
        const char* name = get_rel_name(relid);
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                 errmsg("cannot use fencing locks or tokens in a transaction that changed the members of extension "
                        "\"fencing\""),
                 errdetail("This transaction made \"%s.%s\" a member of the extension (ALTER EXTENSION ... ADD). "
                           "Tokens and grants are recorded outside the transaction, and its rollback would bring the "
                           "earlier member back without them.",
                           nsp ? nsp : "?", name ? name : "?"),
                 errhint("Commit or roll back the transaction first.")));
    }
}

void refuse_if_counter_replaced_here() {
    if (!TransactionIdIsValid(GetTopTransactionIdIfAny())) return;
    const Oid seq = fencing_relation(FencingRel::token_seq);
    if (!OidIsValid(seq) || !created_here(seq) || extension_versions(InvalidOid).ended_here == 0) return;
    ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                    errmsg("cannot move the fence token counter in a transaction that dropped extension \"fencing\""),
                    errdetail("This transaction dropped the extension and created it again. Its rollback would bring "
                              "the earlier counter back, behind the token returned here."),
                    errhint("Commit the transaction that creates the extension again first.")));
}

void check_fence_state_layout(Relation rel) {
    const TupleDesc d = RelationGetDescr(rel);
    const bool ok = d->natts == kNatts && att_type(d, kAttKey) == INT8OID && att_type(d, kAttToken) == INT8OID &&
                    att_type(d, kAttGrantedAt) == INT4OID && att_type(d, kAttLease) == INT4OID &&
                    att_type(d, kAttResource) == TEXTOID;
    if (!ok) unexpected_layout("fence_state");
}

void check_key_secret_layout(Relation rel) {
    const TupleDesc d = RelationGetDescr(rel);
    if (d->natts != 1 || att_type(d, kAttSecret) != BYTEAOID) unexpected_layout("key_secret");
}

void check_notify_settings_layout(Relation rel) {
    const TupleDesc d = RelationGetDescr(rel);
    if (d->natts != 1 || att_type(d, 1) != TEXTOID) unexpected_layout("notify_settings");
}

void check_tombstones_layout(Relation rel) {
    const TupleDesc d = RelationGetDescr(rel);
    const bool ok = d->natts == tombstone_att::kNatts && att_type(d, tombstone_att::kTbl) == OIDOID &&
                    att_type(d, tombstone_att::kHash) == INT8OID && att_type(d, tombstone_att::kToken) == INT8OID &&
                    att_type(d, tombstone_att::kDeletedAt) == TIMESTAMPTZOID;
    if (!ok) unexpected_layout("tombstones");
}

void check_tombstone_runs_layout(Relation rel) {
    const TupleDesc d = RelationGetDescr(rel);
    const bool ok = d->natts == run_att::kNatts && att_type(d, run_att::kTbl) == OIDOID &&
                    att_type(d, run_att::kLo) == INT8OID && att_type(d, run_att::kToken) == INT8OID &&
                    att_type(d, run_att::kDeletedAt) == TIMESTAMPTZOID && att_type(d, run_att::kHi) == INT8OID &&
                    att_type(d, run_att::kHashes) == BYTEAOID;
    if (!ok) unexpected_layout("tombstone_runs");
}

}  // namespace fencing::pg

// The cache of fencing's catalog objects and the checks of its tables'
// layouts: see catalog_ids.hpp.
#include "pg/catalog_ids.hpp"

extern "C" {
#include "catalog/pg_proc.h"
}

namespace fencing::pg {

namespace {

constexpr int kRels = static_cast<int>(FencingRel::tombstone_runs_key) + 1;
constexpr const char* kRelNames[kRels] = {"fence_state",     "fence_state_pkey",  "token_seq",       "key_secret",
                                          "notify_settings", "tombstones",        "tombstones_pkey", "retired",
                                          "tombstone_runs",  "tombstone_runs_key"};

Oid namespace_oid = InvalidOid;
Oid rel_oid[kRels] = {};
std::uint64_t rel_generation[kRels] = {};
std::uint64_t any_relcache_generation = 0;
Oid enforce_oid = InvalidOid;
Oid token_type_oid = InvalidOid;

FenceOids fence;
std::uint64_t fence_generation = 0;

bool callbacks_registered = false;

void forget_relation(int i) {
    rel_oid[i] = InvalidOid;
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

}  // namespace

Oid fencing_namespace() {
    register_callbacks();
    if (!OidIsValid(namespace_oid)) namespace_oid = get_namespace_oid("fencing", true);
    return namespace_oid;
}

Oid fencing_relation(FencingRel which) {
    const int i = static_cast<int>(which);
    if (OidIsValid(rel_oid[i])) return rel_oid[i];
    const Oid nsp = fencing_namespace();
    rel_oid[i] = OidIsValid(nsp) ? get_relname_relid(kRelNames[i], nsp) : InvalidOid;
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

bool defined_here(Oid relid) {
    HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tup)) return false;
    const HeapTupleHeader h = tup->t_data;
    const bool mine =
        !HeapTupleHeaderXminFrozen(h) && TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(h));
    ReleaseSysCache(tup);
    return mine;
}

void refuse_if_defined_here(Oid relid) {
    if (!defined_here(relid)) return;
    const char* nsp = get_namespace_name(get_rel_namespace(relid));
    const char* name = get_rel_name(relid);
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
             errmsg("cannot use fencing locks or tokens in a transaction that changed \"%s.%s\"", nsp, name),
             errdetail("This transaction created, altered, renamed or rewrote \"%s.%s\" (CREATE EXTENSION, ALTER, "
                       "TRUNCATE, CLUSTER, REINDEX, ALTER SEQUENCE ... RESTART). Tokens and grants are recorded "
                       "outside the transaction, and its rollback would bring back what was there before, without "
                       "them.",
                       nsp, name),
             errhint("Commit or roll back the transaction first.")));
}

void refuse_if_fence_defined_here() {
    if (!TransactionIdIsValid(GetTopTransactionIdIfAny())) return;
    // The schema first: the relations are found by name in the schema
    // named fencing, and renaming schemas (ALTER SCHEMA ... RENAME) writes
    // only its pg_namespace row, not theirs.
    if (const Oid nsp = fencing_namespace(); OidIsValid(nsp)) {
        HeapTuple tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
        if (HeapTupleIsValid(tup)) {
            const HeapTupleHeader h = tup->t_data;
            const bool mine =
                !HeapTupleHeaderXminFrozen(h) && TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(h));
            ReleaseSysCache(tup);
            if (mine)
                ereport(ERROR,
                        (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                         errmsg("cannot use fencing locks or tokens in a transaction that changed schema \"fencing\""),
                         errdetail("This transaction created, altered or renamed the schema now named \"fencing\". "
                                   "Tokens and grants are recorded outside the transaction, in the relations found "
                                   "in it, and its rollback would bring back what was there before, without them."),
                         errhint("Commit or roll back the transaction first.")));
        }
    }
    static constexpr FencingRel kRels[] = {FencingRel::fence_state, FencingRel::fence_state_pkey, FencingRel::token_seq,
                                           FencingRel::key_secret};
    for (const FencingRel which : kRels)
        if (const Oid relid = fencing_relation(which); OidIsValid(relid)) refuse_if_defined_here(relid);
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

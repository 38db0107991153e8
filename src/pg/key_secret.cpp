// The resource key secret: loading and caching it, and replacing it (the
// trigger of fencing.key_secret). See key_secret.hpp and docs/design.md.
#include "pg/key_secret.hpp"
#include "pg/index_entries.hpp"

#include "core/resource_key.hpp"
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/lock_tags.hpp"

extern "C" {
#include "catalog/index.h"
#include "catalog/pg_collation.h"
#include "utils/fmgroids.h"
}

namespace fencing::pg {

namespace {

// The secret this backend read, with the generation of fencing.key_secret
// it was read under (catalog_ids.hpp): a new secret committed sends a
// relcache invalidation of the table, which changes the generation.
struct Cached {
    bool valid = false;
    std::uint64_t generation = 0;
    core::KeySecret secret;
    // The row's inserting transaction (InvalidTransactionId when frozen):
    // while it is the current one, the secret is this transaction's own,
    // uncommitted replacement (or CREATE EXTENSION's first secret).
    TransactionId xmin = InvalidTransactionId;
};
Cached cached;

// The 16 bytes of a secret value; false when it is not 16 bytes long.
bool secret_bytes(Datum d, unsigned char* out) {
    bytea* b = DatumGetByteaPP(d);
    if (VARSIZE_ANY_EXHDR(b) != core::kSecretBytes) return false;
    memcpy(out, VARDATA_ANY(b), core::kSecretBytes);
    return true;
}

const core::KeySecret& current_secret() {
    // A secret replaced by a transaction that committed before this call
    // began is seen: its invalidation was sent before it released its locks.
    AcceptInvalidationMessages();
    if (cached.valid && cached.generation == fencing_relation_generation(FencingRel::key_secret)) return cached.secret;
    const Oid relid = required_fencing_relation(FencingRel::key_secret);
    const std::uint64_t generation = fencing_relation_generation(FencingRel::key_secret);
    Relation rel = table_open(relid, AccessShareLock);
    check_key_secret_layout(rel);
    // SnapshotSelf, as for the fence state: committed rows and this
    // transaction's own. A replacement in progress elsewhere shows the old
    // row until it commits; one in this transaction shows the new row.
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, SnapshotSelf, 0, nullptr);
    int rows = 0;
    bool well_formed = true;
    unsigned char bytes[core::kSecretBytes];
    TransactionId xmin = InvalidTransactionId;
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        bool isnull = false;
        Datum d = heap_getattr(tup, kAttSecret, RelationGetDescr(rel), &isnull);
        ++rows;
        if (!HeapTupleHeaderXminFrozen(tup->t_data)) xmin = HeapTupleHeaderGetRawXmin(tup->t_data);
        if (isnull || !secret_bytes(d, bytes)) well_formed = false;
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    if (rows == 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("fencing resource key secret is missing"),
                 errdetail("The table fencing.key_secret has no row."),
                 errhint("As a superuser, run INSERT INTO fencing.key_secret DEFAULT VALUES while no fencing "
                         "lock is held.")));
    if (rows > 1 || !well_formed)
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("fencing.key_secret is malformed"),
                        errdetail("It holds %d rows; it must hold one, of 16 bytes.", rows)));
    cached = Cached{true, generation, core::secret_from_bytes(bytes), xmin};
    return cached.secret;
}

// ---------------------------------------------------------------------------
// Replacing the secret.
// ---------------------------------------------------------------------------

// Whether any backend holds or awaits a fencing lock (resource, token or
// guard tag) of this database.
bool fencing_locks_exist() {
    LockData* data = GetLockStatusData();
    bool any = false;
    for (int i = 0; i < data->nelements && !any; ++i) {
        const LockInstanceData& l = data->locks[i];
        if (l.locktag.locktag_type != LOCKTAG_ADVISORY || l.locktag.locktag_field1 != MyDatabaseId) continue;
        const uint16 kind = l.locktag.locktag_field4;
        if (kind != kResourceTagKind && kind != kTokenTagKind && kind != kGuardTagKind) continue;
        any = l.holdMask != 0 || l.waitLockMode != NoLock;
    }
    return any;
}

// The live fence state row (key, resource) other than `self`, if any.
bool find_other_row(Relation rel, Oid index, std::int64_t key, Datum resource, ItemPointer self, ItemPointerData* tid,
                    std::int64_t* token) {
    ScanKeyData skey[2];
    ScanKeyInit(&skey[0], kAttKey, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(key));
    ScanKeyEntryInitialize(&skey[1], 0, kAttResource, BTEqualStrategyNumber, InvalidOid, C_COLLATION_OID, F_TEXTEQ,
                           resource);
    SysScanDesc scan = systable_beginscan(rel, index, true, SnapshotSelf, 2, skey);
    HeapTuple tup;
    bool found = false;
    while (!found && HeapTupleIsValid(tup = systable_getnext(scan))) {
        if (ItemPointerEquals(&tup->t_self, self)) continue;
        bool isnull = false;
        *tid = tup->t_self;
        *token = DatumGetInt64(heap_getattr(tup, kAttToken, RelationGetDescr(rel), &isnull));
        found = true;
    }
    systable_endscan(scan);
    return found;
}

// Gives every fence state row the key of its resource under `secret`. Two
// rows of one resource can only meet here when rows were loaded under one
// secret and written under another (a restore into a database that was used
// before the restore's secret arrived): the one with the newer token stays.
void rekey_fence_state(const core::KeySecret& secret) {
    const Oid state = required_fencing_relation(FencingRel::fence_state);
    // ExclusiveLock until the transaction ends: no grant can be recorded
    // (acquisitions write under RowExclusiveLock, as forget does) before the
    // new secret is committed, and then every acquisition that waited here
    // checks its key again (check_key_current).
    Relation rel = table_open(state, ExclusiveLock);
    TupleDesc d = RelationGetDescr(rel);
    check_fence_state_layout(rel);
    const Oid index = required_fencing_relation(FencingRel::fence_state_pkey);  // only now: state_index()
    if (fencing_locks_exist())
        ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                        errmsg("cannot replace the fencing resource key secret while fencing locks are held"),
                        errdetail("The keys of the held or awaited locks were made with the current secret."),
                        errhint("Replace it when no session holds or awaits a fencing lock in this database.")));
    Relation irel = index_open(index, RowExclusiveLock);
    IndexInfo* info = BuildIndexInfo(irel);
    // One pass. Rows updated here are visible to the scan (SnapshotSelf)
    // and already carry their new key when it meets them again.
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, SnapshotSelf, 0, nullptr);
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        bool isnull[kNatts];
        Datum values[kNatts];
        heap_deform_tuple(tup, d, values, isnull);
        if (isnull[kAttKey - 1] || isnull[kAttResource - 1] || isnull[kAttToken - 1]) continue;
        text* name = DatumGetTextPP(values[kAttResource - 1]);
        const std::int64_t key =
            core::key_as_int64(core::resource_key(secret, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)));
        if (key == DatumGetInt64(values[kAttKey - 1])) continue;
        ItemPointerData self = tup->t_self;
        const Datum resource = PointerGetDatum(name);
        ItemPointerData other;
        std::int64_t other_token = 0;
        if (find_other_row(rel, index, key, resource, &self, &other, &other_token)) {
            if (other_token >= DatumGetInt64(values[kAttToken - 1])) {
                simple_heap_delete(rel, &self);
                continue;
            }
            simple_heap_delete(rel, &other);
        }
        values[kAttKey - 1] = Int64GetDatum(key);
        HeapTuple moved = heap_form_tuple(d, values, isnull);
        compat::simple_update(rel, &self, moved);
        // The key changed, so the update is never HOT: index the new version.
        Datum ivalues[2] = {values[kAttKey - 1], resource};
        bool inulls[2] = {false, false};
        compat::index_insert_unique(irel, ivalues, inulls, &moved->t_self, rel, info);
        (void)insert_other_index_entries(rel, index, moved, false);
        heap_freetuple(moved);
    }
    systable_endscan(scan);
    index_close(irel, RowExclusiveLock);
    table_close(rel, NoLock);  // ExclusiveLock is kept to the end of the transaction
}

// Removes every row of fencing.key_secret but `keep` (an UPDATE's own row).
void delete_other_secrets(Relation rel, ItemPointer keep) {
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, SnapshotSelf, 0, nullptr);
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        if (keep != nullptr && ItemPointerEquals(&tup->t_self, keep)) continue;
        simple_heap_delete(rel, &tup->t_self);
    }
    systable_endscan(scan);
}

}  // namespace

std::uint64_t resource_key_of(const char* data, int len) {
    return core::resource_key(current_secret(), data, static_cast<std::size_t>(len));
}

void refuse_if_secret_new_here() {
    // A transaction that wrote anything has a transaction id.
    if (!TransactionIdIsValid(GetTopTransactionIdIfAny())) return;
    // Read by resource_key_of() in this very call, as a rule.
    if (!cached.valid) (void)current_secret();
    if (!TransactionIdIsValid(cached.xmin) || !TransactionIdIsCurrentTransactionId(cached.xmin)) return;
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
             errmsg("cannot take a fencing lock in a transaction that set the resource key secret"),
             errdetail("This transaction wrote the secret (INSERT INTO fencing.key_secret, or CREATE EXTENSION). "
                       "Locks taken under its keys would outlast a rollback that brings the old keys back."),
             errhint("Commit or roll back the transaction first.")));
}

void check_key_current(std::uint64_t key, const char* data, int len) {
    if (resource_key_of(data, len) == key) return;
    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                    errmsg("could not acquire fencing lock on resource \"%.*s\"", len, data),
                    errdetail("The database's resource key secret was replaced while the lock was being acquired."),
                    errhint("Acquire the lock again.")));
}

}  // namespace fencing::pg

using namespace fencing;
using namespace fencing::pg;

// BEFORE INSERT OR UPDATE FOR EACH ROW on fencing.key_secret. A row without
// a secret gets 16 bytes from pg_strong_random (CREATE EXTENSION inserts one
// such row; INSERT INTO fencing.key_secret DEFAULT VALUES makes a new one);
// a row with one (a restore's COPY) keeps it. The new secret replaces the old
// one: the other rows go, the fence state is rekeyed, and every backend
// forgets its copy when the transaction commits. Refused (55006) while any
// fencing lock of the database is held or awaited.
FENCING_FUNCTION(fencing_key_secret_replace) {
    return guarded("fencing.key_secret_replace", [&]() -> Datum {
        if (!CALLED_AS_TRIGGER(fcinfo))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.key_secret_replace must be called as a trigger")));
        TriggerData* td = reinterpret_cast<TriggerData*>(fcinfo->context);
        const bool inserting = TRIGGER_FIRED_BY_INSERT(td->tg_event);
        if (!TRIGGER_FIRED_BEFORE(td->tg_event) ||
            RelationGetRelid(td->tg_relation) != required_fencing_relation(FencingRel::key_secret))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.key_secret_replace must be a BEFORE trigger of fencing.key_secret")));
        // The secret is replaced, never removed: without it no key can be
        // computed, and backends that still had it would go on using it.
        if (TRIGGER_FIRED_BY_DELETE(td->tg_event) || TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("the fencing resource key secret cannot be removed"),
                            errhint("To replace it, insert a new row: INSERT INTO fencing.key_secret DEFAULT VALUES "
                                    "makes a random one.")));
        if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !(inserting || TRIGGER_FIRED_BY_UPDATE(td->tg_event)))
            ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                            errmsg("fencing.key_secret_replace must be a BEFORE ROW trigger of fencing.key_secret")));
        Relation rel = td->tg_relation;
        check_key_secret_layout(rel);
        HeapTuple row = inserting ? td->tg_trigtuple : td->tg_newtuple;
        TupleDesc desc = RelationGetDescr(rel);
        bool isnull = false;
        Datum value = heap_getattr(row, kAttSecret, desc, &isnull);
        unsigned char bytes[core::kSecretBytes];
        if (isnull) {
            if (!pg_strong_random(bytes, sizeof bytes))
                ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                                errmsg("could not generate a random fencing resource key secret")));
            bytea* b = static_cast<bytea*>(palloc(VARHDRSZ + sizeof bytes));
            SET_VARSIZE(b, VARHDRSZ + sizeof bytes);
            memcpy(VARDATA(b), bytes, sizeof bytes);
            Datum replacement[1] = {PointerGetDatum(b)};
            bool nulls[1] = {false};
            bool replace[1] = {true};
            row = heap_modify_tuple(row, desc, replacement, nulls, replace);
        } else if (!secret_bytes(value, bytes)) {
            ereport(ERROR,
                    (errcode(ERRCODE_CHECK_VIOLATION), errmsg("a fencing resource key secret must be 16 bytes long"),
                     errdetail("The value given is %d bytes long.",
                               static_cast<int>(VARSIZE_ANY_EXHDR(DatumGetByteaPP(value))))));
        }
        rekey_fence_state(core::secret_from_bytes(bytes));
        delete_other_secrets(rel, inserting ? nullptr : &td->tg_trigtuple->t_self);
        // Sent at commit: every backend then drops its copy of the secret.
        CacheInvalidateRelcache(rel);
        return PointerGetDatum(row);
    });
}

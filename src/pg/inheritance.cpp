// The inheritance graph of pg_inherits (inheritance.hpp), and its SQL entry
// point fencing.reached_tables.
#include "pg/inheritance.hpp"

#include "pg/bridge.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/tuplestore.h"
}

namespace fencing::pg {

namespace {

// The OIDs of pg_inherits rows whose column ATTNUM is RELID: the other
// column of each (inhparent of a child's rows, inhrelid of a parent's), in
// the order of INDEX.
List* inherits_neighbours(Oid relid, AttrNumber attnum, Oid index) {
    List* out = NIL;
    Relation inh = table_open(InheritsRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, attnum, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(inh, index, true, nullptr, 1, &key);
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        const Form_pg_inherits f = reinterpret_cast<Form_pg_inherits>(GETSTRUCT(tup));
        out = lappend_oid(out, attnum == Anum_pg_inherits_inhrelid ? f->inhparent : f->inhrelid);
    }
    systable_endscan(scan);
    table_close(inh, AccessShareLock);
    return out;
}

}  // namespace

List* inheritance_parents(Oid relid) {
    return inherits_neighbours(relid, Anum_pg_inherits_inhrelid, InheritsRelidSeqnoIndexId);
}

List* reached_tables(Oid relid) {
    HASHCTL ctl;
    memset(&ctl, 0, sizeof ctl);
    ctl.keysize = sizeof(Oid);
    ctl.entrysize = sizeof(Oid);
    ctl.hcxt = CurrentMemoryContext;
    HTAB* seen = hash_create("fencing reached tables", 32, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    (void)hash_search(seen, &relid, HASH_ENTER, nullptr);
    List* out = list_make1_oid(relid);
    // OUT grows while it is walked: each table's children are appended once.
    for (int i = 0; i < list_length(out); ++i) {
        List* children = inherits_neighbours(list_nth_oid(out, i), Anum_pg_inherits_inhparent, InheritsParentIndexId);
        list_sort(children, list_oid_cmp);
        ListCell* lc;
        foreach (lc, children) {
            Oid child = lfirst_oid(lc);
            bool found = false;
            (void)hash_search(seen, &child, HASH_ENTER, &found);
            if (!found) out = lappend_oid(out, child);
        }
        list_free(children);
        CHECK_FOR_INTERRUPTS();
    }
    hash_destroy(seen);
    return out;
}

}  // namespace fencing::pg

using namespace fencing::pg;

// fencing.reached_tables(tbl regclass): the tables a write through TBL
// reaches (reached_tables(): TBL first, then its partitions and inheritance
// children at any depth), each with what fencing.install_check needs of it:
// oid, relname, nspname, relkind, relispartition, relpersistence. For the
// table's owner (42501 otherwise), as install_check is; what it returns is
// what pg_class, pg_namespace and pg_inherits show any role. A table (or
// schema) dropped meanwhile is left out.
FENCING_FUNCTION(fencing_reached_tables) {
    return guarded("fencing.reached_tables", [&]() -> Datum {
        const Oid relid = PG_GETARG_OID(0);
        const char* relname = get_rel_name(relid);
        if (relname == nullptr)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
        if (!compat::is_relation_owner(relid, GetUserId()))
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("must be owner of table %s", relname)));
        InitMaterializedSRF(fcinfo, 0);
        ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
        if (rsinfo->setDesc->natts != 6)
            ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                            errmsg("fencing.reached_tables has %d columns, expected 6", rsinfo->setDesc->natts)));
        ListCell* lc;
        foreach (lc, reached_tables(relid)) {
            const Oid rel = lfirst_oid(lc);
            HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
            if (!HeapTupleIsValid(tup)) continue;
            const Form_pg_class c = reinterpret_cast<Form_pg_class>(GETSTRUCT(tup));
            const char* nsp = get_namespace_name(c->relnamespace);
            if (nsp == nullptr) {
                ReleaseSysCache(tup);
                continue;
            }
            NameData nspname;
            namestrcpy(&nspname, nsp);
            Datum values[6] = {ObjectIdGetDatum(rel),           NameGetDatum(&c->relname),
                               NameGetDatum(&nspname),          CharGetDatum(c->relkind),
                               BoolGetDatum(c->relispartition), CharGetDatum(c->relpersistence)};
            bool nulls[6] = {false, false, false, false, false, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
            ReleaseSysCache(tup);
        }
        return compat::null_datum();
    });
}

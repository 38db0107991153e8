// The inheritance graph, upwards (inheritance.hpp).
#include "pg/inheritance.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_inherits.h"
#include "utils/fmgroids.h"
}

namespace fencing::pg {

List* inheritance_parents(Oid relid) {
    List* out = NIL;
    Relation inh = table_open(InheritsRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(inh, InheritsRelidSeqnoIndexId, true, nullptr, 1, &key);
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan)))
        out = lappend_oid(out, reinterpret_cast<Form_pg_inherits>(GETSTRUCT(tup))->inhparent);
    systable_endscan(scan);
    table_close(inh, AccessShareLock);
    return out;
}

}  // namespace fencing::pg

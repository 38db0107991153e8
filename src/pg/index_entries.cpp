// See index_entries.hpp.
#include "pg/index_entries.hpp"

extern "C" {
#include "catalog/index.h"
#include "executor/executor.h"
}

namespace fencing::pg {

bool insert_other_index_entries(Relation heap, Oid primary, HeapTuple tup, bool report_duplicates) {
    List* indexes = RelationGetIndexList(heap);
    bool unique = true;
    EState* estate = nullptr;
    TupleTableSlot* slot = nullptr;
    ListCell* lc;
    foreach (lc, indexes) {
        const Oid index_oid = lfirst_oid(lc);
        if (index_oid == primary) continue;
        Relation irel = index_open(index_oid, RowExclusiveLock);
        IndexInfo* info = BuildIndexInfo(irel);
        if (info->ii_ReadyForInserts) {
            if (estate == nullptr) {
                estate = CreateExecutorState();
                slot = MakeSingleTupleTableSlot(RelationGetDescr(heap), &TTSOpsHeapTuple);
                ExecStoreHeapTuple(tup, slot, false);
                GetPerTupleExprContext(estate)->ecxt_scantuple = slot;
            }
            bool wanted = true;
            if (info->ii_Predicate != NIL)
                wanted = ExecQual(ExecPrepareQual(info->ii_Predicate, estate), GetPerTupleExprContext(estate));
            if (wanted) {
                Datum values[INDEX_MAX_KEYS];
                bool isnull[INDEX_MAX_KEYS];
                FormIndexDatum(info, slot, estate, values, isnull);
                const IndexUniqueCheck check = !irel->rd_index->indisunique ? UNIQUE_CHECK_NO
                                               : report_duplicates          ? UNIQUE_CHECK_PARTIAL
                                                                            : UNIQUE_CHECK_YES;
                if (!index_insert(irel, values, isnull, &tup->t_self, heap, check, false, info) &&
                    check == UNIQUE_CHECK_PARTIAL)
                    unique = false;
            }
        }
        index_close(irel, NoLock);  // RowExclusiveLock until the transaction ends, as the executor keeps it
    }
    if (estate != nullptr) {
        ExecDropSingleTupleTableSlot(slot);
        FreeExecutorState(estate);
    }
    list_free(indexes);
    return unique;
}

}  // namespace fencing::pg

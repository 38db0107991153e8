// The index entries of a row that the module writes into one of its own
// tables without the executor (fence_state, tombstones, notify_settings).
//
// The writers fill the primary key themselves (its IndexInfo is kept open
// where rows are written often). Every other index of the table that takes
// insertions needs the row's entry too: an index being built or rebuilt
// concurrently (CREATE INDEX CONCURRENTLY, REINDEX CONCURRENTLY, which swaps
// its copy in for the primary key) would otherwise miss the row, and a
// rebuilt primary key would lose it: a tombstone no INSERT finds, a second
// fence state row of a resource.
#pragma once
#include "pg/pg.hpp"

namespace fencing::pg {

// Inserts TUP's entries (TUP already in HEAP, at tup->t_self) into the
// indexes of HEAP but PRIMARY that are ready for insertions (partial
// indexes when TUP satisfies their predicate). Unique indexes check as
// PostgreSQL's own writes do (23505, waiting for a writer in progress);
// with REPORT_DUPLICATES, a possible duplicate is reported instead (false),
// its entry inserted all the same (UNIQUE_CHECK_PARTIAL).
bool insert_other_index_entries(Relation heap, Oid primary, HeapTuple tup, bool report_duplicates);

}  // namespace fencing::pg

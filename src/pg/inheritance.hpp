// The inheritance graph of pg_inherits, the one walk over it: a relation's
// direct parents (a partition's partitioned table, an inheritance child's
// parents), and the tables a write through a table reaches (its partitions
// and inheritance children, at any depth). coverage.cpp and tombstones.cpp
// walk upwards with inheritance_parents(); fencing.install_check walks
// downwards through fencing.reached_tables (reached_tables()).
#pragma once
#include "pg/pg.hpp"

extern "C" {
#include "nodes/pg_list.h"
}

namespace fencing::pg {

// The direct inheritance parents of RELID, in inhseqno order (a List of
// OIDs, allocated in the current memory context; NIL for none).
List* inheritance_parents(Oid relid);

// The tables a write through RELID reaches: RELID first, then its
// partitions and inheritance children at any depth, each once (a child of
// several parents in the hierarchy too), level by level, the children of
// one table in OID order (a List of OIDs, allocated in the current memory
// context). As pg_inherits holds them now: detached partitions not, one
// whose DETACH CONCURRENTLY has not finished yet still; no lock is taken.
List* reached_tables(Oid relid);

}  // namespace fencing::pg

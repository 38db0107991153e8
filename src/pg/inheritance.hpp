// The inheritance graph, upwards: a relation's direct parents in pg_inherits
// (a partition's partitioned table, an inheritance child's parents).
#pragma once
#include "pg/pg.hpp"

extern "C" {
#include "nodes/pg_list.h"
}

namespace fencing::pg {

// The direct inheritance parents of RELID, in inhseqno order (a List of
// OIDs, allocated in the current memory context; NIL for none).
List* inheritance_parents(Oid relid);

}  // namespace fencing::pg

// Whether a table has tombstones at all, in shared memory: an INSERT into a
// table that has none skips the tombstone lookup and its key lock, and its
// transaction is refused at commit (40001) if a tombstone of the table was
// recorded by another transaction meanwhile (core/tombstone_summary.hpp has
// the rules). Needs fencing in shared_preload_libraries; without it every
// INSERT looks its key up.
#pragma once
#include "pg/pg.hpp"

namespace fencing::pg::tombstone_summary {

// From _PG_init, while shared_preload_libraries is processed.
void init();

// Before a tombstone of the table `owner` keeps them for is written.
void recorded(Oid owner);

// Whether an INSERT into a table whose tombstones `owner` keeps may skip the
// lookup in this transaction. `any_tombstone(owner)` tells whether the
// table has a tombstone, committed or in progress (asked once per table
// after the server starts).
bool insert_may_skip(Oid owner, bool (*any_tombstone)(Oid));

}  // namespace fencing::pg::tombstone_summary

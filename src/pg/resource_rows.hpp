// The per-resource rows of fencing.fence_state (key, latest token, grant
// time, lease, resource name). A resource's row is found by its key and its
// name (the primary key): two names with the same key (a collision) share
// the lock but each has a row of its own, and never reads or writes the
// other's. Grants are recorded in place (a heap "inplace" WAL record: no
// transaction id, no commit; see fence_state.hpp for what that means after a
// crash); a first grant inserts the row frozen. Each backend remembers where
// it found each resource's row and overwrites it there without the index
// scan while it still is that resource's live row.
#pragma once
#include "pg/catalog_ids.hpp"
#include "pg/fence_state.hpp"
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

// The table's column numbers and its layout check are in catalog_ids.hpp.

// The resource's row, as this command sees it (found = false when none).
StateRow lookup_row(Relation rel, Oid index, std::uint64_t key, const char* resource, int len);

// Errors (25000): an acquisition of a resource whose row the current
// transaction deleted or wrote (a grant, recorded outside the transaction,
// would not be undone with that change).
[[noreturn]] void report_changed_here(const char* resource, int len);

// The current time in seconds since 2000-01-01 UTC (the granted_at column).
std::int32_t now_seconds();

enum class Recorded {
    updated,  // the row now holds the grant
    missing,  // the resource has no row yet
    behind,   // the row already holds a token >= this one: the counter is behind
};

// Records the grant in the resource's existing row. The counter can be behind
// a stored token when the rows were restored from a dump of a database whose
// counter was ahead of this one's clock seed: *stored then says how far.
Recorded record_in_place(Relation rel, Oid index, std::uint64_t key, const char* resource, int len, std::int64_t token,
                         std::int32_t granted_at, std::int32_t lease_ms, std::int64_t* stored);

// First grant of a resource: inserts its row, frozen (it stays, visible to
// everyone, even if this transaction aborts: the token was handed out either
// way). Warns when another resource's row carries the same key. False,
// having inserted nothing, after waiting for a transaction that was writing
// a row of the resource (a restore's INSERT): look the row up again.
bool insert_row(Relation rel, Oid index, std::uint64_t key, const char* resource, int len, std::int64_t token,
                std::int32_t granted_at, std::int32_t lease_ms);

}  // namespace fencing::pg

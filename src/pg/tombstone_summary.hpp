// Whether a table has tombstones, and the greatest of their tokens, in shared
// memory: an INSERT into a table that has none, or none with a token as
// great as the INSERT's, skips the tombstone lookup and its key lock, and its
// transaction is refused at commit (40001) if another transaction recorded a
// tombstone of the table meanwhile that may reject it
// (core/tombstone_summary.hpp has the rules). Needs fencing in shared_preload_libraries; without it every
// INSERT looks its key up.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>
#include <optional>

namespace fencing::pg::tombstone_summary {

// From _PG_init, while shared_preload_libraries is processed.
void init();

// How many rows of tombstones the table has (a run's row counting one),
// committed or in progress, counted up to `limit` + 1, the greatest of
// their tokens, and the greatest of its runs' tokens (tombstones::survey):
// asked once per table after the server starts, at the first look.
using Survey = std::int64_t (*)(Oid owner, std::int64_t limit, std::int64_t* greatest, std::int64_t* runs_greatest);

// Before a tombstone of the table `owner` keeps them for is written with
// `token` (or a greater one, if the key's earlier tombstone has it); `run`
// when it goes into a run (1.2). With `survey`, a table not looked at yet is
// looked at first.
void recorded(Oid owner, std::int64_t token, Survey survey, bool run = false);

// (1.2) Whether a lookup of a key of the table `owner` keeps tombstones for,
// written with `token`, must read the table's runs (core::runs_may_reject):
// asked with the table's run lock held, which a DELETE recording runs takes
// only after it recorded them here.
bool runs_may_reject(Oid owner, std::int64_t token);

// Whether an INSERT with `token` (the one it is judged with: the row's, else
// fencing.token) into a table whose tombstones `owner` keeps may skip the
// lookup in this transaction.
bool insert_may_skip(Oid owner, Survey survey, std::optional<std::int64_t> token);

}  // namespace fencing::pg::tombstone_summary

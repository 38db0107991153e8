// Tombstone runs (1.2): the tombstones of a DELETE of many rows, recorded
// together at the end of its statement, in fencing.tombstone_runs, instead
// of a row and an index entry per key in fencing.tombstones.
//
// A fenced DELETE statement records its first kRowsBeforeRuns tombstones one
// by one (tombstones::record()). From the next row on it takes the table's
// run lock (RowExclusiveLock, until its transaction ends) and only keeps the
// key's hash in memory (a key of one int4 or int8 column: its value, hashed
// with the rest when they are written or looked at); the statement's hashes are written when its
// executor finishes (or before its transaction commits or prepares),
// grouped by range into rows of up to kRunChunk hashes that share the
// DELETE's token: one heap row and one index entry per row of hashes. An
// aborted (sub)transaction forgets its hashes with its deletions.
//
// The run lock replaces the key lock of every row the statement records
// this way: an INSERT that looks its key up (tombstones::claim()) holds the
// run lock of the table in ShareLock from its lookup until its row is in
// the primary key index, so it either looks up after the DELETE's
// transaction has ended (its runs committed, or gone with it), or has its row
// in the index before the DELETE removes any row of the run (the DELETE
// then meets it as a live row).
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

#include "core/tombstone_runs.hpp"

namespace fencing::pg::tombstone_runs {

using core::tombstone_runs::kRowsBeforeRuns;
using core::tombstone_runs::kRunChunk;

// From _PG_init: the executor hook and the transaction callbacks.
void init();

// Whether the database has fencing.tombstone_runs (an extension updated to 1.2).
bool available();

// The run lock of the table OWNER keeps tombstones for.
LOCKTAG run_tag(Oid owner);

// Records, when the statement's executor finishes, that the row of REL with
// key HASH was deleted with TOKEN, under OWNER (tombstones::record()'s
// arguments). Takes the run lock first. RAW not 0: HASH is the key's value,
// of a key of that kind (tombstones::Key::raw), hashed when the hashes are
// written or looked at (tombstones::hash_raw).
void defer(Relation rel, Oid owner, std::uint64_t hash, std::int64_t token, int raw);

// Before a lookup of OWNER's tombstones in this backend: this
// (sub)transaction's hashes not written yet are written now.
void write_pending();

// fencing.tombstone_runs as a transaction's lookups read it (kept open by
// tombstones.cpp's handle): the table and its index, a slot of the table.
struct Reader {
    Relation heap;
    Relation index;
    TupleTableSlot* slot;
};

// Opens READER (AccessShareLock; the index once the table is locked) in the
// current memory context and resource owner; false when the database has no
// fencing.tombstone_runs.
bool open_reader(Reader* reader);
void close_reader(Reader* reader);

// The greatest token, at least AT_LEAST, of a run of OWNER that holds HASH
// (this transaction's hashes not written yet included), read through
// READER (nullptr: the database has no runs table): *FOUND false when none.
// When a transaction in progress writes or removes such a run, its xid is
// returned (nothing else is valid then): wait for it and ask again.
TransactionId probe(const Reader* reader, Oid owner, std::uint64_t hash, std::int64_t at_least, bool* found,
                    std::int64_t* token);

// How many rows OWNER's runs have, committed or in progress, counted up to
// LIMIT + 1, raising *GREATEST to their greatest token (left as it is when
// there are none).
std::int64_t survey(Oid owner, std::int64_t limit, std::int64_t* greatest);

// Whether OWNER has a run: a committed one (true), none (false), or the xid
// of a transaction in progress that writes or removes one in *WRITER.
bool any(Oid owner, TransactionId* writer);

// The least table OID above AFTER that has runs, or InvalidOid; from
// relations opened and closed here.
Oid next_after(Oid after);

// Moves FROM's runs to TO (tombstones::move_table()); returns how many hashes.
std::int64_t move(Oid from, Oid to);

// Removes RELID's runs (a table being dropped); returns how many hashes.
std::int64_t remove(Oid relid);

// Removes runs recorded before CUTOFF, at most BUDGET hashes (whole rows),
// leaving those another transaction is removing; returns how many hashes.
std::int64_t forget(TimestampTz cutoff, std::int64_t budget);

}  // namespace fencing::pg::tombstone_runs

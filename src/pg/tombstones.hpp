// Tombstones: the token with which a row of a protected table was deleted,
// per (table, primary key), in fencing.tombstones, so that a later INSERT of
// the key (or an UPDATE that moves a row onto it) is judged against it.
//
// The table a tombstone is kept under is the one that owns the protection
// of the table that held the row (owner_of()): its top-most protected
// ancestor through pg_inherits (partitioned tables and inheritance parents
// alike), or the table itself. So a key deleted anywhere in a protected
// hierarchy is judged on an INSERT anywhere in it, into whichever table the
// row lands (one created after the DELETE too), and a partition or child
// dropped takes none of them along.
//
// Written by the module under the writer's own transaction (an aborted
// DELETE leaves none; no privilege of the writer is needed), read as
// committed or in progress (never through the writer's snapshot), and
// removed by fencing.forget_tombstones() and with their table (the event
// trigger fencing_sql_drop). See docs/design.md, "Tombstones",
// for the lock that keeps a DELETE and an INSERT of one key running at once
// from missing each other.
#pragma once
#include "pg/pg.hpp"
#include "pg/row_attr.hpp"

#include <cstdint>
#include <optional>

namespace fencing::pg::tombstones {

// How a table's primary key is hashed; built once per statement and table
// (a call site of the trigger).
struct Key {
    bool built;
    bool usable;          // an immediate primary key whose columns all hash
    const char* problem;  // why not (a sentence), when !usable
    Oid other_owner;      // (prepare()) other_owner_of() the table, or InvalidOid
    int natts;
    int raw;              // a key of one int4 or int8 column: kRawInt4 or kRawInt8 (see hash_raw), else 0
    bool legacy_differs;  // a column hashes otherwise than before 1.2 (see legacy_hash_key)
    AttrNumber att[INDEX_MAX_KEYS];
    Oid coll[INDEX_MAX_KEYS];
    FmgrInfo hash[INDEX_MAX_KEYS];
};

// The key locks a call site holds: those taken for its last row, from that
// row's check until the row is in the primary key index (the call site's
// next row, or the end of the statement: when CXT of claim(), the
// statement's memory, goes; or with the (sub)transaction that aborts).
struct Site {
    int nlocks;
    LOCKTAG tag[2];
    LOCKMODE mode[2];
    ResourceOwner lock_owner[2];
    bool callback_set;
    MemoryContextCallback callback;
};

// Fills KEY for REL (memory for the function lookups in CXT) and returns
// owner_of() REL (with KEY->other_owner), both from a per-backend cache (so
// a statement on a protected table reads no catalog for them): an entry is built again after a relcache invalidation of
// the table, of its primary key index or of an ancestor owner_of() looked at, and after any change to functions,
// operators or types.
Oid prepare(Key* key, Relation rel, Oid check_fn, MemoryContext cxt);

// Why RELID's primary key cannot carry tombstones (a sentence), or nullptr.
const char* key_problem(Oid relid);

// What RELID's tombstones' hashes depend on: its primary key's columns in
// order, their collations and hash functions, and their types' parts at any
// depth ("" without a usable primary key); palloc'd.
char* key_fingerprint(Oid relid);

// The least OID above AFTER under which tombstones are kept, or InvalidOid.
Oid next_table_with_tombstones(Oid after);

// Whether a tombstone is kept under RELID, committed (one that a
// transaction in progress writes or removes is waited for).
bool has_tombstones(Oid relid);

// Refuses (0A000) RELID, locked, keeping its tombstones under OWNER with
// another primary key than OWNER's (other columns, another order: its keys
// would not meet those of the rest of the hierarchy); the check of every
// write does the same (55000, no usable primary key).
void refuse_other_key(Oid relid, Oid owner);

// The 64-bit hash of TUP's primary key (KEY must be usable): equal keys, as
// the primary key compares them, hash equally.
std::uint64_t hash_key(const Key* key, Relation rel, HeapTuple tup);

// (1.2) The hash TUP's key had before 1.2, under which a tombstone recorded
// then is kept: PostgreSQL's hash functions alone, which fold 64-bit values
// (bigint, timestamp, timestamptz, time) into 32 bits and leave a numeric's
// sign out, so that keys differing there shared one tombstone. hash_key()
// hashes those values by all their bits and a numeric with its sign; the
// two differ only for keys with such a column (Key::legacy_differs).
std::uint64_t legacy_hash_key(const Key* key, Relation rel, HeapTuple tup);

// A key of one int4 or int8 column (Key::raw) can be kept as its value and
// hashed later, in bulk (tombstone runs): hash_raw(key->raw, v) of the
// value v of TUP's key column (raw_key()) is hash_key(key, rel, tup).
inline constexpr int kRawInt4 = 4;
inline constexpr int kRawInt8 = 8;
std::uint64_t hash_raw(int raw, std::int64_t value);
inline std::int64_t raw_key(const Key* key, Relation rel, HeapTuple tup) {
    bool isnull = false;  // a primary key column is never null
    const Datum v = row_attr(tup, RelationGetDescr(rel), key->att[0], &isnull);
    return key->raw == kRawInt4 ? static_cast<std::int64_t>(DatumGetInt32(v)) : DatumGetInt64(v);
}

// Whether the primary keys of tuples A and B of REL have the same bytes
// (then they are equal and hash equally; false says nothing): an UPDATE
// that leaves the key alone needs no hashing.
bool same_key_bytes(const Key* key, Relation rel, HeapTuple a, HeapTuple b);

// The table whose tombstones (and key locks) a write to RELID uses: the
// top-most ancestor that carries a trigger on CHECK_FN (fencing.enforce),
// following at each level the first such parent in inhseqno order; RELID
// itself when no parent carries one. Read from the catalogs (no lock on the
// ancestors); the trigger takes it from prepare()'s cache.
Oid owner_of(Oid relid, Oid check_fn);

// (1.2) Another top-most ancestor that carries the check, reached through
// any parent that carries it (RELID an inheritance child of several
// parents, in two protected hierarchies), or InvalidOid: then no single
// owner's tombstones judge RELID's writes, and they are refused (0A000).
Oid other_owner_of(Oid relid, Oid check_fn);

// For a row about to (re)create key HASH under OWNER (owner_of() the
// table) with a token of AT_LEAST (the least a tombstone that may reject it
// can have): takes the table's run lock and the key's lock (kept in SITE
// until release()) and returns the token of the key's tombstone, if any (of
// its runs, only one of at least AT_LEAST counts), once no transaction in
// progress is writing that tombstone. LEGACY: the key's legacy_hash_key(),
// under which a tombstone recorded before 1.2 may be kept (equal to HASH
// when the key hashes as it did then).
std::optional<std::int64_t> claim(Oid owner, std::uint64_t hash, std::uint64_t legacy, std::int64_t at_least,
                                  Site* site, MemoryContext cxt);

// Refuses (25006) to record a deletion of a row of REL in a read-only
// transaction.
void refuse_read_only(Relation rel);

// Records that the row of REL (named in errors) with key HASH was deleted
// with TOKEN, under OWNER (owner_of() REL), keeping a newer tombstone's
// token.
void record(Relation rel, Oid owner, std::uint64_t hash, std::int64_t token);

// Moves every tombstone kept under FROM to TO (a table that joins TO's
// protected hierarchy: ATTACH PARTITION, INHERIT), a key's newer token
// winning where both have one; FROM must be locked against writes. Returns
// how many.
std::int64_t move_table(Oid from, Oid to);

// (1.2) After RELID's check was installed (protect()): the tables a write
// through RELID reaches (locked against writes here) may have owned their
// protection before (protected before RELID, or an ancestor unprotected),
// and keep tombstones under themselves: they move to the owner they have
// now. A table among them in two protected hierarchies (other_owner_of())
// is refused (0A000). Returns how many moved.
std::int64_t join_owner(Oid relid, Oid check_fn);

// Removes every tombstone kept under RELID, a table being dropped (it is
// locked, so none of its rows is being written); returns how many. A
// partition or inheritance child keeps none of its rows' tombstones (its
// protected ancestor does), only those from a time it owned its protection
// (protected alone, or detached).
std::int64_t remove_table(Oid relid);

// Removes the tombstones recorded before CUTOFF, at most 10,000 (the oldest
// are not necessarily first: call again until it returns 0), leaving those
// whose key is being written at the moment; returns how many it removed.
std::int64_t forget_older_than(TimestampTz cutoff);

// How many tombstone rows (of fencing.tombstones or fencing.tombstone_runs)
// this backend has written so far, rolled back or not: a count that only
// grows. note_write() counts one.
std::uint64_t writes();
void note_write();

// Closes fencing.tombstones and its indexes if the transaction has them
// open (they stay open from one statement to the next, for the writes of a
// transaction): before a utility statement, which may drop them (DROP
// EXTENSION after a write or a DROP TABLE in the same transaction, as
// pg_restore --clean --single-transaction does) and refuses relations in
// use. The locks stay until the transaction ends.
void close_before_utility();

// Releases the key locks SITE holds (those of the current resource owner;
// the others go with their owner, at the end of the (sub)transaction).
void release(Site* site);

// (1.2) How many rows of tombstones the table whose tombstones OWNER keeps
// has (a row of fencing.tombstones or of fencing.tombstone_runs each),
// committed or in progress, counted up to LIMIT + 1, and the greatest of
// their tokens in *GREATEST (for tombstone_summary).
// *RUNS_GREATEST is raised to the greatest token of its runs.
std::int64_t survey(Oid owner, std::int64_t limit, std::int64_t* greatest, std::int64_t* runs_greatest);

}  // namespace fencing::pg::tombstones

// The one per-backend cache of fencing's own catalog objects: the OID of
// schema fencing, of the extension's tables and indexes, of the function
// fencing.enforce and of the type fencing.token, and the checks of the
// tables' layouts. Every file asks here; nothing else looks these objects up
// by name or registers an invalidation callback for them.
//
// Only objects found are remembered (a missing one is looked up again at
// the next call). One set of callbacks, registered at the first lookup,
// forgets them: a relcache invalidation of a relation forgets that
// relation's OID (a relcache reset all of them), any change to pg_namespace
// forgets everything, and any change to pg_proc or pg_type the function's or
// the type's OID. The generations below let a file tell that what it
// derived from a relation (its rows, a secret) is stale, without a callback
// of its own.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

// The relations of schema fencing the module reads or writes.
enum class FencingRel {
    fence_state,
    fence_state_pkey,
    token_seq,
    key_secret,
    notify_settings,  // from 1.1 on
    tombstones,       // from 1.1 on
    tombstones_pkey,
    retired,         // from 1.2 on
    tombstone_runs,  // from 1.2 on
    tombstone_runs_key,
};

// The OID of the extension's schema (named fencing unless renamed), or
// InvalidOid without the extension.
Oid fencing_namespace();

// The relation's OID, or InvalidOid when it does not exist (a database
// without the extension, or still at a version without it). Only a member
// of the extension, in its schema, counts.
Oid fencing_relation(FencingRel which);

// The relation's OID; errors (55000, "fencing extension is not installed in
// this database") when it does not exist.
Oid required_fencing_relation(FencingRel which);

// Changes whenever the relation's OID, once found here, is forgotten (a
// relcache invalidation of the relation, a relcache reset, a change to
// pg_namespace): what a file derived from the relation after looking it up
// (its rows, the secret) is stale once the value saved then differs.
std::uint64_t fencing_relation_generation(FencingRel which);

// Changes at every relcache invalidation of any relation (a relation that
// does not exist yet may be any of them once created).
std::uint64_t relcache_generation();

// fencing.enforce(), found without a privilege check on schema fencing, or
// InvalidOid.
Oid enforce_function();

// The type fencing.token, or InvalidOid.
Oid token_type();

// fence_state, its primary key index and the token counter's sequence, all
// required (errors as required_fencing_relation()).
struct FenceOids {
    Oid state = InvalidOid;  // fencing.fence_state
    Oid index = InvalidOid;  // fencing.fence_state_pkey
    Oid seq = InvalidOid;    // fencing.token_seq
};

const FenceOids& fence_oids();

// Changes whenever any of fence_oids() is forgotten: what a backend
// remembers of the relations (the counter's records) is stale once it
// differs.
std::uint64_t fence_oids_generation();

// fencing.fence_state_pkey, to be read only once fencing.fence_state is
// locked: taking that lock processes the invalidations of a REINDEX
// CONCURRENTLY that swapped the index, whose old OID goes away once the
// transactions that locked the table before the swap have ended. (The same
// holds for fencing.tombstones and its index.)
Oid state_index();

// ---------------------------------------------------------------------------
// Layouts. Each check errors (XX001, "fencing.<table> has an unexpected
// layout") when the table's columns are not the ones below.
// ---------------------------------------------------------------------------

// Tokens and grants are recorded outside the transaction (the counter's
// page, the fence state's rows in place or frozen, their index entries):
// none may go into storage of the module's relations that the current
// transaction replaced (TRUNCATE, CLUSTER, REINDEX, SET TABLESPACE, ALTER
// SEQUENCE ... RESTART), which its rollback would swap back for the old
// storage without them. (A relation renamed or created in the place of one
// of them is not found: fencing_relation() takes only the extension's
// members, in the extension's schema. A transaction that created the
// extension wrote its secret, which refuses its acquisitions:
// key_secret.hpp.)
//
// Whether the current transaction gave RELID new storage.
bool made_here(Oid relid);
// Errors (25000) when it did.
void refuse_if_made_here(Oid relid);
// Errors (25000) when it did so to fencing.fence_state, its primary key,
// fencing.token_seq or fencing.key_secret, or made one of them a member of
// the extension (ALTER EXTENSION ... ADD, a superuser's) without creating
// the extension. Free in a transaction without a transaction id, which
// wrote nothing.
void refuse_if_fence_made_here();
// Errors (25000) when the current transaction dropped the extension and
// created it again, for a token returned to the caller (advance_past): a
// rollback brings the earlier counter back, which may be behind it. (Its
// acquisitions are refused by the new secret: key_secret.hpp.)
void refuse_if_counter_replaced_here();

// Column numbers of fencing.fence_state.
constexpr int kAttKey = 1, kAttToken = 2, kAttGrantedAt = 3, kAttLease = 4, kAttResource = 5;
constexpr int kNatts = 5;
void check_fence_state_layout(Relation rel);

// fencing.key_secret's one column.
constexpr int kAttSecret = 1;
void check_key_secret_layout(Relation rel);

// fencing.notify_settings's one column (the resource; NULL for all).
void check_notify_settings_layout(Relation rel);

// Column numbers of fencing.tombstones.
namespace tombstone_att {
constexpr int kTbl = 1, kHash = 2, kToken = 3, kDeletedAt = 4, kNatts = 4;
}
void check_tombstones_layout(Relation rel);

// Column numbers of fencing.tombstone_runs (1.2): tbl and token where
// fencing.tombstones has them, so that fencing.local_state() reads both
// tables alike.
namespace run_att {
constexpr int kTbl = 1, kLo = 2, kToken = 3, kDeletedAt = 4, kHi = 5, kHashes = 6, kNatts = 6;
}
void check_tombstone_runs_layout(Relation rel);

}  // namespace fencing::pg

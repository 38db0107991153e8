// Lock tags of fencing. They are advisory-type tags (so pg_locks shows them and
// the deadlock detector sees them) with field4 values PostgreSQL's own
// advisory functions never use (they use 1 and 2): the application's
// pg_advisory_lock keys can never meet ours.
//
// The k...TagKind values below are the one definition of these numbers. SQL
// that writes one (the fencing.locks view) names the constant beside it,
// `32257 /* kResourceTagKind */`, and the build fails when the two disagree
// (tests/scripts/check_lock_tags.sh); the docs and tests may only write
// numbers of the 0x7E00-0x7EFF range that are defined here.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

#include "core/resource_key.hpp"

namespace fencing::pg {

inline constexpr uint16 kResourceTagKind = 0x7E01;  // (db, key hi, key lo): the resource itself
inline constexpr uint16 kTokenTagKind = 0x7E02;     // (db, token hi, token lo): held with the token
inline constexpr uint16 kGuardTagKind = 0x7E03;     // (db, key hi, key lo): validate()-guarded writes
// (db, hash of table and primary key): a key of a protected table while a
// write creates or removes it (tombstones.cpp).
inline constexpr uint16 kTombstoneTagKind = 0x7E10;
// (1.2) (db, table): the run lock of a protected table (tombstone_runs.hpp).
inline constexpr uint16 kTombstoneRunTagKind = 0x7E11;
// Tags of the options of 1.1 (pg/lock_options.hpp); 0x7E04 .. 0x7E08 = 32260 .. 32264.
inline constexpr uint16 kDelayTagKind = 0x7E04;        // (db, end of delay in s, key lo): a lost grant in its delay
inline constexpr uint16 kPermitsHeldTagKind = 0x7E05;  // (db, key hi, key lo): some permit of the resource is held
inline constexpr uint16 kPermitCountTagKind = 0x7E06;  // (db, key hi, key lo ^ N): a permit held with count N
inline constexpr uint16 kSharedXactTagKind = 0x7E07;   // (db, key hi, key lo): a shared hold is transaction-scoped
inline constexpr uint16 kPermitQueueTagKind = 0x7E08;  // (db, key hi, key lo): waiters for a permit

// Session holds take the resource in ExclusiveLock, transaction holds in
// ShareRowExclusiveLock: the two conflict with each other and with
// themselves, never with the same backend's own holds, and pg_locks tells the
// scope apart.
inline constexpr LOCKMODE kSessionMode = ExclusiveLock;
inline constexpr LOCKMODE kXactMode = ShareRowExclusiveLock;
// Shared holds take the resource in ShareLock, in either scope: it conflicts
// with both exclusive modes, not with itself. Their token tag is held in
// RowExclusiveLock, which validate()'s probe does not conflict with: a shared
// hold shares the latest exclusive token, and must not make it valid again
// once the exclusive grant is over (a lost writer would pass validate()).
inline constexpr LOCKMODE kSharedMode = ShareLock;
inline constexpr LOCKMODE kTokenSharedMode = RowExclusiveLock;
// Token tags are held in ExclusiveLock by exclusive grants and permits;
// validate() probes them with RowExclusiveLock, which conflicts with that
// and neither with shared holders nor with other probes.
inline constexpr LOCKMODE kTokenHoldMode = ExclusiveLock;
inline constexpr LOCKMODE kTokenProbeMode = RowExclusiveLock;
// A successful validate() holds the resource's guard tag in ShareLock until its
// transaction ends; every acquisition that finds it held takes (and at once
// releases) the guard in ExclusiveLock before it issues a new token, so no
// transaction that validated an older token is still open when a newer token
// exists.
inline constexpr LOCKMODE kGuardHoldMode = ShareLock;
inline constexpr LOCKMODE kGuardDrainMode = ExclusiveLock;

inline LOCKTAG resource_tag(std::uint64_t key) {
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, core::key_high(key), core::key_low(key), kResourceTagKind);
    return tag;
}

inline LOCKTAG token_tag(std::int64_t token) {
    std::uint64_t t = static_cast<std::uint64_t>(token);
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, core::key_high(t), core::key_low(t), kTokenTagKind);
    return tag;
}

inline LOCKTAG guard_tag(std::uint64_t key) {
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, core::key_high(key), core::key_low(key), kGuardTagKind);
    return tag;
}

// A tag of one of the 1.1 kinds over (hi, lo).
inline LOCKTAG option_tag(uint16 kind, std::uint32_t hi, std::uint32_t lo) {
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, hi, lo, kind);
    return tag;
}

inline bool held_by_me(const LOCKTAG& tag, LOCKMODE mode) { return compat::lock_held_by_me(&tag, mode); }

}  // namespace fencing::pg

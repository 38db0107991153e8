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

// Session holds take the resource in ExclusiveLock, transaction holds in
// ShareRowExclusiveLock: the two conflict with each other and with
// themselves, never with the same backend's own holds, and pg_locks tells the
// scope apart.
inline constexpr LOCKMODE kSessionMode = ExclusiveLock;
inline constexpr LOCKMODE kXactMode = ShareRowExclusiveLock;
// Token tags are held in ExclusiveLock; validate() probes them with ShareLock.
inline constexpr LOCKMODE kTokenHoldMode = ExclusiveLock;
inline constexpr LOCKMODE kTokenProbeMode = ShareLock;
// A successful validate() holds the resource's guard tag in ShareLock until its
// transaction ends; every acquisition takes (and at once releases) the guard
// in ExclusiveLock before it issues a new token, so no transaction that
// validated an older token is still open when a newer token exists.
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

inline bool held_by_me(const LOCKTAG& tag, LOCKMODE mode) {
    return compat::lock_held_by_me(&tag, mode);
}

}  // namespace fencing::pg

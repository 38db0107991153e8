// This session's fencing holds: per resource key, how many session-scoped and
// transaction-scoped holds it has (transaction holds per subtransaction, since
// an aborted subtransaction releases the locks it took), the token they were
// granted with, and the lease they asked for.
//
// The lock manager is the source of truth for whether a lock is held; the
// ledger only remembers what the lock manager cannot tell us (scope counts,
// token, lease). The glue re-synchronises it when the two disagree (e.g. after
// pg_advisory_unlock_all()).
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fencing::core {

struct Hold {
    std::int64_t token = 0;
    std::uint32_t session = 0;
    // (subtransaction id, count), innermost last.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> xact;
    std::int64_t lease_ms = 0;  // 0: no lease
    // The statement that took the first hold (an opaque stamp of the caller's;
    // see add()).
    std::int64_t statement = 0;

    std::uint32_t xact_total() const noexcept;
    bool held() const noexcept { return session > 0 || xact_total() > 0; }
};

class HoldLedger {
public:
    // Records one more hold of `key`. `token` and `lease_ms` replace the
    // stored ones only for a key that was not held (a nested hold keeps them,
    // except that a shorter non-zero lease wins).
    // `statement` identifies the statement taking the hold; it is kept for a
    // key that was not held.
    void add(std::uint64_t key, std::int64_t token, bool session, std::uint32_t subxact, std::int64_t lease_ms,
             std::int64_t statement = 0);

    // Removes one session hold. False when there is none.
    bool release_session(std::uint64_t key);

    // The hold of key, or nullptr.
    const Hold* find(std::uint64_t key) const noexcept;

    // Forget every hold of key (the lock manager says it is gone).
    void forget(std::uint64_t key) noexcept;

    // Keys that have session holds, with their counts and tokens, written to
    // out[0 .. cap) without allocating (so that the caller may use plain
    // memory it owns); returns how many were written (at most size()).
    struct SessionHold {
        std::uint64_t key;
        std::uint32_t count;
        std::int64_t token;
    };
    std::size_t copy_session_holds(SessionHold* out, std::size_t cap) const noexcept;

    // Keys that have a leased hold, with their leases, written to
    // out[0 .. cap) without allocating; returns how many there are in all
    // (more than cap when out was too small).
    struct LeasedHold {
        std::uint64_t key;
        std::int64_t lease_ms;
    };
    std::size_t copy_leased_holds(LeasedHold* out, std::size_t cap) const noexcept;

    // Subtransaction `sub` committed into `parent`: its holds now belong to the parent.
    void subxact_commit(std::uint32_t sub, std::uint32_t parent);
    // Subtransaction `sub` aborted: its transaction holds are gone.
    void subxact_abort(std::uint32_t sub);
    // The top-level transaction ended: every transaction hold is gone.
    void xact_end();
    // Whether any key has a transaction hold (a transaction that holds one
    // must not be prepared: the lock would outlive its holder, unleased).
    bool any_xact() const noexcept;

    // Shortest lease among held keys; 0 when none is leased. Constant time
    // unless some hold is leased (then linear in the holds).
    std::int64_t shortest_lease() const noexcept;
    std::size_t size() const noexcept { return holds_.size(); }

private:
    using Map = std::unordered_map<std::uint64_t, Hold>;
    void drop_if_free(Map::iterator it);
    void erase(Map::iterator it) noexcept;
    Map holds_;
    std::size_t leased_ = 0;  // holds with lease_ms > 0
};

}  // namespace fencing::core

// What lock-event notifications need to remember (pure: no PostgreSQL header).
//
//  * NotifyKeys: the resources notifications are enabled for in this database
//    (by 64-bit resource key), or all of them.
//  * Announcements: this session's grants of such resources whose end it
//    will announce (released or lost): the name, the token, the scope of the
//    grant, and for transaction-scoped grants the subtransaction that took
//    them (an aborted subtransaction's grants were never announced, since
//    their notifications are discarded with it, and end silently).
//
// The lock manager remains the truth about what is held; the glue asks it
// when a transaction commits and when the session ends.
#pragma once
#include "core/no_postgres.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace fencing::core {

class NotifyKeys {
public:
    // Replaces the set: every resource when `all`, else the n keys given.
    void assign(bool all, const std::uint64_t* keys, std::size_t n);
    // Whether any resource's notifications are enabled.
    bool any() const noexcept { return all_ || !keys_.empty(); }
    bool enabled(std::uint64_t key) const noexcept;
    std::size_t size() const noexcept { return keys_.size(); }

private:
    bool all_ = false;
    std::vector<std::uint64_t> keys_;  // sorted, unique
};

class Announcements {
public:
    struct Grant {
        std::int64_t token = 0;
        std::string resource;
        bool session = false;       // the grant is (now) session-scoped
        std::uint32_t subxact = 0;  // for a transaction-scoped grant: its subtransaction
    };

    // Records a grant of `key` (replacing an earlier one of the same key).
    void add(std::uint64_t key, std::int64_t token, const char* resource, std::size_t len, bool session,
             std::uint32_t subxact);
    const Grant* find(std::uint64_t key) const noexcept;
    void remove(std::uint64_t key) noexcept;
    // The grant of key is held at session scope from now on.
    void mark_session(std::uint64_t key) noexcept;

    // Subtransaction `sub` committed into `parent` / aborted (its
    // transaction-scoped grants end unannounced).
    void subxact_commit(std::uint32_t sub, std::uint32_t parent) noexcept;
    void subxact_abort(std::uint32_t sub) noexcept;
    // The top-level transaction aborted: its transaction-scoped grants end unannounced.
    void drop_transaction_grants() noexcept;

    // Keys of every recorded grant, written to out[0 .. cap); returns how many.
    std::size_t copy_keys(std::uint64_t* out, std::size_t cap) const noexcept;
    std::size_t size() const noexcept { return grants_.size(); }
    void clear() noexcept { grants_.clear(); }

private:
    std::unordered_map<std::uint64_t, Grant> grants_;
};

}  // namespace fencing::core

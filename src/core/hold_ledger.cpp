#define FENCING_CORE_SOURCE 1
#include "core/hold_ledger.hpp"

#include <algorithm>

namespace fencing::core {

std::uint32_t Hold::xact_total() const noexcept {
    std::uint32_t n = 0;
    for (const auto& level : xact) n += level.second;
    return n;
}

bool HoldLedger::any_xact() const noexcept {
    for (const auto& [key, hold] : holds_)
        if (hold.xact_total() > 0) return true;
    return false;
}

void HoldLedger::add(std::uint64_t key, std::int64_t token, bool session, std::uint32_t subxact, std::int64_t lease_ms,
                     std::int64_t statement) {
    Hold& h = holds_[key];
    const bool was_leased = h.lease_ms > 0;
    if (!h.held()) {
        h.token = token;
        h.lease_ms = lease_ms;
        h.statement = statement;
    } else if (lease_ms > 0 && (h.lease_ms == 0 || lease_ms < h.lease_ms)) {
        h.lease_ms = lease_ms;
    }
    if (!was_leased && h.lease_ms > 0) ++leased_;
    if (was_leased && h.lease_ms <= 0) --leased_;
    if (session) {
        ++h.session;
        return;
    }
    if (!h.xact.empty() && h.xact.back().first == subxact)
        ++h.xact.back().second;
    else
        h.xact.emplace_back(subxact, 1);
}

bool HoldLedger::release_session(std::uint64_t key) {
    auto it = holds_.find(key);
    if (it == holds_.end() || it->second.session == 0) return false;
    --it->second.session;
    drop_if_free(it);
    return true;
}

const Hold* HoldLedger::find(std::uint64_t key) const noexcept {
    auto it = holds_.find(key);
    return it == holds_.end() ? nullptr : &it->second;
}

void HoldLedger::forget(std::uint64_t key) noexcept {
    auto it = holds_.find(key);
    if (it != holds_.end()) erase(it);
}

void HoldLedger::erase(Map::iterator it) noexcept {
    if (it->second.lease_ms > 0) --leased_;
    holds_.erase(it);
}

std::size_t HoldLedger::copy_session_holds(SessionHold* out, std::size_t cap) const noexcept {
    std::size_t n = 0;
    for (const auto& [key, h] : holds_)
        if (h.session > 0 && n < cap) out[n++] = SessionHold{key, h.session, h.token};
    return n;
}

std::size_t HoldLedger::copy_leased_holds(LeasedHold* out, std::size_t cap) const noexcept {
    if (leased_ == 0) return 0;
    std::size_t n = 0;
    for (const auto& [key, h] : holds_) {
        if (h.lease_ms <= 0) continue;
        if (n < cap) out[n] = LeasedHold{key, h.lease_ms};
        ++n;
    }
    return n;
}

void HoldLedger::subxact_commit(std::uint32_t sub, std::uint32_t parent) {
    for (auto& [key, h] : holds_) {
        (void)key;
        for (auto& level : h.xact)
            if (level.first == sub) level.first = parent;
        // Merge adjacent entries that now name the same subtransaction.
        std::vector<std::pair<std::uint32_t, std::uint32_t>> merged;
        for (const auto& level : h.xact) {
            if (!merged.empty() && merged.back().first == level.first)
                merged.back().second += level.second;
            else
                merged.push_back(level);
        }
        h.xact.swap(merged);
    }
}

void HoldLedger::subxact_abort(std::uint32_t sub) {
    for (auto it = holds_.begin(); it != holds_.end();) {
        auto& xs = it->second.xact;
        xs.erase(std::remove_if(xs.begin(), xs.end(), [sub](const auto& l) { return l.first == sub; }), xs.end());
        auto next = std::next(it);
        drop_if_free(it);
        it = next;
    }
}

void HoldLedger::xact_end() {
    for (auto it = holds_.begin(); it != holds_.end();) {
        it->second.xact.clear();
        auto next = std::next(it);
        drop_if_free(it);
        it = next;
    }
}

std::int64_t HoldLedger::shortest_lease() const noexcept {
    if (leased_ == 0) return 0;
    std::int64_t best = 0;
    for (const auto& [key, h] : holds_) {
        (void)key;
        if (h.lease_ms > 0 && (best == 0 || h.lease_ms < best)) best = h.lease_ms;
    }
    return best;
}

void HoldLedger::drop_if_free(Map::iterator it) {
    if (!it->second.held()) erase(it);
}

}  // namespace fencing::core

#define FENCING_CORE_SOURCE 1
#include "core/announcements.hpp"

#include <algorithm>

namespace fencing::core {

void NotifyKeys::assign(bool all, const std::uint64_t* keys, std::size_t n) {
    std::vector<std::uint64_t> v(keys, keys + n);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    keys_.swap(v);
    all_ = all;
}

bool NotifyKeys::enabled(std::uint64_t key) const noexcept {
    return all_ || std::binary_search(keys_.begin(), keys_.end(), key);
}

void Announcements::add(std::uint64_t key, std::int64_t token, const char* resource, std::size_t len, bool session,
                        std::uint32_t subxact) {
    Grant g;
    g.token = token;
    g.resource.assign(resource, len);
    g.session = session;
    g.subxact = subxact;
    grants_[key] = std::move(g);
}

const Announcements::Grant* Announcements::find(std::uint64_t key) const noexcept {
    auto it = grants_.find(key);
    return it == grants_.end() ? nullptr : &it->second;
}

void Announcements::remove(std::uint64_t key) noexcept { grants_.erase(key); }

void Announcements::mark_session(std::uint64_t key) noexcept {
    auto it = grants_.find(key);
    if (it != grants_.end()) it->second.session = true;
}

void Announcements::subxact_commit(std::uint32_t sub, std::uint32_t parent) noexcept {
    for (auto& [key, g] : grants_)
        if (!g.session && g.subxact == sub) g.subxact = parent;
}

void Announcements::subxact_abort(std::uint32_t sub) noexcept {
    for (auto it = grants_.begin(); it != grants_.end();)
        it = !it->second.session && it->second.subxact == sub ? grants_.erase(it) : std::next(it);
}

void Announcements::drop_transaction_grants() noexcept {
    for (auto it = grants_.begin(); it != grants_.end();) it = !it->second.session ? grants_.erase(it) : std::next(it);
}

std::size_t Announcements::copy_keys(std::uint64_t* out, std::size_t cap) const noexcept {
    std::size_t n = 0;
    for (const auto& [key, g] : grants_) {
        if (n >= cap) break;
        out[n++] = key;
    }
    return n;
}

}  // namespace fencing::core

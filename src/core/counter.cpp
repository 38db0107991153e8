#include "core/counter.hpp"

namespace fencing::core {

namespace {
std::int64_t cover_from(std::int64_t token, std::int64_t ahead) noexcept {
    return token > INT64_MAX - ahead ? INT64_MAX : token + ahead;
}
}  // namespace

CounterPlan plan_next_token(const CounterPage& page, std::int64_t floor, std::uint64_t redo,
                            const CounterRecord& before, std::int64_t log_ahead) noexcept {
    CounterPlan plan;
    if (log_ahead < 2) log_ahead = 2;
    if (page.is_called && page.last_value == INT64_MAX) {
        plan.status = CounterStatus::exhausted;
        return plan;
    }
    std::int64_t token = page.is_called ? page.last_value + 1 : page.last_value;
    std::int64_t remaining = page.is_called ? page.log_cnt : 0;  // values under the newest record, token's included
    if (token <= floor) {
        if (floor == INT64_MAX) {
            plan.status = CounterStatus::exhausted;
            return plan;
        }
        token = floor + 1;
        remaining = 0;  // beyond what the newest record covers
    }
    plan.token = token;
    plan.covered = cover_from(token, log_ahead);
    const CounterRecord newest{page.lsn, page.is_called ? page.last_value + page.log_cnt : page.last_value};

    if (remaining <= 0 || page.lsn <= redo) {
        // Nothing replayable covers the token (or this is the page's first
        // change after a checkpoint, which must be logged anyway).
        plan.action = CounterAction::log_now;
        return plan;
    }
    plan.covering = newest;
    // The oldest replayable record known to cover the token: the likeliest
    // to be flushed already.
    if (before.lsn != 0 && before.lsn > redo && before.lsn < newest.lsn && before.upto >= token)
        plan.covering = before;
    const bool half_used = remaining - 1 < log_ahead / 2;
    plan.action = half_used && plan.covered > newest.upto ? CounterAction::log_ahead : CounterAction::count_down;
    return plan;
}

void SeenRecords::observe(const CounterRecord& r) noexcept {
    if (r.lsn == newest_.lsn) return;
    // An older LSN than the newest seen: another counter (the extension was
    // recreated); what was seen before says nothing about it.
    before_ = r.lsn > newest_.lsn ? newest_ : CounterRecord{};
    newest_ = r;
}

}  // namespace fencing::core

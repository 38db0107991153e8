#define FENCING_CORE_SOURCE 1
#include "core/counter.hpp"

namespace fencing::core {

namespace {
std::int64_t add_sat(std::int64_t a, std::int64_t b) noexcept { return a > INT64_MAX - b ? INT64_MAX : a + b; }
}  // namespace

bool stamp_vouches(const CounterStamp& on_page, const CounterStamp& here, std::uint64_t page_lsn,
                   std::uint64_t born) noexcept {
    return page_lsn != 0 && on_page.magic == kStampMagic && on_page.lsn == page_lsn && on_page.lsn > born &&
           on_page.tablespace == here.tablespace && on_page.database == here.database &&
           on_page.relfile == here.relfile && on_page.timeline == here.timeline &&
           on_page.server_start == here.server_start;
}

std::int64_t floor_limit(std::int64_t clock_us) noexcept {
    if (clock_us < 0) clock_us = 0;
    return add_sat(clock_us, 2 * kClockLead) - 1;
}

CounterPlan plan_next_token(const CounterPage& page, std::int64_t floor, std::uint64_t redo,
                            const CounterRecord& before, std::int64_t log_ahead, std::int64_t clock_us,
                            FloorReach reach) noexcept {
    CounterPlan plan;
    if (log_ahead < 2) log_ahead = 2;
    if (clock_us < 0) clock_us = 0;
    if (page.is_called && page.last_value == INT64_MAX) {
        plan.status = CounterStatus::exhausted;
        return plan;
    }
    std::int64_t token = page.is_called ? page.last_value + 1 : page.last_value;
    std::int64_t remaining = page.is_called ? page.log_cnt : 0;  // values under the newest record, token's included
    // The most a record may cover now; also where a fresh counter starts.
    const std::int64_t limit = add_sat(clock_us, kClockLead);
    if (!page.vouched) {
        // A page of unproven history (a copy, a restore, a replica, a
        // restart): tokens issued from other copies of it are below the
        // clock bound, not necessarily below its values.
        if (token < limit) token = limit;
        remaining = 0;
    }
    if (token <= floor) {
        if (reach == FloorReach::clock_bound && floor > floor_limit(clock_us)) {
            plan.status = CounterStatus::beyond_bound;
            plan.bound = floor_limit(clock_us);
            return plan;
        }
        if (floor == INT64_MAX) {
            plan.status = CounterStatus::exhausted;
            return plan;
        }
        token = floor + 1;
        remaining = 0;  // beyond what the newest record covers
    }
    plan.token = token;
    if (token <= limit) {
        plan.covered = add_sat(token, log_ahead);
        if (plan.covered > limit) plan.covered = limit;
    } else if (token - limit <= kClockLead) {
        // Past the bound by a little (tokens faster than the clock, or a
        // clock set back a little): let the clock catch up.
        plan.action = CounterAction::wait_for_clock;
        plan.wait_us = token - limit;
        return plan;
    } else {
        // Moved far past the clock by an unbounded floor, or the clock was
        // set back: outside the clock bound.
        plan.covered = add_sat(token, log_ahead);
    }
    const CounterRecord newest{page.lsn, page.is_called ? page.last_value + page.log_cnt : page.last_value};

    if (remaining <= 0 || page.lsn <= redo || !page.vouched) {
        // Nothing replayable covers the token (or this is the page's first
        // change after a checkpoint, which must be logged anyway).
        plan.action = CounterAction::log_now;
        return plan;
    }
    plan.covering = newest;
    // The oldest replayable record known to cover the token: the likeliest
    // to be flushed already.
    if (before.lsn != 0 && before.lsn > redo && before.lsn < newest.lsn && before.upto >= token) plan.covering = before;
    const bool half_used = remaining - 1 < (plan.covered - token) / 2;
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

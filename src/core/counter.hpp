// The token counter's plan for one token: which value to hand out, whether to
// WAL-log the counter now, and which WAL record makes the token durable.
//
// The counter is a page (the sequence fencing.token_seq's) that is WAL-logged
// ahead: a record says "the counter is at least `upto`", and values below it
// are then handed out by counting down on the page without WAL. A token may
// leave the backend once a flushed record covers it. Only records after the
// checkpoint's redo point count: recovery replays nothing older.
//
// The plan writes the next record early, when half of the current record's
// values are used, so that it is flushed (by the WAL writer) by the time the
// tokens need it, while the tokens of the second half name the older record,
// long flushed, as theirs. The PostgreSQL glue (pg/fence_state.cpp) carries
// the plan out under the page's buffer lock.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>

namespace fencing::core {

// A WAL record of the counter: where it ends (an LSN) and the value it covers.
struct CounterRecord {
    std::uint64_t lsn = 0;  // 0: none
    std::int64_t upto = 0;
};

// What the counter's page says.
struct CounterPage {
    std::int64_t last_value = 0;  // the value handed out last (or the start, when !is_called)
    std::int64_t log_cnt = 0;     // values left under the newest record
    bool is_called = false;
    std::uint64_t lsn = 0;        // end of the newest record
};

enum class CounterAction {
    count_down,  // hand out without WAL
    log_now,     // nothing replayable covers the token: log, and the token waits for that record
    log_ahead,   // hand out under the current record, and log the next one now
};

enum class CounterStatus { ok, exhausted };

struct CounterPlan {
    CounterStatus status = CounterStatus::ok;
    std::int64_t token = 0;
    CounterAction action = CounterAction::count_down;
    std::int64_t covered = 0;  // log_now / log_ahead: what the new record covers
    // count_down / log_ahead: the record the token waits for. log_now: the
    // new record, whose LSN only the caller learns.
    CounterRecord covering;
};

// The plan for the next token, greater than `floor` too. `redo` is the redo
// point of the current checkpoint; `before` a record older than the page's
// newest that the caller saw (lsn 0 when none); `log_ahead` >= 2.
CounterPlan plan_next_token(const CounterPage& page, std::int64_t floor, std::uint64_t redo,
                            const CounterRecord& before, std::int64_t log_ahead) noexcept;

// The newest two records a backend has seen of the counter.
class SeenRecords {
public:
    void observe(const CounterRecord& r) noexcept;
    const CounterRecord& before() const noexcept { return before_; }
    const CounterRecord& newest() const noexcept { return newest_; }
    void forget() noexcept { before_ = newest_ = CounterRecord{}; }

private:
    CounterRecord newest_, before_;
};

}  // namespace fencing::core

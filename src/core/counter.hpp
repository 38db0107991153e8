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
// long flushed, as theirs. The PostgreSQL glue (pg/counter_page.cpp) carries
// the plan out under the page's buffer lock.
//
// Two rules make the counter safe against copies and lost WAL, which a page
// cannot see by itself:
//
//  - The clock bound. A record never covers more than kClockLead past the
//    wall clock (microseconds since 1970) at the time it is written, so no
//    token ever exceeds the clock at its issue plus kClockLead. A counter that
//    cannot prove its history (below) starts at clock + kClockLead: above
//    every token any earlier copy of it issued, while the clock moves forward.
//  - The stamp. Right after writing a record, the glue stamps the live page
//    (outside the logged image: replay and copies never carry a valid one)
//    with what identifies this copy of the page and this run of the server:
//    the relation file, the timeline, the server's start time, the record's
//    LSN. Counting down is allowed only on a page whose stamp matches: the
//    newest record then provably covers this very file and will be replayed
//    into it after a crash. A page copied (CREATE DATABASE, a tablespace
//    move), restored (base backup, PITR), replayed (a standby, crash
//    recovery) or kept across a restart has no matching stamp: it is a fresh
//    counter and starts at the clock bound.
//  - The incarnation. A stamp names a place (database OID, file), and a
//    place can be taken again: a database dropped and created again under
//    its old OID (CREATE DATABASE ... OID = n) from a FILE_COPY snapshot of
//    itself carries a page whose stamp names that very OID, file, timeline
//    and server run. So a stamp counts only when its record is newer than
//    the current version of the database's own row in pg_database (the LSN
//    of the catalog page that holds it): that row is written by CREATE
//    DATABASE (and ALTER DATABASE), in a shared catalog that no copy of the
//    database carries, so every record of an earlier incarnation, or of the
//    database a snapshot was taken of, is older than it. A stamp made before
//    the row last changed (ALTER DATABASE, a VACUUM that advances
//    datfrozenxid) no longer counts either: the counter starts fresh once,
//    above its page, which never lowers a token.
//
// A floor (a value the next token must exceed: protect's table, a restored
// fence state row) moves the counter only within the clock bound: a floor
// whose next token would run past the bound by at most kClockLead waits for
// the clock like any token; one beyond that (floor_limit) is refused, so that
// no table and no restore can carry the counter out of the clock bound.
// Only a caller that accepts the cost (FloorReach::unbounded: a superuser's
// fencing.advance_past) moves it further; such a counter, and one whose
// clock was set back by more than kClockLead, is outside the bound: it logs
// ahead as before and is protected by its WAL alone, so copies and restores
// made while it is ahead of the clock can issue its tokens again.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>

namespace fencing::core {

// How far the counter's covered value (what a crash resumes at) may run ahead
// of the wall clock, in microseconds (2 s); a fresh counter starts this far
// ahead.
inline constexpr std::int64_t kClockLead = 2'000'000;

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
    std::uint64_t lsn = 0;  // end of the newest record
    // Whether the page's stamp matches (stamp_vouches): its newest record was
    // written by this server run for this very file, in this incarnation of
    // the database.
    bool vouched = true;
};

// What the glue writes beside the counter on the live page after each
// record, and what it expects there.
struct CounterStamp {
    std::uint32_t magic = 0;  // kStampMagic when written
    std::uint32_t tablespace = 0, database = 0, relfile = 0;
    std::uint32_t timeline = 0;
    std::uint32_t reserved = 0;
    std::int64_t server_start = 0;  // the postmaster's start time
    std::uint64_t lsn = 0;          // end of the record written just before the stamp
};
inline constexpr std::uint32_t kStampMagic = 0x434e4546;  // "FENC"

// Whether the stamp found on a page (`on_page`) vouches for it: written
// after the page's newest record (`page_lsn`), for the same file, on the same
// timeline, by the same server run as `here` (whose lsn is ignored), and
// after `born`, the WAL position at which the current incarnation of the
// database was last recorded (see below): a record older than that was
// written by an earlier incarnation, or by the one a copy was made of.
bool stamp_vouches(const CounterStamp& on_page, const CounterStamp& here, std::uint64_t page_lsn,
                   std::uint64_t born) noexcept;

enum class CounterAction {
    count_down,      // hand out without WAL
    log_now,         // nothing replayable covers the token: log, and the token waits for that record
    log_ahead,       // hand out under the current record, and log the next one now
    wait_for_clock,  // the token would run past the clock bound: wait wait_us, then plan again
};

// The largest floor that may move the counter at clock_us within the clock
// bound: its next token is then at most kClockLead past the bound, which the
// plan waits out (the clock + 2 * kClockLead - 1).
std::int64_t floor_limit(std::int64_t clock_us) noexcept;

// Whether a floor may move the counter past floor_limit.
enum class FloorReach { clock_bound, unbounded };

enum class CounterStatus {
    ok,
    exhausted,
    beyond_bound,  // the floor is past floor_limit (FloorReach::clock_bound): nothing is issued
};

struct CounterPlan {
    CounterStatus status = CounterStatus::ok;
    std::int64_t token = 0;
    CounterAction action = CounterAction::count_down;
    std::int64_t covered = 0;  // log_now / log_ahead: what the new record covers
    // count_down / log_ahead: the record the token waits for. log_now: the
    // new record, whose LSN only the caller learns.
    CounterRecord covering;
    std::int64_t wait_us = 0;  // wait_for_clock: how long
    std::int64_t bound = 0;    // beyond_bound: floor_limit at clock_us
};

// The plan for the next token, greater than `floor` too. `redo` is the redo
// point of the current checkpoint; `before` a record older than the page's
// newest that the caller saw (lsn 0 when none); `log_ahead` >= 2 the most
// values one record covers; `clock_us` the wall clock in microseconds since
// 1970; `reach` how far the floor may move the counter.
CounterPlan plan_next_token(const CounterPage& page, std::int64_t floor, std::uint64_t redo,
                            const CounterRecord& before, std::int64_t log_ahead, std::int64_t clock_us,
                            FloorReach reach = FloorReach::clock_bound) noexcept;

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

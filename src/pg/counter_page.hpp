// The token counter. It lives in the page of the sequence fencing.token_seq
// (so the sequence's SQL view of it stays true), but is advanced here with a
// log-ahead of fencing.log_ahead values (default 2^20) instead of the
// sequence's 32. The technique is the sequence's own: under the buffer lock,
// WAL-log the page as it must be after a crash (last_value = the highest
// value covered, log_cnt = 0), then set the page to the value actually handed
// out, counting log_cnt down, without WAL. Redo restores the covered value,
// so no token is issued twice. On the page, last_value + log_cnt is thus what
// the newest record covers.
//
// A token may leave the backend once a record that covers it is flushed. The
// next record is written early, when half of the current one's values are
// handed out, and the WAL writer is asked to flush it; the tokens of the
// second half are still covered by the current record, flushed long ago. By
// the time they run out, the next record is normally flushed too: no
// acquisition waits for a flush. (Waiting for a flush at the end of every
// window stalled acquisitions: profiling found those waits, not CPU, to be
// most of the difference to bare advisory locks. A window of 2^20 tokens
// gives the WAL writer, which flushes at least every wal_writer_delay,
// seconds even at 100,000 acquisitions a second.)
//
// Only records written after the current checkpoint's redo point count:
// recovery replays nothing older. So the first change after a checkpoint is
// always logged, as for sequences (torn-page safety too), and the token it
// hands out waits for that record's flush: one wait per checkpoint.
//
// A page can also be copied or restored without its records: CREATE DATABASE
// (the WAL_LOG strategy logs the copy with a new LSN), tablespace moves, base
// backups and PITR, standbys. Right after each record, the page is therefore
// stamped (CounterStamp, in the unused space between the line pointers and
// the tuple, which the logged image leaves zero) with its relation file, the
// timeline, the server's start time and the record's LSN. Only a page whose
// stamp matches counts down; any other starts over as a fresh counter at the
// clock bound (core/counter.hpp), above every token a copy of it issued.
#pragma once
#include "core/counter.hpp"
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

using Record = core::CounterRecord;

// A token drawn from the counter.
struct Issued {
    std::int64_t token;
    Record covering;                // a record covering the token, to be flushed before it leaves
    std::int64_t beyond_bound = 0;  // nonzero: nothing issued, the floor is past this bound
};

// The next token, greater than `floor` too (within the clock bound, unless
// `reach` is unbounded). Errors in recovery and in read-only transactions,
// and when the counter is exhausted; waits while the counter is at the clock
// bound.
Issued next_counter_value(Oid seq, std::int64_t floor, core::FloorReach reach);

}  // namespace fencing::pg

// The lease clock: given periodic samples of what a backend is doing, is the
// lease of a leased holder over?
//
// A lease ends when the holder's client is silent for longer than the lease:
// it sends nothing and reads nothing. The server sees that silence as its
// backend waiting for the client (wait event ClientRead: idle, idle in a
// transaction, waiting for COPY data; ClientWrite: blocked sending a result)
// or, between statements, doing work of its own for the session (delivering
// NOTIFY messages, catching up with cache invalidations): none of that is the
// client. A backend in a statement (running, or waiting for a lock, for I/O,
// for a standby) is busy, not silent.
//
// Each sample says which of those the backend is doing, plus two counters:
//  - `sent` moves whenever the client did something the server can tell
//    apart from its own work: a message began (a statement, a COPY data
//    chunk, as the statement start and COPY progress show), TCP bytes
//    arrived from it;
//  - `drained` moves whenever the backend's send queue moves (its length,
//    TCP bytes acknowledged). Writes of the server move it too (a NOTIFY
//    delivered into the socket buffers of a stopped client), so it counts
//    only across two samples that both saw the backend blocked sending
//    (ClientWrite): then nothing but the client taking data can move it.
// A silence is uninterrupted while no busy sample, no change of `sent` and
// no counted change of `drained` is seen. It counts from the first sample
// that saw it, so the lease is over at most one sampling period late.
//
// Pure logic, no allocation, noexcept: the glue calls it from a signal handler.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>

namespace fencing::core {

// How often to sample for a lease of lease_ms: an eighth of it, within
// [25 ms, 125 ms]; 0 when there is no lease. A lease ends at most two periods
// late (the wait counts from the first sample that saw it, and is found over
// at the first sample after the lease), a quarter of the lease at most.
std::int64_t lease_sampling_period_ms(std::int64_t lease_ms) noexcept;

enum class BackendWait : std::uint8_t {
    busy,          // in a statement, not waiting for the client
    idle_work,     // between statements, busy with the server's own work for the session
    client_read,   // waiting for the client to send (ClientRead)
    client_write,  // blocked sending to the client (ClientWrite)
};

struct LeaseSample {
    BackendWait wait = BackendWait::busy;
    std::uint64_t sent = 0;
    std::uint64_t drained = 0;
};

class LeaseClock {
public:
    // Forget the current silence (a new set of leased holds began).
    void reset() noexcept { silent_ = false; }

    // One sample at now_us (microseconds, any monotonic-enough origin).
    // Returns how long, in microseconds, the current uninterrupted silence
    // has lasted (0 when the backend is busy or the client just did
    // something).
    std::int64_t sample(std::int64_t now_us, const LeaseSample& s) noexcept;

    // True when the current uninterrupted silence is longer than lease_ms.
    bool over(std::int64_t now_us, std::int64_t lease_ms) const noexcept {
        return silent_ && lease_ms > 0 && now_us - since_us_ > lease_ms * 1000;
    }

private:
    bool silent_ = false;
    std::int64_t since_us_ = 0;
    std::uint64_t sent_ = 0;
    std::uint64_t drained_ = 0;
    BackendWait last_ = BackendWait::busy;
};

}  // namespace fencing::core

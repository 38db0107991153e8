// Lock-delay: acquire(..., lock_delay => d).
//
// A grant taken with a lock-delay ends cleanly when its session gives it back
// (release, release_all, the end of its transaction, ROLLBACK TO SAVEPOINT,
// pg_advisory_unlock_all(), DISCARD ALL); uncleanly when the session ends
// while holding it: the client went away or was killed, the backend was
// terminated (pg_terminate_backend, a lease that ran out, an idle timeout).
// After an unclean end nobody is granted the resource until d has passed.
//
// The ended session's own backend keeps the lock for that long: a callback
// run as the backend exits (before_shmem_exit, registered at the first grant
// with a delay, so it runs before PostgreSQL releases the session's locks)
//  1. finds the grants with a delay that are still held, and keeps their
//     locks at session level (a transaction-scoped lock is taken once more in
//     the same mode at session level: the lock manager only counts it);
//  2. rolls back the session's transaction, and releases every other
//     advisory lock the session held (other fencing locks, the grants'
//     tokens, so that validate() of them fails at once, the application's
//     own advisory locks), and closes the client connection;
//  3. takes, for each delayed lock, a mark whose lock tag carries the end of
//     the delay (fencing.locks shows it as delay_until);
//  4. waits, releasing each lock when its own delay is over, then lets the
//     backend exit.
// Waiters wait in the lock manager as for any holder: in order, within their
// own wait, seen by the deadlock detector. Nothing needs shared memory, so no
// shared_preload_libraries. A SIGTERM to the delaying backend (a second
// pg_terminate_backend, or a fast shutdown) ends its delays at once; a crash
// or restart of the server ends every delay (docs/leases-and-pools.md).
#include "pg/lock_options.hpp"

#include <sys/socket.h>
#include <time.h>

extern "C" {
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/timeout.h"
#if PG_VERSION_NUM >= 140000
#include "utils/backend_status.h"
#include "utils/wait_event.h"
#else
#include "pgstat.h"
#endif
}

#include "core/lock_delay.hpp"
#include "pg/events.hpp"
#include "pg/lock_tags.hpp"

namespace fencing::pg {

namespace {

constexpr std::size_t kMaxDelayed = 128;  // grants with a delay kept after the session ends
constexpr std::size_t kPerGrant = 7;      // locks kept per grant (lock_tags.hpp)

bool armed = false;
volatile sig_atomic_t end_requested = 0;

void request_end(SIGNAL_ARGS) {
    const int saved_errno = errno;
    end_requested = 1;
    SetLatch(MyLatch);
    errno = saved_errno;
}

// Microseconds of a monotonic clock: the delays are measured with it, so that
// a wall clock set back or forward neither lengthens nor shortens them.
std::int64_t monotonic_us() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

struct Kept {
    LOCKTAG tag;
    LOCKMODE mode;
    std::size_t grant;  // index into the planned entries
};

bool same_tag(const LOCKTAG& a, const LOCKTAG& b) {
    return a.locktag_field1 == b.locktag_field1 && a.locktag_field2 == b.locktag_field2 &&
           a.locktag_field3 == b.locktag_field3 && a.locktag_field4 == b.locktag_field4 &&
           a.locktag_type == b.locktag_type && a.locktag_lockmethodid == b.locktag_lockmethodid;
}

bool is_kept(const Kept* kept, std::size_t n, const LOCKTAG& tag, LOCKMODE mode) {
    for (std::size_t i = 0; i < n; ++i)
        if (kept[i].mode == mode && same_tag(kept[i].tag, tag)) return true;
    return false;
}

void release_every(const LOCKTAG& tag, LOCKMODE mode) {
    while (held_by_me(tag, mode))
        if (!LockRelease(&tag, mode, true)) break;
}

// Keeps tag in mode at session level, if this backend holds it at all.
void keep(Kept* kept, std::size_t* n, const LOCKTAG& tag, LOCKMODE mode, std::size_t grant) {
    if (*n >= kMaxDelayed * kPerGrant || !held_by_me(tag, mode)) return;
    (void)LockAcquire(&tag, mode, true, true);  // held already: only counted
    kept[(*n)++] = Kept{tag, mode, grant};
}

// Every session-level advisory lock this backend holds that is not kept.
void release_the_rest(const Kept* kept, std::size_t n) {
    LockData* data = GetLockStatusData();
    for (int i = 0; i < data->nelements; ++i) {
        const LockInstanceData& inst = data->locks[i];
        if (inst.pid != MyProcPid || inst.locktag.locktag_lockmethodid != USER_LOCKMETHOD) continue;
        for (LOCKMODE mode = 1; mode <= MaxLockMode; ++mode)
            if ((inst.holdMask & LOCKBIT_ON(mode)) && !is_kept(kept, n, inst.locktag, mode))
                release_every(inst.locktag, mode);
    }
}

// What lock_delay_keep() found and kept, for lock_delay_wait().
core::GrantBook::Delayed delayed[kMaxDelayed];
core::DelayEntry entries[kMaxDelayed];
std::size_t m = 0;
Kept kept[kMaxDelayed * kPerGrant];
std::size_t k = 0;

}  // namespace

// 1. The grants with a delay still held: their locks kept at session level.
bool lock_delay_keep() {
    m = 0;
    k = 0;
    if (!armed || grant_book().empty()) return false;
    const std::size_t candidates = grant_book().copy_delayed(delayed, kMaxDelayed);

    std::int64_t delays[kMaxDelayed];
    for (std::size_t i = 0; i < candidates; ++i) {
        const LOCKTAG rtag = resource_tag(delayed[i].key);
        if (!held_by_me(rtag, kSessionMode) && !held_by_me(rtag, kXactMode) && !held_by_me(rtag, kSharedMode))
            continue;
        entries[m] = core::DelayEntry{delayed[i].key, 0, false};
        delays[m++] = delayed[i].traits.delay_ms;
    }
    if (m == 0) return false;
    core::plan_delays(entries, delays, m, monotonic_us());
    for (std::size_t g = 0; g < m; ++g) {
        const std::uint64_t key = entries[g].key;
        const LOCKTAG rtag = resource_tag(key);
        keep(kept, &k, rtag, kSessionMode, g);
        keep(kept, &k, rtag, kXactMode, g);
        keep(kept, &k, rtag, kSharedMode, g);
        core::GrantTraits t;
        for (std::size_t i = 0; i < candidates; ++i)
            if (delayed[i].key == key) t = delayed[i].traits;
        if (t.permit > 0) {
            keep(kept, &k, option_tag(kPermitsHeldTagKind, core::key_high(t.base), core::key_low(t.base)), ShareLock, g);
            keep(kept, &k,
                 option_tag(kPermitCountTagKind, core::key_high(t.base),
                            core::count_mark_low(core::key_low(t.base), t.permits)),
                 ShareLock, g);
        }
        if (t.shared)
            keep(kept, &k, option_tag(kSharedXactTagKind, core::key_high(key), core::key_low(key)), AccessShareLock, g);
    }

    return true;
}

// 2. to 4.: everything else goes, then the kept locks wait out their delays.
void lock_delay_wait() {
    if (m == 0) return;
    // The delays were planned on the monotonic clock when the locks were
    // kept; fencing.locks shows their ends on the wall clock.
    const TimestampTz ended = GetCurrentTimestamp();
    const std::int64_t ended_mono = monotonic_us();

    // 2. Everything else of the session goes now.
    AbortOutOfAnyTransaction();
    release_the_rest(kept, k);
    whereToSendOutput = DestNone;
    if (MyProcPort != nullptr) {
        // The socket is the first member of struct Port (see pg/session.cpp).
        const pgsocket sock = *reinterpret_cast<const pgsocket*>(MyProcPort);
        if (sock != PGINVALID_SOCKET) (void)shutdown(sock, SHUT_RDWR);
    }

    // 3. The marks fencing.locks reads the ends of the delays from.
    for (std::size_t g = 0; g < m; ++g) {
        const std::int64_t until = ended + (entries[g].until_us - ended_mono);
        const LOCKTAG mark = option_tag(kDelayTagKind, core::delay_end_seconds(until), core::key_low(entries[g].key));
        if (k < kMaxDelayed * kPerGrant && compat::try_lock_quietly(&mark, AccessShareLock, true) != LOCKACQUIRE_NOT_AVAIL)
            kept[k++] = Kept{mark, AccessShareLock, g};
    }
    for (std::size_t g = 0; g < m; ++g) on_lost_grant_delay(entries[g].key, true);
    ereport(LOG, (errmsg("fencing: session ended holding %zu fencing lock%s with a lock-delay", m, m == 1 ? "" : "s"),
                  errdetail("The locks are kept until their delays have passed, at most %lld ms.",
                            static_cast<long long>((entries[m - 1].until_us - ended_mono) / 1000))));
    pgstat_report_activity(STATE_IDLE, "fencing lock-delay");

    // 4. Wait, releasing each lock when its delay is over.
    disable_all_timeouts(false);
    end_requested = 0;
    pqsignal(SIGTERM, request_end);
    std::size_t due[kMaxDelayed];
    for (;;) {
        std::int64_t sleep_us = 0;
        const std::size_t n_due = core::due_delays(entries, m, monotonic_us(), due, &sleep_us);
        for (std::size_t d = 0; d < n_due; ++d) {
            for (std::size_t i = 0; i < k; ++i)
                if (kept[i].grant == due[d]) release_every(kept[i].tag, kept[i].mode);
            on_lost_grant_delay(entries[due[d]].key, false);
        }
        if (sleep_us <= 0 || end_requested) break;
        ResetLatch(MyLatch);
        const int rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
                                 static_cast<long>((sleep_us + 999) / 1000), PG_WAIT_EXTENSION);
        if ((rc & WL_POSTMASTER_DEATH) || end_requested) break;
    }
    // Whatever is left (ended early) is released by PostgreSQL's own exit.
    for (std::size_t g = 0; g < m; ++g)
        if (!entries[g].done) on_lost_grant_delay(entries[g].key, false);
    m = 0;
}

void arm_lock_delay() {
    if (armed) return;
    // One exit callback for the session's end (pg/events.cpp): it keeps the
    // delayed locks, announces what the session lost, then waits here.
    events::ensure_exit_callback();
    armed = true;
}

}  // namespace fencing::pg

#include "pg/session.hpp"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

extern "C" {
#if PG_VERSION_NUM >= 140000
#include "utils/backend_status.h"
#include "utils/wait_event.h"
#else
#include "pgstat.h"
#endif
#include "tcop/tcopprot.h"
#include "utils/timeout.h"
}

#include "core/lease_clock.hpp"
#include "pg/events.hpp"
#include "pg/lock_tags.hpp"

namespace fencing::pg {

namespace {

core::HoldLedger the_ledger;
core::HoldLedger the_guards;

// ---------------------------------------------------------------------------
// Lease enforcement.
//
// While the session holds any leased hold (a leased fencing lock, or a guard
// of a validate()-guarded transaction whose grant has a lease), a periodic
// timer samples what the backend is doing (core::LeaseSample). ClientRead or
// ClientWrite means the backend is waiting for its client: idle, idle in a
// transaction, waiting for COPY data, or blocked sending a result; no wait
// for the client and no statement under way (debug_query_string unset) means
// it is idle but busy with work of its own for the session, such as
// delivering NOTIFY messages: the client is silent all the same. Anything
// else is a statement at work, alive. When one uninterrupted silence
// (core::LeaseClock) outlasts the shortest lease still held, the handler ends
// the session the way die() does; PostgreSQL's client read/write interrupt
// processing then ends even a backend blocked on its socket, and the lock
// manager frees every lock. The session's own settings are never touched.
//
// The handler runs in signal context: it reads plain data prepared by
// apply_leases() (no C++ container), and calls only async-signal-safe code.
// It looks at the lock manager's backend-local table (LockHeldByMe) only when
// the backend is waiting for its client, i.e. blocked in WaitEventSetWait and
// not inside the lock manager (a NOTIFY delivery blocked on a full socket
// waits there too, inside its transaction but outside the lock manager).

struct Enforced {
    std::uint64_t key;
    std::int64_t lease_ms;
    bool guard;  // a validate() guard, not a fencing lock
};
constexpr std::size_t kEnforcedCap = 64;
Enforced enforced[kEnforcedCap];
volatile std::size_t enforced_count = 0;
volatile bool enforced_overflow = false;  // more leased holds than kEnforcedCap
volatile std::int64_t shortest_lease_ms = 0;

bool timer_registered = false;
TimeoutId timer_id;
std::int64_t timer_period_ms = 0;  // 0: not running
core::LeaseClock lease_clock;

// Set by the handler when it ends the session; read by the emit_log_hook.
volatile sig_atomic_t ended_lease_ms = 0;
volatile sig_atomic_t ended_held = 0;

// What the backend is doing, and the counters of core::LeaseSample: `sent`
// moves when the client sends something (a message begins: the statement
// start, a plain read of xact.c's variable set for every message whatever
// track_activities says; COPY FROM data arrives: the command's progress
// counters; on TCP, bytes arrive), `drained` when the send queue moves (its
// length; on TCP, bytes acknowledged). The backend's pg_stat_activity entry
// as a whole is no such signal: it also changes for the server's own work
// (each NOTIFY delivered runs a transaction). Only syscalls and plain reads:
// it runs in the timer's signal handler.
struct TcpInfoPrefix {  // the start of Linux's struct tcp_info (ABI, append-only)
    std::uint8_t bytes8[8];
    std::uint32_t words[24];
    std::uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
};

core::LeaseSample sample_backend(std::uint32_t wait_event) {
    core::LeaseSample s;
    if (wait_event == WAIT_EVENT_CLIENT_READ)
        s.wait = core::BackendWait::client_read;
    else if (wait_event == WAIT_EVENT_CLIENT_WRITE)
        s.wait = core::BackendWait::client_write;
    else if (debug_query_string == nullptr)
        s.wait = core::BackendWait::idle_work;  // no statement under way
    else
        s.wait = core::BackendWait::busy;
    s.sent = static_cast<std::uint64_t>(GetCurrentStatementStartTimestamp());
    if (MyBEEntry != nullptr)
        for (int i = 0; i < PGSTAT_NUM_PROGRESS_PARAM; ++i)
            s.sent += static_cast<std::uint64_t>(MyBEEntry->st_progress_param[i]) << 20;
    if (MyProcPort == nullptr) return s;
    // The socket is the first member of struct Port (libpq/libpq-be.h, which
    // cannot be included here without the GSSAPI headers).
    const pgsocket sock = *reinterpret_cast<const pgsocket*>(MyProcPort);
    if (sock == PGINVALID_SOCKET) return s;
    int queued = 0;
    if (ioctl(sock, SIOCOUTQ, &queued) == 0) s.drained += static_cast<std::uint64_t>(queued);
    TcpInfoPrefix info;
    socklen_t len = sizeof info;
    if (getsockopt(sock, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && len >= sizeof info) {
        s.drained += info.bytes_acked << 24;
        s.sent += info.bytes_received << 44;
    }
    return s;
}

bool enforced_held(const Enforced& e) {
    if (e.guard) return held_by_me(guard_tag(e.key), kGuardHoldMode);
    const LOCKTAG tag = resource_tag(e.key);
    return held_by_me(tag, kSessionMode) || held_by_me(tag, kXactMode) || held_by_me(tag, kSharedMode);
}

void lease_tick() {
    const int saved_errno = errno;
    if (ended_lease_ms == 0 && shortest_lease_ms > 0 && MyProc != nullptr) {
        const std::uint32_t ev = *static_cast<volatile std::uint32_t*>(&MyProc->wait_event_info);
        const core::LeaseSample s = sample_backend(ev);
        const std::int64_t now = GetCurrentTimestamp();
        lease_clock.sample(now, s);
        // The silence counts in every sample that is not busy, but only a
        // backend blocked waiting for its client is ended from here: only
        // then is it certainly outside the lock manager, whose local table
        // enforced_held() reads (work between statements runs transactions).
        // A backend at such work waits for its client again within moments.
        const bool client = s.wait == core::BackendWait::client_read || s.wait == core::BackendWait::client_write;
        if (client && lease_clock.over(now, shortest_lease_ms)) {
            // Never end a session whose leased locks are all gone: ask the
            // lock manager which are still held, and their shortest lease.
            std::int64_t shortest = 0;
            int held = 0;
            const std::size_t n = enforced_count;
            for (std::size_t i = 0; i < n && i < kEnforcedCap; ++i) {
                if (!enforced_held(enforced[i])) continue;
                ++held;
                if (shortest == 0 || enforced[i].lease_ms < shortest) shortest = enforced[i].lease_ms;
            }
            if (held == 0 && enforced_overflow) shortest = shortest_lease_ms;
            if (shortest > 0 && lease_clock.over(now, shortest)) {
                ended_held = held;
                ended_lease_ms = static_cast<sig_atomic_t>(shortest > INT_MAX ? INT_MAX : shortest);
                ProcDiePending = true;
                InterruptPending = true;
                SetLatch(MyLatch);
            }
        }
    }
    errno = saved_errno;
}

void stop_timer() {
    if (timer_period_ms == 0) return;
    disable_timeout(timer_id, false);
    timer_period_ms = 0;
}

// Leased holds of a ledger the lock manager no longer has are forgotten.
void resync(core::HoldLedger& l, bool guard) noexcept {
    core::HoldLedger::LeasedHold buf[kEnforcedCap];
    const std::size_t n = l.copy_leased_holds(buf, kEnforcedCap);
    for (std::size_t i = 0; i < n && i < kEnforcedCap; ++i) {
        const Enforced e{buf[i].key, buf[i].lease_ms, guard};
        if (!enforced_held(e)) l.forget(buf[i].key);
    }
}

void collect(const core::HoldLedger& l, bool guard, std::size_t& n, bool& overflow, std::int64_t& shortest) {
    core::HoldLedger::LeasedHold buf[kEnforcedCap];
    const std::size_t total = l.copy_leased_holds(buf, kEnforcedCap);
    for (std::size_t i = 0; i < total; ++i) {
        const std::int64_t lease = i < kEnforcedCap ? buf[i].lease_ms : l.shortest_lease();
        if (shortest == 0 || lease < shortest) shortest = lease;
        if (i < kEnforcedCap && n < kEnforcedCap)
            enforced[n++] = Enforced{buf[i].key, buf[i].lease_ms, guard};
        else
            overflow = true;
    }
}

void reset_ledgers() noexcept {
    the_ledger = core::HoldLedger{};
    the_guards = core::HoldLedger{};
}

void xact_callback(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_PREPARE: {
            // A prepared transaction keeps its locks after its session ends,
            // unleased, until COMMIT/ROLLBACK PREPARED: a fencing lock (or a
            // validate() guard) there would outlive its holder.
            const bool holds = the_ledger.any_xact() || the_guards.any_xact();
            if (holds)
                ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                                errmsg("cannot prepare a transaction that holds fencing locks"),
                                errdetail("A prepared transaction would keep its transaction-scoped fencing locks and "
                                          "validate() guards after its session ends, beyond any lease, until COMMIT "
                                          "PREPARED or ROLLBACK PREPARED."),
                                errhint("Commit the transaction instead of preparing it.")));
            break;
        }
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:
            try {
                the_ledger.xact_end();
                the_guards.xact_end();
            } catch (...) {
                reset_ledgers();
            }
            apply_leases();
            break;
        default:
            break;
    }
}

void subxact_callback(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void*) {
    try {
        if (event == SUBXACT_EVENT_COMMIT_SUB) {
            the_ledger.subxact_commit(sub, parent);
            the_guards.subxact_commit(sub, parent);
        } else if (event == SUBXACT_EVENT_ABORT_SUB) {
            the_ledger.subxact_abort(sub);
            the_guards.subxact_abort(sub);
        }
    } catch (...) {
        reset_ledgers();
    }
    if (event == SUBXACT_EVENT_ABORT_SUB) apply_leases();
}

// A session ended by its lease: say so in the FATAL error the client receives
// (and the server log), instead of a bare termination.
emit_log_hook_type previous_emit_log_hook = nullptr;

void name_lease_expiry(ErrorData* edata) {
    if (edata->elevel == FATAL && ended_lease_ms > 0 && edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN) {
        MemoryContext old = MemoryContextSwitchTo(ErrorContext);
        const int held = ended_held;
#if PG_VERSION_NUM >= 140000
        edata->sqlerrcode =
            IsTransactionBlock() ? ERRCODE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT : ERRCODE_IDLE_SESSION_TIMEOUT;
#else
        edata->sqlerrcode = ERRCODE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT;
#endif
        edata->message = psprintf("terminating connection because its fencing lease of %d ms expired",
                                  static_cast<int>(ended_lease_ms));
        edata->detail = psprintf("The client sent and read nothing for longer than the lease while the session held "
                                 "%d leased fencing lock%s or guard%s; the locks are released and their tokens are "
                                 "stale.",
                                 held, held == 1 ? "" : "s", held == 1 ? "" : "s");
        edata->hint = pstrdup("Acquire the locks again on a new connection, and renew the lease (fencing.renew) "
                              "or send statements more often than the lease.");
        MemoryContextSwitchTo(old);
    }
    if (previous_emit_log_hook) previous_emit_log_hook(edata);
}

}  // namespace

core::HoldLedger& ledger() noexcept { return the_ledger; }
std::int64_t lease_ending_ms() noexcept { return ended_lease_ms; }
core::HoldLedger& guard_ledger() noexcept { return the_guards; }

void apply_leases() noexcept {
    resync(the_ledger, false);
    resync(the_guards, true);
    // The handler may run in between: it sees no lease while the table changes.
    shortest_lease_ms = 0;
    std::size_t n = 0;
    bool overflow = false;
    std::int64_t shortest = 0;
    collect(the_ledger, false, n, overflow, shortest);
    collect(the_guards, true, n, overflow, shortest);
    enforced_count = n;
    enforced_overflow = overflow;
    const std::int64_t period = core::lease_sampling_period_ms(shortest);
    if (period == 0) {
        stop_timer();
        return;
    }
    if (period != timer_period_ms) {
        if (!timer_registered) {
            timer_id = RegisterTimeout(USER_TIMEOUT, lease_tick);
            timer_registered = true;
            events::leases_enforced();
        }
        if (timer_period_ms == 0) lease_clock.reset();
        enable_timeout_every(timer_id, TimestampTzPlusMilliseconds(GetCurrentTimestamp(), period),
                             static_cast<int>(period));
        timer_period_ms = period;
    }
    shortest_lease_ms = shortest;
}

void register_session_callbacks() {
    RegisterXactCallback(xact_callback, nullptr);
    RegisterSubXactCallback(subxact_callback, nullptr);
    previous_emit_log_hook = emit_log_hook;
    emit_log_hook = name_lease_expiry;
}

}  // namespace fencing::pg

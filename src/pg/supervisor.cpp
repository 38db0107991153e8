// The supervisor and the shared state it owns (see supervisor.hpp).
//
// Shared memory, one block:
//   - slots[MaxBackends]: per backend (by its PGPROC number) its leased holds,
//     under the slot's spinlock; the supervisor writes only ended_*;
//   - delays[kMaxDelays] and events[kMaxEvents], under one LWLock; an atomic
//     count of the delays in use lets every acquisition skip the table while
//     it is empty (the common case: one atomic read).
//
// The supervisor's loop (fencing_supervisor_main) wakes on its latch (a
// backend that starts a lease, posts a delay or an event sets it) or at the
// next sampling time, and:
//   1. samples every backend with a lease: the wait event of its PGPROC, and
//      pg_stat_activity's state, statement start and progress counters for
//      it; a backend blocked sending to its client over TCP also gets the
//      socket's acknowledged bytes (tcp_probe). core::LeaseClock turns the
//      samples into silences; when one outlasts the shortest lease while the
//      backend waits for its client, the supervisor asks the lock manager
//      (GetLockStatusData) whether a leased lock is still held, marks the
//      slot (the ended backend names the lease in its FATAL message) and
//      sends it SIGTERM, as pg_terminate_backend does;
//   2. ends the delays that are over, queueing delay_ended for those whose
//      grant was announced;
//   3. starts a notifier worker for each database with queued events
//      (fencing_notifier_main): it connects to that database, sends them in
//      one transaction, and exits once its database has none left for a
//      second, so that DROP DATABASE and CREATE DATABASE ... TEMPLATE are not
//      held up.
#include "pg/supervisor.hpp"

#include <signal.h>
#include <time.h>

extern "C" {
#include "commands/async.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"
}

#include <new>
#include <type_traits>

#include "core/lease_clock.hpp"
#include "core/lock_delay.hpp"
#include "pg/bridge.hpp"
#include "pg/clock.hpp"
#include "pg/lock_tags.hpp"
#include "pg/notify.hpp"
#include "pg/stats.hpp"
#include "pg/tcp_probe.hpp"

extern "C" {
PGDLLEXPORT void fencing_supervisor_main(Datum);
PGDLLEXPORT void fencing_notifier_main(Datum);
}

namespace fencing::pg::supervisor {

namespace {

constexpr std::size_t kSlotHolds = 32;    // leased holds a slot lists; more: overflow
constexpr std::size_t kMaxDelays = 1024;  // delays kept at once, all databases
constexpr std::size_t kMaxEvents = 1024;  // events waiting to be sent, all databases
constexpr std::size_t kNameMax = core::kMaxResourceBytes;
constexpr std::int64_t kEventMaxAgeUs = 30 * USECS_PER_SEC;

struct Slot {
    slock_t mutex;
    int pid;  // 0: nobody's
    Oid db;
    std::uint32_t epoch;  // moves when the backend's leased holds go from none to some
    std::int64_t shortest_ms;
    std::uint32_t n;
    bool overflow;
    LeasedHold holds[kSlotHolds];
    pg_atomic_uint64 statements;      // moved by the backend at every statement it starts
    pg_atomic_uint32 ended_lease_ms;  // written by the supervisor
    pg_atomic_uint32 ended_held;
    // The supervisor's own: only it reads and writes them. In shared memory
    // so that a supervisor started again goes on measuring the silences.
    core::LeaseClock clock;
    std::uint32_t clock_epoch;
    int clock_pid;
    bool ended;  // SIGTERM sent for this epoch
};

struct Named {
    bool used;
    Oid db;
    std::uint64_t seq;
    core::LockEvent ev;
    std::int64_t token;
    std::int64_t unix_us;
    std::uint16_t len;
    char name[kNameMax];
};

struct Delay {
    core::DelayRecord rec;  // its end on CLOCK_MONOTONIC: a wall clock set back or ahead changes nothing
    bool announce;
    LOCKMODE mode;         // the lost grant's resource lock mode, for fencing.locks
    std::uint64_t base;    // a permit's resource's base key
    std::int32_t permits;  // and its count of permits; 0: not a permit
    int pid;               // the ended backend's
    TimestampTz until;     // the same end on the wall clock, for fencing.locks
    std::int64_t token;
    std::uint16_t len;
    char name[kNameMax];
};

struct Shared {
    LWLock* lock;  // delays, events, next_seq
    pg_atomic_uint32 delays_in_use;
    pg_atomic_uint32 events_in_use;
    pg_atomic_uint32 supervisor_procno;  // UINT32_MAX: not running
    pg_atomic_uint32 sampling_ms;        // the supervisor's sampling period now; 0: not sampling
    std::uint64_t next_seq;
    Delay delays[kMaxDelays];
    Named events[kMaxEvents];
    int nslots;
    Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

// Everything in shared memory is plain data.
static_assert(std::is_trivially_destructible_v<Slot> && std::is_trivially_destructible_v<Delay> &&
              std::is_trivially_destructible_v<Named>);
static_assert(std::is_trivially_destructible_v<core::LeaseClock>);

constexpr const char* kTranche = "fencing supervisor";
Shared* shared = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

Size shared_size() { return add_size(offsetof(Shared, slots), mul_size(MaxBackends, sizeof(Slot))); }

void request() {
    RequestAddinShmemSpace(shared_size());
    RequestNamedLWLockTranche(kTranche, 1);
}

void startup() {
    if (previous_startup_hook) previous_startup_hook();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared = static_cast<Shared*>(ShmemInitStruct("fencing supervisor", shared_size(), &found));
    if (!found) {
        memset(static_cast<void*>(shared), 0, shared_size());
        shared->lock = &(GetNamedLWLockTranche(kTranche))->lock;
        pg_atomic_init_u32(&shared->delays_in_use, 0);
        pg_atomic_init_u32(&shared->events_in_use, 0);
        pg_atomic_init_u32(&shared->supervisor_procno, UINT32_MAX);
        pg_atomic_init_u32(&shared->sampling_ms, 0);
        shared->nslots = MaxBackends;
        for (int i = 0; i < shared->nslots; ++i) {
            SpinLockInit(&shared->slots[i].mutex);
            pg_atomic_init_u64(&shared->slots[i].statements, 0);
            pg_atomic_init_u32(&shared->slots[i].ended_lease_ms, 0);
            pg_atomic_init_u32(&shared->slots[i].ended_held, 0);
            new (&shared->slots[i].clock) core::LeaseClock();
        }
    }
    LWLockRelease(AddinShmemInitLock);
}

std::int64_t monotonic_us() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

void wake_supervisor() noexcept {
    const std::uint32_t n = pg_atomic_read_u32(&shared->supervisor_procno);
    if (n != UINT32_MAX) SetLatch(&GetPGProcByNumber(n)->procLatch);
}

Slot* my_slot() noexcept {
    if (shared == nullptr) return nullptr;
    const int n = compat::my_proc_number();
    return n >= 0 && n < shared->nslots ? &shared->slots[n] : nullptr;
}

// Under shared->lock, exclusive.
bool add_event_locked(Oid db, core::LockEvent ev, const char* resource, std::size_t len, std::int64_t token,
                      std::int64_t unix_us) noexcept {
    if (len > kNameMax) return false;
    for (auto& e : shared->events) {
        if (e.used) continue;
        e.used = true;
        e.db = db;
        e.seq = shared->next_seq++;
        e.ev = ev;
        e.token = token;
        e.unix_us = unix_us;
        e.len = static_cast<std::uint16_t>(len);
        memcpy(e.name, resource, len);
        pg_atomic_fetch_add_u32(&shared->events_in_use, 1);
        return true;
    }
    return false;
}

}  // namespace

bool available() noexcept { return shared != nullptr; }

void require(const char* what) {
    if (available()) return;
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("fencing %s need fencing in shared_preload_libraries", what),
                    errdetail("A background worker of fencing enforces leases and keeps lock-delays; it runs only "
                              "when the library is preloaded."),
                    errhint("Add fencing to shared_preload_libraries in postgresql.conf and restart the server.")));
}

void note_statement() noexcept {
    if (Slot* s = my_slot()) pg_atomic_fetch_add_u64(&s->statements, 1);
}

void publish_leases(const LeasedHold* holds, std::size_t n, bool overflow, std::int64_t shortest_ms) noexcept {
    Slot* s = my_slot();
    if (s == nullptr) return;
    if (n > kSlotHolds) {
        n = kSlotHolds;
        overflow = true;
    }
    SpinLockAcquire(&s->mutex);
    if (s->pid != MyProcPid) {
        s->pid = MyProcPid;
        s->shortest_ms = 0;
        pg_atomic_write_u32(&s->ended_lease_ms, 0);
        pg_atomic_write_u32(&s->ended_held, 0);
    }
    s->db = MyDatabaseId;
    if (shortest_ms > 0 && s->shortest_ms == 0) ++s->epoch;
    s->shortest_ms = shortest_ms;
    s->n = static_cast<std::uint32_t>(n);
    s->overflow = overflow;
    for (std::size_t i = 0; i < n; ++i) s->holds[i] = holds[i];
    SpinLockRelease(&s->mutex);
    if (shortest_ms == 0) return;
    // Wake the supervisor only when it does not sample often enough for this
    // lease already: it goes on sampling for a while after the last lease is
    // gone, so that a session cycling through leased grants costs it nothing
    // but this read. The slot is written before sampling_ms is read, and the
    // supervisor writes sampling_ms = 0 before it looks at the slots a last
    // time: one of the two sees the other.
    pg_memory_barrier();
    const std::uint32_t sampling = pg_atomic_read_u32(&shared->sampling_ms);
    if (sampling == 0 || sampling > core::lease_sampling_period_ms(shortest_ms)) wake_supervisor();
}

std::int64_t lease_ending_ms() noexcept {
    const Slot* s = my_slot();
    return s != nullptr && s->pid == MyProcPid ? pg_atomic_read_u32(const_cast<pg_atomic_uint32*>(&s->ended_lease_ms))
                                               : 0;
}

int lease_ending_held() noexcept {
    const Slot* s = my_slot();
    return s != nullptr && s->pid == MyProcPid
               ? static_cast<int>(pg_atomic_read_u32(const_cast<pg_atomic_uint32*>(&s->ended_held)))
               : 0;
}

bool post_event(core::LockEvent ev, const char* resource, std::size_t len, std::int64_t token) {
    if (shared == nullptr) return false;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    const bool ok = add_event_locked(MyDatabaseId, ev, resource, len, token, unix_now_us());
    LWLockRelease(shared->lock);
    if (ok) wake_supervisor();
    return ok;
}

bool post_delay(const LostGrant& g) {
    if (shared == nullptr || g.len > kNameMax) return false;
    const std::int64_t until_mono = monotonic_us() + g.delay_ms * 1000;
    const TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), g.delay_ms);
    bool ok = false;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (auto& d : shared->delays) {
        if (d.rec.used) continue;
        d.rec.used = true;
        d.rec.shared = g.mode == kSharedMode;
        d.rec.db = MyDatabaseId;
        d.rec.key = g.key;
        d.rec.until_us = until_mono;
        d.announce = g.announce;
        d.mode = g.mode;
        d.base = g.base;
        d.permits = g.permits;
        d.pid = MyProcPid;
        d.until = until;
        d.token = g.token;
        d.len = static_cast<std::uint16_t>(g.len);
        if (g.len > 0) memcpy(d.name, g.resource, g.len);
        pg_atomic_fetch_add_u32(&shared->delays_in_use, 1);
        ok = true;
        break;
    }
    LWLockRelease(shared->lock);
    if (ok) wake_supervisor();
    return ok;
}

std::int64_t delay_left_ms(std::uint64_t key, bool for_shared) {
    if (shared == nullptr || pg_atomic_read_u32(&shared->delays_in_use) == 0) return 0;
    const std::int64_t now = monotonic_us();
    std::int64_t until = 0;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (const auto& d : shared->delays)
        if (core::delay_keeps(d.rec, MyDatabaseId, key, for_shared, now) && d.rec.until_us > until)
            until = d.rec.until_us;
    LWLockRelease(shared->lock);
    return until > now ? (until - now + 999) / 1000 : 0;
}

std::int32_t delayed_permit_count(std::uint64_t base) {
    if (shared == nullptr || pg_atomic_read_u32(&shared->delays_in_use) == 0) return 0;
    const std::int64_t now = monotonic_us();
    std::int32_t n = 0;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (const auto& d : shared->delays)
        if (d.rec.used && d.permits > 0 && d.base == base && d.rec.db == MyDatabaseId && now < d.rec.until_us)
            n = d.permits;
    LWLockRelease(shared->lock);
    return n;
}

bool wait_out_delay(std::uint64_t key, bool for_shared, std::int64_t wait_ms) {
    // lock_timeout bounds this wait for the lock as it bounds the lock
    // manager's.
    if (LockTimeout > 0 && (wait_ms < 0 || LockTimeout < wait_ms)) wait_ms = LockTimeout;
    const std::int64_t started = monotonic_us();
    for (;;) {
        const std::int64_t left = delay_left_ms(key, for_shared);
        if (left == 0) return true;
        long sleep_ms = static_cast<long>(left);
        if (wait_ms >= 0) {
            const std::int64_t budget = wait_ms - (monotonic_us() - started) / 1000;
            if (budget <= 0) return false;
            if (budget < sleep_ms) sleep_ms = static_cast<long>(budget);
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, sleep_ms, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

// ---------------------------------------------------------------------------
// The supervisor's loop.

namespace {

struct SlotCopy {
    int pid;
    Oid db;
    std::uint32_t epoch;
    std::int64_t shortest_ms;
    std::uint32_t n;
    bool overflow;
    LeasedHold holds[kSlotHolds];
};

// The supervisor's own memory (its process only).
SlotCopy* copies = nullptr;
int* leased = nullptr;  // indexes of slots with a lease, this tick
MemoryContext tick_context = nullptr;
TimestampTz last_lease_seen = 0;
constexpr std::int64_t kLingerUs = 10 * USECS_PER_SEC;  // sampling goes on this long after the last lease

struct Notifier {
    Oid db;
    BackgroundWorkerHandle* handle;
    TimestampTz started;
};
constexpr int kMaxNotifiers = 8;
Notifier notifiers[kMaxNotifiers];

bool tag_is(const LOCKTAG& t, Oid db, std::uint64_t key, uint16 kind) {
    return t.locktag_type == LOCKTAG_ADVISORY && t.locktag_lockmethodid == USER_LOCKMETHOD && t.locktag_field1 == db &&
           t.locktag_field2 == core::key_high(key) && t.locktag_field3 == core::key_low(key) &&
           t.locktag_field4 == kind;
}

// How many of the slot's leased holds the lock manager says its backend
// still holds, and the shortest of their leases (*shortest).
int holds_still_held(const SlotCopy& c, const LockData* locks, std::int64_t* shortest) {
    int held = 0;
    *shortest = 0;
    for (std::uint32_t h = 0; h < c.n; ++h) {
        const LeasedHold& lh = c.holds[h];
        bool found = false;
        for (int i = 0; i < locks->nelements && !found; ++i) {
            const LockInstanceData& inst = locks->locks[i];
            if (inst.pid != c.pid) continue;
            if (lh.guard)
                found =
                    tag_is(inst.locktag, c.db, lh.key, kGuardTagKind) && (inst.holdMask & LOCKBIT_ON(kGuardHoldMode));
            else
                found = tag_is(inst.locktag, c.db, lh.key, kResourceTagKind) &&
                        (inst.holdMask & (LOCKBIT_ON(kSessionMode) | LOCKBIT_ON(kXactMode) | LOCKBIT_ON(kSharedMode)));
        }
        if (!found) continue;
        ++held;
        if (*shortest == 0 || lh.lease_ms < *shortest) *shortest = lh.lease_ms;
    }
    if (held == 0 && c.overflow) *shortest = c.shortest_ms;  // the holds past the list: as published
    return held;
}

const PgBackendStatus* status_of(int pid, int count) {
    for (int i = 1; i <= count; ++i) {
        const PgBackendStatus* st = compat::backend_status_at(i);
        if (st != nullptr && st->st_procpid == pid) return st;
    }
    return nullptr;
}

core::BackendWait classify(std::uint32_t wait_event, const PgBackendStatus* st) {
    // The wait event is in PGPROC whatever track_activities says.
    if (wait_event == WAIT_EVENT_CLIENT_READ) return core::BackendWait::client_read;
    if (wait_event == WAIT_EVENT_CLIENT_WRITE) return core::BackendWait::client_write;
    if (st == nullptr) return core::BackendWait::busy;
    if (st->st_state == STATE_IDLE || st->st_state == STATE_IDLEINTRANSACTION ||
        st->st_state == STATE_IDLEINTRANSACTION_ABORTED)
        return core::BackendWait::idle_work;  // the server's own work for an idle session
    return core::BackendWait::busy;
}

// 1. Leases. Returns the sampling period (ms), or -1 when no backend has one.
long check_leases() {
    int nleased = 0;
    std::int64_t period = 0;
    for (int i = 0; i < shared->nslots; ++i) {
        Slot* s = &shared->slots[i];
        if (s->shortest_ms == 0) continue;  // unlocked peek; copied under the lock below
        SlotCopy& c = copies[i];
        SpinLockAcquire(&s->mutex);
        c.pid = s->pid;
        c.db = s->db;
        c.epoch = s->epoch;
        c.shortest_ms = s->shortest_ms;
        c.n = s->n;
        c.overflow = s->overflow;
        for (std::uint32_t h = 0; h < c.n; ++h) c.holds[h] = s->holds[h];
        SpinLockRelease(&s->mutex);
        if (c.shortest_ms == 0 || c.pid == 0) continue;
        leased[nleased++] = i;
        const std::int64_t p = core::lease_sampling_period_ms(c.shortest_ms);
        if (period == 0 || p < period) period = p;
    }
    if (nleased == 0) {
        // Keep the last period for a while: a backend starting a lease then
        // needs no wake-up (publish_leases).
        const std::uint32_t last = pg_atomic_read_u32(&shared->sampling_ms);
        if (last == 0) return -1;
        if (GetCurrentTimestamp() - last_lease_seen < kLingerUs) return static_cast<long>(last);
        pg_atomic_write_u32(&shared->sampling_ms, 0);
        pg_memory_barrier();
        for (int i = 0; i < shared->nslots; ++i)
            if (shared->slots[i].shortest_ms != 0) return 0;  // published meanwhile: sample at once
        return -1;
    }
    last_lease_seen = GetCurrentTimestamp();
    if (pg_atomic_read_u32(&shared->sampling_ms) != static_cast<std::uint32_t>(period))
        pg_atomic_write_u32(&shared->sampling_ms, static_cast<std::uint32_t>(period));

    compat::clear_backend_status();
    const int count = compat::backend_status_count();
    const TimestampTz now = GetCurrentTimestamp();
    core::LeaseSample* samples = static_cast<core::LeaseSample*>(palloc0(sizeof(core::LeaseSample) * nleased));
    sockaddr_storage* peers = static_cast<sockaddr_storage*>(palloc0(sizeof(sockaddr_storage) * nleased));
    int* peer_of = static_cast<int*>(palloc(sizeof(int) * nleased));
    int npeers = 0;
    bool* live = static_cast<bool*>(palloc0(sizeof(bool) * nleased));
    for (int j = 0; j < nleased; ++j) {
        const int i = leased[j];
        const SlotCopy& c = copies[i];
        Slot& sl = shared->slots[i];
        if (sl.clock_epoch != c.epoch || sl.clock_pid != c.pid) {
            sl.clock.reset();
            sl.clock_epoch = c.epoch;
            sl.clock_pid = c.pid;
            sl.ended = false;
        }
        const PGPROC* proc = GetPGProcByNumber(i);
        if (proc->pid != c.pid) continue;  // exited; its slot is cleared soon
        live[j] = true;
        const std::uint32_t ev = *reinterpret_cast<const volatile std::uint32_t*>(&proc->wait_event_info);
        const PgBackendStatus* st = status_of(c.pid, count);
        core::LeaseSample& smp = samples[j];
        smp.wait = classify(ev, st);
        // Every statement the client starts moves the backend's own counter
        // (whatever track_activities says); a protocol step also moves the
        // statement start, COPY FROM data the progress counters.
        smp.sent = pg_atomic_read_u64(&shared->slots[i].statements) << 40;
        if (st != nullptr) {
            smp.sent += static_cast<std::uint64_t>(st->st_activity_start_timestamp);
            for (int k = 0; k < PGSTAT_NUM_PROGRESS_PARAM; ++k)
                smp.sent += static_cast<std::uint64_t>(st->st_progress_param[k]) << 20;
            // Waiting for its client on TCP: the socket says whether the
            // client sends (bytes received: a long message arriving) or
            // takes data (bytes acknowledged).
            const bool client =
                smp.wait == core::BackendWait::client_write || smp.wait == core::BackendWait::client_read;
            if (client &&
                (st->st_clientaddr.addr.ss_family == AF_INET || st->st_clientaddr.addr.ss_family == AF_INET6)) {
                peers[npeers] = st->st_clientaddr.addr;
                peer_of[npeers++] = j;
            }
        }
    }
    if (npeers > 0) {
        tcp_probe::Counters* counters =
            static_cast<tcp_probe::Counters*>(palloc0(sizeof(tcp_probe::Counters) * npeers));
        tcp_probe::read(PostPortNumber, peers, static_cast<std::size_t>(npeers), counters);
        for (int p = 0; p < npeers; ++p)
            if (counters[p].found) {
                samples[peer_of[p]].drained = counters[p].bytes_acked;
                samples[peer_of[p]].sent += counters[p].bytes_received << 44;
            }
    }

    int* over = static_cast<int*>(palloc(sizeof(int) * nleased));
    int nover = 0;
    for (int j = 0; j < nleased; ++j) {
        if (!live[j]) continue;
        const int i = leased[j];
        Slot& sl = shared->slots[i];
        sl.clock.sample(now, samples[j]);
        const bool client =
            samples[j].wait == core::BackendWait::client_read || samples[j].wait == core::BackendWait::client_write;
        if (client && !sl.ended && sl.clock.over(now, copies[i].shortest_ms)) over[nover++] = i;
    }
    if (nover > 0) {
        // Never end a session whose leased locks are all gone (released by
        // pg_advisory_unlock_all(), DISCARD ALL, a rolled-back savepoint
        // since it last published): ask the lock manager.
        LockData* locks = GetLockStatusData();
        for (int o = 0; o < nover; ++o) {
            const int i = over[o];
            const SlotCopy& c = copies[i];
            std::int64_t shortest = 0;
            const int held = holds_still_held(c, locks, &shortest);
            if (shortest <= 0 || !shared->slots[i].clock.over(now, shortest)) continue;
            Slot* s = &shared->slots[i];
            pg_atomic_write_u32(&s->ended_held, static_cast<std::uint32_t>(held));
            pg_atomic_write_u32(&s->ended_lease_ms,
                                static_cast<std::uint32_t>(shortest > INT32_MAX ? INT32_MAX : shortest));
            if (kill(c.pid, SIGTERM) == 0) s->ended = true;
        }
    }
    return static_cast<long>(period);
}

// 2. Delays that are over: removed, and their delay_ended queued. Returns
// the time (ms) until the next one is over, or -1.
long expire_delays() {
    if (pg_atomic_read_u32(&shared->delays_in_use) == 0) return -1;
    const std::int64_t now = monotonic_us();
    std::int64_t next = 0;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (auto& d : shared->delays) {
        if (!d.rec.used) continue;
        if (d.rec.until_us > now) {
            if (next == 0 || d.rec.until_us < next) next = d.rec.until_us;
            continue;
        }
        if (d.announce &&
            !add_event_locked(d.rec.db, core::LockEvent::delay_ended, d.name, d.len, d.token, unix_now_us()))
            stats::add_for_database(d.rec.db, stats::kNotificationsDropped, 1);
        d.rec.used = false;
        pg_atomic_fetch_sub_u32(&shared->delays_in_use, 1);
    }
    LWLockRelease(shared->lock);
    return next == 0 ? -1 : static_cast<long>((next - now + 999) / 1000);
}

bool notifier_running(Notifier& n) {
    if (n.handle == nullptr) return false;
    pid_t pid;
    const BgwHandleStatus st = GetBackgroundWorkerPid(n.handle, &pid);
    if (st == BGWH_STARTED || st == BGWH_NOT_YET_STARTED) return true;
    pfree(n.handle);
    n.handle = nullptr;
    return false;
}

bool start_notifier(Oid db) {
    int free_at = -1;
    for (int i = 0; i < kMaxNotifiers; ++i) {
        if (notifiers[i].handle != nullptr && notifiers[i].db == db && notifier_running(notifiers[i])) return true;
        if (notifiers[i].handle == nullptr || !notifier_running(notifiers[i])) free_at = free_at < 0 ? i : free_at;
    }
    if (free_at < 0) return false;
    BackgroundWorker w;
    memset(&w, 0, sizeof w);
    w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    w.bgw_start_time = BgWorkerStart_RecoveryFinished;
    w.bgw_restart_time = BGW_NEVER_RESTART;
    snprintf(w.bgw_library_name, BGW_MAXLEN, "fencing");
    snprintf(w.bgw_function_name, BGW_MAXLEN, "fencing_notifier_main");
    snprintf(w.bgw_name, BGW_MAXLEN, "fencing notifier for database %u", db);
    snprintf(w.bgw_type, BGW_MAXLEN, "fencing notifier");
    w.bgw_main_arg = ObjectIdGetDatum(db);
    w.bgw_notify_pid = MyProcPid;
    MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
    BackgroundWorkerHandle* h = nullptr;
    const bool ok = RegisterDynamicBackgroundWorker(&w, &h);
    MemoryContextSwitchTo(old);
    if (!ok) return false;
    notifiers[free_at] = Notifier{db, h, GetCurrentTimestamp()};
    return true;
}

// Whether database db exists (pg_database is a shared catalog: readable
// connected to no database, as the autovacuum launcher reads it).
bool database_exists(Oid db) {
    MemoryContext tick = CurrentMemoryContext;
    StartTransactionCommand();
    const bool exists = SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(db));
    CommitTransactionCommand();
    MemoryContextSwitchTo(tick);
    return exists;
}

// The events and delays of a dropped database go.
void forget_database(Oid db) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (auto& e : shared->events)
        if (e.used && e.db == db) {
            e.used = false;
            pg_atomic_fetch_sub_u32(&shared->events_in_use, 1);
        }
    LWLockRelease(shared->lock);
}

// 3. Queued events: a notifier for each database that has some. Events no
// notifier could send for kEventMaxAgeUs (the database is gone, no worker
// slot was free) are dropped. Returns when to look again (ms), or -1.
long dispatch_events() {
    if (pg_atomic_read_u32(&shared->events_in_use) == 0) return -1;
    Oid dbs[kMaxNotifiers];
    int ndbs = 0;
    bool more = false;
    const std::int64_t oldest = unix_now_us() - kEventMaxAgeUs;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (auto& e : shared->events) {
        if (!e.used) continue;
        if (e.unix_us < oldest) {
            e.used = false;
            pg_atomic_fetch_sub_u32(&shared->events_in_use, 1);
            stats::add_for_database(e.db, stats::kNotificationsDropped, 1);
            continue;
        }
        bool seen = false;
        for (int i = 0; i < ndbs; ++i) seen |= dbs[i] == e.db;
        if (!seen && ndbs < kMaxNotifiers) dbs[ndbs++] = e.db;
        if (!seen && ndbs == kMaxNotifiers) more = true;
    }
    LWLockRelease(shared->lock);
    bool waiting = more;
    for (int i = 0; i < ndbs; ++i) {
        if (!database_exists(dbs[i])) {
            forget_database(dbs[i]);
            continue;
        }
        waiting |= !start_notifier(dbs[i]);
    }
    // The notifiers tell us (bgw_notify_pid) when they start and stop; look
    // again soon in any case, for events that arrive as one exits.
    return waiting ? 100 : 250;
}

// The supervisor's exit: nobody should set its latch any more (the
// postmaster starts a new one a second later; delays and events wait for it
// in shared memory).
void forget_supervisor(int, Datum) {
    pg_atomic_write_u32(&shared->supervisor_procno, UINT32_MAX);
    pg_atomic_write_u32(&shared->sampling_ms, 0);
}

}  // namespace

}  // namespace fencing::pg::supervisor

using namespace fencing;
using namespace fencing::pg;
using namespace fencing::pg::supervisor;

void fencing_supervisor_main(Datum) {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    // Connected to no database (as the logical replication launcher): it
    // shows in pg_stat_activity, and holds up no DROP DATABASE.
    BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
    pgstat_report_appname("fencing supervisor");

    const int n = shared->nslots;
    copies = static_cast<SlotCopy*>(MemoryContextAllocZero(TopMemoryContext, sizeof(SlotCopy) * n));
    leased = static_cast<int*>(MemoryContextAllocZero(TopMemoryContext, sizeof(int) * n));
    tick_context = AllocSetContextCreate(TopMemoryContext, "fencing supervisor tick", ALLOCSET_DEFAULT_SIZES);
    pg_atomic_write_u32(&shared->supervisor_procno, static_cast<std::uint32_t>(compat::my_proc_number()));
    before_shmem_exit(forget_supervisor, (Datum)0);

    for (;;) {
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        MemoryContext old = MemoryContextSwitchTo(tick_context);
        long timeout = -1;
        auto earliest = [&timeout](long t) {
            if (t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
        };
        earliest(check_leases());
        earliest(expire_delays());
        earliest(dispatch_events());
        MemoryContextSwitchTo(old);
        MemoryContextReset(tick_context);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | (timeout >= 0 ? WL_TIMEOUT : 0), timeout,
                        PG_WAIT_EXTENSION);
    }
}

// A notifier: sends the queued events of one database (the worker's
// argument) as NOTIFY, in transactions of its own, and exits as soon as
// none is left, so that it holds up no DROP DATABASE or CREATE DATABASE ...
// TEMPLATE of its database (the supervisor starts another for later ones).
void fencing_notifier_main(Datum arg) {
    const Oid db = DatumGetObjectId(arg);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnectionByOid(db, InvalidOid, 0);
    pgstat_report_appname("fencing notifier");
    // A NOTIFY commits a transaction id: never wait for a synchronous standby
    // for it (an absent one would hold every later event up).
    SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
    constexpr int kBatch = 256;
    Named* batch = static_cast<Named*>(MemoryContextAlloc(TopMemoryContext, sizeof(Named) * kBatch));
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        int n = 0;
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        // In the order they were posted: the oldest first.
        for (; n < kBatch; ++n) {
            Named* first = nullptr;
            for (auto& e : shared->events)
                if (e.used && e.db == db && (first == nullptr || e.seq < first->seq)) first = &e;
            if (first == nullptr) break;
            batch[n] = *first;
            first->used = false;
            pg_atomic_fetch_sub_u32(&shared->events_in_use, 1);
        }
        LWLockRelease(shared->lock);
        if (n == 0) break;
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        for (int i = 0; i < n; ++i)
            notify::send_event(batch[i].name, batch[i].len, batch[i].ev, batch[i].token, batch[i].unix_us);
        CommitTransactionCommand();
    }
    proc_exit(0);
}

namespace fencing::pg::supervisor {

void init() {
    if (!process_shared_preload_libraries_in_progress) return;
    compat::request_shared_memory(request);
    previous_startup_hook = shmem_startup_hook;
    shmem_startup_hook = startup;

    BackgroundWorker w;
    memset(&w, 0, sizeof w);
    w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    w.bgw_start_time = BgWorkerStart_RecoveryFinished;
    w.bgw_restart_time = 1;
    snprintf(w.bgw_library_name, BGW_MAXLEN, "fencing");
    snprintf(w.bgw_function_name, BGW_MAXLEN, "fencing_supervisor_main");
    snprintf(w.bgw_name, BGW_MAXLEN, "fencing supervisor");
    snprintf(w.bgw_type, BGW_MAXLEN, "fencing supervisor");
    RegisterBackgroundWorker(&w);
}

}  // namespace fencing::pg::supervisor

// fencing.lock_delays(): the lost grants of this database in their
// lock-delay (for fencing.locks): key, the ended backend's pid, the end of
// the delay (seconds since 2000-01-01, rounded up, as the view's marks had
// it) and the lost grant's lock mode. Empty without the preload.
FENCING_FUNCTION(fencing_lock_delays) {
    return guarded("fencing.lock_delays", [&]() -> Datum {
        InitMaterializedSRF(fcinfo, 0);
        ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
        if (shared == nullptr || pg_atomic_read_u32(&shared->delays_in_use) == 0) return compat::null_datum();
        const std::int64_t now = monotonic_us();
        Datum values[4];
        bool nulls[4] = {false, false, false, false};
        LWLockAcquire(shared->lock, LW_SHARED);
        for (const auto& d : shared->delays) {
            if (!d.rec.used || d.rec.db != MyDatabaseId || d.rec.until_us <= now) continue;
            values[0] = Int64GetDatum(static_cast<std::int64_t>(d.rec.key));
            values[1] = Int32GetDatum(d.pid);
            values[2] = Int64GetDatum(static_cast<std::int64_t>(core::delay_end_seconds(d.until)));
            values[3] = CStringGetTextDatum(GetLockmodeName(USER_LOCKMETHOD, d.mode));
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
        LWLockRelease(shared->lock);
        return compat::null_datum();
    });
}

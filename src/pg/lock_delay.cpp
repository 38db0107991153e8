// Lock-delay: acquire(..., lock_delay => d).
//
// A grant taken with a lock-delay ends cleanly when its session gives it back
// (release, release_all, the end of its transaction, ROLLBACK TO SAVEPOINT,
// pg_advisory_unlock_all(), DISCARD ALL); uncleanly when the session ends
// while holding it: the client went away or was killed, the backend was
// terminated (pg_terminate_backend, a lease that ran out, an idle timeout).
// After an unclean end nobody is granted the resource until d has passed.
//
// The ended session's backend exits at once. Its exit callback (pg/events.cpp,
// before_shmem_exit: it runs before PostgreSQL releases the session's locks)
// records each delayed grant it still holds in the supervisor's delay table
// (lock_delay_publish); only then does the lock manager free the locks. Every
// acquisition, once the lock manager has granted it the resource's lock and
// before it issues a token, looks the resource up in that table
// (lock_delay_wait_out) and waits, still holding the lock, until the delay is
// over: waiters behind it stay queued in the lock manager, in order, each
// within its own wait. The supervisor removes the entry when the delay is
// over and has delay_ended sent. Needs fencing in shared_preload_libraries.
#include "pg/lock_options.hpp"

#include "pg/events.hpp"
#include "pg/lock_tags.hpp"
#include "pg/notify.hpp"
#include "pg/supervisor.hpp"

namespace fencing::pg {

namespace {

constexpr std::size_t kMaxDelayed = 128;  // grants with a delay kept after the session ends
bool armed = false;

}  // namespace

void arm_lock_delay() {
    events::ensure_exit_callback();
    armed = true;
}

std::size_t lock_delay_publish() {
    if (!armed || grant_book().empty()) return 0;
    core::GrantBook::Delayed delayed[kMaxDelayed];
    const std::size_t n = grant_book().copy_delayed(delayed, kMaxDelayed);
    std::size_t posted = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t key = delayed[i].key;
        const LOCKTAG rtag = resource_tag(key);
        const LOCKMODE mode = held_by_me(rtag, kSessionMode)  ? kSessionMode
                              : held_by_me(rtag, kSharedMode) ? kSharedMode
                              : held_by_me(rtag, kXactMode)   ? kXactMode
                                                              : NoLock;
        if (mode == NoLock) continue;
        // delay_ended only for a grant whose lost is announced: one held at
        // session scope (a transaction's grant never committed).
        const notify::Announced a = held_at_session_scope(key) ? notify::announced(key) : notify::Announced{};
        const core::GrantTraits& t = delayed[i].traits;
        const supervisor::LostGrant g{key,        t.delay_ms, mode,   t.base, t.permits, a.resource != nullptr,
                                      a.resource, a.len,      a.token};
        if (supervisor::post_delay(g))
            ++posted;
        else
            ereport(LOG, (errmsg("fencing: the lock-delay of a lost grant could not be kept"),
                          errdetail("The supervisor keeps at most 1024 lock-delays at a time; the resource is "
                                    "free at once.")));
    }
    return posted;
}

bool lock_delay_wait_out(std::uint64_t key, bool shared, bool try_only, std::int64_t wait_ms) {
    if (supervisor::delay_left_ms(key, shared) == 0) return true;
    if (try_only) return false;
    return supervisor::wait_out_delay(key, shared, wait_ms);
}

}  // namespace fencing::pg

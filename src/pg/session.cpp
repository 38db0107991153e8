#include "pg/session.hpp"

extern "C" {
#include "executor/executor.h"
#include "tcop/utility.h"
}

#include "pg/events.hpp"
#include "pg/lock_tags.hpp"
#include "pg/supervisor.hpp"
#include "pg/tombstones.hpp"

namespace fencing::pg {

namespace {

core::HoldLedger the_ledger;
core::HoldLedger the_guards;

// ---------------------------------------------------------------------------
// Leases. The supervisor (pg/supervisor.cpp) enforces them from outside the
// backend; the backend only publishes its leased holds after every change
// (apply_leases). Nothing here runs in a signal handler or depends on a
// timer of the backend, which PostgreSQL's error recovery would cancel.

constexpr std::size_t kPublished = 32;

// Leased holds of a ledger the lock manager no longer has are forgotten.
void resync(core::HoldLedger& l, bool guard) noexcept {
    core::HoldLedger::LeasedHold buf[kPublished];
    const std::size_t n = l.copy_leased_holds(buf, kPublished);
    for (std::size_t i = 0; i < n && i < kPublished; ++i) {
        const bool held = guard ? held_by_me(guard_tag(buf[i].key), kGuardHoldMode)
                                : (held_by_me(resource_tag(buf[i].key), kSessionMode) ||
                                   held_by_me(resource_tag(buf[i].key), kXactMode) ||
                                   held_by_me(resource_tag(buf[i].key), kSharedMode));
        if (!held) l.forget(buf[i].key);
    }
}

void collect(const core::HoldLedger& l, bool guard, supervisor::LeasedHold* out, std::size_t& n, bool& overflow,
             std::int64_t& shortest) {
    core::HoldLedger::LeasedHold buf[kPublished];
    const std::size_t total = l.copy_leased_holds(buf, kPublished);
    for (std::size_t i = 0; i < total; ++i) {
        const std::int64_t lease = i < kPublished ? buf[i].lease_ms : l.shortest_lease();
        if (shortest == 0 || lease < shortest) shortest = lease;
        if (i < kPublished && n < kPublished)
            out[n++] = supervisor::LeasedHold{buf[i].key, buf[i].lease_ms, guard};
        else
            overflow = true;
    }
}

bool published_any = false;

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
    const std::int64_t ended_lease_ms = edata->elevel == FATAL ? supervisor::lease_ending_ms() : 0;
    if (ended_lease_ms > 0 && edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN) {
        MemoryContext old = MemoryContextSwitchTo(ErrorContext);
        const int held = supervisor::lease_ending_held();
        edata->sqlerrcode =
            IsTransactionBlock() ? ERRCODE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT : ERRCODE_IDLE_SESSION_TIMEOUT;
        edata->message = psprintf("terminating connection because its fencing lease of %d ms expired",
                                  static_cast<int>(ended_lease_ms > INT_MAX ? INT_MAX : ended_lease_ms));
        edata->detail = psprintf(
            "The client sent and read nothing for longer than the lease while the session held "
            "%d leased fencing lock%s or guard%s; the locks are released and their tokens are "
            "stale.",
            held, held == 1 ? "" : "s", held == 1 ? "" : "s");
        edata->hint = pstrdup(
            "Acquire the locks again on a new connection, and renew the lease (fencing.renew) "
            "or send statements more often than the lease.");
        MemoryContextSwitchTo(old);
    }
    if (previous_emit_log_hook) previous_emit_log_hook(edata);
}

}  // namespace

core::HoldLedger& ledger() noexcept { return the_ledger; }
std::int64_t lease_ending_ms() noexcept { return supervisor::lease_ending_ms(); }
core::HoldLedger& guard_ledger() noexcept { return the_guards; }

void apply_leases() noexcept {
    resync(the_ledger, false);
    resync(the_guards, true);
    supervisor::LeasedHold holds[kPublished];
    std::size_t n = 0;
    bool overflow = false;
    std::int64_t shortest = 0;
    collect(the_ledger, false, holds, n, overflow, shortest);
    collect(the_guards, true, holds, n, overflow, shortest);
    if (shortest == 0 && !published_any) return;  // nothing leased, before or now
    supervisor::publish_leases(holds, n, overflow, shortest);
    published_any = shortest > 0;
    if (shortest > 0) events::leases_enforced();
}

namespace {

// Every statement the client starts, counted for the supervisor while the
// session holds a lease: it tells a client that sends statements from one
// that is silent, whatever track_activities says.
ExecutorStart_hook_type previous_executor_start = nullptr;
ProcessUtility_hook_type previous_process_utility = nullptr;

void count_executor_start(QueryDesc* query, int eflags) {
    if (published_any) supervisor::note_statement();
    if (previous_executor_start)
        previous_executor_start(query, eflags);
    else
        standard_ExecutorStart(query, eflags);
}

void count_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                   ParamListInfo params, QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc) {
    if (published_any) supervisor::note_statement();
    tombstones::close_before_utility();
    if (previous_process_utility)
        previous_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
}

}  // namespace

void register_session_callbacks() {
    RegisterXactCallback(xact_callback, nullptr);
    RegisterSubXactCallback(subxact_callback, nullptr);
    previous_emit_log_hook = emit_log_hook;
    emit_log_hook = name_lease_expiry;
    previous_executor_start = ExecutorStart_hook;
    ExecutorStart_hook = count_executor_start;
    previous_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = count_utility;
}

}  // namespace fencing::pg

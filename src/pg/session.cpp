#include "pg/session.hpp"

namespace fencing::pg {

namespace {

core::HoldLedger the_ledger;

// Leases are enforced by the server's own idle timeouts: a holder whose client
// sends nothing for longer than the lease is disconnected by its backend, and
// the lock manager frees its locks. The session's own values come back when
// its last leased hold is gone (unless it changed them in the meantime).
struct SavedTimeouts {
    bool active = false;
    int idle_in_xact = 0;   // the session's own values
    int idle_session = 0;
    int applied = 0;        // the value we set
};
SavedTimeouts saved;

int min_positive(int a, int b) {
    if (a <= 0) return b;
    if (b <= 0) return a;
    return a < b ? a : b;
}

void xact_callback(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:
            try {
                the_ledger.xact_end();
            } catch (...) {
                the_ledger = core::HoldLedger{};
            }
            apply_leases();
            break;
        default:
            break;
    }
}

void subxact_callback(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void*) {
    try {
        if (event == SUBXACT_EVENT_COMMIT_SUB)
            the_ledger.subxact_commit(sub, parent);
        else if (event == SUBXACT_EVENT_ABORT_SUB)
            the_ledger.subxact_abort(sub);
    } catch (...) {
        the_ledger = core::HoldLedger{};
    }
}

// A session ended by the idle timeout a lease set: say so in the FATAL error
// the client receives (and the server log), instead of a bare idle timeout.
emit_log_hook_type previous_emit_log_hook = nullptr;

void name_lease_expiry(ErrorData* edata) {
    if (edata->elevel == FATAL && saved.active &&
        ((edata->sqlerrcode == ERRCODE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT &&
          (saved.idle_in_xact <= 0 || saved.idle_in_xact > saved.applied))
#if PG_VERSION_NUM >= 140000
         || (edata->sqlerrcode == ERRCODE_IDLE_SESSION_TIMEOUT &&
             (saved.idle_session <= 0 || saved.idle_session > saved.applied))
#endif
             )) {
        MemoryContext old = MemoryContextSwitchTo(ErrorContext);
        const std::size_t held = the_ledger.size();
        edata->message = psprintf("terminating connection because its fencing lease of %d ms expired", saved.applied);
        edata->detail = psprintf("The client sent nothing for longer than the lease while the session held %zu "
                                 "fencing lock%s; the locks are released and their tokens are stale.",
                                 held, held == 1 ? "" : "s");
        edata->hint = pstrdup("Acquire the locks again on a new connection, and renew the lease (fencing.renew) "
                              "or send statements more often than the lease.");
        MemoryContextSwitchTo(old);
    }
    if (previous_emit_log_hook) previous_emit_log_hook(edata);
}

}  // namespace

core::HoldLedger& ledger() noexcept { return the_ledger; }

void apply_leases() noexcept {
    std::int64_t lease = the_ledger.shortest_lease();
    if (lease > INT_MAX) lease = INT_MAX;
    if (lease > 0) {
        if (!saved.active) {
            saved.active = true;
            saved.idle_in_xact = IdleInTransactionSessionTimeout;
            saved.idle_session = compat::idle_session_timeout();
        }
        int v = static_cast<int>(lease);
        saved.applied = v;
        IdleInTransactionSessionTimeout = min_positive(saved.idle_in_xact, v);
        if (compat::has_idle_session_timeout) compat::set_idle_session_timeout(min_positive(saved.idle_session, v));
        return;
    }
    if (!saved.active) return;
    if (IdleInTransactionSessionTimeout == min_positive(saved.idle_in_xact, saved.applied))
        IdleInTransactionSessionTimeout = saved.idle_in_xact;
    if (compat::has_idle_session_timeout && compat::idle_session_timeout() == min_positive(saved.idle_session, saved.applied))
        compat::set_idle_session_timeout(saved.idle_session);
    saved = SavedTimeouts{};
}

void register_session_callbacks() {
    RegisterXactCallback(xact_callback, nullptr);
    RegisterSubXactCallback(subxact_callback, nullptr);
    previous_emit_log_hook = emit_log_hook;
    emit_log_hook = name_lease_expiry;
}

}  // namespace fencing::pg

#include "pg/durability.hpp"

#include "pg/settings.hpp"

namespace fencing::pg {

namespace {

// The WAL position this backend knows to be flushed.
XLogRecPtr known_flushed = InvalidXLogRecPtr;

// Whether synchronous standbys are configured (synchronous_standby_names).
bool sync_standbys_defined() { return compat::sync_standbys_configured(); }

bool sync_standby_confirmed(XLogRecPtr lsn) { return compat::sync_standbys_flushed() >= lsn; }

// The token must be durable before it leaves the backend: locally, and on
// synchronous standbys where they are configured, whatever this session's
// synchronous_commit says.
void make_durable(XLogRecPtr lsn) {
    XLogFlush(lsn);
    if (!sync_standbys_defined()) return;
    // SyncRepWaitForLSN() waits in the mode SyncRepWaitMode says, which only
    // synchronous_commit's assign hook sets: raise the setting through the GUC
    // machinery (so the hook runs) for the wait, and pop it afterwards, on
    // error too (an aborting (sub)transaction pops it as well).
    const bool raise = synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH;
    const int nest = raise ? NewGUCNestLevel() : 0;
    if (raise)
        (void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                                false);
    PG_TRY();
    { SyncRepWaitForLSN(lsn, false); }
    PG_CATCH();
    {
        if (raise) AtEOXact_GUC(false, nest);
        PG_RE_THROW();
    }
    PG_END_TRY();
    if (raise) AtEOXact_GUC(false, nest);
    // The wait ends early only when canceled (a cancel, statement_timeout, or
    // a termination that is on its way): the token must not leave. Not a
    // class-08 code: that would tell connection pools the connection broke.
    if (sync_standbys_defined() && !sync_standby_confirmed(lsn))
        ereport(ERROR,
                (errcode(ProcDiePending ? ERRCODE_ADMIN_SHUTDOWN : ERRCODE_QUERY_CANCELED),
                 errmsg("fence token was not confirmed by the synchronous standby"),
                 errdetail("The wait for synchronous replication was canceled before the standby flushed the token."),
                 errhint("The token was not handed out; acquire again.")));
}

}  // namespace

void check_sync_standby_required() {
    if (!require_sync_standby()) return;
    bool defined = sync_standbys_defined();
    if (!defined)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("fencing.require_sync_standby is on but no synchronous standby is configured"),
                        errdetail("Tokens issued without a synchronous standby can be issued again after a failover."),
                        errhint("Set synchronous_standby_names, or turn fencing.require_sync_standby off.")));
}

// Flushes (and has synchronous standbys confirm) the record covering a token.
// With synchronous standbys configured, always check (cheap when the standby
// has already confirmed): they may have been configured, or replaced by a
// lagging one, after this backend last looked.
void make_covering_durable(XLogRecPtr lsn) {
    if (lsn <= known_flushed && !sync_standbys_defined()) return;
    make_durable(lsn);
    if (lsn > known_flushed) known_flushed = lsn;
}

}  // namespace fencing::pg

// Durability of a token before it leaves the backend: its covering WAL
// record flushed locally and, where synchronous standbys are configured,
// confirmed by them, whatever this session's synchronous_commit says; and
// fencing.require_sync_standby's check.
#pragma once
#include "pg/pg.hpp"

namespace fencing::pg {

// Errors (55000) when fencing.require_sync_standby is on and no synchronous
// standby is configured.
void check_sync_standby_required();

// Flushes (and has synchronous standbys confirm) the WAL up to `lsn`. Errors
// (57014, or 57P01 when terminating) when the standby's wait is canceled: the
// token must not be handed out then.
void make_covering_durable(XLogRecPtr lsn);

}  // namespace fencing::pg

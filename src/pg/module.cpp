// Module entry: PG_MODULE_MAGIC and _PG_init (settings, callbacks).
#include "pg/bridge.hpp"

#include "core/no_postgres.hpp"
#include "pg/session.hpp"
#include "pg/settings.hpp"
#include "pg/stats.hpp"
#include "pg/supervisor.hpp"
#include "pg/tombstone_runs.hpp"
#include "pg/tombstone_summary.hpp"

static_assert(fencing::core::kPureCore, "the core must be built without PostgreSQL headers");

extern "C" {
PG_MODULE_MAGIC;
}

extern "C" PGDLLEXPORT void _PG_init(void);

void _PG_init(void) {
    fencing::pg::stats::init();  // before define_settings() reserves the "fencing." prefix
    fencing::pg::supervisor::init();
    fencing::pg::tombstone_summary::init();
    fencing::pg::tombstone_runs::init();
    fencing::pg::define_settings();
    fencing::pg::register_session_callbacks();
}

FENCING_FUNCTION(fencing_version) {
    return fencing::pg::guarded("fencing.version",
                                [&]() -> Datum { PG_RETURN_TEXT_P(cstring_to_text(FENCING_VERSION)); });
}

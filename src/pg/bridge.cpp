#include "pg/bridge.hpp"

namespace fencing::pg {

void raise_cpp_failure(const char* where, int kind, const char* message) {
    if (kind == kBadAlloc) ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory in %s", where)));
    if (kind == kStd)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("internal error in %s: %s", where, message)));
    ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("internal error in %s", where),
                    errdetail("An unidentified C++ exception was caught.")));
    pg_unreachable();
}

}  // namespace fencing::pg

// The wall clock in the unit of the counter's clock bound and of lock
// events' times.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

// The wall clock in microseconds since 1970-01-01 UTC (PostgreSQL's
// timestamps count from 2000-01-01).
inline std::int64_t unix_now_us() {
    return GetCurrentTimestamp() + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

}  // namespace fencing::pg

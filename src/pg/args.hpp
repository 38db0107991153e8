// Argument checks shared by the SQL-callable functions.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

struct Resource {
    const char* data;
    int len;
    std::uint64_t key;
};

// Argument `argno` as a resource name: not NULL, 1 .. 1024 bytes (22004 / 22023).
Resource resource_arg(FunctionCallInfo fcinfo, int argno);

// An interval in microseconds, months counting as 30 days, as everywhere in
// PostgreSQL's interval arithmetic (128 bits: no interval overflows it).
__int128 interval_usecs(const Interval* iv);

// An interval argument in milliseconds; -1 when NULL or absent. `what` names
// the argument in errors. Negative intervals raise 22023; so do zero ones when
// !allow_zero.
std::int64_t interval_ms_arg(FunctionCallInfo fcinfo, int argno, const char* what, bool allow_zero);

}  // namespace fencing::pg

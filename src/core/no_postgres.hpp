// Included first by every file under src/core; core .cpp files define
// FENCING_CORE_SOURCE before any include. (The unit-test build, which has no
// PostgreSQL include path at all, enforces the rule for every core file.) The core is pure C++17: it must
// compile and be unit-tested without any PostgreSQL header, so that its logic
// can never longjmp and can be exercised in isolation.
#pragma once

#if defined(FENCING_CORE_SOURCE) && (defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(PG_CONFIG_H))
#error "src/core must not include PostgreSQL headers"
#endif

namespace fencing::core {
// A compile-time marker that the glue checks it was built against.
inline constexpr bool kPureCore = true;
}  // namespace fencing::core

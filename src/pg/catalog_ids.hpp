// The object ids of fencing's own catalog: the fence state table, its primary
// key index and the token counter's sequence, looked up once per backend and
// forgotten when any of them changes (DROP/CREATE EXTENSION, a relcache
// reset). Errors with "fencing extension is not installed in this database"
// when they are missing.
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

struct FenceOids {
    Oid state = InvalidOid;  // fencing.fence_state
    Oid index = InvalidOid;  // fencing.fence_state_pkey
    Oid seq = InvalidOid;    // fencing.token_seq
};

const FenceOids& fence_oids();

// Changes whenever the cached ids are forgotten: what a backend remembers of
// the relations (the counter's records) is stale once it differs.
std::uint64_t fence_oids_generation();

}  // namespace fencing::pg

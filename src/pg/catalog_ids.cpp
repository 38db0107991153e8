#include "pg/catalog_ids.hpp"

namespace fencing::pg {

namespace {

FenceOids cached;
std::uint64_t generation = 0;
bool callback_registered = false;

void invalidate(Datum, Oid relid) {
    if (relid == InvalidOid || relid == cached.state || relid == cached.index || relid == cached.seq) {
        if (OidIsValid(cached.state)) ++generation;
        cached = FenceOids{};
    }
}

}  // namespace

const FenceOids& fence_oids() {
    if (OidIsValid(cached.state)) return cached;
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(invalidate, (Datum)0);
        callback_registered = true;
    }
    Oid nsp = get_namespace_oid("fencing", true);
    Oid state = OidIsValid(nsp) ? get_relname_relid("fence_state", nsp) : InvalidOid;
    Oid index = OidIsValid(nsp) ? get_relname_relid("fence_state_pkey", nsp) : InvalidOid;
    Oid seq = OidIsValid(nsp) ? get_relname_relid("token_seq", nsp) : InvalidOid;
    if (!OidIsValid(state) || !OidIsValid(index) || !OidIsValid(seq))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("fencing extension is not installed in this database"),
                        errhint("Run CREATE EXTENSION fencing.")));
    ++generation;
    cached = FenceOids{state, index, seq};
    return cached;
}

std::uint64_t fence_oids_generation() { return generation; }

}  // namespace fencing::pg

// The database's resource key secret (table fencing.key_secret, one row of 16
// random bytes): the SipHash key under which resource names become lock keys.
//
// Each backend reads it once and keeps it until the table changes: a new
// secret (a restore's COPY, INSERT ... DEFAULT VALUES), DROP or CREATE
// EXTENSION all invalidate the table's relcache entry, and that clears the
// copy. A new secret is accepted only while no fencing lock of the database
// is held or awaited (the old keys name those locks), and it rekeys the fence
// state in the same transaction (see fencing_key_secret_replace).
#pragma once
#include "pg/pg.hpp"

#include <cstdint>

namespace fencing::pg {

// The lock key of a resource name under the database's current secret. Takes
// in pending invalidations first, so that a secret replaced by a committed
// transaction is seen. ERROR when the extension or its secret is missing.
std::uint64_t resource_key_of(const char* data, int len);

// Raises 40001 unless `key` is still the resource's key: for an acquisition
// that computed the key, took the lock, and then waited for the fence state
// while a new secret was being committed.
void check_key_current(std::uint64_t key, const char* data, int len);

// Errors (25000) in a transaction that wrote the secret itself, not yet
// committed: every fencing lock it took (a grant, a validate() guard) would
// be keyed by a secret its rollback undoes, and exclude nobody after it.
// Call it after resource_key_of() (it reads the secret that call loaded).
void refuse_if_secret_new_here();

}  // namespace fencing::pg

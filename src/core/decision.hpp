// The write-acceptance decision: the single place that decides whether a row
// write on a protected table is accepted. Every case is unit-tested in
// tests/unit/decision_test.cpp; the trigger only gathers the inputs and acts
// on the verdict.
#pragma once
#include "core/no_postgres.hpp"

#include <cstdint>
#include <optional>

namespace fencing::core {

enum class WriteEvent { insert, update, del };
enum class OnStale { error, skip };

struct ProtectMode {
    bool allow_equal = false;
    OnStale on_stale = OnStale::error;
    bool fence_deletes = true;  // as fencing.protect()'s default
    // (1.2) The table's floor (fencing.raise_floor): every token up to it is
    // stale for every row of the table, whatever the row or the key's
    // tombstone holds; empty when the table has none.
    std::optional<std::int64_t> floor;
};

struct WriteInput {
    WriteEvent event = WriteEvent::update;
    // The existing row's token (UPDATE, DELETE); empty when the column is NULL.
    std::optional<std::int64_t> stored;
    // The new row's token column (INSERT, UPDATE); empty when NULL.
    std::optional<std::int64_t> row_token;
    // UPDATE only: the statement assigns the token column itself (its SET
    // list names the column). When the value is unchanged and the setting is
    // set, the setting wins: MERGE reports the union of all its actions'
    // SET lists, so "named" need not mean "assigned by this action".
    bool assigned = false;
    // The transaction's fencing.token setting; empty when unset.
    std::optional<std::int64_t> setting;
    // INSERT, and UPDATE that changes the row's key: the token with which a
    // row of the key being (re)created was deleted (its tombstone); empty
    // when there is none. The write is judged against it as against a
    // stored token: a key deleted with token T comes back only with a token
    // newer than T.
    std::optional<std::int64_t> deleted;
    // (1.2) The write is a logical replication worker's: a change the
    // publisher judged, applied on a subscriber that has the table protected
    // too. It is judged against the subscriber's row (and tombstone) like any
    // write, but a stale one is skipped whatever on_stale says (an error
    // would stop the apply worker on every retry), and a DELETE, which
    // carries no token of its own (the publisher's fencing.token is not
    // replicated), is accepted with the deleted row's token as its own (the
    // key's tombstone records that token).
    // On a table with a floor (cut over: its publisher is the old primary),
    // a replicated DELETE is skipped. (Only a superuser's subscription may
    // replicate DELETEs at all: checked before, pg/trigger.cpp.)
    bool replicated = false;
};

enum class Verdict {
    accept,        // write the row (filling in the token when fill_row says so)
    reject_error,  // raise 23T01
    reject_skip,   // leave the row unchanged, do not count it
};

enum class RejectReason {
    none,
    no_token,     // no incoming token at all (NULL column and no setting)
    not_newer,    // incoming <= stored (or == without allow_equal / explicit token)
    below_floor,  // (1.2) incoming <= the table's floor
};

struct Decision {
    Verdict verdict = Verdict::accept;
    RejectReason reason = RejectReason::none;
    // The token the write is judged with (empty when there is none).
    std::optional<std::int64_t> incoming;
    // The incoming token came from the setting and must be written into the row.
    bool fill_row = false;
    // DELETE on a table without fence_deletes: accepted without a check.
    bool unchecked = false;
    // Rejected (not_newer) because of the deleted row's token, not a
    // stored one.
    bool against_deleted = false;
};

Decision decide(const WriteInput& in, const ProtectMode& mode) noexcept;

}  // namespace fencing::core

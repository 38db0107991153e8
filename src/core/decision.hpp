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

// Inline, all of it: the trigger decides for every row, and its inputs and
// verdict then stay in registers. (Called out of line, the optionals and
// the Decision go through the stack in pieces, and reading them back
// stalls; measured in the trigger of a 200,000-row DELETE.)
#if defined(__GNUC__)
#define FENCING_DECISION_INLINE inline __attribute__((always_inline))
#else
#define FENCING_DECISION_INLINE inline
#endif
namespace detail {

// Why an incoming token is not accepted against the stored one (none when
// it is). `explicit_token` is true when the writer stated a token (assigned
// the column or set fencing.token): only then may allow_equal accept an
// equal token.
FENCING_DECISION_INLINE RejectReason judge(std::optional<std::int64_t> stored, std::optional<std::int64_t> incoming,
                                           bool explicit_token, const ProtectMode& mode) noexcept {
    if (!incoming) return RejectReason::no_token;
    if (!stored || *incoming > *stored) return RejectReason::none;
    if (*incoming == *stored && mode.allow_equal && explicit_token) return RejectReason::none;
    return RejectReason::not_newer;
}

// The decision for a write judged with INCOMING. (1.2) A write the rules
// accept is still stale when its token is not above the table's floor.
// `deleted_counts`: a not_newer rejection is for the deleted row's token,
// not a stored one. Built once, from scalars, for the registers' sake.
FENCING_DECISION_INLINE Decision verdict(RejectReason why, std::optional<std::int64_t> incoming, bool fill_row,
                                         bool deleted_counts, const ProtectMode& mode) noexcept {
    if (why == RejectReason::none && mode.floor && incoming && *incoming <= *mode.floor)
        why = RejectReason::below_floor;
    Decision d;
    d.incoming = incoming;
    if (why == RejectReason::none) {
        d.fill_row = fill_row;
        return d;
    }
    d.verdict = mode.on_stale == OnStale::skip ? Verdict::reject_skip : Verdict::reject_error;
    d.reason = why;
    d.against_deleted = deleted_counts && why == RejectReason::not_newer;
    return d;
}

// The decision for a write of this session's own.
FENCING_DECISION_INLINE Decision decide_local(const WriteInput& in, const ProtectMode& mode) noexcept {
    switch (in.event) {
        case WriteEvent::insert: {
            // No existing row to compare with; a row of the key that was
            // deleted counts as one (a tombstone), else only a token is
            // required.
            const bool has_deleted = in.deleted.has_value();
            if (in.row_token)
                return verdict(judge(in.deleted, in.row_token, true, mode), in.row_token, false, has_deleted, mode);
            return verdict(judge(in.deleted, in.setting, true, mode), in.setting, in.setting.has_value(), has_deleted,
                           mode);
        }
        case WriteEvent::update: {
            // An UPDATE that moves the row onto a deleted key is judged
            // against the newer of the stored token and the deleted row's.
            const bool by_deleted = in.deleted && (!in.stored || *in.deleted > *in.stored);
            const std::optional<std::int64_t> stored = by_deleted ? in.deleted : in.stored;
            // The statement's SET list names the column. MERGE reports the
            // union of all its UPDATE actions' columns, so when the value did
            // not change and fencing.token is set, the setting is the token
            // the writer meant (and the safer reading either way).
            const bool unchanged_with_setting = in.setting && in.row_token && in.row_token == in.stored;
            if (in.assigned && !unchanged_with_setting)
                return verdict(judge(stored, in.row_token, true, mode), in.row_token, false, by_deleted, mode);
            if (in.setting) return verdict(judge(stored, in.setting, true, mode), in.setting, true, by_deleted, mode);
            // The statement names no token: the row still carries the stored
            // one (unless an earlier trigger changed it), which is not newer.
            return verdict(judge(stored, in.row_token, false, mode), in.row_token, false, by_deleted, mode);
        }
        case WriteEvent::del: {
            // A DELETE that needs no token has none to judge (nor a floor).
            if (!mode.fence_deletes) {
                Decision d;
                d.unchecked = true;
                return d;
            }
            return verdict(judge(in.stored, in.setting, true, mode), in.setting, false, false, mode);
        }
    }
    return verdict(RejectReason::no_token, std::nullopt, false, false, mode);
}

}  // namespace detail

FENCING_DECISION_INLINE Decision decide(const WriteInput& in, const ProtectMode& mode) noexcept {
    if (!in.replicated) return detail::decide_local(in, mode);
    // A replicated DELETE: the publisher judged it with a token the
    // subscriber never sees; the row's own token is the most it knows.
    if (in.event == WriteEvent::del && mode.fence_deletes) {
        if (mode.floor) {
            Decision d;
            d.verdict = Verdict::reject_skip;
            d.reason = RejectReason::no_token;
            return d;
        }
        Decision d;
        d.incoming = in.stored;
        return d;
    }
    Decision d = detail::decide_local(in, mode);
    if (d.verdict == Verdict::reject_error) d.verdict = Verdict::reject_skip;
    return d;
}

}  // namespace fencing::core

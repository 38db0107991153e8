#define FENCING_CORE_SOURCE 1
#include "core/decision.hpp"

namespace fencing::core {

namespace {

Decision reject(const ProtectMode& mode, RejectReason why, std::optional<std::int64_t> incoming) noexcept {
    Decision d;
    d.verdict = mode.on_stale == OnStale::skip ? Verdict::reject_skip : Verdict::reject_error;
    d.reason = why;
    d.incoming = incoming;
    return d;
}

// Compare an incoming token against the stored one. `explicit_token` is true
// when the writer stated a token (assigned the column or set fencing.token):
// only then may allow_equal accept an equal token.
Decision judge(std::optional<std::int64_t> stored, std::optional<std::int64_t> incoming, bool explicit_token,
               bool fill_row, const ProtectMode& mode) noexcept {
    if (!incoming) return reject(mode, RejectReason::no_token, incoming);
    Decision ok;
    ok.incoming = incoming;
    ok.fill_row = fill_row;
    if (!stored || *incoming > *stored) return ok;
    if (*incoming == *stored && mode.allow_equal && explicit_token) return ok;
    return reject(mode, RejectReason::not_newer, incoming);
}

// Marks a rejection for not being newer than the deleted row's token.
Decision against(Decision d, bool deleted_counts) noexcept {
    d.against_deleted = deleted_counts && d.reason == RejectReason::not_newer;
    return d;
}

// The decision for a write of this session's own.
Decision decide_local(const WriteInput& in, const ProtectMode& mode) noexcept {
    switch (in.event) {
        case WriteEvent::insert: {
            // No existing row to compare with; a row of the key that was
            // deleted counts as one (a tombstone), else only a token is
            // required.
            const bool has_deleted = in.deleted.has_value();
            if (in.row_token) return against(judge(in.deleted, in.row_token, true, false, mode), has_deleted);
            return against(judge(in.deleted, in.setting, true, in.setting.has_value(), mode), has_deleted);
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
                return against(judge(stored, in.row_token, true, false, mode), by_deleted);
            if (in.setting) return against(judge(stored, in.setting, true, true, mode), by_deleted);
            // The statement names no token: the row still carries the stored
            // one (unless an earlier trigger changed it), which is not newer.
            return against(judge(stored, in.row_token, false, false, mode), by_deleted);
        }
        case WriteEvent::del: {
            if (!mode.fence_deletes) {
                Decision d;
                d.unchecked = true;
                return d;
            }
            return judge(in.stored, in.setting, true, false, mode);
        }
    }
    return reject(mode, RejectReason::no_token, std::nullopt);
}

// (1.2) A write the rules above accept is still stale when its token is not
// above the table's floor. A DELETE that needs no token has none to judge.
Decision above_floor(Decision d, const ProtectMode& mode) noexcept {
    if (mode.floor && d.verdict == Verdict::accept && !d.unchecked && d.incoming && *d.incoming <= *mode.floor)
        return reject(mode, RejectReason::below_floor, d.incoming);
    return d;
}

}  // namespace

Decision decide(const WriteInput& in, const ProtectMode& mode) noexcept {
    if (!in.replicated) return above_floor(decide_local(in, mode), mode);
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
    Decision d = above_floor(decide_local(in, mode), mode);
    if (d.verdict == Verdict::reject_error) d.verdict = Verdict::reject_skip;
    return d;
}

}  // namespace fencing::core

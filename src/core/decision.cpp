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

}  // namespace

Decision decide(const WriteInput& in, const ProtectMode& mode) noexcept {
    switch (in.event) {
        case WriteEvent::insert: {
            // No existing row to compare with: only a token is required.
            if (in.row_token) return judge(std::nullopt, in.row_token, true, false, mode);
            return judge(std::nullopt, in.setting, true, in.setting.has_value(), mode);
        }
        case WriteEvent::update: {
            // The statement's SET list names the column. MERGE reports the
            // union of all its UPDATE actions' columns, so when the value did
            // not change and fencing.token is set, the setting is the token
            // the writer meant (and the safer reading either way).
            const bool unchanged_with_setting = in.setting && in.row_token && in.row_token == in.stored;
            if (in.assigned && !unchanged_with_setting) return judge(in.stored, in.row_token, true, false, mode);
            if (in.setting) return judge(in.stored, in.setting, true, true, mode);
            // The statement names no token: the row still carries the stored
            // one (unless an earlier trigger changed it), which is not newer.
            return judge(in.stored, in.row_token, false, false, mode);
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

}  // namespace fencing::core

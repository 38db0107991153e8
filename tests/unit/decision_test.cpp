// Unit tests of src/core/decision: every case of the write-acceptance rules.
//
// The rules (the specification this file tests against):
//
//   UPDATE  incoming = the row's token if the UPDATE assigns the token column;
//           else the fencing.token setting if set (fill_row = true);
//           else the row's token (not explicit).
//           Accepted when incoming is not NULL and (stored is NULL or
//           incoming > stored); incoming == stored is accepted only with
//           allow_equal AND an explicit token (assigned or setting).
//           Otherwise rejected: reject_error or reject_skip per on_stale;
//           reason no_token when incoming is NULL, not_newer otherwise.
//   INSERT  incoming = the row's token, or the setting when the row's token is
//           NULL (fill_row = true); rejected (no_token) when both are NULL.
//           With a deleted token (the key's tombstone) it is judged like an
//           UPDATE of the deleted row with explicit = true: stored = deleted.
//   UPDATE  with a deleted token (the row moves onto a deleted key): judged
//           against the newer of stored and deleted.
//   DELETE  unchecked (accept, unchecked = true) unless fence_deletes; then
//           incoming = the setting, judged like UPDATE with explicit = true.
//           A deleted token does not matter.
//   against_deleted: rejected as not_newer, with the deleted token (and not
//           the stored one) the one compared with.
//
// The first part names each case; the last test compares decide() with a
// reference model of the rules over the whole input space.
#include "core/decision.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

using namespace fencing::core;

namespace {

using Tok = std::optional<std::int64_t>;
constexpr std::nullopt_t NUL = std::nullopt;

ProtectMode mode(bool allow_equal = false, OnStale on_stale = OnStale::error, bool fence_deletes = false) {
    ProtectMode m;
    m.allow_equal = allow_equal;
    m.on_stale = on_stale;
    m.fence_deletes = fence_deletes;
    return m;
}

WriteInput update(Tok stored, Tok row_token, bool assigned, Tok setting) {
    WriteInput in;
    in.event = WriteEvent::update;
    in.stored = stored;
    in.row_token = row_token;
    in.assigned = assigned;
    in.setting = setting;
    return in;
}

WriteInput insert(Tok row_token, Tok setting) {
    WriteInput in;
    in.event = WriteEvent::insert;
    in.row_token = row_token;
    in.setting = setting;
    return in;
}

WriteInput del(Tok stored, Tok setting) {
    WriteInput in;
    in.event = WriteEvent::del;
    in.stored = stored;
    in.setting = setting;
    return in;
}

const char* name(Verdict v) {
    switch (v) {
        case Verdict::accept:
            return "accept";
        case Verdict::reject_error:
            return "reject_error";
        case Verdict::reject_skip:
            return "reject_skip";
    }
    return "?";
}
const char* name(RejectReason r) {
    switch (r) {
        case RejectReason::none:
            return "none";
        case RejectReason::no_token:
            return "no_token";
        case RejectReason::not_newer:
            return "not_newer";
        case RejectReason::below_floor:
            return "below_floor";
    }
    return "?";
}
std::string show(Tok t) { return t ? std::to_string(*t) : std::string("NULL"); }

std::string show(const Decision& d) {
    std::ostringstream o;
    o << "{" << name(d.verdict) << ", " << name(d.reason) << ", incoming=" << show(d.incoming)
      << ", fill_row=" << d.fill_row << ", unchecked=" << d.unchecked << ", against_deleted=" << d.against_deleted
      << "}";
    return o.str();
}

::testing::AssertionResult accepted(const Decision& d, Tok incoming, bool fill_row) {
    if (d.verdict == Verdict::accept && d.reason == RejectReason::none && d.incoming == incoming &&
        d.fill_row == fill_row && !d.unchecked)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << show(d) << ", wanted accept with incoming=" << show(incoming)
                                         << " fill_row=" << fill_row;
}

// A rejection: verdict per on_stale, the reason, nothing to fill in, checked.
// (incoming is checked too: it is the token the write was judged with.)
::testing::AssertionResult rejected(const Decision& d, OnStale on_stale, RejectReason why, Tok incoming) {
    const Verdict want = on_stale == OnStale::skip ? Verdict::reject_skip : Verdict::reject_error;
    if (d.verdict == want && d.reason == why && d.incoming == incoming && !d.fill_row && !d.unchecked)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << show(d) << ", wanted " << name(want) << " " << name(why)
                                         << " incoming=" << show(incoming);
}

const OnStale kBothOnStale[] = {OnStale::error, OnStale::skip};

}  // namespace

// ============================================================================
// UPDATE that assigns the token column: incoming = the row's (new) token.
// ============================================================================

TEST(DecisionUpdateAssigned, NewerThanStoredAccepted) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true}) EXPECT_TRUE(accepted(decide(update(5, 6, true, NUL), mode(eq, s)), 6, false));
}

TEST(DecisionUpdateAssigned, StoredNullAccepted) {
    EXPECT_TRUE(accepted(decide(update(NUL, 1, true, NUL), mode()), 1, false));
    EXPECT_TRUE(accepted(decide(update(NUL, INT64_MAX, true, NUL), mode()), INT64_MAX, false));
}

TEST(DecisionUpdateAssigned, OlderRejectedNotNewer) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true})
            EXPECT_TRUE(rejected(decide(update(5, 4, true, NUL), mode(eq, s)), s, RejectReason::not_newer, 4));
}

TEST(DecisionUpdateAssigned, EqualRejectedWithoutAllowEqual) {
    for (OnStale s : kBothOnStale)
        EXPECT_TRUE(rejected(decide(update(5, 5, true, NUL), mode(false, s)), s, RejectReason::not_newer, 5));
}

TEST(DecisionUpdateAssigned, EqualAcceptedWithAllowEqual) {
    for (OnStale s : kBothOnStale) EXPECT_TRUE(accepted(decide(update(5, 5, true, NUL), mode(true, s)), 5, false));
}

TEST(DecisionUpdateAssigned, NullAssignedRejectedNoToken) {
    for (OnStale s : kBothOnStale) {
        EXPECT_TRUE(rejected(decide(update(5, NUL, true, NUL), mode(false, s)), s, RejectReason::no_token, NUL));
        EXPECT_TRUE(rejected(decide(update(NUL, NUL, true, NUL), mode(true, s)), s, RejectReason::no_token, NUL));
    }
}

TEST(DecisionUpdateAssigned, AssignedTokenWinsOverSetting) {
    // The setting is newer, but the statement's own token is what counts.
    EXPECT_TRUE(rejected(decide(update(5, 4, true, 9), mode()), OnStale::error, RejectReason::not_newer, 4));
    // The setting is older, but the assigned token is newer.
    EXPECT_TRUE(accepted(decide(update(5, 6, true, 1), mode()), 6, false));
    // Assigning NULL is not rescued by the setting.
    EXPECT_TRUE(rejected(decide(update(5, NUL, true, 9), mode()), OnStale::error, RejectReason::no_token, NUL));
}

TEST(DecisionUpdateAssigned, Extremes) {
    EXPECT_TRUE(accepted(decide(update(INT64_MAX - 1, INT64_MAX, true, NUL), mode()), INT64_MAX, false));
    EXPECT_TRUE(rejected(decide(update(INT64_MAX, INT64_MAX, true, NUL), mode()), OnStale::error,
                         RejectReason::not_newer, INT64_MAX));
    EXPECT_TRUE(accepted(decide(update(INT64_MAX, INT64_MAX, true, NUL), mode(true)), INT64_MAX, false));
    EXPECT_TRUE(rejected(decide(update(INT64_MAX, 1, true, NUL), mode()), OnStale::error, RejectReason::not_newer, 1));
}

// ============================================================================
// UPDATE that does not assign the token column, fencing.token set:
// incoming = the setting, written into the row (fill_row).
// ============================================================================

TEST(DecisionUpdateSetting, NewerThanStoredAcceptedAndFilled) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true}) EXPECT_TRUE(accepted(decide(update(5, 5, false, 6), mode(eq, s)), 6, true));
}

TEST(DecisionUpdateSetting, StoredNullAcceptedAndFilled) {
    EXPECT_TRUE(accepted(decide(update(NUL, NUL, false, 3), mode()), 3, true));
}

TEST(DecisionUpdateSetting, OlderRejectedNotNewer) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true})
            EXPECT_TRUE(rejected(decide(update(5, 5, false, 4), mode(eq, s)), s, RejectReason::not_newer, 4));
}

TEST(DecisionUpdateSetting, EqualRejectedWithoutAllowEqual) {
    for (OnStale s : kBothOnStale)
        EXPECT_TRUE(rejected(decide(update(5, 5, false, 5), mode(false, s)), s, RejectReason::not_newer, 5));
}

TEST(DecisionUpdateSetting, EqualAcceptedWithAllowEqual) {
    for (OnStale s : kBothOnStale) EXPECT_TRUE(accepted(decide(update(5, 5, false, 5), mode(true, s)), 5, true));
}

TEST(DecisionUpdateSetting, SettingWinsOverUnassignedRowToken) {
    // An earlier trigger changed the row token to something newer; the setting
    // (explicit) is what is judged and written.
    EXPECT_TRUE(rejected(decide(update(5, 9, false, 4), mode()), OnStale::error, RejectReason::not_newer, 4));
    EXPECT_TRUE(accepted(decide(update(5, 1, false, 6), mode()), 6, true));
    // Row token NULL (e.g. nulled by an earlier trigger), setting present.
    EXPECT_TRUE(accepted(decide(update(5, NUL, false, 6), mode()), 6, true));
}

// ============================================================================
// UPDATE with neither: incoming = the row's token, NOT explicit.
// ============================================================================

TEST(DecisionUpdateImplicit, UnchangedTokenRejectedNotNewer) {
    for (OnStale s : kBothOnStale)
        EXPECT_TRUE(rejected(decide(update(5, 5, false, NUL), mode(false, s)), s, RejectReason::not_newer, 5));
}

TEST(DecisionUpdateImplicit, UnchangedTokenRejectedEvenWithAllowEqual) {
    for (OnStale s : kBothOnStale)
        EXPECT_TRUE(rejected(decide(update(5, 5, false, NUL), mode(true, s)), s, RejectReason::not_newer, 5));
}

TEST(DecisionUpdateImplicit, NullRowTokenRejectedNoToken) {
    for (OnStale s : kBothOnStale) {
        EXPECT_TRUE(rejected(decide(update(NUL, NUL, false, NUL), mode(false, s)), s, RejectReason::no_token, NUL));
        EXPECT_TRUE(rejected(decide(update(5, NUL, false, NUL), mode(true, s)), s, RejectReason::no_token, NUL));
    }
}

TEST(DecisionUpdateImplicit, RowTokenChangedByEarlierTriggerToNewerAccepted) {
    EXPECT_TRUE(accepted(decide(update(5, 6, false, NUL), mode()), 6, false));
}

TEST(DecisionUpdateImplicit, RowTokenOverNullStoredAccepted) {
    EXPECT_TRUE(accepted(decide(update(NUL, 5, false, NUL), mode()), 5, false));
}

TEST(DecisionUpdateImplicit, RowTokenOlderRejected) {
    EXPECT_TRUE(rejected(decide(update(5, 4, false, NUL), mode(true)), OnStale::error, RejectReason::not_newer, 4));
}

// ============================================================================
// INSERT: incoming = the row's token, else the setting (filled in).
// ============================================================================

TEST(DecisionInsert, RowTokenAccepted) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true})
            for (bool fd : {false, true}) EXPECT_TRUE(accepted(decide(insert(7, NUL), mode(eq, s, fd)), 7, false));
}

TEST(DecisionInsert, RowTokenWinsOverSetting) {
    EXPECT_TRUE(accepted(decide(insert(7, 9), mode()), 7, false));
    EXPECT_TRUE(accepted(decide(insert(9, 7), mode()), 9, false));
}

TEST(DecisionInsert, SettingFillsNullRowToken) {
    for (OnStale s : kBothOnStale) EXPECT_TRUE(accepted(decide(insert(NUL, 3), mode(false, s)), 3, true));
}

TEST(DecisionInsert, NoTokenAtAllRejected) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true})
            EXPECT_TRUE(rejected(decide(insert(NUL, NUL), mode(eq, s)), s, RejectReason::no_token, NUL));
}

TEST(DecisionInsert, NoComparisonWithAnyStoredValue) {
    // An INSERT has no existing row; a stray `stored` must not matter.
    WriteInput in = insert(3, NUL);
    in.stored = 100;
    EXPECT_TRUE(accepted(decide(in, mode()), 3, false));
    in = insert(NUL, 3);
    in.stored = 3;
    EXPECT_TRUE(accepted(decide(in, mode()), 3, true));
}

TEST(DecisionInsert, Extremes) {
    EXPECT_TRUE(accepted(decide(insert(1, NUL), mode()), 1, false));
    EXPECT_TRUE(accepted(decide(insert(INT64_MAX, NUL), mode()), INT64_MAX, false));
    EXPECT_TRUE(accepted(decide(insert(NUL, INT64_MAX), mode()), INT64_MAX, true));
}

// ============================================================================
// Tombstones: an INSERT of a deleted key, an UPDATE onto one.
// ============================================================================

namespace {
WriteInput with_deleted(WriteInput in, Tok deleted) {
    in.deleted = deleted;
    return in;
}
}  // namespace

TEST(DecisionTombstone, InsertJudgedAgainstDeletedToken) {
    for (OnStale s : kBothOnStale) {
        Decision d = decide(with_deleted(insert(5, NUL), 200), mode(false, s, true));
        EXPECT_TRUE(rejected(d, s, RejectReason::not_newer, 5));
        EXPECT_TRUE(d.against_deleted);
        d = decide(with_deleted(insert(200, NUL), 200), mode(false, s, true));
        EXPECT_TRUE(rejected(d, s, RejectReason::not_newer, 200));
        EXPECT_TRUE(d.against_deleted);
        EXPECT_TRUE(accepted(decide(with_deleted(insert(201, NUL), 200), mode(false, s, true)), 201, false));
    }
}

TEST(DecisionTombstone, InsertFromSettingJudgedAndFilled) {
    EXPECT_TRUE(rejected(decide(with_deleted(insert(NUL, 150), 200), mode(false, OnStale::error, true)), OnStale::error,
                         RejectReason::not_newer, 150));
    EXPECT_TRUE(accepted(decide(with_deleted(insert(NUL, 250), 200), mode(false, OnStale::error, true)), 250, true));
}

TEST(DecisionTombstone, InsertEqualNeedsAllowEqual) {
    EXPECT_TRUE(accepted(decide(with_deleted(insert(200, NUL), 200), mode(true, OnStale::error, true)), 200, false));
    EXPECT_TRUE(accepted(decide(with_deleted(insert(NUL, 200), 200), mode(true, OnStale::error, true)), 200, true));
}

TEST(DecisionTombstone, InsertWithoutTokenStillNoToken) {
    const Decision d = decide(with_deleted(insert(NUL, NUL), 200), mode(false, OnStale::error, true));
    EXPECT_TRUE(rejected(d, OnStale::error, RejectReason::no_token, NUL));
    EXPECT_FALSE(d.against_deleted);
}

TEST(DecisionTombstone, UpdateOntoDeletedKeyJudgedAgainstTheNewer) {
    // Stored 100, the key it moves onto was deleted with 200.
    Decision d = decide(with_deleted(update(100, 150, true, NUL), 200), mode());
    EXPECT_TRUE(rejected(d, OnStale::error, RejectReason::not_newer, 150));
    EXPECT_TRUE(d.against_deleted);
    EXPECT_TRUE(accepted(decide(with_deleted(update(100, 201, true, NUL), 200), mode()), 201, false));
    // The stored token is the newer one: a rejection is not the deleted row's.
    d = decide(with_deleted(update(300, 250, true, NUL), 200), mode());
    EXPECT_TRUE(rejected(d, OnStale::error, RejectReason::not_newer, 250));
    EXPECT_FALSE(d.against_deleted);
    // A stored NULL: the deleted token is the one to beat.
    d = decide(with_deleted(update(NUL, 150, true, NUL), 200), mode());
    EXPECT_TRUE(d.against_deleted);
}

TEST(DecisionTombstone, DeleteIgnoresDeletedToken) {
    EXPECT_TRUE(accepted(decide(with_deleted(del(100, 150), 200), mode(false, OnStale::error, true)), 150, false));
}

// ============================================================================
// DELETE
// ============================================================================

TEST(DecisionDelete, UncheckedWithoutFenceDeletes) {
    const Tok values[] = {NUL, 1, 5, INT64_MAX};
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true})
            for (Tok stored : values)
                for (Tok setting : values) {
                    const Decision d = decide(del(stored, setting), mode(eq, s, false));
                    EXPECT_EQ(d.verdict, Verdict::accept) << show(d);
                    EXPECT_EQ(d.reason, RejectReason::none) << show(d);
                    EXPECT_TRUE(d.unchecked) << show(d);
                    EXPECT_FALSE(d.fill_row) << show(d);
                    EXPECT_FALSE(d.incoming.has_value()) << show(d);
                }
}

TEST(DecisionDelete, FencedNewerSettingAccepted) {
    for (OnStale s : kBothOnStale) EXPECT_TRUE(accepted(decide(del(5, 6), mode(false, s, true)), 6, false));
}

TEST(DecisionDelete, FencedStoredNullAccepted) {
    EXPECT_TRUE(accepted(decide(del(NUL, 1), mode(false, OnStale::error, true)), 1, false));
}

TEST(DecisionDelete, FencedOlderSettingRejected) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true})
            EXPECT_TRUE(rejected(decide(del(5, 4), mode(eq, s, true)), s, RejectReason::not_newer, 4));
}

TEST(DecisionDelete, FencedEqualSettingNeedsAllowEqual) {
    for (OnStale s : kBothOnStale) {
        EXPECT_TRUE(rejected(decide(del(5, 5), mode(false, s, true)), s, RejectReason::not_newer, 5));
        // The setting is an explicit token, so allow_equal applies.
        EXPECT_TRUE(accepted(decide(del(5, 5), mode(true, s, true)), 5, false));
    }
}

TEST(DecisionDelete, FencedWithoutSettingRejectedNoToken) {
    for (OnStale s : kBothOnStale)
        for (bool eq : {false, true}) {
            EXPECT_TRUE(rejected(decide(del(5, NUL), mode(eq, s, true)), s, RejectReason::no_token, NUL));
            EXPECT_TRUE(rejected(decide(del(NUL, NUL), mode(eq, s, true)), s, RejectReason::no_token, NUL));
        }
}

TEST(DecisionDelete, FencedIgnoresRowTokenAndAssigned) {
    // A DELETE has no new row: only the setting counts.
    WriteInput in = del(5, NUL);
    in.row_token = 9;
    in.assigned = true;
    EXPECT_TRUE(rejected(decide(in, mode(false, OnStale::error, true)), OnStale::error, RejectReason::no_token, NUL));
    in.setting = 6;
    in.row_token = 1;
    EXPECT_TRUE(accepted(decide(in, mode(false, OnStale::error, true)), 6, false));
}

// ============================================================================
// Defaults
// ============================================================================

TEST(DecisionDefaults, ProtectModeDefaults) {
    const ProtectMode m;
    EXPECT_FALSE(m.allow_equal);
    EXPECT_EQ(m.on_stale, OnStale::error);
    EXPECT_TRUE(m.fence_deletes);  // as fencing.protect()'s default
}

TEST(DecisionDefaults, DecisionDefaultsToPlainAccept) {
    const Decision d;
    EXPECT_EQ(d.verdict, Verdict::accept);
    EXPECT_EQ(d.reason, RejectReason::none);
    EXPECT_FALSE(d.incoming.has_value());
    EXPECT_FALSE(d.fill_row);
    EXPECT_FALSE(d.unchecked);
}

// ============================================================================
// Exhaustive: decide() against a reference model of the rules above, over
// every event x stored x row token x assigned x setting x mode, with token
// values chosen around the stored value and at the type's limits.
// ============================================================================

namespace {

Decision model(const WriteInput& in, const ProtectMode& m) {
    Decision d;
    Tok incoming;
    bool fill = false;
    bool explicit_token = true;
    Tok against = in.stored;
    bool by_deleted = false;
    switch (in.event) {
        case WriteEvent::insert:
            against = in.deleted;
            by_deleted = in.deleted.has_value();
            if (in.row_token) {
                incoming = in.row_token;
            } else if (in.setting) {
                incoming = in.setting;
                fill = true;
            }
            break;
        case WriteEvent::update:
            if (in.deleted && (!in.stored || *in.deleted > *in.stored)) {
                against = in.deleted;
                by_deleted = true;
            }
            if (in.assigned && !(in.setting && in.row_token && in.row_token == in.stored)) {
                incoming = in.row_token;
            } else if (in.setting) {
                incoming = in.setting;
                fill = true;
            } else {
                incoming = in.row_token;
                explicit_token = false;
            }
            break;
        case WriteEvent::del:
            if (!m.fence_deletes) {
                d.unchecked = true;
                return d;
            }
            incoming = in.setting;
            break;
    }
    bool ok;
    RejectReason why = RejectReason::none;
    if (!incoming) {
        ok = false;
        why = RejectReason::no_token;
    } else if (!against || *incoming > *against) {
        ok = true;
    } else if (*incoming == *against && m.allow_equal && explicit_token) {
        ok = true;
    } else {
        ok = false;
        why = RejectReason::not_newer;
    }
    if (ok && m.floor && *incoming <= *m.floor) {
        ok = false;
        why = RejectReason::below_floor;
    }
    d.incoming = incoming;
    if (ok) {
        d.fill_row = fill;
    } else {
        d.verdict = m.on_stale == OnStale::skip ? Verdict::reject_skip : Verdict::reject_error;
        d.reason = why;
        d.against_deleted = by_deleted && why == RejectReason::not_newer;
    }
    return d;
}

}  // namespace

TEST(DecisionExhaustive, MatchesReferenceModel) {
    const Tok stored_values[] = {NUL, 1, 5, INT64_MAX};
    const Tok token_values[] = {NUL, 1, 4, 5, 6, INT64_MAX - 1, INT64_MAX};
    const Tok deleted_values[] = {NUL, 1, 5, 6, INT64_MAX};
    const Tok floor_values[] = {NUL, 4, 5};
    const WriteEvent events[] = {WriteEvent::insert, WriteEvent::update, WriteEvent::del};
    long cases = 0, mismatches = 0;
    for (WriteEvent ev : events)
        for (Tok stored : stored_values)
            for (Tok row : token_values)
                for (bool assigned : {false, true})
                    for (Tok setting : token_values)
                        for (Tok deleted : deleted_values)
                            for (bool eq : {false, true})
                                for (OnStale s : kBothOnStale)
                                    for (bool fd : {false, true})
                                        for (Tok floor : floor_values) {
                                            WriteInput in;
                                            in.event = ev;
                                            in.stored = stored;
                                            in.row_token = row;
                                            in.assigned = assigned;
                                            in.setting = setting;
                                            in.deleted = deleted;
                                            ProtectMode m = mode(eq, s, fd);
                                            m.floor = floor;
                                            const Decision got = decide(in, m);
                                            const Decision want = model(in, m);
                                            ++cases;
                                            const bool same =
                                                got.verdict == want.verdict && got.reason == want.reason &&
                                                got.incoming == want.incoming && got.fill_row == want.fill_row &&
                                                got.unchecked == want.unchecked &&
                                                got.against_deleted == want.against_deleted;
                                            if (!same && ++mismatches <= 20)
                                                ADD_FAILURE()
                                                    << "event=" << static_cast<int>(ev) << " stored=" << show(stored)
                                                    << " row=" << show(row) << " assigned=" << assigned
                                                    << " setting=" << show(setting) << " deleted=" << show(deleted)
                                                    << " allow_equal=" << eq << " on_stale=" << static_cast<int>(s)
                                                    << " fence_deletes=" << fd << " floor=" << show(floor) << ": got "
                                                    << show(got) << ", model " << show(want);
                                        }
    EXPECT_EQ(mismatches, 0) << "of " << cases << " cases";
    EXPECT_EQ(cases, 3L * 4 * 7 * 2 * 7 * 5 * 2 * 2 * 2 * 3);
}

// MERGE with several WHEN MATCHED UPDATE actions reports the union of their
// SET lists: an action that leaves the token alone still "assigns" it. With
// fencing.token set, an unchanged token means the setting is the token.
TEST(DecisionUpdateSetting, UnchangedNamedColumnDefersToSetting) {
    WriteInput in;
    in.event = WriteEvent::update;
    in.stored = 10;
    in.row_token = 10;   // unchanged
    in.assigned = true;  // named by some action
    in.setting = 5;      // the writer's (stale) token
    Decision d = decide(in, mode(true, OnStale::error, false));
    EXPECT_EQ(d.verdict, Verdict::reject_error);
    EXPECT_EQ(d.reason, RejectReason::not_newer);
    EXPECT_EQ(d.incoming, std::optional<std::int64_t>(5));
    in.setting = 30;  // a newer setting is used and written into the row
    d = decide(in, mode(false, OnStale::error, false));
    EXPECT_EQ(d.verdict, Verdict::accept);
    EXPECT_TRUE(d.fill_row);
    EXPECT_EQ(d.incoming, std::optional<std::int64_t>(30));
    // Without a setting, an explicitly assigned equal token stays explicit.
    in.setting.reset();
    d = decide(in, mode(true, OnStale::error, false));
    EXPECT_EQ(d.verdict, Verdict::accept);
    EXPECT_FALSE(d.fill_row);
}

// ============================================================================
// (1.2) Replicated writes: a logical replication worker applying a change the
// publisher judged. Judged like any write, a stale one skipped whatever
// on_stale says; a DELETE (no token of its own) accepted with the row's
// token.
// ============================================================================

namespace {
WriteInput replicated(WriteInput in) {
    in.replicated = true;
    return in;
}
}  // namespace

TEST(DecisionReplicated, NewerUpdateAccepted) {
    for (OnStale s : kBothOnStale)
        EXPECT_TRUE(accepted(decide(replicated(update(10, 11, true, NUL)), mode(false, s, true)), 11, false));
}

TEST(DecisionReplicated, StaleUpdateSkippedNeverAnError) {
    for (OnStale s : kBothOnStale) {
        EXPECT_TRUE(rejected(decide(replicated(update(10, 9, true, NUL)), mode(false, s, true)), OnStale::skip,
                             RejectReason::not_newer, 9));
        EXPECT_TRUE(rejected(decide(replicated(update(10, 10, true, NUL)), mode(false, s, true)), OnStale::skip,
                             RejectReason::not_newer, 10));
        EXPECT_TRUE(rejected(decide(replicated(update(10, NUL, true, NUL)), mode(false, s, true)), OnStale::skip,
                             RejectReason::no_token, NUL));
    }
    // allow_equal: an equal token the change assigns passes, as locally.
    EXPECT_TRUE(accepted(decide(replicated(update(10, 10, true, NUL)), mode(true, OnStale::error, true)), 10, false));
}

TEST(DecisionReplicated, InsertJudgedAgainstTombstone) {
    WriteInput in = replicated(insert(20, NUL));
    in.deleted = 20;
    Decision d = decide(in, mode(false, OnStale::error, true));
    EXPECT_TRUE(rejected(d, OnStale::skip, RejectReason::not_newer, 20));
    EXPECT_TRUE(d.against_deleted);
    in.row_token = 21;
    EXPECT_TRUE(accepted(decide(in, mode(false, OnStale::error, true)), 21, false));
    // No token at all: skipped.
    EXPECT_TRUE(rejected(decide(replicated(insert(NUL, NUL)), mode()), OnStale::skip, RejectReason::no_token, NUL));
}

TEST(DecisionReplicated, DeleteAcceptedWithTheRowsToken) {
    for (OnStale s : kBothOnStale) {
        EXPECT_TRUE(accepted(decide(replicated(del(10, NUL)), mode(false, s, true)), 10, false));
        EXPECT_TRUE(accepted(decide(replicated(del(NUL, NUL)), mode(false, s, true)), NUL, false));
    }
    // Without fence_deletes: unchecked, as locally.
    EXPECT_TRUE(decide(replicated(del(10, NUL)), mode(false, OnStale::error, false)).unchecked);
}

// ============================================================================
// The table's floor (fencing.raise_floor, 1.2): every token up to it is
// stale, whatever the row or the key's tombstone holds.
// ============================================================================

namespace {
ProtectMode floored(std::int64_t floor, bool allow_equal = false, OnStale s = OnStale::error) {
    ProtectMode m = mode(allow_equal, s, true);
    m.floor = floor;
    return m;
}
}  // namespace

TEST(DecisionFloor, NewerThanRowButNotAboveFloorIsStale) {
    EXPECT_TRUE(
        rejected(decide(update(10, 50, true, NUL), floored(100)), OnStale::error, RejectReason::below_floor, 50));
    EXPECT_TRUE(rejected(decide(update(10, 100, true, NUL), floored(100, true)), OnStale::error,
                         RejectReason::below_floor, 100));
    EXPECT_TRUE(accepted(decide(update(10, 101, true, NUL), floored(100)), 101, false));
    EXPECT_TRUE(rejected(decide(update(10, 50, true, NUL), floored(100, false, OnStale::skip)), OnStale::skip,
                         RejectReason::below_floor, 50));
}

TEST(DecisionFloor, InsertOfANeverSeenKey) {
    EXPECT_TRUE(rejected(decide(insert(7, NUL), floored(100)), OnStale::error, RejectReason::below_floor, 7));
    EXPECT_TRUE(rejected(decide(insert(NUL, 7), floored(100)), OnStale::error, RejectReason::below_floor, 7));
    EXPECT_TRUE(accepted(decide(insert(NUL, 101), floored(100)), 101, true));
}

TEST(DecisionFloor, FencedDeleteButNotAnUnfencedOne) {
    EXPECT_TRUE(rejected(decide(del(10, 50), floored(100)), OnStale::error, RejectReason::below_floor, 50));
    ProtectMode m = floored(100);
    m.fence_deletes = false;
    EXPECT_TRUE(decide(del(10, NUL), m).unchecked);
}

TEST(DecisionFloor, ReplicatedChangesSkippedDeletesApplied) {
    EXPECT_TRUE(rejected(decide(replicated(update(10, 50, true, NUL)), floored(100)), OnStale::skip,
                         RejectReason::below_floor, 50));
    // A replicated DELETE carries no token: on a table with a floor (cut
    // over, its publisher the old primary) it is skipped.
    EXPECT_TRUE(rejected(decide(replicated(del(10, NUL)), floored(100)), OnStale::skip, RejectReason::no_token, NUL));
    EXPECT_TRUE(rejected(decide(replicated(del(500, NUL)), floored(100)), OnStale::skip, RejectReason::no_token, NUL));
}

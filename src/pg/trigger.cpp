// fencing.enforce(): the BEFORE ROW trigger installed by fencing.protect().
//
// It gathers the decision's inputs from the row(s), the statement and the
// fencing.token setting, asks core::decide(), and acts on the verdict. It
// looks nothing up through search_path: columns by name in the relation's own
// descriptor, values with heap_getattr, the comparison in C++.
// The errors with which it refuses a write are rejections.cpp's.
#include "pg/bridge.hpp"
#include "pg/catalog_ids.hpp"
#include "pg/events.hpp"
#include "pg/rejections.hpp"
#include "pg/row_attr.hpp"
#include "pg/settings.hpp"
#include "pg/tombstone_runs.hpp"
#include "pg/tombstone_summary.hpp"
#include "pg/tombstones.hpp"

#include "core/decision.hpp"

#include <limits>

extern "C" {
#include <cerrno>
#include <cstdlib>

#include "access/sysattr.h"
#include "catalog/pg_trigger.h"
#include "utils/relcache.h"
}

using namespace fencing;
namespace tombstones = fencing::pg::tombstones;
namespace tombstone_runs = fencing::pg::tombstone_runs;
namespace rejections = fencing::pg::rejections;
using fencing::pg::rejections::report_stale;

namespace {

constexpr const char* kProtectHint = "Install the trigger with fencing.protect(table).";

// Whether ROLE may assign the token column (INSERT, UPDATE), as checked
// once per call site: -1 not checked yet, 0 no, 1 yes.
struct TokenAcl {
    Oid role;
    signed char may_insert;
    signed char may_update;
};

// Per query and trigger call site (fn_extra): the relation's column position
// and settings, recomputed whenever the relation or its descriptor changes,
// so ALTER TABLE between statements is always seen.
struct CallSite {
    Oid relid;
    TupleDesc desc;  // identity only
    AttrNumber attnum;
    core::ProtectMode mode;
    bool later_insert_trigger;  // an enabled BEFORE ROW INSERT trigger fires after ours
    bool later_update_trigger;
    char later_name[NAMEDATALEN];
    // The old version of the row this statement's last accepted UPDATE
    // judged: when PostgreSQL moves that row to another partition it fires
    // the DELETE trigger for it, which is part of the accepted UPDATE.
    bool moved_row_valid;
    ItemPointerData moved_row;
    // Whether the current role, and inside a referential action the
    // session's role, may assign the token column (INSERT, UPDATE) when the
    // token comes from fencing.token.
    TokenAcl acl_current;
    TokenAcl acl_outer;
    // Tombstones (the fifth argument): the primary key and the table the
    // tombstones are kept under (the top-most protected ancestor, or the
    // relation itself), both resolved at the first row that needs them, and
    // the key lock of the previous row (kept across rebuilds: it belongs to
    // the row, not to the descriptor). The key's layout and the owner come
    // from tombstones::prepare()'s per-backend cache, which relcache
    // invalidation keeps current (a DETACH, an ATTACH, an INHERIT); the
    // call site itself lives as long as the statement's executor state.
    bool use_tombstones;
    // IsLogicalWorker(), which a backend's lifetime does not change.
    bool replicated;
    // Fenced DELETEs of this call site that recorded their tombstones: after
    // tombstone_runs::kRowsBeforeRuns of them, the rest go into runs (when
    // the database has the runs' table: runs_available, asked then).
    int deletes_recorded;
    bool runs_available;
    tombstones::Key key;
    Oid tombstone_owner;
    tombstones::Site site;
};

bool parse_bool_arg(const char* s, bool* out) {
    if (strcmp(s, "true") == 0 || strcmp(s, "t") == 0 || strcmp(s, "on") == 0) return *out = true, true;
    if (strcmp(s, "false") == 0 || strcmp(s, "f") == 0 || strcmp(s, "off") == 0) return *out = false, true;
    return false;
}

[[noreturn]] void bad_arguments(const Trigger* trig, Relation rel, const char* detail) {
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("trigger \"%s\" on relation \"%s\" has invalid arguments for fencing.enforce", trig->tgname,
                           RelationGetRelationName(rel)),
                    errdetail("%s", detail), errhint("%s", kProtectHint)));
    pg_unreachable();
}

// Once per statement (cold): kept out of the per-row path's instructions.
[[gnu::cold, gnu::noinline]] void build_call_site(CallSite* cs, TriggerData* td) {
    Relation rel = td->tg_relation;
    const Trigger* trig = td->tg_trigger;
    TupleDesc desc = RelationGetDescr(rel);
    if (trig->tgnargs != 5 && trig->tgnargs != 6)
        bad_arguments(trig, rel,
                      "Expected 5 or 6 arguments (token column, allow_equal, on_stale, fence_deletes, tombstones, "
                      "and the table's floor).");
    const char* column = trig->tgargs[0];
    AttrNumber attnum = InvalidAttrNumber;
    for (int i = 0; i < desc->natts; ++i) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        if (!a->attisdropped && strcmp(NameStr(a->attname), column) == 0) {
            attnum = a->attnum;
            break;
        }
    }
    if (attnum == InvalidAttrNumber)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
                        errmsg("column \"%s\" named by trigger \"%s\" does not exist in relation \"%s\"", column,
                               trig->tgname, RelationGetRelationName(rel)),
                        errhint("Protect the table again with fencing.protect(table, token_column => ...).")));
    Oid type = TupleDescAttr(desc, attnum - 1)->atttypid;
    if (type != INT8OID && type != pg::token_type())
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("fence token column \"%s\" named by trigger \"%s\" of relation \"%s\" is of type %s",
                               column, trig->tgname, RelationGetRelationName(rel), format_type_be(type)),
                        errhint("A fence token column must be of type fencing.token or bigint.")));
    if (TupleDescAttr(desc, attnum - 1)->attgenerated != '\0')
        ereport(ERROR,
                (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                 errmsg("fence token column \"%s\" named by trigger \"%s\" of relation \"%s\" is a generated column",
                        column, trig->tgname, RelationGetRelationName(rel)),
                 errdetail("BEFORE triggers see a generated column before it is computed."),
                 errhint("Use an ordinary column for the token.")));
    core::ProtectMode mode;
    bool b = false;
    if (!parse_bool_arg(trig->tgargs[1], &b)) bad_arguments(trig, rel, "allow_equal must be true or false.");
    mode.allow_equal = b;
    if (strcmp(trig->tgargs[2], "error") == 0)
        mode.on_stale = core::OnStale::error;
    else if (strcmp(trig->tgargs[2], "skip") == 0)
        mode.on_stale = core::OnStale::skip;
    else
        bad_arguments(trig, rel, "on_stale must be 'error' or 'skip'.");
    if (!parse_bool_arg(trig->tgargs[3], &b)) bad_arguments(trig, rel, "fence_deletes must be true or false.");
    mode.fence_deletes = b;
    if (!parse_bool_arg(trig->tgargs[4], &b)) bad_arguments(trig, rel, "tombstones must be true or false.");
    cs->use_tombstones = b;
    cs->deletes_recorded = 0;
    cs->runs_available = false;
    cs->key.built = false;
    // (1.2) The table's floor (fencing.raise_floor): 1 to 19 decimal digits,
    // at most 9223372036854775807; exactly what fencing.protected reads.
    if (trig->tgnargs == 6) {
        const char* text = trig->tgargs[5];
        const std::size_t n = strlen(text);
        bool digits = n >= 1 && n <= 19;
        for (std::size_t i = 0; digits && i < n; ++i) digits = text[i] >= '0' && text[i] <= '9';
        char* end = nullptr;
        errno = 0;
        const long long f = digits ? strtoll(text, &end, 10) : -1;
        if (!digits || errno != 0 || f < 0)
            bad_arguments(trig, rel, "The floor must be a token: 1 to 19 decimal digits, at most 9223372036854775807.");
        // A floor of 0 makes no token stale: none (as fencing.protected shows it).
        if (f > 0) mode.floor = static_cast<std::int64_t>(f);
    }

    cs->relid = RelationGetRelid(rel);
    cs->replicated = IsLogicalWorker();
    cs->desc = desc;
    cs->attnum = attnum;
    cs->mode = mode;
    cs->later_insert_trigger = cs->later_update_trigger = false;
    cs->later_name[0] = '\0';
    cs->moved_row_valid = false;
    cs->acl_current = cs->acl_outer = TokenAcl{InvalidOid, -1, -1};
    // Triggers fire in name order. A BEFORE ROW trigger that fires after ours
    // could rewrite the token after the check: refuse writes rather than
    // accept a stale one.
    if (const TriggerDesc* tdesc = rel->trigdesc) {
        for (int i = 0; i < tdesc->numtriggers; ++i) {
            const Trigger* t = &tdesc->triggers[i];
            if (t->tgoid == trig->tgoid || t->tgenabled == TRIGGER_DISABLED) continue;
            if (!TRIGGER_FOR_ROW(t->tgtype) || !TRIGGER_FOR_BEFORE(t->tgtype)) continue;
            if (strcmp(t->tgname, trig->tgname) <= 0) continue;
            bool ins = TRIGGER_FOR_INSERT(t->tgtype), upd = TRIGGER_FOR_UPDATE(t->tgtype);
            if (!ins && !upd) continue;
            cs->later_insert_trigger |= ins;
            cs->later_update_trigger |= upd;
            strlcpy(cs->later_name, t->tgname, sizeof cs->later_name);
        }
    }
}

std::optional<std::int64_t> token_of(HeapTuple tup, TupleDesc desc, AttrNumber attnum) {
    bool isnull = false;
    const Datum d = pg::row_attr(tup, desc, attnum, &isnull);
    if (isnull) return std::nullopt;
    return DatumGetInt64(d);
}

// Whether ROLE may assign the token column with NEEDED (INSERT or UPDATE):
// as the executor checks a column, the table's privilege or the column's
// own, on the table that holds the row. Not on a partitioned table or an
// inheritance parent the write may have gone through: the trigger does not
// know which table the statement named, and a privilege on some ancestor
// says nothing of what the role may do through it (row-level security, a
// schema it may not use, another parent). Checked once per call site and
// role.
[[gnu::cold, gnu::noinline]] signed char check_token_acl(Oid role, Relation rel, AttrNumber attnum, AclMode needed) {
    return pg_class_aclcheck(RelationGetRelid(rel), role, needed) == ACLCHECK_OK ||
                   pg_attribute_aclcheck(RelationGetRelid(rel), attnum, role, needed) == ACLCHECK_OK
               ? 1
               : 0;
}

bool may_assign_token(TokenAcl* acl, Oid role, Relation rel, AttrNumber attnum, AclMode needed) {
    if (unlikely(acl->role != role)) *acl = TokenAcl{role, -1, -1};
    signed char* may = needed == ACL_INSERT ? &acl->may_insert : &acl->may_update;
    if (unlikely(*may < 0)) *may = check_token_acl(role, rel, attnum, needed);
    return *may == 1;
}

// Whether the trigger fires inside a referential action of a foreign key
// (ON UPDATE CASCADE, ON DELETE CASCADE / SET NULL / SET DEFAULT), or in
// anything that runs within one. PostgreSQL runs the action's query as the
// owner of the table it writes (ri_triggers.c, ri_PerformCheck) and marks
// the security context with SECURITY_NOFORCE_RLS, which nothing else in
// PostgreSQL sets and which every context nested in the query inherits
// (security definer functions and security-restricted operations add their
// flags to it).
bool in_referential_action() {
    Oid user = InvalidOid;
    int context = 0;
    GetUserIdAndSecContext(&user, &context);
    return (context & SECURITY_NOFORCE_RLS) != 0;
}

// The role that may not assign the token column with NEEDED although the
// write takes its token from fencing.token, or InvalidOid: the current
// role, as for any column a write assigns; inside a referential action the
// session's role as well. The action runs as the referencing table's owner,
// but its token is the choice of the role whose statement set it off, and
// that role must not stamp into rows it may not write a token of its
// choosing (nor record one as a tombstone).
Oid role_denied_token(CallSite* cs, Relation rel, AclMode needed) {
    // The current role and whether this is a referential action (as
    // in_referential_action() tells) in one call: this runs for every row.
    Oid current = InvalidOid;
    int context = 0;
    GetUserIdAndSecContext(&current, &context);
    if (!may_assign_token(&cs->acl_current, current, rel, cs->attnum, needed)) return current;
    if ((context & SECURITY_NOFORCE_RLS) == 0) return InvalidOid;
    const Oid outer = GetOuterUserId();
    if (outer != current && !may_assign_token(&cs->acl_outer, outer, rel, cs->attnum, needed)) return outer;
    return InvalidOid;
}

// The least token a tombstone that may reject the write has: the write's
// own (the row's, else fencing.token's); without one, any (the write is
// rejected all the same).
std::int64_t least_rejected(const std::optional<std::int64_t>& row_token, const std::optional<std::int64_t>& setting) {
    const std::optional<std::int64_t> t = row_token ? row_token : setting;
    return t.value_or(std::numeric_limits<std::int64_t>::min());
}

template <core::WriteEvent ev>
[[gnu::noinline]] Datum judge(FunctionCallInfo fcinfo, TriggerData* td, CallSite* cs);

// The tombstone of a key a write removes, with TOKEN: of the key of ROW
// (hashed here), or when ROW is null of the key whose hash is KEY; into the
// statement's runs or as a row of its own. Out of the per-row instructions
// of a bulk DELETE, whose rows past the first few go into runs as key
// values when the key is one integer column (see judge()).
[[gnu::cold, gnu::noinline]] void keep_tombstone(Relation rel, const CallSite* cs, HeapTuple row, std::uint64_t key,
                                                 bool into_runs, std::int64_t token) {
    if (row != nullptr) key = tombstones::hash_key(&cs->key, rel, row);
    if (into_runs)
        tombstone_runs::defer(rel, cs->tombstone_owner, key, token, 0);
    else
        tombstones::record(rel, cs->tombstone_owner, key, token);
}

Datum enforce(FunctionCallInfo fcinfo) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR,
                (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                 errmsg("fencing.enforce() was not called by the trigger manager"), errhint("%s", kProtectHint)));
    TriggerData* td = reinterpret_cast<TriggerData*>(fcinfo->context);
    Relation rel = td->tg_relation;
    const Trigger* trig = td->tg_trigger;
    if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("trigger \"%s\" on relation \"%s\" must be fired BEFORE and FOR EACH ROW", trig->tgname,
                               RelationGetRelationName(rel)),
                        errhint("%s", kProtectHint)));
    core::WriteEvent ev;
    if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
        ev = core::WriteEvent::insert;
    else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
        ev = core::WriteEvent::update;
    else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
        ev = core::WriteEvent::del;
    else
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("trigger \"%s\" on relation \"%s\" must be fired for INSERT, UPDATE or DELETE",
                               trig->tgname, RelationGetRelationName(rel)),
                        errhint("%s", kProtectHint)));

    CallSite* cs = static_cast<CallSite*>(fcinfo->flinfo->fn_extra);
    if (unlikely(cs == nullptr)) {
        cs = static_cast<CallSite*>(MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CallSite)));
        fcinfo->flinfo->fn_extra = cs;
    }
    // The key lock taken for this call site's previous row kept that row's
    // key from being deleted between its check and its arrival in the
    // primary key index; it has arrived (rows are written one at a time).
    if (cs->site.nlocks > 0) tombstones::release(&cs->site);
    if (unlikely(cs->relid != RelationGetRelid(rel) || cs->desc != RelationGetDescr(rel))) {
        cs->relid = InvalidOid;
        build_call_site(cs, td);
    }
    if (unlikely((ev == core::WriteEvent::insert && cs->later_insert_trigger) ||
                 (ev == core::WriteEvent::update && cs->later_update_trigger)))
        rejections::later_trigger(rel, cs->later_name, trig->tgname);

    // (1.2) Never on an unlogged table (protect() and the event triggers
    // refuse one; DDL while event triggers do not fire, or a check made by
    // hand, could still get here): crash recovery empties it without
    // triggers and without tombstones.
    if (unlikely(rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED)) rejections::unlogged_table(rel, trig->tgname);

    switch (ev) {
        case core::WriteEvent::insert:
            return judge<core::WriteEvent::insert>(fcinfo, td, cs);
        case core::WriteEvent::update:
            return judge<core::WriteEvent::update>(fcinfo, td, cs);
        case core::WriteEvent::del:
            break;
    }
    return judge<core::WriteEvent::del>(fcinfo, td, cs);
}

// The rest of a row's check, for one kind of write: each kind's
// instructions together and without the others' (a bulk statement runs them
// for every row, and the instruction cache holds little more than one row's
// work of the executor).
template <core::WriteEvent ev>
Datum judge(FunctionCallInfo fcinfo, TriggerData* td, CallSite* cs) {
    Relation rel = td->tg_relation;
    const Trigger* trig = td->tg_trigger;
    TupleDesc desc = RelationGetDescr(rel);
    // The decision's inputs (core::WriteInput), gathered in locals: the
    // trigger runs for every row, and a struct built up field by field is
    // zeroed first.
    std::optional<std::int64_t> stored, row_token, deleted;
    bool assigned = false;
    const std::optional<std::int64_t> setting = pg::token_setting();
    // (1.2) A logical replication worker applying a subscription's change.
    const bool replicated = cs->replicated;
    // (1.2) A replicated DELETE carries no token: only a superuser's
    // subscription is trusted with it (a logical replication worker connects
    // as its subscription's owner, the session user; the apply may run a
    // change as the table's owner). Another owner could not delete the row
    // without a token itself. An error, not a skip: a skipped DELETE would
    // leave the row, and the next INSERT of its key would fail on every
    // retry anyway.
    if (replicated && ev == core::WriteEvent::del && cs->mode.fence_deletes && !superuser_arg(GetSessionUserId()))
        rejections::untrusted_replicated_delete(rel);
    HeapTuple result = nullptr;
    HeapTuple keyrow = nullptr;
    switch (ev) {
        case core::WriteEvent::insert:
            row_token = token_of(td->tg_trigtuple, desc, cs->attnum);
            result = keyrow = td->tg_trigtuple;
            break;
        case core::WriteEvent::update:
            stored = token_of(td->tg_trigtuple, desc, cs->attnum);
            row_token = token_of(td->tg_newtuple, desc, cs->attnum);
            assigned = td->tg_updatedcols != nullptr &&
                       bms_is_member(cs->attnum - FirstLowInvalidHeapAttributeNumber, td->tg_updatedcols);
            result = td->tg_newtuple;
            keyrow = td->tg_trigtuple;
            break;
        case core::WriteEvent::del:
            stored = token_of(td->tg_trigtuple, desc, cs->attnum);
            result = keyrow = td->tg_trigtuple;
            break;
    }

    // A referential action that writes the token column itself (the column
    // references another table: ON UPDATE CASCADE, ON DELETE SET NULL / SET
    // DEFAULT) carries a value chosen by whoever wrote the referenced table
    // into it. As with a token from fencing.token, the session's role must
    // be allowed to assign the column too, or a role with privileges on the
    // referenced table only would stamp any token into the rows.
    if (ev == core::WriteEvent::update && assigned && in_referential_action()) {
        const Oid outer = GetOuterUserId();
        if (outer != GetUserId() && !may_assign_token(&cs->acl_outer, outer, rel, cs->attnum, ACL_UPDATE))
            rejections::referential_token_update(rel, NameStr(TupleDescAttr(desc, cs->attnum - 1)->attname), outer);
    }

    if (ev == core::WriteEvent::del && cs->mode.fence_deletes && cs->moved_row_valid &&
        ItemPointerEquals(&td->tg_trigtuple->t_self, &cs->moved_row)) {
        // The DELETE half of moving a row whose UPDATE was just accepted
        // (which also recorded the tombstone of the key it left).
        cs->moved_row_valid = false;
        return PointerGetDatum(td->tg_trigtuple);
    }

    // Tombstones: a write that (re)creates a key is judged against the token
    // its earlier row was deleted with; a write that removes one records it.
    std::uint64_t old_key = 0, new_key = 0;
    bool removes_key = false;
    if (cs->use_tombstones) {
        // Not for a temporary table (protect() gives it none; a check made by
        // hand could ask for them): PostgreSQL drops it at the end of its
        // session without event triggers, and its tombstones would stay.
        if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
            rejections::temporary_with_tombstones(rel, trig->tgname);
        if (unlikely(!cs->key.built))
            cs->tombstone_owner = tombstones::prepare(&cs->key, rel, fcinfo->flinfo->fn_oid, fcinfo->flinfo->fn_mcxt);
        // (1.2) A table without tombstones, or without one whose token is
        // as great as the INSERT's: nothing to look up (its transaction is
        // refused at commit if one that may reject it was recorded since).
        const bool insert_skips = ev == core::WriteEvent::insert && !replicated &&
                                  pg::tombstone_summary::insert_may_skip(cs->tombstone_owner, tombstones::survey,
                                                                         row_token ? row_token : setting);
        // So such an INSERT needs no usable key either (a parallel
        // pg_restore loads partitions whose primary keys come later); every
        // other write does.
        if (unlikely(!cs->key.usable) && !insert_skips) rejections::no_usable_key(rel, cs->key.problem);
        if (unlikely(OidIsValid(cs->key.other_owner)))
            rejections::two_hierarchies(RelationGetRelid(rel), cs->tombstone_owner, cs->key.other_owner);
        switch (ev) {
            case core::WriteEvent::insert:
                if (insert_skips) break;
                new_key = tombstones::hash_key(&cs->key, rel, td->tg_trigtuple);
                deleted = tombstones::claim(
                    cs->tombstone_owner, new_key,
                    cs->key.legacy_differs ? tombstones::legacy_hash_key(&cs->key, rel, td->tg_trigtuple) : new_key,
                    least_rejected(row_token, setting), &cs->site, fcinfo->flinfo->fn_mcxt);
                break;
            case core::WriteEvent::update:
                if (tombstones::same_key_bytes(&cs->key, rel, td->tg_trigtuple, td->tg_newtuple)) break;
                old_key = tombstones::hash_key(&cs->key, rel, td->tg_trigtuple);
                new_key = tombstones::hash_key(&cs->key, rel, td->tg_newtuple);
                if (old_key != new_key) {
                    removes_key = true;
                    deleted = tombstones::claim(
                        cs->tombstone_owner, new_key,
                        cs->key.legacy_differs ? tombstones::legacy_hash_key(&cs->key, rel, td->tg_newtuple) : new_key,
                        least_rejected(row_token, setting), &cs->site, fcinfo->flinfo->fn_mcxt);
                }
                break;
            case core::WriteEvent::del:
                // Hashed below, once the row is accepted; a key value that
                // goes into the statement's runs is hashed with the rest of
                // them (out of the executor's loop over the rows).
                removes_key = cs->mode.fence_deletes;
                break;
        }
    }
    const core::WriteInput in{ev, stored, row_token, assigned, setting, deleted, replicated};
    const core::Decision d = core::decide(in, cs->mode);
    if (ev == core::WriteEvent::update && d.verdict == core::Verdict::accept) {
        cs->moved_row = td->tg_trigtuple->t_self;
        cs->moved_row_valid = true;
    }
    switch (d.verdict) {
        case core::Verdict::accept:
            break;
        case core::Verdict::reject_skip:
            pg::events::stale_write(cs->relid, rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP, true);
            if (in.replicated) rejections::log_skipped_replicated(rel, d.reason);
            return fencing::pg::compat::null_datum();
        case core::Verdict::reject_error:
            pg::events::stale_write(cs->relid, rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP, false);
            report_stale(rel, d, in, keyrow, NameStr(TupleDescAttr(desc, cs->attnum - 1)->attname), cs->attnum,
                         cs->mode.floor.value_or(0));
    }
    if (removes_key && d.incoming) {
        // The DELETE's token (from fencing.token) is recorded for the key,
        // and every later INSERT of the key must beat it: as stamping a
        // token into the row would, it needs UPDATE on the token column (a
        // role with DELETE alone must not bar a key with a token of its
        // choosing). An UPDATE's token was checked as it was assigned.
        // (A replicated DELETE records the row's own token: nobody chose it.)
        const Oid denied =
            ev == core::WriteEvent::del && !in.replicated ? role_denied_token(cs, rel, ACL_UPDATE) : InvalidOid;
        if (OidIsValid(denied) && denied == GetUserId())
            rejections::tombstone_token(rel, NameStr(TupleDescAttr(desc, cs->attnum - 1)->attname));
        if (OidIsValid(denied))
            rejections::referential_tombstone_token(rel, NameStr(TupleDescAttr(desc, cs->attnum - 1)->attname), denied);
        // A DELETE of many rows records the rest of them together, when its
        // statement ends (not a replicated one: the apply runs no executor).
        if (ev == core::WriteEvent::del && cs->deletes_recorded == tombstone_runs::kRowsBeforeRuns)
            cs->runs_available = tombstone_runs::available();
        const bool into_runs = ev == core::WriteEvent::del && !in.replicated &&
                               cs->deletes_recorded >= tombstone_runs::kRowsBeforeRuns && cs->runs_available;
        if (into_runs && cs->key.raw != 0)
            tombstone_runs::defer(rel, cs->tombstone_owner,
                                  static_cast<std::uint64_t>(tombstones::raw_key(&cs->key, rel, td->tg_trigtuple)),
                                  *d.incoming, cs->key.raw);
        else
            keep_tombstone(rel, cs, ev == core::WriteEvent::del ? td->tg_trigtuple : nullptr, old_key, into_runs,
                           *d.incoming);
        if (ev == core::WriteEvent::del) ++cs->deletes_recorded;
    }
    if (d.fill_row && d.incoming) {
        // The token comes from fencing.token and is written into the token
        // column: the role must be allowed to assign that column, as if it
        // had named it (a role with UPDATE (balance) only must not stamp any
        // token it likes into the row). Checked once per call site and role;
        // inside a referential action for the session's role too.
        const bool inserting = ev == core::WriteEvent::insert;
        const Oid denied = role_denied_token(cs, rel, inserting ? ACL_INSERT : ACL_UPDATE);
        if (OidIsValid(denied) && denied != GetUserId())
            rejections::referential_setting_token(rel, NameStr(TupleDescAttr(desc, cs->attnum - 1)->attname), denied,
                                                  inserting);
        if (OidIsValid(denied))
            rejections::setting_token(rel, NameStr(TupleDescAttr(desc, cs->attnum - 1)->attname), inserting);
        int col = cs->attnum;
        Datum value = Int64GetDatum(*d.incoming);
        bool isnull = false;
        result = heap_modify_tuple_by_cols(result, desc, 1, &col, &value, &isnull);
    }
    return PointerGetDatum(result);
}

}  // namespace

FENCING_FUNCTION(fencing_enforce) {
    return pg::guarded("fencing.enforce", [&]() -> Datum { return enforce(fcinfo); });
}

// pg_trigger.tgargs (NUL-separated) as text[]; used by the fencing.protected view.
FENCING_FUNCTION(fencing_trigger_args) {
    return pg::guarded("fencing.trigger_args", [&]() -> Datum {
        bytea* raw = PG_GETARG_BYTEA_PP(0);
        const char* p = VARDATA_ANY(raw);
        int len = VARSIZE_ANY_EXHDR(raw);
        ArrayBuildState* astate = nullptr;
        int start = 0;
        // Text must be valid in the database encoding (22021 otherwise): a
        // function returning invalid text would put it into query results
        // and dumps that cannot be loaded again.
        if (len > 0) {
            for (int i = 0, start_v = 0; i <= len; ++i) {
                if (i < len && p[i] != '\0') continue;
                (void)pg_verifymbstr(p + start_v, i - start_v, false);
                start_v = i + 1;
            }
        }
        for (int i = 0; i < len; ++i) {
            if (p[i] != '\0') continue;
            astate = accumArrayResult(astate, PointerGetDatum(cstring_to_text_with_len(p + start, i - start)), false,
                                      TEXTOID, CurrentMemoryContext);
            start = i + 1;
        }
        if (start < len)
            astate = accumArrayResult(astate, PointerGetDatum(cstring_to_text_with_len(p + start, len - start)), false,
                                      TEXTOID, CurrentMemoryContext);
        if (astate == nullptr) PG_RETURN_ARRAYTYPE_P(construct_empty_array(TEXTOID));
        PG_RETURN_DATUM(makeArrayResult(astate, CurrentMemoryContext));
    });
}

// The errors with which fencing.enforce() refuses a write (rejections.hpp).
#include "pg/rejections.hpp"

#include "pg/settings.hpp"

#include "core/token.hpp"

extern "C" {
#include "lib/stringinfo.h"
#include "utils/rls.h"
}

namespace fencing::pg::rejections {

namespace {

// "(id, region)=(3, eu)" for the row's primary key, or "" without one.
char* describe_key(Relation rel, HeapTuple tup) {
    Oid pk = compat::primary_key_index(rel);
    if (!OidIsValid(pk) || tup == nullptr) return nullptr;
    // As PostgreSQL's BuildIndexValueDescription: only for a role that may
    // read the key columns, and never under row-level security.
    const Oid relid = RelationGetRelid(rel);
    if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED) return nullptr;
    const bool table_select = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
    Relation idx = index_open(pk, AccessShareLock);
    if (!table_select) {
        for (int k = 0; k < idx->rd_index->indnkeyatts; ++k) {
            AttrNumber att = idx->rd_index->indkey.values[k];
            if (att <= 0 || pg_attribute_aclcheck(relid, att, GetUserId(), ACL_SELECT) != ACLCHECK_OK) {
                index_close(idx, AccessShareLock);
                return nullptr;
            }
        }
    }
    TupleDesc desc = RelationGetDescr(rel);
    StringInfoData names, values;
    initStringInfo(&names);
    initStringInfo(&values);
    for (int k = 0; k < idx->rd_index->indnkeyatts; ++k) {
        AttrNumber att = idx->rd_index->indkey.values[k];
        if (att <= 0) continue;
        Form_pg_attribute a = TupleDescAttr(desc, att - 1);
        if (k > 0) {
            appendStringInfoString(&names, ", ");
            appendStringInfoString(&values, ", ");
        }
        appendStringInfoString(&names, quote_identifier(NameStr(a->attname)));
        bool isnull = false;
        Datum v = heap_getattr(tup, att, desc, &isnull);
        if (isnull) {
            appendStringInfoString(&values, "null");
        } else {
            Oid out;
            bool varlena;
            getTypeOutputInfo(a->atttypid, &out, &varlena);
            appendStringInfoString(&values, OidOutputFunctionCall(out, v));
        }
    }
    index_close(idx, AccessShareLock);
    return psprintf("(%s)=(%s)", names.data, values.data);
}

// Whether the role may read the token column (to be shown the stored token).
bool may_read_column(Relation rel, AttrNumber attnum) {
    const Oid relid = RelationGetRelid(rel);
    if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED) return false;
    return pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK ||
           pg_attribute_aclcheck(relid, attnum, GetUserId(), ACL_SELECT) == ACLCHECK_OK;
}

}  // namespace

void report_stale(Relation rel, const core::Decision& d, const core::WriteInput& in, HeapTuple keyrow,
                  const char* column, AttrNumber attnum, std::int64_t floor) {
    const std::optional<std::int64_t> stored = d.against_deleted ? in.deleted : in.stored;
    const bool show_stored = may_read_column(rel, attnum);
    const core::WriteEvent ev = in.event;
    const bool unstated = ev == core::WriteEvent::update && !in.assigned && !in.setting;
    char in_buf[core::kTokenTextMax], st_buf[core::kTokenTextMax];
    if (d.incoming) core::format_token(*d.incoming, in_buf);
    if (stored) core::format_token(*stored, st_buf);
    const char* key = describe_key(rel, keyrow);
    const char* what = ev == core::WriteEvent::insert   ? "inserted"
                       : ev == core::WriteEvent::update ? "updated"
                                                        : "deleted";
    // The stored token only for a role that may read the token column.
    const char* st = stored ? st_buf : "null";
    char* detail;
    if (d.reason == core::RejectReason::no_token && ev == core::WriteEvent::del)
        detail = show_stored
                     ? psprintf("Deleting from this table needs fencing.token to be set; the stored token is %s.", st)
                     : pstrdup("Deleting from this table needs fencing.token to be set.");
    else if (d.reason == core::RejectReason::no_token && ev == core::WriteEvent::insert)
        detail = psprintf("The row carries no fence token in column \"%s\" and fencing.token is not set.", column);
    else if (d.reason == core::RejectReason::no_token && in.assigned)
        detail = show_stored ? psprintf("The UPDATE sets column \"%s\" to null; the stored token is %s.", column, st)
                             : psprintf("The UPDATE sets column \"%s\" to null.", column);
    else if (d.reason == core::RejectReason::no_token)
        detail =
            show_stored
                ? psprintf("The row carries no fence token and fencing.token is not set; the stored token is %s.", st)
                : pstrdup("The row carries no fence token and fencing.token is not set.");
    else if (unstated)
        detail = show_stored ? psprintf(
                                   "The UPDATE does not assign column \"%s\" and fencing.token is not set, so the row "
                                   "keeps its stored token %s.",
                                   column, st)
                             : psprintf(
                                   "The UPDATE does not assign column \"%s\" and fencing.token is not set, so the row "
                                   "keeps its stored token.",
                                   column);
    else if (d.against_deleted) {
        // The row's key was deleted (an INSERT), or the key an UPDATE moves
        // the row to was.
        const char* whose = ev == core::WriteEvent::insert ? "a row of the same key" : "a row of the key it moves to";
        detail = show_stored ? psprintf("Incoming token %s is not greater than the token %s with which %s was deleted.",
                                        in_buf, st, whose)
                             : psprintf("Incoming token %s is not greater than the token with which %s was deleted.",
                                        in_buf, whose);
    } else if (d.reason == core::RejectReason::below_floor) {
        char fl_buf[core::kTokenTextMax];
        core::format_token(floor, fl_buf);
        detail = psprintf(
            "Incoming token %s is not greater than %s, the floor of relation \"%s\": every token up to it is "
            "stale (fencing.raise_floor).",
            in_buf, fl_buf, RelationGetRelationName(rel));
    } else
        detail = show_stored ? psprintf("Incoming token %s is not greater than the stored token %s.", in_buf, st)
                             : psprintf("Incoming token %s is not greater than the stored token.", in_buf);
    // A session-level fencing.token is ignored (only the transaction's own
    // token counts): say so, or the rejection would look like a bug.
    const char* ignored = !in.setting && token_setting_ignored()
                              ? " A session-level fencing.token (SET without LOCAL) is ignored: set the "
                                "transaction's token with SET LOCAL fencing.token or SELECT fencing.use($1)."
                              : "";
    // A write that carried no token has not lost a lock: say what it lacks.
    char* hint = (d.reason == core::RejectReason::no_token || unstated) && ev == core::WriteEvent::del
                     ? pstrdup(
                           "The write carried no token: set the lock's token for the transaction with SELECT "
                           "fencing.use($1).")
                 : d.reason == core::RejectReason::no_token || unstated
                     ? psprintf(
                           "The write carried no token: assign the lock's token to column \"%s\", or set it for "
                           "the transaction with SELECT fencing.use($1).",
                           column)
                     : pstrdup("The lock was lost: acquire it again and retry with the new token.");
    if (key)
        ereport(ERROR, (errcode(ERRCODE_FENCING_STALE_TOKEN),
                        errmsg("stale fence token for relation \"%s\"", RelationGetRelationName(rel)),
                        errdetail("%s The row with key %s was not %s.%s", detail, key, what, ignored),
                        errhint("%s", hint), errtable(rel)));
    ereport(ERROR, (errcode(ERRCODE_FENCING_STALE_TOKEN),
                    errmsg("stale fence token for relation \"%s\"", RelationGetRelationName(rel)),
                    errdetail("%s The row was not %s.%s", detail, what, ignored), errhint("%s", hint), errtable(rel)));
    pg_unreachable();
}

void later_trigger(Relation rel, const char* later_name, const char* check_name) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("trigger \"%s\" on relation \"%s\" fires after the fencing check", later_name,
                           RelationGetRelationName(rel)),
                    errdetail("Triggers fire in name order; a BEFORE ROW trigger that fires after \"%s\" could "
                              "change the fence token after it was checked.",
                              check_name),
                    errhint("Rename the trigger so that its name sorts before \"%s\".", check_name)));
    pg_unreachable();
}

void unlogged_table(Relation rel, const char* check_name) {
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("unlogged table \"%s\" cannot be protected", RelationGetRelationName(rel)),
             errdetail("Crash recovery empties an unlogged table without firing triggers and leaves no "
                       "tombstones, so a stale write could create its rows again."),
             errhint("Make it a logged table (ALTER TABLE ... SET LOGGED), or remove trigger \"%s\".", check_name)));
    pg_unreachable();
}

void temporary_with_tombstones(Relation rel, const char* check_name) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("temporary table \"%s\" cannot have tombstones", RelationGetRelationName(rel)),
                    errdetail("Trigger \"%s\" asks for tombstones; PostgreSQL drops a temporary table at the end "
                              "of its session without running event triggers, so its tombstones would "
                              "outlive it.",
                              check_name),
                    errhint("Protect it with fencing.protect(table), which gives a temporary table no "
                            "tombstones.")));
    pg_unreachable();
}

void two_hierarchies(Oid relid, Oid owner, Oid other) {
    const char* name = get_rel_name(relid);
    const char* owner_name = get_rel_name(owner);
    const char* other_name = get_rel_name(other);
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("table \"%s\" inherits from two protected hierarchies", name ? name : "?"),
             errdetail("A write to it would be judged against the tombstones of \"%s\" only: a key deleted in the "
                       "hierarchy of \"%s\" could be inserted again into it with an older token.",
                       owner_name ? owner_name : "?", other_name ? other_name : "?"),
             errhint("Give it protected parents of one hierarchy only (ALTER TABLE ... NO INHERIT), or unprotect "
                     "one of the hierarchies and protect both with tombstones => false.")));
    pg_unreachable();
}

void key_deleted_twice(Oid relid, std::int64_t older, std::int64_t newer) {
    const char* name = get_rel_name(relid);
    ereport(
        ERROR,
        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
         errmsg("a key of table \"%s\" was deleted twice in one statement with different tokens", name ? name : "?"),
         errdetail("Its tombstone got token " INT64_FORMAT " from the first row, and cannot take token " INT64_FORMAT
                   " from the second within the same statement.",
                   static_cast<int64>(older), static_cast<int64>(newer)),
         errhint("Delete the rows of the key with one token, or in separate statements.")));
    pg_unreachable();
}

void key_changed(Oid relid, Oid owner) {
    const char* name = get_rel_name(relid);
    const char* owner_name = get_rel_name(owner);
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("cannot change the primary key of table \"%s\", which has tombstones", name ? name : "?"),
             errdetail("Tombstones (kept under \"%s\") remember deleted keys by a hash of the primary key's values, "
                       "in its column order, collations and types' hash functions: under another primary key, an "
                       "INSERT of a key deleted before would not meet its tombstone.",
                       owner_name ? owner_name : "?"),
             errhint("Keep the primary key as it is. The change goes through once no tombstone is kept under the "
                     "table: fencing.forget_tombstones() removes them by age, for every table.")));
    pg_unreachable();
}

void other_key(Oid relid, Oid owner, const char* problem) {
    const char* name = get_rel_name(relid);
    const char* owner_name = get_rel_name(owner);
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("table \"%s\" cannot carry the check of a table protected with tombstones", name ? name : "?"),
             errdetail("%s Tombstones remember deleted rows by their primary key.", problem),
             errhint("Give it the primary key of \"%s\" (the same columns in the same order), or "
                     "protect the hierarchy with tombstones => false.",
                     owner_name ? owner_name : "?")));
    pg_unreachable();
}

void no_usable_key(Relation rel, const char* problem) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("relation \"%s\" is protected with tombstones but has no usable primary key",
                           RelationGetRelationName(rel)),
                    errdetail("%s Tombstones remember deleted rows by their primary key.", problem),
                    errhint("Give it a primary key that can carry tombstones, or protect the table "
                            "with fencing.protect(table, tombstones => false).")));
    pg_unreachable();
}

void referential_token_update(Relation rel, const char* column, Oid role) {
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("permission denied for column \"%s\" of relation \"%s\"", column, RelationGetRelationName(rel)),
             errdetail("The write is a referential action, run as the table's owner but set off in a "
                       "session of role \"%s\"; it writes the fence token column \"%s\" with a value "
                       "of the referenced table, and that needs the UPDATE privilege on the column for "
                       "the session's role too.",
                       GetUserNameFromId(role, false), column),
             errhint("Grant role \"%s\" UPDATE on the token column, or run the statement with a role "
                     "that has it.",
                     GetUserNameFromId(role, false))));
    pg_unreachable();
}

void tombstone_token(Relation rel, const char* column) {
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("permission denied for column \"%s\" of relation \"%s\"", column, RelationGetRelationName(rel)),
             errdetail("A DELETE on this table records its fence token from fencing.token for the "
                       "deleted key (a tombstone), which a later INSERT of the key must beat; that "
                       "needs the UPDATE privilege on column \"%s\".",
                       column),
             errhint("Grant the role UPDATE on the token column, or delete with a role that has it.")));
    pg_unreachable();
}

void referential_tombstone_token(Relation rel, const char* column, Oid role) {
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("permission denied for column \"%s\" of relation \"%s\"", column, RelationGetRelationName(rel)),
             errdetail("The DELETE is a referential action, run as the table's owner but set off in a "
                       "session of role \"%s\"; it records its fence token from fencing.token for the "
                       "deleted key (a tombstone), which a later INSERT of the key must beat, and that "
                       "needs the UPDATE privilege on column \"%s\" for the session's role too.",
                       GetUserNameFromId(role, false), column),
             errhint("Grant role \"%s\" UPDATE on the token column, or run the statement with a role "
                     "that has it.",
                     GetUserNameFromId(role, false))));
    pg_unreachable();
}

void setting_token(Relation rel, const char* column, bool inserting) {
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("permission denied for column \"%s\" of relation \"%s\"", column, RelationGetRelationName(rel)),
             errdetail("The write takes its fence token from fencing.token, which is written into column "
                       "\"%s\"; that needs the %s privilege on the column.",
                       column, inserting ? "INSERT" : "UPDATE"),
             errhint("Grant the role %s on the token column of this table, or name the token column "
                     "in the statement (it is then checked on the table the statement names, such as "
                     "a partitioned table), or write with a role that has it.",
                     inserting ? "INSERT" : "UPDATE")));
    pg_unreachable();
}

void referential_setting_token(Relation rel, const char* column, Oid role, bool inserting) {
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("permission denied for column \"%s\" of relation \"%s\"", column, RelationGetRelationName(rel)),
             errdetail("The write is a referential action, run as the table's owner but set off in a "
                       "session of role \"%s\"; it takes its fence token from fencing.token, which is "
                       "written into column \"%s\", and that needs the %s privilege on the column for "
                       "the session's role too.",
                       GetUserNameFromId(role, false), column, inserting ? "INSERT" : "UPDATE"),
             errhint("Grant role \"%s\" %s on the token column, or run the statement with a role that "
                     "has it.",
                     GetUserNameFromId(role, false), inserting ? "INSERT" : "UPDATE")));
    pg_unreachable();
}

void untrusted_replicated_delete(Relation rel) {
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("replicated DELETE on protected relation \"%s\" needs a subscription owned by a superuser",
                           RelationGetRelationName(rel)),
                    errdetail("A replicated DELETE carries no fence token, and the subscription's owner \"%s\" could "
                              "not delete a row of the table without one.",
                              GetUserNameFromId(GetSessionUserId(), false)),
                    errhint("Have a superuser own the subscription, or publish the table without deletes "
                            "(WITH (publish = 'insert, update')).")));
    pg_unreachable();
}

void log_skipped_replicated(Relation rel, core::RejectReason why) {
    ereport(LOG, (errmsg("skipped a stale replicated change of relation \"%s\"", RelationGetRelationName(rel)),
                  errdetail("%s", why == core::RejectReason::no_token ? "The change carries no fence token."
                                  : why == core::RejectReason::below_floor
                                      ? "Its fence token is not greater than the floor of the relation."
                                      : "Its fence token is not newer than the one the subscriber's row "
                                        "(or the tombstone of its key) holds.")));
}

}  // namespace fencing::pg::rejections

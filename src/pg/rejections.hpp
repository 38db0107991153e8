// The errors with which fencing.enforce() refuses a write (trigger.cpp): a
// stale token (23T01), and the writes it cannot judge or must not let
// through (a BEFORE ROW trigger that fires after the check, an unlogged
// table, a temporary table with tombstones, a table without a usable
// primary key for them, a role that may not assign the token column). Each
// raises its error and never returns; their messages and SQLSTATEs are part
// of the documented interface (docs/protected-tables.md).
#pragma once
#include "pg/pg.hpp"

#include "core/decision.hpp"

#include <cstdint>

namespace fencing::pg::rejections {

// 23T01: the write D rejected. IN is what it was judged on, KEYROW the row
// whose primary key the message names (when the role may read the key),
// COLUMN and ATTNUM the token column (the stored token is shown to a role
// that may read it), FLOOR the table's floor.
[[noreturn]] void report_stale(Relation rel, const core::Decision& d, const core::WriteInput& in, HeapTuple keyrow,
                               const char* column, AttrNumber attnum, std::int64_t floor);

// 42501: a replicated DELETE on REL through a subscription whose owner
// (this worker's session user) is not a superuser; it carries no token.
[[noreturn]] void untrusted_replicated_delete(Relation rel);

// LOG, not an error: a stale replicated change of REL was skipped (WHY:
// no token, not above the floor, or not newer than the row or tombstone).
void log_skipped_replicated(Relation rel, core::RejectReason why);

// 55000: trigger LATER_NAME, a BEFORE ROW INSERT or UPDATE trigger of REL,
// fires after CHECK_NAME (the check's trigger) and could change the token.
[[noreturn]] void later_trigger(Relation rel, const char* later_name, const char* check_name);

// 0A000: REL is unlogged (CHECK_NAME, the check's trigger, is named in the
// hint).
[[noreturn]] void unlogged_table(Relation rel, const char* check_name);

// 0A000: REL is a temporary table whose check CHECK_NAME asks for
// tombstones.
[[noreturn]] void temporary_with_tombstones(Relation rel, const char* check_name);

// 0A000: RELID, a table whose check keeps tombstones, is in two protected
// hierarchies (an inheritance child of several parents): OWNER's, under
// which its tombstones are kept and its writes judged, and OTHER's. Raised
// at a write and by the DDL that would make it so (protect, CREATE TABLE
// ... INHERITS, ALTER TABLE ... INHERIT).
[[noreturn]] void two_hierarchies(Oid relid, Oid owner, Oid other);

// 0A000: a command deleted a key of RELID's tombstones twice (through an
// inheritance parent), the second time with a newer token NEWER than the
// OLDER its tombstone got the first time.
[[noreturn]] void key_deleted_twice(Oid relid, std::int64_t older, std::int64_t newer);

// 0A000: an ALTER TABLE changed the primary key of RELID, whose
// tombstones are kept under OWNER and exist (or kept under RELID itself).
[[noreturn]] void key_changed(Oid relid, Oid owner);

// 0A000: RELID, whose check keeps tombstones under OWNER, has another
// primary key than OWNER's (PROBLEM, a sentence). Raised by the DDL that
// would make it so (CREATE TABLE ... INHERITS, ALTER TABLE ... INHERIT,
// ATTACH PARTITION, protect()).
[[noreturn]] void other_key(Oid relid, Oid owner, const char* problem);

// 55000: REL is protected with tombstones, but its primary key cannot carry
// them; PROBLEM says why (a sentence).
[[noreturn]] void no_usable_key(Relation rel, const char* problem);

// 42501, permission denied for the token column COLUMN of REL:
//  * referential_token_update: a referential action writes the column
//    itself with a value of the referenced table, and the session's role
//    ROLE may not UPDATE it;
//  * tombstone_token: a DELETE records its token from fencing.token as a
//    tombstone, and the current role may not UPDATE the column;
//    referential_tombstone_token: within a referential action, the
//    session's role ROLE may not;
//  * setting_token: a token from fencing.token is written into the
//    column, and the current role may not INSERT (INSERTING) or UPDATE it;
//    referential_setting_token: within a referential action, the session's
//    role ROLE may not.
[[noreturn]] void referential_token_update(Relation rel, const char* column, Oid role);
[[noreturn]] void tombstone_token(Relation rel, const char* column);
[[noreturn]] void referential_tombstone_token(Relation rel, const char* column, Oid role);
[[noreturn]] void setting_token(Relation rel, const char* column, bool inserting);
[[noreturn]] void referential_setting_token(Relation rel, const char* column, Oid role, bool inserting);

}  // namespace fencing::pg::rejections

/*
 * release_one_lock: a test-only C function that releases one advisory-type
 * lock-manager lock of the calling backend and leaves every other lock it
 * holds. PostgreSQL frees a transaction's or an exiting session's locks one
 * after the other, in hash order; this reproduces, deterministically, an
 * instant between two of those releases. Built and loaded by the TAP test
 * that uses it, never installed.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(release_one_lock);

/* release_one_lock(field2 bigint, field3 bigint, field4 int, mode int, session bool) */
Datum
release_one_lock(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) PG_GETARG_INT64(0), (uint32) PG_GETARG_INT64(1),
						 (uint16) PG_GETARG_INT32(2));
	PG_RETURN_BOOL(LockRelease(&tag, (LOCKMODE) PG_GETARG_INT32(3), PG_GETARG_BOOL(4)));
}

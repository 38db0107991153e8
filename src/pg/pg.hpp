// The only place PostgreSQL's C headers are included for the glue layer.
// Everything in src/pg includes this first; nothing in src/core may.
#pragma once

// The module is built with -fvisibility=hidden; what PostgreSQL must find by
// name (PG_MODULE_MAGIC, PG_FUNCTION_INFO_V1's records, the functions) is
// marked PGDLLEXPORT, which c.h leaves empty on Linux before PostgreSQL 16.
#ifndef PGDLLEXPORT
#define PGDLLEXPORT __attribute__((visibility("default")))
#endif

// Headers of a release built with glibc 2.38 or later assume that
// <string.h> declares strlcpy/strlcat (HAVE_DECL_STRLCPY), which glibc only
// does from 2.38 on. When such headers are compiled against an older glibc
// (e.g. the headers of a newer Debian release on Debian 12), declare them:
// the release's own libc provides them at run time.
#include <string.h>
#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 38)
extern "C" size_t strlcpy(char* dst, const char* src, size_t siz);
extern "C" size_t strlcat(char* dst, const char* src, size_t siz);
#endif

extern "C" {
#include "postgres.h"

#include "access/genam.h"
#include "access/generic_xlog.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "replication/logicalworker.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

// Every difference between PostgreSQL releases (and the minimum releases).
#include "pg/compat.hpp"

// SQLSTATE 23T01, condition name stale_fence_token: a stale fence token. Class
// 23 (integrity constraint violation), so that drivers that map SQLSTATE
// classes raise their integrity error, which no retry helper retries (a write
// that lost its lock must not be retried with the same token).
#define ERRCODE_FENCING_STALE_TOKEN MAKE_SQLSTATE('2', '3', 'T', '0', '1')

// Declares an SQL-callable function: C linkage, PG_FUNCTION_INFO_V1, visible.
// Its body must run under fencing::pg::guarded() (see bridge.hpp).
#define FENCING_FUNCTION(name) \
    extern "C" {               \
    PG_FUNCTION_INFO_V1(name); \
    }                          \
    extern "C" PGDLLEXPORT Datum name(PG_FUNCTION_ARGS)

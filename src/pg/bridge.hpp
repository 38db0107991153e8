// The error wall between C++ and PostgreSQL.
//
// PostgreSQL raises errors with longjmp; C++ with exceptions. They must never
// cross: a longjmp through C++ frames skips destructors, and an exception
// through PostgreSQL's C frames is undefined behaviour.
//
//  * guarded(where, body) runs the C++ body of every SQL-callable function.
//    Any C++ exception is caught and turned into ereport(ERROR) only *after*
//    the catch scope has been left (so the exception object is destroyed
//    first). The body itself may call PostgreSQL functions (which may
//    ereport) only while no object with a non-trivial destructor is alive in
//    its frames: the glue keeps such objects inside src/core calls, which
//    never call PostgreSQL, and calls PostgreSQL with plain C data only.
//  * Nothing that may ereport runs inside a catch block (see locks.cpp: a
//    flag is set in the handler, the PostgreSQL work happens after it).
#pragma once
#include "pg/pg.hpp"

#include <exception>
#include <new>

namespace fencing::pg {

// Raises the error described by kind/message. Never returns.
[[noreturn]] void raise_cpp_failure(const char* where, int kind, const char* message);

enum : int { kNone = 0, kBadAlloc = 1, kStd = 2, kUnknown = 3 };

template <class Body>
Datum guarded(const char* where, Body&& body) {
    int kind = kNone;
    char message[256];
    message[0] = '\0';
    // An exception thrown out of a PG_TRY block of the body would leave
    // PostgreSQL's error handler stack pointing into a frame that is gone:
    // restored before the error is raised (as pg_duckdb's InvokeCPPFunc).
    sigjmp_buf* const saved_exception_stack = PG_exception_stack;
    ErrorContextCallback* const saved_context_stack = error_context_stack;
    try {
        return body();
    } catch (const std::bad_alloc&) {
        kind = kBadAlloc;
    } catch (const std::exception& e) {
        kind = kStd;
        strlcpy(message, e.what(), sizeof message);
    } catch (...) {
        kind = kUnknown;
    }
    // Outside every catch scope: the exception object is gone.
    PG_exception_stack = saved_exception_stack;
    error_context_stack = saved_context_stack;
    raise_cpp_failure(where, kind, message);
}

}  // namespace fencing::pg

// The error wall between C++ and PostgreSQL.
//
// PostgreSQL raises errors with longjmp; C++ with exceptions. They must never
// cross: a longjmp through C++ frames skips destructors, and an exception
// through PostgreSQL's C frames is undefined behaviour.
//
//  * guarded(body): runs the C++ body of an SQL-callable function. Any C++
//    exception is caught, and turned into ereport(ERROR) only *after* the catch
//    scope has been left (so the exception object is destroyed first).
//  * pg_call(fn): runs a PostgreSQL call from C++ code that owns objects with
//    destructors. A PostgreSQL error is caught (PG_TRY), copied, and thrown as
//    PgError; guarded() re-raises it unchanged on the PostgreSQL side.
//
// Rule for the body: between two pg_call()s or outside of them, a PostgreSQL
// function may be called directly only while no object with a non-trivial
// destructor is alive in the body's frames.
#pragma once
#include "pg/pg.hpp"

#include <exception>
#include <new>

namespace fencing::pg {

// A PostgreSQL error in flight through C++ frames.
class PgError final : public std::exception {
public:
    explicit PgError(ErrorData* data) noexcept : data_(data) {}
    ErrorData* data() const noexcept { return data_; }
    const char* what() const noexcept override { return data_ && data_->message ? data_->message : "postgres error"; }

private:
    ErrorData* data_;  // palloc'd in the error context's caller; freed by PostgreSQL
};

// Raises the error described by kind/message. Never returns.
[[noreturn]] void raise_cpp_failure(const char* where, int kind, const char* message);
[[noreturn]] void rethrow_pg_error(ErrorData* data);

enum : int { kNone = 0, kBadAlloc = 1, kStd = 2, kUnknown = 3, kPg = 4 };

template <class Body>
Datum guarded(const char* where, Body&& body) {
    int kind = kNone;
    char message[256];
    message[0] = '\0';
    ErrorData* pg = nullptr;
    try {
        return body();
    } catch (const PgError& e) {
        kind = kPg;
        pg = e.data();
    } catch (const std::bad_alloc&) {
        kind = kBadAlloc;
    } catch (const std::exception& e) {
        kind = kStd;
        strlcpy(message, e.what(), sizeof message);
    } catch (...) {
        kind = kUnknown;
    }
    // Outside every catch scope: the exception object is gone.
    if (kind == kPg) rethrow_pg_error(pg);
    raise_cpp_failure(where, kind, message);
}

template <class Fn>
auto pg_call(Fn&& fn) -> decltype(fn()) {
    using R = decltype(fn());
    MemoryContext caller = CurrentMemoryContext;
    ErrorData* failure = nullptr;
    if constexpr (std::is_void_v<R>) {
        PG_TRY();
        { fn(); }
        PG_CATCH();
        {
            MemoryContextSwitchTo(caller);
            failure = CopyErrorData();
            FlushErrorState();
        }
        PG_END_TRY();
        if (failure) throw PgError(failure);
    } else {
        R result{};
        PG_TRY();
        { result = fn(); }
        PG_CATCH();
        {
            MemoryContextSwitchTo(caller);
            failure = CopyErrorData();
            FlushErrorState();
        }
        PG_END_TRY();
        if (failure) throw PgError(failure);
        return result;
    }
}

}  // namespace fencing::pg

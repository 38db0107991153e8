// Reading a column of a heap tuple on the trigger's per-row paths.
#pragma once
#include "pg/pg.hpp"

namespace fencing::pg {

// heap_getattr(TUP, ATTNUM, DESC, ISNULL) for a user column. The usual row
// (no NULLs, the column stored in it rather than added since, at an offset
// the descriptor has cached) is read in place; anything else goes through
// heap_getattr. Inline, so that ISNULL stays in a register: heap_getattr
// itself is not inlined into C++ callers, and reading back the flag it
// stored stalls the CPU on every row.
// The rest out of line (and out of the per-row paths' instruction cache
// lines: heap_getattr expands to half a kilobyte of code).
[[gnu::cold, gnu::noinline]] inline Datum row_attr_slow(HeapTuple tup, TupleDesc desc, AttrNumber attnum,
                                                        bool* isnull) {
    return heap_getattr(tup, attnum, desc, isnull);
}

[[gnu::always_inline]] inline Datum row_attr(HeapTuple tup, TupleDesc desc, AttrNumber attnum, bool* isnull) {
    const auto* att = compat::attr_layout(desc, attnum - 1);
    if (likely(attnum > 0 && HeapTupleNoNulls(tup) && att->attcacheoff >= 0 &&
               attnum <= HeapTupleHeaderGetNatts(tup->t_data))) {
        *isnull = false;
        return fetchatt(att, reinterpret_cast<char*>(tup->t_data) + tup->t_data->t_hoff + att->attcacheoff);
    }
    return row_attr_slow(tup, desc, attnum, isnull);
}

}  // namespace fencing::pg

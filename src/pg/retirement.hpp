// A database whose tokens are retired (fencing.retire(), 1.2): the old
// primary of a cut-over to a logical replica. Once it is retired no
// acquisition succeeds in it, nor in a copy of it (CREATE DATABASE ...
// TEMPLATE) or a restore of its dump: the row of fencing.retired comes
// along. Only a superuser can take the row out.
#pragma once
#include "pg/pg.hpp"

namespace fencing::pg::retirement {

// 55000 when this database is retired.
void refuse_if_retired();

}  // namespace fencing::pg::retirement

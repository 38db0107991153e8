/*
 * noop_trigger.c -- the benchmarks' floor for any row trigger: a C BEFORE
 * ROW trigger that returns the row unchanged, for INSERT, UPDATE and DELETE
 * alike. Built by tests/scripts/bench.sh and tests/bench/write_instructions.sh
 * (not part of the extension):
 *
 *   CREATE FUNCTION bench_noop_trigger() RETURNS trigger
 *       AS '/path/noop_trigger.so', 'bench_noop_trigger' LANGUAGE C;
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(bench_noop_trigger);

Datum
bench_noop_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
						errmsg("bench_noop_trigger() was not called by the trigger manager")));
	return PointerGetDatum(TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple);
}

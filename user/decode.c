// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "decode.h"

/* Decoded kinds are the record kinds: one name per kind in every output. */
_Static_assert((int)EV_CREATE == (int)CORO_EV_CREATE && (int)EV_NAME == (int)CORO_EV_NAME &&
		       (int)EV_READY == (int)CORO_EV_READY && (int)EV_SWITCH == (int)CORO_EV_SWITCH &&
		       (int)EV_EXIT == (int)CORO_EV_EXIT && (int)EV_SPAN_BEGIN == (int)CORO_EV_SPAN_BEGIN &&
		       (int)EV_SPAN_END == (int)CORO_EV_SPAN_END && (int)EV_LIBLOAD == (int)CORO_EV_LIBLOAD &&
		       (int)EV_OFFCPU_BEGIN == (int)CORO_EV_OFFCPU_BEGIN &&
		       (int)EV_OFFCPU_END == (int)CORO_EV_OFFCPU_END && (int)EV_PROC_NEW == (int)CORO_EV_PROC_NEW &&
		       (int)EV_EXEC == (int)CORO_EV_EXEC && (int)EV_PROC_GONE == (int)CORO_EV_PROC_GONE &&
		       (int)EV_SAMPLE == (int)CORO_EV_SAMPLE,
	       "decoded BPF kinds keep their record numbers");
_Static_assert((int)EV_PROCESS == (int)CORO_REC_PROCESS && (int)EV_THREAD == (int)CORO_REC_THREAD &&
		       (int)EV_OBJECT == (int)CORO_REC_OBJECT && (int)EV_PROC_EXIT == (int)CORO_REC_PROC_EXIT &&
		       (int)EV_STATS == (int)CORO_REC_STATS && (int)EV_END == (int)CORO_REC_END &&
		       (int)EV_SWITCH_PATH == (int)CORO_REC_SWITCH,
	       "decoded user kinds keep their record numbers");

const char *event_kind_name(enum event_kind kind)
{
	return coro_kind_name(kind);
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The kinds of findings and the fields each fills: one table for every writer. See finding.h. */
#include "finding.h"
#include "model.h"

/* clang-format off */
const struct finding_kind_def finding_kinds[FK_NKINDS] = {
	[FK_LOST_WAKEUP] = {"lost_wakeup", FF_STATE | FF_WAIT | FF_AWAITER | FF_WAKER},
	[FK_STALL] = {"stall", FF_WAIT | FF_AWAITER | FF_WAKER},
	[FK_LONG_RUN] = {"long_run", FF_SAMPLES | FF_KEY},
	[FK_SCHED_LATENCY] = {"sched_latency", FF_WAKER},
	[FK_LEAK] = {"leak", FF_STATE | FF_WAIT | FF_AWAITER},
	[FK_UNMATCHED_SPAN] = {"unmatched_span", FF_SPAN},
	[FK_SPAWN_STORM] = {"spawn_storm", FF_STORM | FF_PARENT},
	[FK_BLOCKING] = {"blocking", FF_OFFCPU},
	[FK_SLOW_SPAN] = {"slow_span", FF_SPAN | FF_SLOW | FF_CAUSE_WAIT, .only_with_spans = true},
};
/* clang-format on */

u32 finding_fields(const struct finding *f)
{
	u32 kind = finding_kinds[f->kind].fields;
	u32 have = kind & (FF_STATE | FF_SPAN | FF_SLOW | FF_STORM | FF_PARENT | FF_OFFCPU);

	/* A state said alone is one the finding ended in: its suspension only when suspended. */
	if ((kind & FF_WAIT) && (!(kind & FF_STATE) || f->state == CS_SUSPENDED))
		have |= FF_WAIT;
	if ((have & FF_WAIT) && (kind & FF_AWAITER) && f->reason == CORO_R_WAIT && f->awaiter[0])
		have |= FF_AWAITER;
	if ((kind & FF_WAKER) && f->has_waker)
		have |= FF_WAKER;
	if ((kind & FF_CAUSE_WAIT) && f->cause == SPAN_CAUSE_SUSPENDED)
		have |= FF_CAUSE_WAIT;
	if ((kind & FF_SAMPLES) && f->samples) {
		have |= FF_SAMPLES;
		if ((kind & FF_KEY) && f->has_key)
			have |= FF_KEY;
	}
	return have;
}

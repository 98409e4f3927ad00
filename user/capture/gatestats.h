/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * gatestats.h: the exec gate's account when the capture stops it
 * (execgate_stop()'s struct execgate_stats): what it held and let go, at
 * -v; and, as warnings, every exec whose first probes can have been missed
 * and every library a search did not reach (attached when mapped, counted
 * as late), each with its cause (docs/reliability.md).
 */
#ifndef COROBPF_GATESTATS_H
#define COROBPF_GATESTATS_H

#include "execgate.h"

/* Says st; timeout_ms is --exec-gate's, the longest hold. */
void gatestats_say(const struct execgate_stats *st, u32 timeout_ms);

#endif /* COROBPF_GATESTATS_H */

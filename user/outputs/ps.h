/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * corobpf ps: a snapshot of the live coroutines of a process. A model
 * observer that keeps, for every coroutine still alive when the window
 * ends, its state, since when, and the stack where it last parked; printed
 * longest-in-state first.
 */
#ifndef COROBPF_PS_H
#define COROBPF_PS_H

#include <stdio.h>
#include "model.h"

struct ps;

struct ps *ps_new(FILE *out, const struct model *m, struct model_observer *obs);
/* After pipeline_finish(): the table. `frames`: per stack at most. */
void ps_print(struct ps *ps, double window_s, u32 frames);
void ps_free(struct ps *ps);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How full the BPF ring buffer is, for a live view (corobpf top): the
 * producer and consumer positions, mapped read-only from the ring's map.
 * Reading them takes no lock and disturbs neither side; the answer is a
 * moment's, already old when shown. No records are read here.
 */
#ifndef COROBPF_RINGFILL_H
#define COROBPF_RINGFILL_H

#include <stddef.h>
#include "util.h"

struct capture;

struct ring_fill {
	const volatile unsigned long *cons, *prod; /* NULL: not mapped */
	void *cons_map, *prod_map;
	size_t page;
	u64 size;
};

/* After capture_open(). Returns 0 or a negative errno (then ring_fill_now() says 0). */
int ring_fill_open(struct ring_fill *rf, const struct capture *c);
/* The share of the ring written and not yet read, 0 to 1. Any thread. */
double ring_fill_now(void *rf);
void ring_fill_close(struct ring_fill *rf);

#endif

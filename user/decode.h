/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records to decoded events (user/event.h): the one place besides the
 * model's own state machine that reads record layouts. The model decodes a
 * record before applying it (so observers called during the apply see the
 * event being applied) and fills in what the apply found (the coroutines,
 * thread and process concerned, span matching) afterwards.
 */
#ifndef COROBPF_DECODE_H
#define COROBPF_DECODE_H

#include "event.h"
#include "raw.h"

/*
 * The header's facts and the payload of `h` into *ev; the model's part
 * (c, to, thread, proc, cur_known, the span's owner, depth and matching)
 * is left zero. False for a kind observers never see.
 */
bool event_decode(struct event *ev, const struct coro_event_hdr *h);

#endif

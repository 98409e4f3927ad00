/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * stopper.h: the capture's stop, made at its time whatever its reader is
 * doing. A thread of its own waits for -d's deadline or the first stopping
 * signal (the handler wakes it through capture_stop_wake_fd, signals.h) and
 * silences the probes then (the BPF side's `stopped`): a reader held up by
 * a flood's backlog or a slow disk under the model's queue file ends the
 * capture later, as of that time, and the ring then holds nothing later.
 * Without an eventfd or a thread, the loop alone stops the capture, as
 * before, when it gets there.
 */
#ifndef COROBPF_STOPPER_H
#define COROBPF_STOPPER_H

#include <pthread.h>
#include <stdbool.h>
#include "util.h"

struct stopper {
	pthread_t thread;
	bool running;
	int efd;	 /* -1 when there is none */
	int quit;	 /* __atomic: stopper_end() asks the thread to go */
	u64 stopped_at;	 /* __atomic: when the thread silenced the probes, or 0 */
	u64 deadline;	 /* CLOCK_BOOTTIME ns, or 0 */
	volatile u32 *flag; /* the BPF side's `stopped` */
};

/* Waits for deadline (0: none) or a stopping signal, then sets *flag. */
void stopper_start(struct stopper *s, u64 deadline, volatile u32 *flag);
/* Whether the thread has silenced the probes (the loop then ends the capture). */
bool stopper_fired(struct stopper *s);
/* The thread gone; when the probes were silenced: by it, or now (the caller silences them). */
u64 stopper_end(struct stopper *s);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The status line of a live capture: one line on stderr, redrawn in place
 * about once a second, when stderr is a terminal and not with -q:
 *
 *   corobpf: 12 s  1,204,112 events  98,310/s  0 lost  1,000 live  written 14.2 MiB
 *
 * Elapsed time since the capture began; the events the live model applied
 * (m->events) and their rate over the last redraw; the events the BPF
 * ring buffer dropped (the latest stats record, as the summary counts
 * them); the live coroutines; the bytes the outputs (and --raw, and the
 * flight recorder's dumps) hold on disk so far. Nothing is counted for it:
 * it reads counters that exist, from the capture's loop (status_tick), never
 * per event.
 *
 * Any other message erases it first (log.c, through log_status_shown), so
 * lines never interleave; the next tick draws it again. status_end() erases
 * it before the summary.
 */
#ifndef COROBPF_STATUS_H
#define COROBPF_STATUS_H

#include <stdbool.h>
#include "model.h"

struct status;

/* NULL when there is none: stderr not a terminal, or -q. */
struct status *status_new(const struct model *live);
/* From the capture's loop, as often as it likes: redraws once a second. */
void status_tick(struct status *s, u64 bytes_written);
/* Erases the line for good. NULL is fine. */
void status_end(struct status *s);
/* The bytes a file descriptor's file holds now (0 if unknown, or fd < 0). */
u64 status_file_bytes(int fd);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * corobpf top: the live coroutines, refreshed about once a second while the
 * capture runs. A model observer (the states each coroutine went through
 * lately, the findings as they are made) and a view of its own thread,
 * which draws a full screen (ncurses) when stdout is a terminal and prints
 * a plain-text snapshot to stdout every interval otherwise.
 *
 * The model is the capture thread's: the view reads it only between
 * top_lock() and top_unlock(), which the session's record sink takes around
 * every record it hands the pipeline (a record at a time: the view never
 * waits longer than one; the sink lets a waiting view in first). The view
 * copies what it shows under the lock and draws after, so the capture waits
 * only for the copy.
 *
 * Everything shown that a target chose (coroutine names, process names,
 * symbols and paths of stacks) goes through term_safe() first.
 *
 * The text snapshot (docs/top.md) is stable, for scripts and tests: a line
 * "# corobpf top" with the header's figures as key=value pairs, a line of
 * column names, one line per coroutine in the current order (fields split by
 * blanks, none empty, NAME last and alone allowed to hold blanks), then
 * "# findings N" and the newest findings, one a line, then an empty line.
 */
#ifndef COROBPF_TOP_H
#define COROBPF_TOP_H

#include <signal.h>
#include <stdio.h>
#include "finding.h"
#include "model.h"

struct top_config {
	double interval_s;	/* between refreshes (0: 1 s) */
	bool text;		/* the text snapshots even on a terminal (--batch) */
	bool stacks;		/* --stacks was given: the detail view shows the stacks */
	const char *what;	/* what is traced, for the title ("pid 42 (demo)") */
	/* Set to SIGINT when the user quits (q): the capture's own stop flag. */
	volatile sig_atomic_t *stop;
	/* The ring buffer's fill (0..1), read from the view's thread; NULL: not shown. */
	double (*ring_fill)(void *ctx);
	void *ring_ctx;
};

struct top;

/* The observer and finding sink to add to the pipeline (obs->slot is set). */
struct top *top_new(const struct model *m, const struct top_config *cfg,
		    struct model_observer *obs, struct finding_sink *fs);
/*
 * The view starts: its thread, and on a terminal the screen (the terminal
 * is taken over; stderr is held in a temporary file while it is, and
 * written out at top_stop(), so a warning cannot tear the screen).
 * Returns 0 or a negative errno.
 */
int top_start(struct top *t);
/* Around every use of the model by the capture thread while the view runs. */
void top_lock(struct top *t);
void top_unlock(struct top *t);
/* The view ends: the screen restored (text: one last snapshot). Idempotent. */
void top_stop(struct top *t);
void top_free(struct top *t);

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * gatewatch.h: the exec gate's watchdog, a process that answers the gate's fanotify
 * permission events while corobpf cannot: stopped (SIGSTOP, which no process can refuse; a
 * debugger), or its gate thread kept from running.
 *
 * The kernel gives a permission event no timeout: an exec waits for its group's answer until
 * the group is closed, and a stopped process answers nothing. So a process forked for this,
 * in a session of its own (a stop sent to corobpf's process group does not reach it), holds
 * the group too and watches the gate thread's heartbeat, a word in memory they share, which
 * the gate writes at least every GATEWATCH_BEAT_MS. When the heartbeat is older than stale_ms
 * it answers for the gate: FAN_ALLOW for every exec the gate holds (their descriptor numbers
 * are in the shared page; the kernel matches an answer by that number), then for every event
 * it reads itself, until the heartbeat moves again. So while corobpf is stopped an exec waits
 * about stale_ms once, then none waits; what the watchdog let go was not examined (its first
 * probes may be missed), and it is counted. The watchdog dies with corobpf's thread that
 * started it (PR_SET_PDEATHSIG), so the group never outlives corobpf.
 *
 * Between its fork and its end the watchdog makes system calls only: it shares nothing with
 * corobpf's threads but the page.
 */
#ifndef COROBPF_GATEWATCH_H
#define COROBPF_GATEWATCH_H

#include "util.h"

#define GATEWATCH_BEAT_MS 100
#define GATEWATCH_MAX_HELD 256

struct gatewatch_shared {
	u64 beat_us;			   /* the gate thread's last loop (CLOCK_MONOTONIC) */
	u32 nheld;			   /* the gate's held events: their descriptors */
	s32 held[GATEWATCH_MAX_HELD];
	u64 answered;			   /* written by the watchdog: events it let go */
	u64 takeovers;			   /* times it found the heartbeat stale */
};

struct gatewatch;

/* Forks the watchdog on the group fan. NULL if it could not be started (said at info level). */
struct gatewatch *gatewatch_start(int fan, u32 stale_ms);

/* The page the gate writes its heartbeat and held events to. */
struct gatewatch_shared *gatewatch_page(struct gatewatch *w);

/* Ends the watchdog (it holds the group) and says what it did. w may be NULL. */
void gatewatch_stop(struct gatewatch *w, u64 *answered, u64 *takeovers);

#endif /* COROBPF_GATEWATCH_H */

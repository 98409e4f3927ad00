/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * announce.h: asking a running scheduler what exists (usdt/corobpf.h, WHAT
 * EXISTS WHEN A TRACER ATTACHES), without writing into it.
 *
 * The kernel counts, in the program's announce semaphore, the announce
 * sites that carry a uprobe; the scheduler keeps beside it the count it
 * last answered for (struct corobpf_announce). Attaching the announce and
 * announce_done probes raises the count. But the kernel counts sites, not
 * tracers: a session attached after another (or beside it) may leave the
 * count as the scheduler last answered it. Then one of the spare sites the
 * header emits (jumped over, never run) gets a uprobe too, and another,
 * until the count differs from the answered one: CORO_ANNOUNCE_WANTED()
 * turns true. The answer arrives as announce records, then announce_done;
 * one that does not come within ANNOUNCE_WAIT_NS is counted and said.
 *
 * Only for processes attached one by one (-p, ps, top, --flight). With -a,
 * the probes are attached for every process: the count of each one running
 * rises with them, and its scheduler answers if it differs from its last
 * answer (not when another session holds the same sites armed).
 */
#ifndef COROBPF_ANNOUNCE_H
#define COROBPF_ANNOUNCE_H

#include <stdbool.h>
#include "util.h"

#define ANNOUNCE_WAIT_NS 1000000000ULL
#define ANNOUNCE_SPARES_MAX 8

struct attach_ctx;

/* usdt/corobpf.h's struct corobpf_announce, as corobpf reads it (never writes). */
struct announce_state {
	u16 semaphore, answered, asked, layout;
};

/* One process's request. */
struct announce_req {
	u32 pid;
	int fd;	     /* the object with the scheduler's announce sites, kept open */
	char *path;  /* ...as /proc/self/fd/N, to attach the spares to */
	char *shown; /* ...as messages name it */
	u64 sema_off;			   /* the announce semaphore's file offset */
	u64 spares[ANNOUNCE_SPARES_MAX];   /* file offsets of the spare sites */
	u32 nspares, armed;
	u64 cookie;	  /* the announce_done site's spec id, for the spares' links */
	u64 deadline; /* 0: not asked yet */
	u64 addr;     /* the announce state in the process (0: not found when noted) */
	struct announce_state before; /* before our sites were armed */
	bool have_before;
	bool answered, unanswered;
};

struct announce_reqs {
	struct announce_req *v;
	size_t n, cap;
};

/* usdt.c: an object attached for process pid has announce sites (spares at spares[0..n)). */
void announce_note(struct attach_ctx *a, u32 pid, const char *path, const char *shown,
		   u64 sema_off, const u64 *spares, u32 nspares, u64 cookie);
/* Process pid is not to be asked (launched: traced from its start; nothing came before). */
void announce_not_asked(struct announce_reqs *r, u32 pid);
/* Ask every process noted and not asked yet, at now. */
void announce_request_all(struct attach_ctx *a, u64 now);
/* An announce_done record of process pid came. */
void announce_answered(struct announce_reqs *r, u32 pid);
/*
 * Requests past their time unanswered, at now (or all still unanswered when
 * `end`): counted in ustats[CORO_USTAT_ANNOUNCE_UNANSWERED], said once each.
 */
void announce_check(struct attach_ctx *a, u64 now, bool end);
void announce_free(struct announce_reqs *r);

#endif /* COROBPF_ANNOUNCE_H */

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Asking a running scheduler what exists, by the count of armed sites in its
 * announce semaphore (announce.h). corobpf reads the program's memory here,
 * never writes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include "announce.h"
#include "attachctx.h"
#include "capture_info.h"
#include "log.h"

static u64 address_of(u32 pid, int fd, u64 off);
static bool read_state(u32 pid, u64 addr, struct announce_state *s);

void announce_note(struct attach_ctx *a, u32 pid, const char *path, const char *shown,
		   u64 sema_off, const u64 *spares, u32 nspares, u64 cookie)
{
	struct announce_reqs *r = a->announce;
	struct announce_req *q;
	char fdpath[64];

	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].pid == pid)
			return; /* one request a process: its scheduler lists all it runs */
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 8;
		r->v = xrealloc(r->v, r->cap * sizeof(*r->v));
	}
	q = &r->v[r->n++];
	memset(q, 0, sizeof(*q));
	q->pid = pid;
	/*
	 * The path names the object as attach opened it (/proc/self/fd/N, for a moment): a
	 * descriptor of our own keeps the same file for the spares, and for its mappings.
	 */
	q->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (q->fd < 0) {
		log_verbose("process %u: %s: cannot keep the object to ask its scheduler: %s", pid,
			    shown, strerror(errno));
		r->n--;
		return;
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", q->fd);
	q->path = xstrdup(fdpath);
	q->shown = xstrdup(shown);
	q->sema_off = sema_off;
	q->nspares = MIN(nspares, ANNOUNCE_SPARES_MAX);
	memcpy(q->spares, spares, q->nspares * sizeof(*spares));
	q->cookie = cookie;
	/* Its count before our sites raise it: an answer already given to us shows as a change. */
	q->addr = address_of(pid, q->fd, sema_off);
	q->have_before = q->addr && read_state(pid, q->addr, &q->before);
}

/*
 * Where the object's bytes at file offset `off` are in process pid: from its
 * mappings of the file (by device and inode, as attached), 0 if none.
 */
static u64 address_of(u32 pid, int fd, u64 off)
{
	char maps[64], line[4096 + 128];
	struct stat st;
	u64 addr = 0;
	FILE *f;

	if (fstat(fd, &st))
		return 0;
	snprintf(maps, sizeof(maps), "/proc/%u/maps", pid);
	f = fopen(maps, "re");
	while (f && !addr && fgets(line, sizeof(line), f)) {
		unsigned long start, end, pgoff, ino;
		unsigned maj, min;

		if (sscanf(line, "%lx-%lx %*4s %lx %x:%x %lu", &start, &end, &pgoff, &maj, &min,
			   &ino) < 6)
			continue;
		if (ino != st.st_ino || makedev(maj, min) != st.st_dev || off < pgoff ||
		    off - pgoff >= end - start)
			continue;
		addr = start + (off - pgoff);
	}
	if (f)
		fclose(f);
	return addr;
}

static bool read_state(u32 pid, u64 addr, struct announce_state *s)
{
	struct iovec local = {s, sizeof(*s)}, remote = {(void *)(uintptr_t)addr, sizeof(*s)};

	return process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(*s);
}

/*
 * The scheduler will answer (again) with every site armed: its count differs from the one it
 * last answered, and, when an answer was begun during the attach, from the one that answer was
 * asked for (which it stores as answered when done).
 */
static bool will_answer(const struct announce_state *s, bool began)
{
	return s->semaphore != s->answered && !(began && s->semaphore == s->asked);
}

/* Ask one process: make its count differ from the one it last answered. */
static void request(struct attach_ctx *a, struct announce_req *q, u64 now)
{
	const struct bpf_program *prog = attach_prog(a, "announce_done");
	struct announce_state s;
	bool began, asked;
	u64 addr = q->addr ? q->addr : address_of(q->pid, q->fd, q->sema_off);

	q->deadline = now + ANNOUNCE_WAIT_NS;
	log_debug("process %u: announce semaphore of %s at 0x%llx (file offset 0x%llx)", q->pid,
		  q->shown, (unsigned long long)addr, (unsigned long long)q->sema_off);
	if (!addr || !read_state(q->pid, addr, &s)) {
		/* Counted as unanswered when its time is up; said with why. */
		log_verbose("process %u: cannot read the announce semaphore of %s: %s", q->pid,
			    q->shown, addr ? strerror(errno) : "not mapped");
		return;
	}
	/*
	 * An answer begun since our sites began to be armed (a scheduler quick to look): the
	 * kernel raises the count before it writes a site's breakpoint, so that answer may have
	 * gone through an announce site not armed yet, its done alone seen (announce_eager lost
	 * every list so, and a CI run 200 of a server's). Asked again now that every site is
	 * armed, whether that answer is over or still being given (then the count it will store
	 * as answered is the one it was asked for): one more list at worst.
	 */
	began = q->have_before && s.asked != q->before.asked;
	if (began)
		log_verbose("process %u: its scheduler answered as corobpf attached (asked %u, "
			    "was %u): asked again, that list may have passed sites not yet armed",
			    q->pid, s.asked, q->before.asked);
	asked = will_answer(&s, began);
	while (!asked && q->armed < q->nspares && prog) {
		u64 ref = q->sema_off;
		u16 was = s.asked;
		int fd = attach_uprobe_multi(a, prog, q->pid, q->path, &q->spares[q->armed], &ref,
					     &q->cookie, 1);

		q->armed++;
		if (fd < 0) {
			log_verbose("process %u: cannot arm a spare announce site of %s: %s",
				    q->pid, q->shown, strerror(-fd));
			continue;
		}
		if (!read_state(q->pid, addr, &s))
			break;
		/* Every announce site is armed by now: an answer begun since is whole. */
		asked = s.asked != was || will_answer(&s, false);
	}
	if (!asked)
		log_verbose("process %u: the announce count of %s stays %u, as last answered: "
			    "all %u spare sites are armed by other sessions", q->pid, q->shown,
			    s.semaphore, q->nspares);
	else
		log_verbose("process %u: asked its scheduler for its coroutines (count %u, "
			    "answered %u; %u spare sites armed)", q->pid, s.semaphore, s.answered,
			    q->armed);
}

void announce_not_asked(struct announce_reqs *r, u32 pid)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].pid == pid) {
			r->v[i].deadline = UINT64_MAX;
			r->v[i].answered = true;
		}
}

void announce_request_all(struct attach_ctx *a, u64 now)
{
	if (!a->announce)
		return;
	for (size_t i = 0; i < a->announce->n; i++)
		if (!a->announce->v[i].deadline)
			request(a, &a->announce->v[i], now);
}

void announce_answered(struct announce_reqs *r, u32 pid)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].pid == pid)
			r->v[i].answered = true;
}

void announce_check(struct attach_ctx *a, u64 now, bool end)
{
	if (!a->announce)
		return;
	for (size_t i = 0; i < a->announce->n; i++) {
		struct announce_req *q = &a->announce->v[i];

		if (!q->deadline || q->answered || q->unanswered || (!end && now < q->deadline))
			continue;
		q->unanswered = true;
		a->ustats[CORO_USTAT_ANNOUNCE_UNANSWERED]++;
		log_warn("process %u: its scheduler did not list its coroutines %s (it has the "
			 "announce probes of %s, but no CORO_ANNOUNCE_WANTED() call answered, or it "
			 "is stuck): those from before the attach appear when they next run",
			 q->pid, end && now < q->deadline ? "before the end of the run"
							  : "within a second of the attach",
			 q->shown);
	}
}

void announce_free(struct announce_reqs *r)
{
	for (size_t i = 0; i < r->n; i++) {
		close(r->v[i].fd);
		free(r->v[i].path);
		free(r->v[i].shown);
	}
	free(r->v);
	memset(r, 0, sizeof(*r));
}

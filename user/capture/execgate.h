/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * execgate.h: under -a and --follow, each exec of a program corobpf has not
 * examined yet waits until it is examined and attached, so its first probes
 * are traced (without it, a program never seen before runs before the
 * rescan its exec asks for, and its first probes are missed: "attached late").
 *
 * The kernel's fanotify permission events (FAN_OPEN_EXEC_PERM) make the exec
 * wait for corobpf's answer. The answer comes from a thread of its own (the
 * gate) that never waits on anything but its poll: not on the capture
 * thread, not on a lock the capture thread holds while it works (it only
 * tries the lock of the two short queues between them), not on a pipe, not
 * on the examiners.
 *
 *   gate thread                              examiners (processes, execsearch.h)
 *   read events (at most as many as there
 *   are descriptors to spare)
 *   key (device, inode, mtime, ctime) known:
 *     allow at once (one round trip)
 *   else: keep the event, queue its
 *   examination in its user's lane      ──>  search what ld.so will map with it
 *                                            (bounded, from the process's root, never
 *                                            in a filesystem that can hang), send back
 *   collect what was found              <──  each object with its descriptor
 *                                            capture thread (capture_run)
 *   hand it over, wake the capture      ──>  execgate_serve(): attach the file exec'd
 *                                            and the objects found, close them
 *   allow every event of that key       <──  answered (key)
 *   a kept event older than the timeout: allowed anyway, counted
 *
 * Nothing an exec can make slow holds anyone else's:
 *   - lanes: examinations are queued by the real user ID of the process that
 *     execs; a user has one examination at a time and a quarter of the room
 *     to hold execs, so another user's exec finds an examiner free;
 *   - bounds: a search stops at EXECSEARCH_* (entries, names, lookups) or at
 *     its deadline (a quarter of the timeout), and what it did not reach is
 *     said; an examiner long past its deadline is killed and replaced, and
 *     its user's execs are not examined until it has ended, nor for a while
 *     after (at most GATE_MAX_STUCK killed examiners may linger);
 *   - the capture: while it takes no examination for a whole timeout, new
 *     execs are not held at all;
 *   - corobpf stopped: a watchdog process answers (gatewatch.h).
 *
 * Every answer is FAN_ALLOW: the gate delays execs, it never refuses one. The
 * file examined is the event's descriptor, the very file being exec'd, never
 * a path (a path can be swapped between the exec and the look). Objects are
 * known by device and inode plus their change times, so a file rewritten in
 * place is examined again; a file examined without probes is never held again.
 *
 * Every filesystem mounted where corobpf runs is marked (FAN_MARK_FILESYSTEM:
 * all its mounts, bind mounts included), except kernel pseudo filesystems
 * nobody execs from (proc, sysfs, cgroup, ...); filesystems mounted later are
 * marked when /proc/self/mountinfo says they came. Mounts only another mount
 * namespace sees (a container's) are not.
 *
 * Where permission events are unavailable (no CONFIG_FANOTIFY_ACCESS_PERMISSIONS,
 * no CAP_SYS_ADMIN, an old kernel), execgate_start() says so once and returns
 * NULL: new programs are then attached at their exec's rescan, late, as before.
 */
#ifndef COROBPF_EXECGATE_H
#define COROBPF_EXECGATE_H

#include <stdbool.h>
#include "util.h"

struct execgate;

struct execgate_opts {
	u32 timeout_ms; /* longest an exec is held; then it runs, counted */
	/*
	 * --follow: the BPF `traced` map; only execs of processes in it are held
	 * (everyone else's run at once). -1 (-a): every process's.
	 */
	int traced_map_fd;
};

struct execgate_stats {
	u64 events;	 /* permission events answered */
	u64 held;	 /* of them, held for an examination */
	u64 examined;	 /* objects examined for the gate */
	u64 timeouts;	 /* held, then let go at the timeout before the examination ended */
	u64 not_held;	 /* let go at once: too many waiting already (descriptors) */
	u64 overflow;	 /* the kernel's queue overflowed: events it answered itself (allowed) */
	u64 max_wait_us; /* the longest hold that ended with an answer */
	u64 answer_errors; /* answers the kernel did not take (it allows those at the end) */
	u64 marked_later;  /* filesystems mounted during the run, marked */
	u64 mark_errors;   /* filesystems mounted during the run that could not be marked */
	int poll_error;	   /* the gate stopped early on this errno (execs then run unheld) */
	u64 searches_cut;  /* searches stopped at a bound: libraries past it attached late */
	u64 searches_refused; /* searches that left out directories on a filesystem that may hang */
	u64 replaced;	   /* examiners past their deadline, killed and replaced */
	u64 unexamined;	   /* execs let go unexamined: their user's examiner was killed */
	u64 busy;	   /* execs not held: the capture took no examination for a timeout */
	u64 no_examiner;   /* examinations without a search: no examiner could be started */
	u64 watchdog_answers;	/* events the watchdog let go while the gate did not answer */
	u64 watchdog_takeovers; /* times it did */
	char first_cut[512];	/* the first search cut short: the program, and why */
	char first_refused[320]; /* the first directory not searched, and its filesystem */
};

/*
 * Marks the filesystems and starts the gate thread. NULL when permission
 * events cannot be had (said once, at info level, with the reason).
 */
struct execgate *execgate_start(const struct execgate_opts *opts);

/* Readable (an eventfd) when examinations wait for execgate_serve(). */
int execgate_wake_fd(const struct execgate *g);

/* An object ld.so will map for a held exec, as its examiner found it. */
struct execgate_lib {
	int fd;	    /* the file examined, open for reading; -1: this examiner sent it before */
	char *path; /* as the process names it (inside its root) */
};

/* An examination, for the capture thread to attach. */
struct execgate_found {
	int fd;	     /* the file being exec'd, open for reading */
	u32 pid;     /* the process execing it */
	bool changed; /* examined before under other change times */
	const struct execgate_lib *libs; /* in ld.so's order, the interpreter first */
	size_t nlibs;
};

/*
 * The capture thread: the examinations waiting, each attached through
 * examine() (the descriptors are closed here afterwards), then answered.
 * Returns how many were served.
 */
typedef void (*execgate_examine_fn)(void *ctx, const struct execgate_found *f);
size_t execgate_serve(struct execgate *g, execgate_examine_fn examine, void *ctx);

/* Answers every event still held, stops the thread, frees g. out may be NULL. */
void execgate_stop(struct execgate *g, struct execgate_stats *out);

#endif /* COROBPF_EXECGATE_H */

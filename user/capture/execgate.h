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
 * tries the lock of the two short queues between them), not on a pipe.
 *
 *   gate thread                              capture thread (capture_run)
 *   read events (at most as many as there
 *   are descriptors to spare)
 *   key (device, inode, mtime, ctime) known:
 *     allow at once (one round trip)
 *   else: keep the event, queue a duplicate
 *   of its descriptor, wake the capture  ──> execgate_serve(): examine the file
 *                                             through that descriptor and what ld.so
 *                                             will map with it, attach, close it
 *   allow every event of that key        <── answered (key)
 *   a kept event older than the timeout: allowed anyway, counted
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
};

/*
 * Marks the filesystems and starts the gate thread. NULL when permission
 * events cannot be had (said once, at info level, with the reason).
 */
struct execgate *execgate_start(const struct execgate_opts *opts);

/* Readable (an eventfd) when examinations wait for execgate_serve(). */
int execgate_wake_fd(const struct execgate *g);

/*
 * The capture thread: the objects waiting, each examined through examine()
 * (fd: the file being exec'd, open for reading, closed here afterwards; pid:
 * the process execing it; changed: examined before under other change
 * times), then answered. Returns how many were examined.
 */
typedef void (*execgate_examine_fn)(void *ctx, int fd, u32 pid, bool changed);
size_t execgate_serve(struct execgate *g, execgate_examine_fn examine, void *ctx);

/* Answers every event still held, stops the thread, frees g. out may be NULL. */
void execgate_stop(struct execgate *g, struct execgate_stats *out);

#endif /* COROBPF_EXECGATE_H */

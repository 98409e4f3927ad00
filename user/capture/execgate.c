// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exec gate (execgate.h): fanotify permission events on every exec, each
 * answered by a thread that waits on nothing but its poll.
 *
 * Descriptors are the resource an attacker can make us run out of: every
 * event read is an open file in this process, and one that cannot be
 * created makes the kernel refuse the exec. So the gate reads at most as
 * many events as it has room for (GATE_READ_BATCH), keeps at most
 * GATE_MAX_HELD events and GATE_MAX_INFLIGHT duplicates for the capture
 * thread, and lets a program go at once when either is full.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include "execgate.h"
#include "log.h"

#define GATE_MAX_HELD 256
#define GATE_MAX_INFLIGHT 128
#define GATE_READ_BATCH 32

struct gate_key {
	u64 dev, ino;
};

/* An object to examine, from the gate to the capture thread. */
struct gate_req {
	int fd; /* the capture thread's duplicate of the event's descriptor */
	u32 pid;
	bool changed;
	struct gate_key key;
};

/* An exec the kernel holds until its fd is answered. */
struct gate_held {
	int fd;
	struct gate_key key;
	u64 since_us, deadline_us;
};

/* What the gate knows of an object: examined with these change times. */
struct gate_known {
	struct timespec mtime, ctime;
};

struct execgate {
	struct execgate_opts opts;
	int fan;       /* the fanotify group */
	int wake_cap;  /* eventfd: requests wait for the capture thread */
	int wake_gate; /* eventfd: answers (or the stop) wait for the gate */
	int mountinfo; /* POLLPRI when the mount table changes */
	pid_t self;
	pthread_t thread;
	bool stopping; /* atomic */

	/* Shared, under lock, held only to move entries (never while working). */
	pthread_mutex_t lock;
	struct gate_req reqs[GATE_MAX_INFLIGHT];
	size_t nreqs;
	struct gate_key answers[GATE_MAX_INFLIGHT];
	size_t nanswers;

	/* The gate thread's own. */
	struct gate_req outbox[GATE_MAX_INFLIGHT]; /* not yet handed over (lock busy) */
	size_t noutbox;
	struct gate_held held[GATE_MAX_HELD];
	size_t nheld;
	struct hmap known;    /* key -> struct gate_known */
	struct hmap inflight; /* key -> change times asked about (struct gate_known) */
	struct hmap marked;   /* device -> 1: filesystems marked or refused */
	u32 max_held, max_inflight;
	struct execgate_stats st;
};

static u64 now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000 + (u64)ts.tv_nsec / 1000;
}

static void allow(struct execgate *g, int fd)
{
	struct fanotify_response r = {.fd = fd, .response = FAN_ALLOW};

	/*
	 * A failed write leaves the event to the kernel, which allows it when the
	 * group closes. Not logged: the gate thread never writes to stderr, which
	 * can be a pipe nobody reads.
	 */
	if (write(g->fan, &r, sizeof(r)) != sizeof(r))
		g->st.answer_errors++;
	close(fd);
	g->st.events++;
}

static bool same_times(const struct gate_known *k, const struct stat *st)
{
	return k->mtime.tv_sec == st->st_mtim.tv_sec && k->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       k->ctime.tv_sec == st->st_ctim.tv_sec && k->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* --follow: only the followed processes' execs wait. */
static bool wanted(struct execgate *g, u32 pid)
{
	__u8 v;

	if (pid == (u32)g->self)
		return false;
	if (g->opts.traced_map_fd < 0)
		return true;
	return bpf_map_lookup_elem(g->opts.traced_map_fd, &pid, &v) == 0;
}

static void hold(struct execgate *g, int fd, struct gate_key key)
{
	u64 now = now_us();

	g->held[g->nheld++] = (struct gate_held){
		.fd = fd, .key = key, .since_us = now,
		.deadline_us = now + (u64)g->opts.timeout_ms * 1000,
	};
	g->st.held++;
}

static void on_event(struct execgate *g, const struct fanotify_event_metadata *m)
{
	struct gate_known *k, *asked;
	struct gate_key key;
	struct stat st;
	int dup;

	if (m->mask & FAN_Q_OVERFLOW) {
		g->st.overflow++;
		return;
	}
	if (m->fd < 0)
		return;
	if (!(m->mask & FAN_OPEN_EXEC_PERM)) {
		close(m->fd);
		return;
	}
	if (!wanted(g, (u32)m->pid) || fstat(m->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		allow(g, m->fd);
		return;
	}
	key = (struct gate_key){st.st_dev, st.st_ino};
	k = hmap_get(&g->known, key.dev, key.ino);
	if (k && same_times(k, &st)) {
		allow(g, m->fd);
		return;
	}
	if (g->nheld >= g->max_held) {
		g->st.not_held++;
		allow(g, m->fd);
		return;
	}
	asked = hmap_get(&g->inflight, key.dev, key.ino);
	if (asked && same_times(asked, &st)) {
		/* Another exec of the same file is being examined: its answer is ours. */
		hold(g, m->fd, key);
		return;
	}
	if (asked || g->inflight.len >= g->max_inflight ||
	    (dup = fcntl(m->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		/* The file changed while being examined, or no room: it runs now. */
		g->st.not_held++;
		allow(g, m->fd);
		return;
	}
	asked = xcalloc(1, sizeof(*asked));
	asked->mtime = st.st_mtim;
	asked->ctime = st.st_ctim;
	hmap_put(&g->inflight, key.dev, key.ino, asked);
	g->outbox[g->noutbox++] = (struct gate_req){
		.fd = dup, .pid = (u32)m->pid, .changed = k != NULL, .key = key,
	};
	hold(g, m->fd, key);
}

static void read_events(struct execgate *g)
{
	struct fanotify_event_metadata buf[GATE_READ_BATCH];

	for (;;) {
		size_t room = g->max_held - g->nheld;
		ssize_t n;

		/* One descriptor per event read: never more than can be kept. */
		if (room > GATE_READ_BATCH)
			room = GATE_READ_BATCH;
		if (!room)
			room = 1; /* answered at once (not held), so the queue still moves */
		n = read(g->fan, buf, room * sizeof(buf[0]));
		if (n <= 0)
			return;
		for (const struct fanotify_event_metadata *m = buf; FAN_EVENT_OK(m, n);
		     m = FAN_EVENT_NEXT(m, n)) {
			if (m->vers != FANOTIFY_METADATA_VERSION) {
				/* Cannot happen with these headers; answer what we can. */
				if (m->fd >= 0)
					allow(g, m->fd);
				continue;
			}
			on_event(g, m);
		}
	}
}

/* An object examined: its key known, its held execs let go. */
static void answered(struct execgate *g, struct gate_key key)
{
	struct gate_known *asked = hmap_del(&g->inflight, key.dev, key.ino);
	u64 now = now_us();
	size_t j = 0;

	if (asked) {
		free(hmap_get(&g->known, key.dev, key.ino));
		hmap_put(&g->known, key.dev, key.ino, asked);
	}
	for (size_t i = 0; i < g->nheld; i++) {
		struct gate_held *h = &g->held[i];

		if (h->key.dev == key.dev && h->key.ino == key.ino) {
			if (now - h->since_us > g->st.max_wait_us)
				g->st.max_wait_us = now - h->since_us;
			allow(g, h->fd);
		} else {
			g->held[j++] = *h;
		}
	}
	g->nheld = j;
}

/* Held past the timeout: a tracer never holds a machine. Returns the next deadline (0: none). */
static u64 expire(struct execgate *g)
{
	u64 now = now_us(), next = 0;
	size_t j = 0;

	for (size_t i = 0; i < g->nheld; i++) {
		struct gate_held *h = &g->held[i];

		if (h->deadline_us <= now) {
			g->st.timeouts++;
			allow(g, h->fd);
			continue;
		}
		if (!next || h->deadline_us < next)
			next = h->deadline_us;
		g->held[j++] = *h;
	}
	g->nheld = j;
	return next;
}

/* Hands requests over and takes answers, without ever waiting for the lock. False: busy. */
static bool exchange(struct execgate *g)
{
	struct gate_key got[GATE_MAX_INFLIGHT];
	size_t ngot;

	if (pthread_mutex_trylock(&g->lock))
		return false;
	while (g->noutbox && g->nreqs < GATE_MAX_INFLIGHT)
		g->reqs[g->nreqs++] = g->outbox[--g->noutbox];
	ngot = g->nanswers;
	memcpy(got, g->answers, ngot * sizeof(got[0]));
	g->nanswers = 0;
	pthread_mutex_unlock(&g->lock);
	if (g->nreqs) {
		u64 one = 1;

		if (write(g->wake_cap, &one, sizeof(one)) < 0) {
			/* Only when the counter is full: the capture is awake already. */
		}
	}
	for (size_t i = 0; i < ngot; i++)
		answered(g, got[i]);
	return true;
}

/*
 * Kernel pseudo filesystems nobody execs from; and filesystems where the
 * open the kernel makes for us when we read an event can wait on someone
 * else: a FUSE daemon (any user can run one) or a network server. A gate
 * stuck in that open would answer no exec on the machine.
 */
static bool skip_fstype(const char *t)
{
	static const char *const skip[] = {
		"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs",
		"securityfs", "pstore", "bpf", "configfs", "fusectl", "binfmt_misc", "autofs",
		"efivarfs", "rpc_pipefs", "nsfs", "selinuxfs", "hugetlbfs",
		"nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "afs", "glusterfs", "virtiofs",
	};

	if (!strncmp(t, "fuse", 4))
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(skip); i++)
		if (!strcmp(t, skip[i]))
			return true;
	return false;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* Marks every filesystem not marked yet. Returns how many are marked, or -errno from the first. */
static int mark_filesystems(struct execgate *g, bool first)
{
	static char buf[1 << 20];
	int marked = 0, first_err = 0;
	ssize_t n, len = 0;
	char *line, *save = NULL;

	if (lseek(g->mountinfo, 0, SEEK_SET) < 0)
		return -errno;
	while (len < (ssize_t)sizeof(buf) - 1 &&
	       (n = read(g->mountinfo, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	buf[len] = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned maj, min;
		char mnt[4096], *sep, type[64];
		int off = 0;

		if (sscanf(line, "%*u %*u %u:%u %*s %n", &maj, &min, &off) < 2 || !off)
			continue;
		if (sscanf(line + off, "%4095s", mnt) != 1)
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s", type) != 1)
			continue;
		if (hmap_get(&g->marked, makedev(maj, min), 0))
			continue;
		hmap_put(&g->marked, makedev(maj, min), 0, (void *)1);
		if (skip_fstype(type)) {
			if (first)
				log_debug("exec gate: %s (%s) not marked", mnt, type);
			continue;
		}
		unescape(mnt);
		if (fanotify_mark(g->fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM | FAN_MARK_DONT_FOLLOW,
				  FAN_OPEN_EXEC_PERM, AT_FDCWD, mnt) < 0) {
			if (!first_err)
				first_err = errno;
			if (first)
				log_verbose("exec gate: cannot mark %s (%s): %s; execs from it are not "
					    "held", mnt, type, strerror(errno));
			else
				g->st.mark_errors++;
			continue;
		}
		marked++;
		if (!first)
			g->st.marked_later++;
	}
	return marked || !first_err ? marked : -first_err;
}

static void *gate_main(void *arg)
{
	struct execgate *g = arg;
	sigset_t all;

	/* Signals are the capture thread's (its stop flag): none interrupts an answer here. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	while (!__atomic_load_n(&g->stopping, __ATOMIC_ACQUIRE)) {
		struct pollfd p[3] = {
			{.fd = g->fan, .events = POLLIN},
			{.fd = g->wake_gate, .events = POLLIN},
			{.fd = g->mountinfo, .events = POLLPRI},
		};
		bool handed;
		u64 next, now;
		int timeout = -1;

		handed = exchange(g);
		next = expire(g);
		now = now_us();
		if (next)
			timeout = (int)((next - now + 999) / 1000);
		/* The lock was busy for a moment: try again soon, do not wait for it. */
		if (!handed && (timeout < 0 || timeout > 1))
			timeout = 1;
		if (poll(p, ARRAY_SIZE(p), timeout) < 0) {
			if (errno == EINTR)
				continue;
			g->st.poll_error = errno; /* said by execgate_stop's caller */
			break;
		}
		if (p[1].revents & POLLIN) {
			u64 v;

			/* EAGAIN: another read took it; nothing else can fail here. */
			if (read(g->wake_gate, &v, sizeof(v)) < 0)
				v = 0;
		}
		if (p[0].revents & POLLIN)
			read_events(g);
		if (p[2].revents & (POLLPRI | POLLERR))
			mark_filesystems(g, false);
	}
	/* Everything still held runs now; whatever is still queued in the kernel, at close. */
	exchange(g);
	for (size_t i = 0; i < g->nheld; i++)
		allow(g, g->held[i].fd);
	g->nheld = 0;
	return NULL;
}

static void gate_free(struct execgate *g)
{
	size_t it = 0;
	u64 k1, k2;
	void *v;

	if (g->fan >= 0)
		close(g->fan);
	if (g->wake_cap >= 0)
		close(g->wake_cap);
	if (g->wake_gate >= 0)
		close(g->wake_gate);
	if (g->mountinfo >= 0)
		close(g->mountinfo);
	for (size_t i = 0; i < g->nreqs; i++)
		close(g->reqs[i].fd);
	for (size_t i = 0; i < g->noutbox; i++)
		close(g->outbox[i].fd);
	while (hmap_next(&g->known, &it, &k1, &k2, &v))
		free(v);
	it = 0;
	while (hmap_next(&g->inflight, &it, &k1, &k2, &v))
		free(v);
	hmap_free(&g->known);
	hmap_free(&g->inflight);
	hmap_free(&g->marked);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

struct execgate *execgate_start(const struct execgate_opts *opts)
{
	struct execgate *g = xcalloc(1, sizeof(*g));
	struct rlimit nofile;
	int marked;

	g->opts = *opts;
	g->self = getpid();
	g->wake_cap = g->wake_gate = g->mountinfo = -1;
	pthread_mutex_init(&g->lock, NULL);
	hmap_init(&g->known);
	hmap_init(&g->inflight);
	hmap_init(&g->marked);
	/* Room to hold: an eighth of the descriptors this process may have. */
	g->max_held = GATE_MAX_HELD;
	g->max_inflight = GATE_MAX_INFLIGHT;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur / 8 < g->max_held) {
		g->max_held = (u32)(nofile.rlim_cur / 8);
		g->max_inflight = g->max_held / 2 ? g->max_held / 2 : 1;
	}
	g->fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK,
			       O_RDONLY | O_LARGEFILE | O_CLOEXEC);
	if (g->fan < 0) {
		log_info("programs started later are attached after their exec, so their first "
			 "probes can be missed (no exec gate: fanotify permission events: %s)",
			 strerror(errno));
		goto fail;
	}
	g->mountinfo = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (g->mountinfo < 0) {
		log_info("programs started later are attached after their exec, so their first "
			 "probes can be missed (no exec gate: /proc/self/mountinfo: %s)",
			 strerror(errno));
		goto fail;
	}
	marked = mark_filesystems(g, true);
	if (marked <= 0) {
		log_info("programs started later are attached after their exec, so their first "
			 "probes can be missed (no exec gate: FAN_OPEN_EXEC_PERM marks: %s)",
			 marked < 0 ? strerror(-marked) : "no filesystem to mark");
		goto fail;
	}
	g->wake_cap = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g->wake_gate = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->wake_cap < 0 || g->wake_gate < 0) {
		log_warn("exec gate: eventfd: %s; programs started later are attached after "
			 "their exec", strerror(errno));
		goto fail;
	}
	if (pthread_create(&g->thread, NULL, gate_main, g)) {
		log_warn("exec gate: cannot start its thread; programs started later are "
			 "attached after their exec");
		goto fail;
	}
	log_verbose("exec gate: %d filesystems marked; an exec of a program not examined yet "
		    "waits for its attach, at most %u ms", marked, g->opts.timeout_ms);
	return g;
fail:
	gate_free(g);
	return NULL;
}

int execgate_wake_fd(const struct execgate *g)
{
	return g->wake_cap;
}

size_t execgate_serve(struct execgate *g, execgate_examine_fn examine, void *ctx)
{
	struct gate_req reqs[GATE_MAX_INFLIGHT];
	size_t n, done = 0;
	u64 v;

	if (read(g->wake_cap, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("exec gate: wake: %s", strerror(errno));
	pthread_mutex_lock(&g->lock);
	n = g->nreqs;
	memcpy(reqs, g->reqs, n * sizeof(reqs[0]));
	g->nreqs = 0;
	pthread_mutex_unlock(&g->lock);
	for (size_t i = 0; i < n; i++) {
		/* The slow part, with no lock held. */
		examine(ctx, reqs[i].fd, reqs[i].pid, reqs[i].changed);
		close(reqs[i].fd);
		pthread_mutex_lock(&g->lock);
		g->answers[g->nanswers++] = reqs[i].key;
		pthread_mutex_unlock(&g->lock);
		v = 1;
		if (write(g->wake_gate, &v, sizeof(v)) < 0)
			log_debug("exec gate: waking the gate: %s", strerror(errno));
		done++;
	}
	g->st.examined += done;
	return done;
}

void execgate_stop(struct execgate *g, struct execgate_stats *out)
{
	u64 one = 1;

	if (!g)
		return;
	__atomic_store_n(&g->stopping, true, __ATOMIC_RELEASE);
	if (write(g->wake_gate, &one, sizeof(one)) < 0)
		log_debug("exec gate: stopping: %s", strerror(errno));
	pthread_join(g->thread, NULL);
	if (out)
		*out = g->st;
	gate_free(g);
}

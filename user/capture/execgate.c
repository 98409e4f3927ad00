// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exec gate (execgate.h): fanotify permission events on every exec, each
 * answered by a thread that waits on nothing but its poll.
 *
 * Descriptors are the resource an attacker can make us run out of: every
 * event read is an open file in this process, and one that cannot be
 * created makes the kernel refuse the exec. So the gate reads at most as
 * many events as it has room for (GATE_READ_BATCH), keeps at most
 * GATE_MAX_HELD events, GATE_MAX_INFLIGHT examinations and GATE_MAX_LIB_FDS
 * descriptors of libraries found, and lets a program go at once when one is
 * full. A user (a lane) has at most a quarter of the held and in-flight room.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include "execgate.h"
#include "execsearch.h"
#include "gatewatch.h"
#include "log.h"
#include "procview.h"

#define GATE_MAX_HELD GATEWATCH_MAX_HELD
#define GATE_MAX_INFLIGHT 128
#define GATE_READ_BATCH 32
#define GATE_EXAMINERS 3    /* examiners at once: a user has one, so others find one free */
#define GATE_MAX_STUCK 5    /* examiners killed that have not ended: no more are started */
#define GATE_MAX_FAILED_STARTS 5 /* examiners in a row that ended before answering: no more */
/* A user whose examiner had to be killed is not examined for this long (then again). */
#define GATE_STUCK_PAUSE_US (10 * 1000000ULL)
#define GATE_MAX_LIB_FDS 256 /* descriptors of libraries found, not yet attached */
#define GATE_LANE_SHARE 4   /* a user may have 1/GATE_LANE_SHARE of the room to hold */
/*
 * An examiner this long past its deadline is taken for stuck: killed, and replaced. (A slow
 * one ends at once; one stuck in the kernel only when its wait does.) Generous: its exec runs
 * at the gate's timeout anyway, and on a busy machine a search may wait long for a CPU.
 */
#define GATE_EXAMINER_GRACE_US 2000000

struct gate_key {
	u64 dev, ino;
};

/* One examination, from the exec that asked for it to its answer. */
struct gate_exam {
	struct gate_key key;
	int fd; /* a duplicate of the event's descriptor: the file exec'd */
	u32 pid, lane;
	bool changed;
	u64 since_us;
	struct execgate_lib *libs; /* what the examiner found */
	size_t nlibs, nlib_fds;
	struct gate_exam *next; /* in the queue it is in */
};

/* An examiner process, and the examination it works on. */
struct gate_examiner {
	pid_t pid;
	int sock; /* -1: none */
	struct gate_exam *cur;
	u32 id;
	u64 deadline_us;
	bool answered; /* it has answered once: it runs */
};

/* A user's share: what their execs hold, and whether they are examined. */
struct gate_lane {
	u32 held, inflight;
	bool busy;  /* one of their examinations is with an examiner */
	u32 stuck; /* examiners of theirs killed that have not ended: not examined meanwhile */
	u64 paused_until_us; /* nor until then, after one was killed */
};

/* An examiner killed, to wait for: until it ends, its user's execs are not examined. */
struct gate_killed {
	pid_t pid;
	u32 lane;
};

/* An exec the kernel holds until its fd is answered. */
struct gate_held {
	int fd;
	u32 lane;
	struct gate_key key;
	u64 since_us, deadline_us;
};

/* What the gate knows of an object: examined with these change times. */
struct gate_known {
	struct timespec mtime, ctime;
};

/* An answer from the capture thread. */
struct gate_answer {
	struct gate_key key;
	u32 nlib_fds;
};

struct execgate {
	struct execgate_opts opts;
	int fan;       /* the fanotify group */
	int wake_cap;  /* eventfd: examinations wait for the capture thread */
	int wake_gate; /* eventfd: answers (or the stop) wait for the gate */
	int mountinfo; /* POLLPRI when the mount table changes */
	pid_t self;
	pthread_t thread;
	bool stopping; /* atomic */
	u64 served_us; /* atomic: the capture thread's last execgate_serve() */

	/* Shared, under lock, held only to move entries (never while working). */
	pthread_mutex_t lock;
	struct gate_exam *reqs[GATE_MAX_INFLIGHT]; /* for the capture thread */
	size_t nreqs;
	struct gate_answer answers[GATE_MAX_INFLIGHT];
	size_t nanswers;

	/* The gate thread's own. */
	struct gate_exam *queue, **queue_tail; /* waiting for an examiner */
	struct gate_exam *outbox;	       /* examined, not yet handed over (lock busy) */
	size_t at_capture;		       /* handed over, not yet answered */
	struct gate_examiner ex[GATE_EXAMINERS];
	struct gate_killed killed[GATE_MAX_STUCK + GATE_EXAMINERS];
	size_t nkilled;
	struct gate_held held[GATE_MAX_HELD];
	size_t nheld;
	u32 lib_fds; /* descriptors of libraries found, not yet answered */
	struct hmap known;    /* key -> struct gate_known */
	struct hmap inflight; /* key -> change times asked about (struct gate_known) */
	struct hmap marked;   /* device -> 1: filesystems marked or refused */
	struct hmap lanes;    /* real user ID -> struct gate_lane */
	u32 max_held, max_inflight;
	bool stopping_examiners; /* the gate thread's: no examiner is started any more */
	u32 failed_starts;	 /* examiners in a row that ended before their first answer */
	struct gatewatch *watch;
	struct gatewatch_shared *watch_page;
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
	 * group closes (or the watchdog answered it already). Not logged: the
	 * gate thread never writes to stderr, which can be a pipe nobody reads.
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

/* --follow: only the followed processes' execs wait. Never corobpf's own examiners'. */
static bool wanted(struct execgate *g, u32 pid)
{
	__u8 v;

	if (pid == (u32)g->self)
		return false;
	for (size_t i = 0; i < GATE_EXAMINERS; i++)
		if (g->ex[i].sock >= 0 && pid == (u32)g->ex[i].pid)
			return false;
	if (g->opts.traced_map_fd < 0)
		return true;
	return bpf_map_lookup_elem(g->opts.traced_map_fd, &pid, &v) == 0;
}

/* The real user ID of pid (its lane), from /proc: procfs, nothing that can wait. */
static u32 real_uid(u32 pid)
{
	char path[64], buf[2048], *p;
	unsigned int uid = (u32)-1;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return uid;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return uid;
	buf[n] = 0;
	p = strstr(buf, "\nUid:");
	if (p)
		sscanf(p + 5, "%u", &uid);
	return uid;
}

static struct gate_lane *lane_of(struct execgate *g, u32 uid)
{
	struct gate_lane *l = hmap_get(&g->lanes, uid, 0);

	if (!l) {
		l = xcalloc(1, sizeof(*l));
		hmap_put(&g->lanes, uid, 0, l);
	}
	return l;
}

/* A user whose examiner had to be killed: not examined while it lives, nor for a while. */
static bool lane_paused(const struct gate_lane *l)
{
	return l->stuck || (l->paused_until_us && now_us() < l->paused_until_us);
}

static void hold(struct execgate *g, int fd, struct gate_key key, u32 lane)
{
	u64 now = now_us();

	g->held[g->nheld++] = (struct gate_held){
		.fd = fd, .key = key, .lane = lane, .since_us = now,
		.deadline_us = now + (u64)g->opts.timeout_ms * 1000,
	};
	lane_of(g, lane)->held++;
	g->st.held++;
}

static void unhold(struct execgate *g, const struct gate_held *h)
{
	struct gate_lane *l = lane_of(g, h->lane);

	if (l->held)
		l->held--;
}

/*
 * The capture thread took no examination for a whole timeout while some waited for it: it
 * is stuck or far behind, and holding more execs would only make each wait the timeout.
 */
static bool capture_stalled(struct execgate *g)
{
	u64 served = __atomic_load_n(&g->served_us, __ATOMIC_ACQUIRE);

	return g->at_capture && now_us() - served > (u64)g->opts.timeout_ms * 1000;
}

static void queue_exam(struct execgate *g, struct gate_exam *e)
{
	e->next = NULL;
	*g->queue_tail = e;
	g->queue_tail = &e->next;
}

static void on_event(struct execgate *g, const struct fanotify_event_metadata *m)
{
	struct gate_known *k, *asked;
	struct gate_lane *lane;
	struct gate_exam *e;
	struct gate_key key;
	struct stat st;
	u32 uid;
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
	if (capture_stalled(g)) {
		g->st.busy++;
		allow(g, m->fd);
		return;
	}
	uid = real_uid((u32)m->pid);
	lane = lane_of(g, uid);
	if (lane_paused(lane)) {
		g->st.unexamined++;
		allow(g, m->fd);
		return;
	}
	if (g->nheld >= g->max_held || lane->held >= g->max_held / GATE_LANE_SHARE) {
		g->st.not_held++;
		allow(g, m->fd);
		return;
	}
	asked = hmap_get(&g->inflight, key.dev, key.ino);
	if (asked && same_times(asked, &st)) {
		/* Another exec of the same file is being examined: its answer is ours. */
		hold(g, m->fd, key, uid);
		return;
	}
	if (asked || g->inflight.len >= g->max_inflight ||
	    lane->inflight >= g->max_inflight / GATE_LANE_SHARE ||
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
	e = xcalloc(1, sizeof(*e));
	*e = (struct gate_exam){
		.key = key, .fd = dup, .pid = (u32)m->pid, .lane = uid, .changed = k != NULL,
		.since_us = now_us(),
	};
	lane->inflight++;
	queue_exam(g, e);
	hold(g, m->fd, key, uid);
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
			unhold(g, h);
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
			unhold(g, h);
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

static void exam_free(struct gate_exam *e)
{
	if (e->fd >= 0)
		close(e->fd);
	for (size_t i = 0; i < e->nlibs; i++) {
		if (e->libs[i].fd >= 0)
			close(e->libs[i].fd);
		free(e->libs[i].path);
	}
	free(e->libs);
	free(e);
}

/* Searched (or not: no examiner): for the capture thread to attach. */
static void to_capture(struct execgate *g, struct gate_exam *e)
{
	struct gate_lane *l = lane_of(g, e->lane);

	if (l->inflight)
		l->inflight--;
	e->next = g->outbox;
	g->outbox = e;
}

/* Hands examinations over and takes answers, without ever waiting for the lock. False: busy. */
static bool exchange(struct execgate *g)
{
	struct gate_answer got[GATE_MAX_INFLIGHT];
	size_t ngot, handed = 0;

	if (pthread_mutex_trylock(&g->lock))
		return false;
	while (g->outbox && g->nreqs < GATE_MAX_INFLIGHT) {
		struct gate_exam *e = g->outbox;

		g->outbox = e->next;
		g->reqs[g->nreqs++] = e;
		handed++;
	}
	ngot = g->nanswers;
	memcpy(got, g->answers, ngot * sizeof(got[0]));
	g->nanswers = 0;
	pthread_mutex_unlock(&g->lock);
	if (handed) {
		u64 one = 1;

		if (!g->at_capture)
			__atomic_store_n(&g->served_us, now_us(), __ATOMIC_RELEASE);
		g->at_capture += handed;
		if (write(g->wake_cap, &one, sizeof(one)) < 0) {
			/* Only when the counter is full: the capture is awake already. */
		}
	}
	for (size_t i = 0; i < ngot; i++) {
		g->at_capture -= g->at_capture ? 1 : 0;
		g->lib_fds -= MIN(g->lib_fds, got[i].nlib_fds);
		answered(g, got[i].key);
	}
	return true;
}

/* ---- marking ---- */

/*
 * Only filesystems an examination may enter (procview.h: local disk and
 * memory ones) are marked. Not kernel pseudo filesystems nobody execs from;
 * not filesystems where the open the kernel makes for us when we read an
 * event can wait on someone else: a FUSE daemon (any user can run one), a
 * network server, a cluster. A gate stuck in that open would answer no exec
 * on the machine.
 */
static bool skip_fstype(const char *t)
{
	return fs_type_may_hang(t);
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

/* ---- examiners (execsearch.h) ---- */

static void examiner_start(struct execgate *g, struct gate_examiner *x)
{
	x->sock = -1;
	x->cur = NULL;
	/* Those stuck in the kernel are processes too: not one more than GATE_MAX_STUCK. */
	if (g->nkilled >= GATE_MAX_STUCK || g->failed_starts >= GATE_MAX_FAILED_STARTS ||
	    g->stopping_examiners)
		return;
	x->answered = false;
	if (execsearch_spawn(&x->pid, &x->sock) < 0)
		x->sock = -1;
}

static bool examiners_alive(const struct execgate *g)
{
	for (size_t i = 0; i < GATE_EXAMINERS; i++)
		if (g->ex[i].sock >= 0)
			return true;
	return false;
}

/* The first search cut short, for the end of the run: which program, why. */
static void note_cut(struct execgate *g, const struct gate_exam *e, const char *why)
{
	char link[32], path[256];
	ssize_t n;

	g->st.searches_cut++;
	if (g->st.first_cut[0])
		return;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", e->fd);
	n = readlink(link, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = 0;
	snprintf(g->st.first_cut, sizeof(g->st.first_cut), "%s, exec'd by process %u: %s", path,
		 e->pid, why);
}

/*
 * An examiner gone, or stuck past its deadline: killed, its examination handed on with what
 * it found, and another one started in its place. It is waited for: a slow one ends at once,
 * one stuck in the kernel only when its wait does, and until then the user whose search it
 * was is not examined (their next search could only get stuck the same way).
 */
static void examiner_drop(struct execgate *g, struct gate_examiner *x, bool stuck)
{
	struct gate_lane *l = x->cur ? lane_of(g, x->cur->lane) : NULL;

	kill(x->pid, SIGKILL);
	if (g->nkilled < ARRAY_SIZE(g->killed)) {
		g->killed[g->nkilled++] = (struct gate_killed){
			.pid = x->pid, .lane = x->cur ? x->cur->lane : (u32)-1};
		if (l)
			l->stuck++;
	}
	close(x->sock);
	x->sock = -1;
	if (!stuck && !x->answered)
		g->failed_starts++;
	if (x->cur) {
		l->busy = false;
		if (stuck) {
			l->paused_until_us = now_us() + GATE_STUCK_PAUSE_US;
			g->st.replaced++;
			note_cut(g, x->cur, "its examiner did not answer by its deadline: it was "
				 "killed and replaced");
		} else {
			note_cut(g, x->cur, "its examiner ended");
		}
		to_capture(g, x->cur);
		x->cur = NULL;
	}
	examiner_start(g, x);
}

/* Examiners killed that have ended: their users are examined again. */
static void reap(struct execgate *g)
{
	size_t j = 0;

	for (size_t i = 0; i < g->nkilled; i++) {
		struct gate_killed *k = &g->killed[i];

		if (waitpid(k->pid, NULL, WNOHANG) == 0) {
			g->killed[j++] = *k;
			continue;
		}
		if (k->lane != (u32)-1 && lane_of(g, k->lane)->stuck)
			lane_of(g, k->lane)->stuck--;
	}
	g->nkilled = j;
	/* Room again: start those that could not be. */
	for (size_t i = 0; i < GATE_EXAMINERS; i++)
		if (g->ex[i].sock < 0)
			examiner_start(g, &g->ex[i]);
}

static bool send_req(struct gate_examiner *x, const struct gate_exam *e, u64 deadline_us)
{
	struct execsearch_req req = {.id = x->id, .pid = e->pid, .deadline_ns = deadline_us * 1000};
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &e->fd, sizeof(int));
	return sendmsg(x->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(req);
}

/*
 * Examinations to free examiners, oldest first, one per user at a time. Each search is given
 * a quarter of the timeout, and ends before three quarters of it have passed since its exec:
 * the rest is for the attach.
 */
static void dispatch(struct execgate *g)
{
	u64 now = now_us(), timeout = (u64)g->opts.timeout_ms * 1000;
	struct gate_exam **pp = &g->queue;

	while (*pp) {
		struct gate_exam *e = *pp;
		struct gate_lane *l = lane_of(g, e->lane);
		struct gate_examiner *x = NULL;
		u64 deadline = MIN(now + timeout / 4, e->since_us + timeout * 3 / 4);

		if (lane_paused(l) || !examiners_alive(g) || deadline <= now + 1000) {
			*pp = e->next;
			if (lane_paused(l))
				g->st.unexamined++;
			else if (!examiners_alive(g))
				g->st.no_examiner++;
			else
				note_cut(g, e, "it waited too long for an examiner");
			to_capture(g, e);
			continue;
		}
		if (l->busy) {
			pp = &e->next;
			continue;
		}
		for (size_t i = 0; i < GATE_EXAMINERS && !x; i++)
			if (g->ex[i].sock >= 0 && !g->ex[i].cur)
				x = &g->ex[i];
		if (!x)
			break;
		x->id++;
		if (!send_req(x, e, deadline)) {
			examiner_drop(g, x, false);
			continue;
		}
		*pp = e->next;
		x->cur = e;
		x->deadline_us = deadline;
		l->busy = true;
	}
	g->queue_tail = &g->queue;
	while (*g->queue_tail)
		g->queue_tail = &(*g->queue_tail)->next;
}

/* What an examiner sends: the objects found, then the end of its search. */
static void collect(struct execgate *g, struct gate_examiner *x)
{
	static struct execsearch_msg m; /* the gate thread's alone */

	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct gate_exam *e = x->cur;
		struct cmsghdr *c;
		ssize_t n = recvmsg(x->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int fd = -1;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			examiner_drop(g, x, false);
			return;
		}
		c = CMSG_FIRSTHDR(&mh);
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
		if (!e || m.id != x->id || (size_t)n < offsetof(struct execsearch_msg, path)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (m.kind == EXECSEARCH_OBJ && (size_t)n > offsetof(struct execsearch_msg, path)) {
			((char *)&m)[n - 1] = 0;
			if (fd >= 0 && g->lib_fds >= MIN(GATE_MAX_LIB_FDS, g->max_held)) {
				close(fd);
				fd = -1;
			}
			e->libs = xrealloc(e->libs, (e->nlibs + 1) * sizeof(*e->libs));
			e->libs[e->nlibs++] = (struct execgate_lib){.fd = fd, .path = xstrdup(m.path)};
			if (fd >= 0) {
				g->lib_fds++;
				e->nlib_fds++;
			}
			continue;
		}
		if (fd >= 0)
			close(fd);
		if (m.kind != EXECSEARCH_END)
			continue;
		m.why[sizeof(m.why) - 1] = m.where[sizeof(m.where) - 1] = 0;
		if (m.flags & EXECSEARCH_CUT)
			note_cut(g, e, m.why);
		if (m.flags & EXECSEARCH_REFUSED) {
			g->st.searches_refused++;
			if (!g->st.first_refused[0])
				snprintf(g->st.first_refused, sizeof(g->st.first_refused),
					 "%s, searched for process %u", m.where, e->pid);
		}
		lane_of(g, e->lane)->busy = false;
		to_capture(g, e);
		x->cur = NULL;
		x->answered = true;
		g->failed_starts = 0;
	}
}

/* Examiners past their deadline and its grace: stuck (in the kernel, as like as not). */
static u64 check_examiners(struct execgate *g)
{
	u64 now = now_us(), next = 0;

	for (size_t i = 0; i < GATE_EXAMINERS; i++) {
		struct gate_examiner *x = &g->ex[i];
		u64 limit = x->deadline_us + GATE_EXAMINER_GRACE_US;

		if (x->sock < 0 || !x->cur)
			continue;
		if (now >= limit) {
			examiner_drop(g, x, true);
			continue;
		}
		if (!next || limit < next)
			next = limit;
	}
	return next;
}

/* The watchdog's view of the gate: alive now, holding these events. */
static void heartbeat(struct execgate *g)
{
	struct gatewatch_shared *w = g->watch_page;

	if (!w)
		return;
	for (size_t i = 0; i < g->nheld; i++)
		w->held[i] = g->held[i].fd;
	w->nheld = (u32)g->nheld;
	__atomic_store_n(&w->beat_us, now_us(), __ATOMIC_RELEASE);
}

static void *gate_main(void *arg)
{
	struct execgate *g = arg;
	sigset_t all;

	/* Signals are the capture thread's (its stop flag): none interrupts an answer here. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* Started here: an examiner dies with the thread that started it (PR_SET_PDEATHSIG). */
	for (size_t i = 0; i < GATE_EXAMINERS; i++)
		examiner_start(g, &g->ex[i]);

	while (!__atomic_load_n(&g->stopping, __ATOMIC_ACQUIRE)) {
		struct pollfd p[3 + GATE_EXAMINERS] = {
			{.fd = g->fan, .events = POLLIN},
			{.fd = g->wake_gate, .events = POLLIN},
			{.fd = g->mountinfo, .events = POLLPRI},
		};
		bool handed;
		u64 next, stuck, now;
		int timeout;

		heartbeat(g);
		reap(g);
		handed = exchange(g);
		dispatch(g);
		stuck = check_examiners(g);
		next = expire(g);
		if (!next || (stuck && stuck < next))
			next = stuck;
		now = now_us();
		/* At least every beat, for the watchdog. */
		timeout = GATEWATCH_BEAT_MS;
		if (next && (next - now + 999) / 1000 < (u64)timeout)
			timeout = next > now ? (int)((next - now + 999) / 1000) : 0;
		/* The lock was busy for a moment: try again soon, do not wait for it. */
		if (!handed && timeout > 1)
			timeout = 1;
		for (size_t i = 0; i < GATE_EXAMINERS; i++)
			p[3 + i] = (struct pollfd){.fd = g->ex[i].sock, .events = POLLIN};
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
		for (size_t i = 0; i < GATE_EXAMINERS; i++)
			if (g->ex[i].sock >= 0 && p[3 + i].revents)
				collect(g, &g->ex[i]);
	}
	/* Everything still held runs now; whatever is still queued in the kernel, at close. */
	exchange(g);
	for (size_t i = 0; i < g->nheld; i++)
		allow(g, g->held[i].fd);
	g->nheld = 0;
	for (size_t i = 0; i < GATE_EXAMINERS; i++) {
		struct gate_examiner *x = &g->ex[i];

		if (x->sock < 0)
			continue;
		kill(x->pid, SIGKILL);
		close(x->sock);
		x->sock = -1;
		if (x->cur)
			exam_free(x->cur);
		x->cur = NULL;
		/* Not waited for: one stuck in the kernel would keep corobpf from ending. */
		if (g->nkilled < ARRAY_SIZE(g->killed))
			g->killed[g->nkilled++] = (struct gate_killed){.pid = x->pid, .lane = (u32)-1};
	}
	g->stopping_examiners = true;
	reap(g);
	return NULL;
}

static void exams_free(struct gate_exam *e)
{
	while (e) {
		struct gate_exam *next = e->next;

		exam_free(e);
		e = next;
	}
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
		exam_free(g->reqs[i]);
	exams_free(g->queue);
	exams_free(g->outbox);
	while (hmap_next(&g->known, &it, &k1, &k2, &v))
		free(v);
	it = 0;
	while (hmap_next(&g->inflight, &it, &k1, &k2, &v))
		free(v);
	it = 0;
	while (hmap_next(&g->lanes, &it, &k1, &k2, &v))
		free(v);
	hmap_free(&g->known);
	hmap_free(&g->inflight);
	hmap_free(&g->marked);
	hmap_free(&g->lanes);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* corobpf's own program: its examiners exec it, and are not held for it. */
static void know_self(struct execgate *g)
{
	struct gate_known *k;
	struct stat st;

	if (stat("/proc/self/exe", &st) < 0)
		return;
	k = xcalloc(1, sizeof(*k));
	k->mtime = st.st_mtim;
	k->ctime = st.st_ctim;
	hmap_put(&g->known, st.st_dev, st.st_ino, k);
}

struct execgate *execgate_start(const struct execgate_opts *opts)
{
	struct execgate *g = xcalloc(1, sizeof(*g));
	struct rlimit nofile;
	int marked;

	g->opts = *opts;
	g->self = getpid();
	g->wake_cap = g->wake_gate = g->mountinfo = -1;
	g->queue_tail = &g->queue;
	for (size_t i = 0; i < GATE_EXAMINERS; i++)
		g->ex[i].sock = -1;
	pthread_mutex_init(&g->lock, NULL);
	hmap_init(&g->known);
	hmap_init(&g->inflight);
	hmap_init(&g->marked);
	hmap_init(&g->lanes);
	know_self(g);
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
	/* Before the gate thread: the watchdog is forked from this one, which lives as long. */
	g->watch = gatewatch_start(g->fan, MAX(g->opts.timeout_ms, 4 * GATEWATCH_BEAT_MS));
	g->watch_page = g->watch ? gatewatch_page(g->watch) : NULL;
	__atomic_store_n(&g->served_us, now_us(), __ATOMIC_RELEASE);
	if (pthread_create(&g->thread, NULL, gate_main, g)) {
		log_warn("exec gate: cannot start its thread; programs started later are "
			 "attached after their exec");
		goto fail;
	}
	log_verbose("exec gate: %d filesystems marked; an exec of a program not examined yet "
		    "waits for its attach, at most %u ms", marked, g->opts.timeout_ms);
	return g;
fail:
	if (g->watch) {
		u64 a, t;

		gatewatch_stop(g->watch, &a, &t);
	}
	gate_free(g);
	return NULL;
}

int execgate_wake_fd(const struct execgate *g)
{
	return g->wake_cap;
}

size_t execgate_serve(struct execgate *g, execgate_examine_fn examine, void *ctx)
{
	struct gate_exam *reqs[GATE_MAX_INFLIGHT];
	size_t n, done = 0;
	u64 v;

	if (read(g->wake_cap, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("exec gate: wake: %s", strerror(errno));
	__atomic_store_n(&g->served_us, now_us(), __ATOMIC_RELEASE);
	pthread_mutex_lock(&g->lock);
	n = g->nreqs;
	memcpy(reqs, g->reqs, n * sizeof(reqs[0]));
	g->nreqs = 0;
	pthread_mutex_unlock(&g->lock);
	for (size_t i = 0; i < n; i++) {
		struct gate_exam *e = reqs[i];
		struct execgate_found f = {
			.fd = e->fd, .pid = e->pid, .changed = e->changed, .libs = e->libs,
			.nlibs = e->nlibs,
		};
		struct gate_answer a = {.key = e->key, .nlib_fds = (u32)e->nlib_fds};

		/* The slow part, with no lock held. */
		examine(ctx, &f);
		exam_free(e);
		pthread_mutex_lock(&g->lock);
		g->answers[g->nanswers++] = a;
		pthread_mutex_unlock(&g->lock);
		v = 1;
		if (write(g->wake_gate, &v, sizeof(v)) < 0)
			log_debug("exec gate: waking the gate: %s", strerror(errno));
		__atomic_store_n(&g->served_us, now_us(), __ATOMIC_RELEASE);
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
	/* The watchdog holds the group too: it goes first, the group with gate_free(). */
	gatewatch_stop(g->watch, &g->st.watchdog_answers, &g->st.watchdog_takeovers);
	if (out)
		*out = g->st;
	gate_free(g);
}

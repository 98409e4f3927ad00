// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exec gate's examiner (execsearch.h): a process that searches, for one exec at a time,
 * what ld.so will map, and sends back the objects it found, each with its descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include "execsearch.h"
#include "ldpaths.h"
#include "procview.h"

#define EXAMINER_FD 3

/* An object sent with its descriptor already, as it was then: sent again without. */
struct sent_obj {
	struct timespec mtime, ctime;
};

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000 + (u64)ts.tv_nsec;
}

static void send_msg(const struct execsearch_msg *m, int fd)
{
	size_t len = m->kind == EXECSEARCH_OBJ ? offsetof(struct execsearch_msg, path) +
							 strlen(m->path) + 1
					       : offsetof(struct execsearch_msg, path);
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = (void *)m, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	/* The gate gone: nothing to do but end, at the next read. */
	while (sendmsg(EXAMINER_FD, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* A path as the process names it: `path` (from our root) less its root's path `root`. */
static const char *in_root(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (!strcmp(root, "/"))
		return path;
	if (!strncmp(path, root, n) && path[n] == '/')
		return path + n;
	return path; /* its root is not above it as we see it: the path as it is */
}

static ssize_t read_link(const char *link, char *buf, size_t size)
{
	ssize_t n = readlink(link, buf, size - 1);

	buf[n > 0 ? n : 0] = 0;
	return n;
}

/*
 * Whether reading the environment of pid can wait on a file: it is read from the process's
 * memory, and a process may map a FUSE file where its environment was. Every mapping over
 * [env_start, env_end) must be anonymous. (A thread of the process could map one there after
 * this look: the examiner would then wait, and be replaced.)
 */
static bool env_in_anonymous_memory(u32 pid, u64 deadline_ns, unsigned long *start,
				    unsigned long *end)
{
	char path[64], buf[2048], *p, line[4096 + 128];
	unsigned long field;
	bool ok = true;
	ssize_t n;
	FILE *f;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* Fields after the command's name (which may hold anything, parentheses too). */
	p = strrchr(buf, ')');
	if (!p)
		return false;
	p++;
	*start = *end = 0;
	for (i = 3; i <= 51; i++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return false;
		field = strtoul(p, &p, 10);
		if (i == 50)
			*start = field;
		if (i == 51)
			*end = field;
		/* The state (field 3) is a letter: skip it. */
		while (*p && *p != ' ')
			p++;
	}
	if (!*start || *end <= *start)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	for (unsigned int lines = 0; fgets(line, sizeof(line), f); lines++) {
		unsigned long s, e, ino;

		if (!(lines % 256) && now_ns() >= deadline_ns) {
			ok = false;
			break;
		}
		if (sscanf(line, "%lx-%lx %*s %*x %*x:%*x %lu", &s, &e, &ino) != 3)
			continue;
		if (s >= *end)
			break;
		if (e > *start && ino) {
			ok = false;
			break;
		}
	}
	fclose(f);
	return ok;
}

/* LD_LIBRARY_PATH and LD_PRELOAD of pid's environment (malloc'ed, NULL when unset). */
static const char *read_ld_env(u32 pid, u64 deadline_ns, char **lib, char **preload)
{
	unsigned long start, end;
	char path[64], *buf;
	size_t len = 0, want;
	ssize_t n;
	int fd;

	*lib = *preload = NULL;
	if (!env_in_anonymous_memory(pid, deadline_ns, &start, &end))
		return "its environment could not be read safely (gone, or in a file mapping)";
	want = end - start;
	if (want > EXECSEARCH_MAX_ENV)
		want = EXECSEARCH_MAX_ENV;
	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "its environment could not be read";
	buf = xmalloc(want + 1);
	while (len < want && (n = read(fd, buf + len, want - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = 0;
	ld_env_vars(buf, len, lib, preload);
	free(buf);
	return NULL;
}

static int open_in_view(void *ctx, const char *dir, const char *name)
{
	return proc_view_open(ctx, dir, name);
}

/* The reply's END: flags and reasons. */
static void end_msg(struct execsearch_msg *m, const char *cut, const struct proc_view *v)
{
	m->kind = EXECSEARCH_END;
	m->flags = 0;
	if (cut) {
		m->flags |= EXECSEARCH_CUT;
		snprintf(m->why, sizeof(m->why), "%s", cut);
	}
	if (v && v->refused) {
		m->flags |= EXECSEARCH_REFUSED;
		snprintf(m->where, sizeof(m->where), "%s", v->refused_what);
	}
}

/* One exec: what its program will map, searched and sent. */
static void examine(const struct execsearch_req *req, int exe, struct hmap *sent)
{
	struct execsearch_msg *m = xcalloc(1, sizeof(*m));
	char *shown = xmalloc(PATH_MAX), *root = xmalloc(PATH_MAX), *cwd = xmalloc(PATH_MAX);
	char link[64], exe_path[32], err[512], *lib = NULL, *preload = NULL, *origin = NULL;
	struct ld_opts o = {0};
	struct proc_view v;
	char **paths = NULL, cut[192] = "";
	size_t npaths = 0, new_fds = 0;
	const char *name, *why;
	int ret;

	m->id = req->id;
	ret = proc_view_init(&v, req->pid, EXECSEARCH_MAX_LOOKUPS, req->deadline_ns);
	if (ret < 0) {
		end_msg(m, ret == -EREMOTE ? NULL : "the process is gone", &v);
		goto out;
	}
	snprintf(exe_path, sizeof(exe_path), "/proc/self/fd/%d", exe);
	snprintf(link, sizeof(link), "/proc/%u/root", req->pid);
	if (read_link(exe_path, shown, PATH_MAX) <= 0 || shown[0] != '/' ||
	    read_link(link, root, PATH_MAX) <= 0) {
		end_msg(m, NULL, &v);
		goto out;
	}
	/* The path the process runs it by: its $ORIGIN, as ld.so reads it from /proc/self/exe. */
	name = in_root(shown, root);
	if (ld_path_is_loader(name)) {
		end_msg(m, NULL, &v);
		goto out;
	}
	origin = xstrdup(name);
	*strrchr(origin, '/') = 0;
	if (!origin[0])
		strcpy(origin, "/");
	snprintf(link, sizeof(link), "/proc/%u/cwd", req->pid);
	if (read_link(link, cwd, PATH_MAX) <= 0)
		strcpy(cwd, ".");
	why = read_ld_env(req->pid, req->deadline_ns, &lib, &preload);
	if (why)
		snprintf(cut, sizeof(cut), "%s", why);
	o.library_path = lib ? lib : "";
	o.preload = preload ? preload : "";
	o.open_file = open_in_view;
	o.open_ctx = &v;
	o.origin = origin;
	o.cwd = in_root(cwd, root);
	o.max_library_path = EXECSEARCH_MAX_LIBRARY_PATH;
	o.max_names = EXECSEARCH_MAX_NAMES;
	o.want_fds = 1;
	ret = ld_resolve_needed(exe_path, &paths, &npaths, &o, err, sizeof(err));
	if (ret < 0 && !cut[0] && (ret == -ECANCELED || proc_view_spent(&v)))
		snprintf(cut, sizeof(cut), "%s", "the budget was spent before its interpreter");
	for (size_t i = 0; ret == 0 && i < npaths; i++) {
		int fd = i < o.n_fds ? o.fds[i] : -1;
		struct sent_obj *prev;
		struct stat st;

		m->kind = EXECSEARCH_OBJ;
		snprintf(m->path, sizeof(m->path), "%s", paths[i]);
		if (fd < 0 || fstat(fd, &st) < 0) {
			send_msg(m, -1);
			continue;
		}
		prev = hmap_get(sent, st.st_dev, st.st_ino);
		if (prev && !memcmp(&prev->mtime, &st.st_mtim, sizeof(st.st_mtim)) &&
		    !memcmp(&prev->ctime, &st.st_ctim, sizeof(st.st_ctim))) {
			send_msg(m, -1);
			continue;
		}
		if (new_fds == EXECSEARCH_MAX_NEW_FDS) {
			if (!cut[0])
				snprintf(cut, sizeof(cut), "more than %u libraries not seen before",
					 EXECSEARCH_MAX_NEW_FDS);
			break;
		}
		new_fds++;
		if (!prev) {
			prev = xmalloc(sizeof(*prev));
			hmap_put(sent, st.st_dev, st.st_ino, prev);
		}
		prev->mtime = st.st_mtim;
		prev->ctime = st.st_ctim;
		send_msg(m, fd);
	}
	if (o.cut_short && !cut[0]) {
		/* The bound the view ran into says more than "a budget". */
		if (v.lookups >= v.max_lookups)
			snprintf(cut, sizeof(cut), "more than %u lookups", v.max_lookups);
		else if (proc_view_spent(&v))
			snprintf(cut, sizeof(cut), "its time ran out");
		else
			snprintf(cut, sizeof(cut), "%s", o.cut_reason);
	}
	end_msg(m, cut[0] ? cut : NULL, &v);
out:
	memset(m->path, 0, 1);
	send_msg(m, -1);
	proc_view_release(&v);
	ld_paths_free(paths, npaths);
	ld_opts_release(&o);
	free(lib);
	free(preload);
	free(origin);
	free(shown);
	free(root);
	free(cwd);
	free(m);
}

int execsearch_main(int argc, char **argv)
{
	struct hmap sent;
	struct stat st;

	/* Gone with the gate: corobpf's thread that started it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (argc < 3 || getppid() != (pid_t)strtol(argv[2], NULL, 10))
		return 1;
	if (fstat(EXAMINER_FD, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 1;
	prctl(PR_SET_NAME, "corobpf-exam");
	hmap_init(&sent);
	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct execsearch_req req;
		struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *c;
		ssize_t n = recvmsg(EXAMINER_FD, &mh, MSG_CMSG_CLOEXEC);
		int fd = -1;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0; /* the gate closed its end */
		c = CMSG_FIRSTHDR(&mh);
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
		if (n != sizeof(req) || fd < 0) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		examine(&req, fd, &sent);
		close(fd);
	}
}

int execsearch_spawn(pid_t *pid, int *sock)
{
	extern char **environ;
	char ppid[16], *argv[] = {"corobpf", EXECSEARCH_ARG, ppid, NULL};
	int sv[2], null;
	sigset_t none;
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	snprintf(ppid, sizeof(ppid), "%d", (int)getpid());
	sigemptyset(&none);
	/*
	 * fork, not vfork (posix_spawn): a vfork parent waits until the child's exec is done,
	 * and that exec waits for the gate's answer. Between fork and exec, system calls only.
	 */
	child = fork();
	if (child < 0) {
		int e = -errno;

		close(sv[0]);
		close(sv[1]);
		if (null >= 0)
			close(null);
		return e;
	}
	if (child == 0) {
		setsid(); /* not in the terminal's process group: ^C and ^Z are corobpf's */
		if (null >= 0 && (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0))
			_exit(127);
		/* dup2 onto itself would leave close-on-exec set. */
		if (sv[1] == EXAMINER_FD ? fcntl(sv[1], F_SETFD, 0) < 0
					 : dup2(sv[1], EXAMINER_FD) < 0)
			_exit(127);
		/* Nothing else of corobpf's: not its BPF links, not the gate's group. */
		syscall(SYS_close_range, EXAMINER_FD + 1, ~0U, 0);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execve("/proc/self/exe", argv, environ);
		_exit(127);
	}
	close(sv[1]);
	if (null >= 0)
		close(null);
	*pid = child;
	*sock = sv[0];
	return 0;
}

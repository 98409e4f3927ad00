// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * -- CMD: the command found as execvp would, forked held before its exec,
 * and everything it will load examined and attached first; -- SCRIPT: the
 * same for each image it execs (launch.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "launch.h"
#include "elfnotes.h"
#include "ldpaths.h"
#include "log.h"
#include "procfs.h"
#include "safeopen.h"

/*
 * execvp's search, done before the fork so the attach and the exec see one
 * file: the path the child execs, as a shell would exec it (no symbolic
 * link resolved: the program's $0, and its comm, are what the user typed).
 * NULL with errno set if there is none.
 */
static char *resolve_command(const char *cmd)
{
	const char *path = getenv("PATH");
	char *dirs, *save = NULL, *dir;
	int err = ENOENT;

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0 ? xstrdup(cmd) : NULL;
	dirs = xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char cand[4096];
		struct stat st;

		snprintf(cand, sizeof(cand), "%s/%s", *dir ? dir : ".", cmd);
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
			free(dirs);
			return xstrdup(cand);
		}
		if (errno == EACCES)
			err = EACCES; /* execvp says so when nothing else is found */
	}
	free(dirs);
	errno = err;
	return NULL;
}

static void child_wait_then_exec(const struct attach_launch *l, int release_rd, int errpipe_wr,
				 const char *path)
{
	char go;
	int e;

	/* Held here, running only corobpf's code, until the probes are attached. */
	if (read(release_rd, &go, 1) != 1)
		_exit(127);
	close(release_rd);
	if (l->before_exec)
		l->before_exec();
	execv(path, l->argv);
	e = errno;
	if (write(errpipe_wr, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* One object the launched command will map, examined and attached through its descriptor. */
static void launch_object_fd(struct attach_ctx *a, struct target *t, int fd, const char *path,
			     bool ldso_hook)
{
	char fdp[32];

	fd_path(fdp, fd);
	attach_object(a, t, fd, fdp, path, false);
	if (ldso_hook)
		attach_libload(a, t, fdp);
}

/*
 * One object the launched command will map, opened once (safeopen.h: a
 * regular file, never a FIFO a user planted in a library directory) and
 * attached through that descriptor, so the scan and the uprobes see one file.
 */
static void launch_object(struct attach_ctx *a, struct target *t, const char *path, bool ldso_hook)
{
	int fd = open_regular(path);

	if (fd < 0) {
		a->ustats[fd == -EINVAL ? CORO_USTAT_ATTACH_REFUSED : CORO_USTAT_ATTACH_FAIL]++;
		log_warn("cannot open %s: %s; its probes are not attached", path,
			 fd == -EINVAL ? "not a regular file" : strerror(-fd));
		return;
	}
	launch_object_fd(a, t, fd, path, ldso_hook);
	close(fd);
}

/*
 * What ld.so will map for a launched image, in its order (paths[0] is the
 * interpreter): each object not examined yet, opened once and attached.
 */
static void launch_needed(struct attach_ctx *a, struct target *t, char **paths, size_t npaths)
{
	struct stat st;

	for (size_t i = 0; i < npaths; i++) {
		if (stat(paths[i], &st) == 0) {
			if (hmap_get(attach_examined(a, t), st.st_dev, st.st_ino))
				continue;
			hmap_put(attach_examined(a, t), st.st_dev, st.st_ino, (void *)1);
		}
		attach_note_searched(a, paths[i]);
		launch_object(a, t, paths[i], i == 0 || ld_path_is_loader(paths[i]));
	}
}

int attach_launch_prepare(struct attach_ctx *a, struct target *t, struct attach_launch *l)
{
	char **argv = l->argv, **paths = NULL, err[512], fdp[32], exe[4096];
	struct ld_opts ldo = {0};
	int release[2], errpipe[2], ret = 0, fd = -1;
	size_t npaths = 0;
	char *cmd = resolve_command(argv[0]), *origin = NULL, *slash;
	const char *base;
	struct stat st;
	ssize_t n;
	pid_t pid;

	t->pidfd = -1;
	t->wait_status = -1;
	if (!cmd) {
		log_err("cannot run %s: %s", argv[0],
			strchr(argv[0], '/') || errno != ENOENT ? strerror(errno)
								: "command not found in PATH");
		return EXIT_LAUNCH;
	}
	/*
	 * The file examined is this descriptor's: what ld.so needs, whether it
	 * is ELF, its probes. The exec goes by the path (see resolve_command);
	 * the capture holds the exec and checks that it runs this very file.
	 */
	fd = open_regular(cmd);
	if (fd < 0 || fstat(fd, &st) < 0) {
		log_err("cannot run %s: %s", cmd,
			fd == -EINVAL ? "not a regular file" : strerror(fd < 0 ? -fd : errno));
		ret = EXIT_LAUNCH;
		goto out;
	}
	fd_path(fdp, fd);
	/* The file's own name, links resolved, as /proc/PID/exe will name it. */
	n = readlink(fdp, exe, sizeof(exe) - 1);
	if (n <= 0) {
		log_err("cannot run %s: reading the name of its descriptor: %s", cmd,
			n < 0 ? strerror(errno) : "empty");
		ret = EXIT_LAUNCH;
		goto out;
	}
	exe[n] = 0;
	if (!elf_is_elf(fdp)) {
		/* A script: what it will run is known only at its execs. */
		t->via_script = true;
		log_verbose("%s is not an ELF file: following its exec chain, each image attached "
			    "at its exec", cmd);
		goto fork;
	}
	/*
	 * Through the descriptor: the file examined. $ORIGIN is the directory of
	 * its real path, as ld.so takes it from /proc/self/exe.
	 */
	origin = xstrdup(exe);
	slash = strrchr(origin, '/');
	if (slash)
		slash[slash == origin] = 0; /* "/prog" is in "/" */
	ldo.origin = origin;
	if (ld_resolve_needed(fdp, &paths, &npaths, &ldo, err, sizeof(err)) < 0) {
		log_err("cannot resolve the libraries of %s: %s", cmd, err);
		ret = EXIT_LAUNCH;
		goto out;
	}
	for (size_t i = 0; i < ldo.n_missing; i++)
		log_warn("%s (needed by %s): %s; the command will probably fail to start",
			 ldo.missing[i].name,
			 strcmp(ldo.missing[i].needed_by, fdp) ? ldo.missing[i].needed_by : exe,
			 ldo.missing[i].reason);
	if (ldo.cache_error[0])
		log_verbose("%s", ldo.cache_error);
	t->exec_check = true;
	t->exec_dev = st.st_dev;
	t->exec_ino = st.st_ino;

fork:
	if (pipe2(release, O_CLOEXEC) < 0 || pipe2(errpipe, O_CLOEXEC) < 0) {
		log_err("pipe: %s", strerror(errno));
		ret = EXIT_FAILURE_RUNTIME;
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		log_err("fork: %s", strerror(errno));
		ret = EXIT_FAILURE_RUNTIME;
		goto out;
	}
	if (pid == 0) {
		close(release[1]);
		close(errpipe[0]);
		child_wait_then_exec(l, release[0], errpipe[1], cmd);
	}
	close(release[0]);
	close(errpipe[1]);
	l->child = pid;
	l->release_fd = release[1];
	if (l->forked)
		l->forked(pid);
	t->pid = pid;
	t->launched = true;
	t->start_ts = now_boottime_ns();
	t->ppid = getpid();
	snprintf(t->exe, sizeof(t->exe), "%s", exe);
	/* The kernel names the process after the path exec'd, as typed (15 bytes kept). */
	base = strrchr(cmd, '/');
	snprintf(t->comm, sizeof(t->comm), "%s", base ? base + 1 : cmd);
	/* The exec error pipe is read after release (by the capture). */
	l->launch_err_fd = errpipe[0];
	if (t->via_script)
		goto out;

	/* The executable, then what ld.so will map, in its order. */
	attach_note_searched(a, exe);
	hmap_put(attach_examined(a, t), st.st_dev, st.st_ino, (void *)1);
	launch_object_fd(a, t, fd, exe, false);
	launch_needed(a, t, paths, npaths);
out:
	if (fd >= 0)
		close(fd);
	ld_paths_free(paths, npaths);
	ld_opts_release(&ldo);
	free(origin);
	free(cmd);
	return ret;
}

bool attach_launch_exec_is_examined(const struct target *t)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%u/exe", t->pid);
	if (stat(path, &st) < 0) {
		log_err("cannot tell which file %s (pid %u) runs: %s: %s", t->comm, t->pid, path,
			strerror(errno));
		return false;
	}
	if (st.st_dev == t->exec_dev && st.st_ino == t->exec_ino)
		return true;
	log_err("%s was replaced between its examination and its exec (it is now device %u:%u "
		"inode %llu, not %u:%u inode %llu): the program the kernel runs is not the one "
		"attached to; it is killed before its first instruction. Run the command again, "
		"from a path no other user can write",
		t->exe, major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino,
		major(t->exec_dev), minor(t->exec_dev), (unsigned long long)t->exec_ino);
	return false;
}

/*
 * The variables ld.so reads, from the environment the new image was given
 * (a script may set LD_LIBRARY_PATH before its exec): malloc'ed values in
 * lib and preload, "" when unset. False if the environment cannot be read.
 */
static bool image_ld_env(u32 pid, char **lib, char **preload)
{
	char path[64], *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd;

	*lib = *preload = NULL;
	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	do {
		if (len + 4096 + 1 > cap) {
			cap = cap ? 2 * cap : 16384;
			buf = xrealloc(buf, cap);
		}
		n = read(fd, buf + len, cap - len - 1);
		len += n > 0 ? (size_t)n : 0;
	} while (n > 0);
	close(fd);
	if (n < 0) {
		free(buf);
		return false;
	}
	buf[len] = 0;
	ld_env_vars(buf, len, lib, preload);
	free(buf);
	if (!*lib)
		*lib = xstrdup("");
	if (!*preload)
		*preload = xstrdup("");
	return true;
}

/* What attaching knew of t's last image, forgotten: its objects may all be new. */
static void forget_image(struct attach_ctx *a, struct target *t)
{
	attach_ctx_detach_since(a, t->image_links[0], t->image_links[1]);
	attach_target_free(t);
	hmap_init(&t->objects);
	t->probe_sites = 0;
	t->probe_sites_ignored = 0;
	t->switch_sites = 0;
	t->switch_mode = false;
	t->fcontext_calls = false;
	t->libload_attached = false;
}

int attach_launch_image(struct attach_ctx *a, struct target *t)
{
	char **paths = NULL, err[512], path[64], *lib = NULL, *preload = NULL;
	struct ld_opts ldo = {0};
	size_t npaths = 0;
	ssize_t n;
	int ret;

	if (!a->opts->follow && t->images)
		forget_image(a, t);
	t->image_links[0] = a->nlinks;
	t->image_links[1] = a->nlink_fds;
	t->images++;
	snprintf(path, sizeof(path), "/proc/%u/exe", t->pid);
	n = readlink(path, t->exe, sizeof(t->exe) - 1);
	t->exe[n > 0 ? n : 0] = 0;
	proc_read_comm(t->pid, t->pid, t->comm);
	log_verbose("process %u execs %s: attaching to it", t->pid, t->exe);

	/* What the kernel mapped, through descriptors of the very files mapped. */
	ret = attach_scan_process(a, t, false);
	if (ret)
		return ret;
	/* What ld.so will map, in its order (a static program has nothing more). */
	if (image_ld_env(t->pid, &lib, &preload)) {
		ldo.library_path = lib;
		ldo.preload = preload;
	}
	if (n > 0 && ld_resolve_needed(t->exe, &paths, &npaths, &ldo, err, sizeof(err)) < 0)
		log_verbose("cannot resolve the libraries of %s: %s; they are found as ld.so maps "
			    "them", t->exe, err);
	launch_needed(a, t, paths, npaths);
	ld_paths_free(paths, npaths);
	ld_opts_release(&ldo);
	free(lib);
	free(preload);
	return attach_switch_path(a, t);
}

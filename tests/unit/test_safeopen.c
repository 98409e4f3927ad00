// SPDX-License-Identifier: MIT
/* safeopen: only regular files are opened, nothing blocks, a mapping opens as mapped. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "procview.h"
#include "safeopen.h"
#include "unit.h"

static char dir[64];

static void make_dir(void)
{
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/corobpf-safeopen-XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
}

/* A FIFO nobody writes: open() would block forever; here it is refused at once. */
TEST(safeopen_fifo_is_refused_without_blocking)
{
	char p[128];

	make_dir();
	snprintf(p, sizeof(p), "%s/fifo", dir);
	CHECK_EQ(mkfifo(p, 0600), 0);
	CHECK_EQ(open_regular(p), -EINVAL);
	unlink(p);
}

TEST(safeopen_devices_and_directories_are_refused)
{
	CHECK_EQ(open_regular("/dev/null"), -EINVAL);
	CHECK_EQ(open_regular("/tmp"), -EINVAL);
	CHECK_EQ(open_regular("/nonexistent/x"), -ENOENT);
}

/* A regular file, through a symlink too (the invoker's own paths may have them). */
TEST(safeopen_regular_file_reads)
{
	char p[128], l[128], b[4] = {0};
	int fd;

	make_dir();
	snprintf(p, sizeof(p), "%s/file", dir);
	snprintf(l, sizeof(l), "%s/link", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, "abc", 3) == 3);
	close(fd);
	CHECK_EQ(symlink(p, l), 0);
	fd = open_regular(l);
	CHECK(fd >= 0);
	CHECK_EQ(read(fd, b, 3), 3);
	CHECK(!strcmp(b, "abc"));
	close(fd);
	fd = open_regular_in_root((unsigned)getpid(), p);
	CHECK(fd >= 0);
	close(fd);
	unlink(l);
	unlink(p);
}

/* Our own executable mapping: through map_files as root, else through our root, checked. */
TEST(safeopen_mapped_object_is_the_file_mapped)
{
	char line[4096 + 128];
	FILE *f = fopen("/proc/self/maps", "r");
	bool found = false;

	CHECK(f != NULL);
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long start, end, ino;
		unsigned maj, min;
		char perms[8];
		int off = 0, fd;
		struct stat a, b;

		if (sscanf(line, "%lx-%lx %7s %*x %x:%x %lu %n", &start, &end, perms, &maj, &min,
			   &ino, &off) < 6 || !off || perms[2] != 'x' || !ino)
			continue;
		line[strcspn(line, "\n")] = 0;
		fd = open_mapped_object((unsigned)getpid(), start, end, makedev(maj, min), ino,
					line + off);
		CHECK(fd >= 0);
		if (fd < 0)
			break;
		CHECK_EQ(fstat(fd, &a), 0);
		CHECK_EQ(stat(line + off, &b), 0);
		CHECK(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
		close(fd);
		found = true;
		break;
	}
	if (f)
		fclose(f);
	CHECK(found);
	/* A mapping that is not there: an error, not a hang or a crash. */
	CHECK(open_mapped_object((unsigned)getpid(), 0x1000, 0x2000, makedev(0, 0), 1, "/x") < 0);
}


/* Which filesystems a search enters: local disk and memory ones only. */
TEST(procview_filesystem_types)
{
	static const char *const hang[] = { "fuse", "fuse.sshfs", "fuseblk", "nfs", "nfs4",
					    "cifs", "smb3", "9p", "ceph", "virtiofs", "afs",
					    "autofs", "proc", "sysfs", "debugfs", "" };
	static const char *const local[] = { "ext4", "xfs", "btrfs", "tmpfs", "devtmpfs",
					     "overlay", "squashfs", "vfat" };

	for (size_t i = 0; i < sizeof(hang) / sizeof(hang[0]); i++)
		CHECK(fs_type_may_hang(hang[i]));
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		CHECK(!fs_type_may_hang(local[i]));
}

/*
 * Our own view: files by path and by (directory, name); a FIFO, a device and a directory
 * refused; /proc (a filesystem no search enters) refused without a lookup in it; the budget.
 */
TEST(procview_own_view)
{
	char p[128], l[128];
	struct proc_view v;
	struct stat a, b;
	int fd;

	make_dir();
	snprintf(p, sizeof(p), "%s/lib.so", dir);
	snprintf(l, sizeof(l), "%s/lib.so.1", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(symlink("lib.so", l), 0);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	CHECK_EQ(mkfifo(p, 0600), 0);
	CHECK_EQ(proc_view_init(&v, (unsigned)getpid(), 1000, 0), 0);
	fd = proc_view_open(&v, dir, "lib.so.1");
	CHECK(fd >= 0);
	snprintf(p, sizeof(p), "%s/lib.so", dir);
	CHECK(fd >= 0 && fstat(fd, &a) == 0 && stat(p, &b) == 0 && a.st_ino == b.st_ino);
	if (fd >= 0)
		close(fd);
	snprintf(l, sizeof(l), "%s/lib.so.1", dir);
	fd = proc_view_open(&v, NULL, l);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ(proc_view_open(&v, dir, "fifo"), -EINVAL);
	CHECK_EQ(proc_view_open(&v, "/dev", "null"), -EINVAL);
	CHECK_EQ(proc_view_open(&v, dir, "nothing"), -ENOENT);
	CHECK_EQ(proc_view_open(&v, "/proc/self", "status"), -EREMOTE);
	CHECK_EQ(v.refused, 1);
	CHECK_CONTAINS(v.refused_what, "(proc)");
	CHECK_EQ(proc_view_open(&v, "/nonexistent-corobpf/x/y", "z"), -ENOENT);
	proc_view_release(&v);

	/* A budget of two lookups: the directory's one component, then nothing more. */
	CHECK_EQ(proc_view_init(&v, (unsigned)getpid(), 2, 0), 0);
	fd = proc_view_open(&v, "/tmp", "corobpf-no-such-file");
	CHECK_EQ(fd, -ENOENT);
	CHECK_EQ(proc_view_open(&v, "/tmp", "x"), -ECANCELED);
	CHECK(proc_view_spent(&v));
	proc_view_release(&v);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lib.so", dir);
	unlink(p);
	unlink(l);
}

/*
 * A chrooted process's view: an absolute symlink leads to the file in its root, not the
 * host's; ".." stops at its root. Needs root (chroot); skipped otherwise.
 */
TEST(procview_chroot_view)
{
	char jail[160], p[256];
	struct proc_view v;
	struct stat a, b;
	int ready[2], fd;
	pid_t child;
	char c;

	make_dir();
	snprintf(jail, sizeof(jail), "%s/jail", dir);
	snprintf(p, sizeof(p), "%s/lib", jail);
	CHECK(mkdir(jail, 0755) == 0 && mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/real", jail);
	CHECK(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/real/file", jail);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/lib/abs", jail);
	CHECK_EQ(symlink("/real/file", p), 0);
	snprintf(p, sizeof(p), "%s/lib/up", jail);
	CHECK_EQ(symlink("../../../../real/file", p), 0);
	CHECK_EQ(pipe(ready), 0);
	child = fork();
	if (child == 0) {
		close(ready[0]);
		if (chroot(jail) || chdir("/"))
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1) {
		fprintf(stderr, "  procview_chroot_view: skipped (chroot needs root)\n");
		goto out;
	}
	snprintf(p, sizeof(p), "%s/real/file", jail);
	CHECK_EQ(stat(p, &b), 0);
	CHECK_EQ(proc_view_init(&v, (unsigned)child, 1000, 0), 0);
	fd = proc_view_open(&v, "/lib", "abs");
	CHECK(fd >= 0 && fstat(fd, &a) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	if (fd >= 0)
		close(fd);
	fd = proc_view_open(&v, "/lib", "up");
	CHECK(fd >= 0 && fstat(fd, &a) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	if (fd >= 0)
		close(fd);
	/* Relative names from its current directory, its root. */
	fd = proc_view_open(&v, "real", "file");
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	/* The host's own /etc/hostname is not in its root. */
	CHECK_EQ(proc_view_open(&v, "/etc", "hostname"), -ENOENT);
	proc_view_release(&v);
out:
	close(ready[0]);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	snprintf(p, sizeof(p), "rm -rf '%s'", jail);
	if (system(p))
		fprintf(stderr, "  cannot remove %s\n", jail);
}

int main(void)
{
	RUN(safeopen_fifo_is_refused_without_blocking);
	RUN(safeopen_devices_and_directories_are_refused);
	RUN(safeopen_regular_file_reads);
	RUN(safeopen_mapped_object_is_the_file_mapped);
	RUN(procview_filesystem_types);
	RUN(procview_own_view);
	RUN(procview_chroot_view);
	rmdir(dir);
	return unit_done();
}

// SPDX-License-Identifier: MIT
/* safeopen: only regular files are opened, nothing blocks, a mapping opens as mapped. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
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

int main(void)
{
	RUN(safeopen_fifo_is_refused_without_blocking);
	RUN(safeopen_devices_and_directories_are_refused);
	RUN(safeopen_regular_file_reads);
	RUN(safeopen_mapped_object_is_the_file_mapped);
	rmdir(dir);
	return unit_done();
}

// SPDX-License-Identifier: MIT
/* The raw capture: round trip, and every way a file can be damaged. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>
#include "unit.h"
#include "stream.h"
#include "raw.h"

static char dir[] = "/tmp/corobpf-test-raw-XXXXXX";

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Write a capture of n create records in blocks of `per_block` records, then an end record. */
static void write_capture(const char *path, int n, int per_block, bool with_end)
{
	struct capture_info ci;
	u32 pids[2] = {100, 200};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char err[256];
	struct raw_writer *w;
	union rec_buf b;

	capture_info_init_live(&ci, pids, 2);
	w = raw_writer_open(fd, &ci, err, sizeof(err));
	for (int i = 0; i < n; i++) {
		raw_writer_append(w, mk_create(&b, 1, 1000 + i, 0, i + 1, 0));
		if ((i + 1) % per_block == 0)
			raw_writer_flush(w);
	}
	if (with_end) {
		hdr_fill(&b.hdr, sizeof(b.end), CORO_REC_END, 0, 5000, 0);
		b.end.reason = CORO_END_TARGETS_EXITED;
		raw_writer_append(w, &b.hdr);
	}
	CHECK_EQ(raw_writer_close(w), 0);
	close(fd);
	capture_info_free(&ci);
}

/* Read everything: returns records read; *status the final raw_reader_next value. */
static int read_all(const char *path, int *status, char *errout, size_t errlen)
{
	struct capture_info ci;
	char err[256];
	struct raw_reader *r = raw_reader_open(path, &ci, err, sizeof(err));
	const struct coro_event_hdr *h;
	int n = 0, ret;
	u64 expect_id = 1;

	if (!r) {
		snprintf(errout, errlen, "%s", err);
		*status = -2;
		return 0;
	}
	CHECK_EQ(ci.npids, 2);
	CHECK_EQ(ci.pids[1], 200);
	while ((ret = raw_reader_next(r, &h)) == 1) {
		if (h->kind == CORO_EV_CREATE) {
			/* Records come back intact and in order. */
			CHECK_EQ(((const struct coro_ev_create *)h)->id, expect_id);
			expect_id++;
		}
		n++;
	}
	*status = ret;
	snprintf(errout, errlen, "%s", ret < 0 ? raw_reader_error(r) : "");
	raw_reader_close(r);
	capture_info_free(&ci);
	return n;
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

TEST(roundtrip)
{
	char p[256], err[512];
	int st;

	path_of(p, sizeof(p), "ok.raw");
	write_capture(p, 1000, 100, true);
	CHECK_EQ(read_all(p, &st, err, sizeof(err)), 1001);
	CHECK_EQ(st, 0);
}

TEST(missing_end_record_is_an_error_after_the_data)
{
	char p[256], err[512];
	int st;

	path_of(p, sizeof(p), "noend.raw");
	write_capture(p, 300, 100, false);
	CHECK_EQ(read_all(p, &st, err, sizeof(err)), 300);
	CHECK_EQ(st, -1);
	CHECK_CONTAINS(err, "without its end record");
}

TEST(truncated_block_keeps_the_blocks_before)
{
	char p[256], err[512];
	int st;

	path_of(p, sizeof(p), "trunc.raw");
	write_capture(p, 300, 100, true);
	/* Drop the end record's block (16 + 40 bytes) and 20 bytes of the third: 200 remain. */
	CHECK_EQ(truncate(p, file_size(p) - 56 - 20), 0);
	CHECK_EQ(read_all(p, &st, err, sizeof(err)), 200);
	CHECK_EQ(st, -1);
	CHECK_CONTAINS(err, "truncated block");
	CHECK_CONTAINS(err, "after 200 records");
	/* Cut inside a block header. */
	write_capture(p, 300, 100, true);
	{
		/* Header 208 + 2 pids = 216; one block = 16 + 100 * 48. */
		off_t second_block = 216 + 16 + 100 * 48;

		CHECK_EQ(truncate(p, second_block + 5), 0);
	}
	CHECK_EQ(read_all(p, &st, err, sizeof(err)), 100);
	CHECK_CONTAINS(err, "truncated block header");
}

TEST(flipped_byte_is_caught_by_the_checksum)
{
	char p[256], err[512];
	int st, fd;
	char c;

	path_of(p, sizeof(p), "flip.raw");
	write_capture(p, 300, 100, true);
	fd = open(p, O_RDWR);
	/* A byte inside the second block's records. */
	CHECK_EQ(pread(fd, &c, 1, 216 + 16 + 100 * 48 + 16 + 77), 1);
	c ^= 0x40;
	CHECK_EQ(pwrite(fd, &c, 1, 216 + 16 + 100 * 48 + 16 + 77), 1);
	close(fd);
	CHECK_EQ(read_all(p, &st, err, sizeof(err)), 100);
	CHECK_CONTAINS(err, "checksum");
	CHECK_CONTAINS(err, "at byte 5032"); /* where the damaged block starts */
}

TEST(bad_record_inside_a_valid_block)
{
	char p[256], err[512];
	int fd, st;
	struct capture_info ci;
	u32 pid = 100;
	struct raw_writer *w;
	union rec_buf b;

	path_of(p, sizeof(p), "badrec.raw");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	capture_info_init_live(&ci, &pid, 1);
	ci.npids = 2; /* read_all checks two pids */
	{
		u32 two[2] = {100, 200};

		ci.pids = realloc(ci.pids, sizeof(two));
		memcpy(ci.pids, two, sizeof(two));
	}
	w = raw_writer_open(fd, &ci, err, sizeof(err));
	raw_writer_append(w, mk_create(&b, 1, 1, 0, 1, 0));
	mk_create(&b, 1, 2, 0, 2, 0);
	b.hdr.size = 24; /* shorter than a header: the block and its CRC are fine, the record is not */
	raw_writer_append(w, &b.hdr);
	raw_writer_close(w);
	close(fd);
	capture_info_free(&ci);
	CHECK_EQ(read_all(p, &st, err, sizeof(err)), 1);
	CHECK_CONTAINS(err, "corrupt record");
}

TEST(other_version_and_other_files_are_refused)
{
	char p[256], err[512];
	int st, fd;
	u32 v = 99;

	path_of(p, sizeof(p), "v99.raw");
	write_capture(p, 10, 100, true);
	fd = open(p, O_RDWR);
	CHECK_EQ(pwrite(fd, &v, 4, 8), 4);
	close(fd);
	read_all(p, &st, err, sizeof(err));
	CHECK_EQ(st, -2);
	CHECK_CONTAINS(err, "version 99");
	path_of(p, sizeof(p), "text.raw");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ(write(fd, "{\"type\":\"header\"}\n", 18), 18);
	close(fd);
	read_all(p, &st, err, sizeof(err));
	CHECK_EQ(st, -2);
	CHECK_CONTAINS(err, "not a corobpf raw capture");
	path_of(p, sizeof(p), "missing.raw");
	read_all(p, &st, err, sizeof(err));
	CHECK_CONTAINS(err, "No such file");
}

TEST(record_validation)
{
	union rec_buf b;
	const char *why = NULL;

	mk_create(&b, 1, 1, 0, 1, 0);
	CHECK(coro_record_valid(&b.hdr, sizeof(b.create), &why));
	CHECK(!coro_record_valid(&b.hdr, sizeof(b.create) - 8, &why)); /* runs past */
	b.hdr.size = sizeof(struct coro_event_hdr);
	CHECK(!coro_record_valid(&b.hdr, 512, &why)); /* shorter than a create */
	b.hdr.size = sizeof(b.create);
	b.hdr.kind = 0;
	CHECK(!coro_record_valid(&b.hdr, 512, &why));
	/* A process record whose exe has no terminating NUL within the record. */
	mk_process(&b, 1, CORO_PROC_LAUNCHED);
	memset(((struct coro_rec_process *)b.raw)->exe, 'x', b.hdr.size - sizeof(struct coro_rec_process));
	CHECK(!coro_record_valid(&b.hdr, 512, &why));
	CHECK_CONTAINS(why, "not terminated");
}

TEST(write_error_stops_writing_and_keeps_what_came_before)
{
	char p[256], err[512];
	struct capture_info ci;
	u32 pids[2] = {100, 200};
	struct rlimit old, small = {.rlim_cur = 300 * 1024, .rlim_max = RLIM_INFINITY};
	struct raw_writer *w;
	union rec_buf b;
	struct stat sb;
	int fd, st, ret, n;

	path_of(p, sizeof(p), "efbig.raw");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	capture_info_init_live(&ci, pids, 2);
	w = raw_writer_open(fd, &ci, err, sizeof(err));
	CHECK(w != NULL);
	/* The file may not grow past 300 KiB: one 256 KiB block fits, the second does not. */
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	small.rlim_max = old.rlim_max;
	setrlimit(RLIMIT_FSIZE, &small);
	for (int i = 0; i < 20000; i++)
		raw_writer_append(w, mk_create(&b, 1, 1000 + i, 0, i + 1, 0));
	ret = raw_writer_close(w);
	setrlimit(RLIMIT_FSIZE, &old);
	close(fd);
	capture_info_free(&ci);
	CHECK_EQ(ret, -EFBIG);
	/* The piece of the second block was cut off: the file ends after the first. */
	CHECK_EQ(stat(p, &sb), 0);
	CHECK(sb.st_size > 256 * 1024 && sb.st_size < 257 * 1024);
	/* It reads back as a capture cut short at a block boundary: every record of block one. */
	n = read_all(p, &st, err, sizeof(err));
	CHECK_EQ(st, -1);
	CHECK(n > 1000 && n < 20000);
	CHECK_CONTAINS(err, "ends without its end record");
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(roundtrip);
	RUN(missing_end_record_is_an_error_after_the_data);
	RUN(truncated_block_keeps_the_blocks_before);
	RUN(flipped_byte_is_caught_by_the_checksum);
	RUN(bad_record_inside_a_valid_block);
	RUN(other_version_and_other_files_are_refused);
	RUN(record_validation);
	RUN(write_error_stops_writing_and_keeps_what_came_before);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			return 1;
	}
	return unit_done();
}

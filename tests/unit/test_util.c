// SPDX-License-Identifier: MIT
/*
 * The hand-made fast paths of util: the carry-less-multiply CRC-32 against
 * zlib's, and the in-place number formatting against printf, over every
 * length and alignment around their internal steps and random values. And
 * output files against what another user can do in their directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>
#include "unit.h"
#include "util.h"

static u64 rnd_state = 0x9e3779b97f4a7c15ULL;

static u64 rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

TEST(crc32_matches_zlib)
{
	static u8 buf[70000];
	int bad = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (u8)rnd();
	/* Every length through the 64-byte and 16-byte folds and the tail, at several alignments. */
	for (size_t len = 0; len < 1100; len++)
		for (size_t off = 0; off < 16; off += 3)
			for (int seed = 0; seed < 2; seed++) {
				u32 c = seed ? 0xdeadbeef : 0;

				if (crc32_buf(c, buf + off, len) != (u32)crc32(c, buf + off, len))
					bad++;
			}
	CHECK_EQ(bad, 0);
	CHECK_EQ(crc32_buf(0, buf, sizeof(buf)), (u32)crc32(0, buf, sizeof(buf)));
	/* A known value: the CRC-32 check string. */
	CHECK_EQ(crc32_buf(0, "123456789", 9), 0xcbf43926);
	memset(buf, 0, 256);
	CHECK_EQ(crc32_buf(0, buf, 256), (u32)crc32(0, buf, 256));
}

TEST(numbers_format_like_printf)
{
	static const u64 edges[] = {0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 12345,
				    9999999999999999999ULL, 10000000000000000000ULL, ~0ULL,
				    1ULL << 63, (1ULL << 63) - 1, 0xf, 0x10, 0xffffffff};
	char got[32], want[32];
	int bad = 0;

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]) + 200000; i++) {
		u64 v = i < sizeof(edges) / sizeof(edges[0]) ? edges[i] : rnd() >> (rnd() & 63);

		*fmt_u64(got, v) = 0;
		snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
		bad += strcmp(got, want) != 0;
		*fmt_hex(got, v) = 0;
		snprintf(want, sizeof(want), "0x%llx", (unsigned long long)v);
		bad += strcmp(got, want) != 0;
	}
	CHECK_EQ(bad, 0);
	/* Every power of ten and its neighbours: where the digit count changes. */
	for (u64 p = 1; p <= 1000000000000000000ULL; p *= 10)
		for (u64 v = p - 1; v <= p + 1; v++) {
			*fmt_u64(got, v) = 0;
			snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
			CHECK_STR(got, want);
		}
}

/* A scratch directory; paths in it by printf format. */
static char scratch[64];

static const char *at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *at(const char *fmt, ...)
{
	static char bufs[4][512];
	static int next;
	char *b = bufs[next++ % 4], name[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	snprintf(b, sizeof(bufs[0]), "%s/%s", scratch, name);
	return b;
}

static void scratch_make(void)
{
	snprintf(scratch, sizeof(scratch), "/tmp/corobpf-test-util-XXXXXX");
	if (!mkdtemp(scratch))
		abort();
}

static void scratch_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", scratch);
	CHECK_EQ(system(cmd), 0);
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static bool has(const char *path, const char *text)
{
	char *got = unit_slurp(path);
	bool ok = got && !strcmp(got, text);

	free(got);
	return ok;
}

TEST(outfile_keeps_what_appeared_at_its_name)
{
	char tmp[600], err[1024];
	struct outfile f;
	struct stat st;

	scratch_make();
	/* A file appears at the name during the run: not replaced; the trace stays as the temp. */
	CHECK_EQ(outfile_open(&f, at("a.jsonl"), false, err, sizeof(err)), 0);
	snprintf(tmp, sizeof(tmp), "%s", f.tmp_path);
	CHECK(write(f.fd, "trace", 5) == 5);
	put(at("a.jsonl"), "theirs");
	CHECK_EQ(outfile_commit(&f, err, sizeof(err)), -EEXIST);
	CHECK_CONTAINS(err, "appeared during the run; the finished trace is kept as");
	CHECK_CONTAINS(err, tmp);
	CHECK(has(at("a.jsonl"), "theirs"));
	CHECK(has(tmp, "trace"));
	/* A directory appears: kept as well, --force or not. */
	for (int force = 0; force < 2; force++) {
		CHECK_EQ(outfile_open(&f, at("d%d.db", force), force, err, sizeof(err)), 0);
		snprintf(tmp, sizeof(tmp), "%s", f.tmp_path);
		CHECK(write(f.fd, "db", 2) == 2);
		CHECK_EQ(mkdir(at("d%d.db", force), 0755), 0);
		CHECK(outfile_commit(&f, err, sizeof(err)) < 0);
		CHECK_CONTAINS(err, tmp);
		CHECK(has(tmp, "db"));
		CHECK(stat(at("d%d.db", force), &st) == 0 && S_ISDIR(st.st_mode));
	}
	/* --force replaces a file that appeared. */
	CHECK_EQ(outfile_open(&f, at("b.jsonl"), true, err, sizeof(err)), 0);
	CHECK(write(f.fd, "mine", 4) == 4);
	put(at("b.jsonl"), "theirs");
	CHECK_EQ(outfile_commit(&f, err, sizeof(err)), 0);
	CHECK(has(at("b.jsonl"), "mine"));
	/* Made 0600 by root: traces hold other users' data. */
	CHECK(stat(at("b.jsonl"), &st) == 0);
	if (geteuid() == 0)
		CHECK_EQ(st.st_mode & 0777, 0600);
	scratch_remove();
}

TEST(outfile_stays_in_the_directory_it_opened)
{
	char err[1024], moved[600], elsewhere[600];
	struct outfile f;

	scratch_make();
	CHECK_EQ(mkdir(at("d"), 0755), 0);
	CHECK_EQ(mkdir(at("elsewhere"), 0755), 0);
	CHECK_EQ(outfile_open(&f, at("d/x.jsonl"), false, err, sizeof(err)), 0);
	CHECK(write(f.fd, "x", 1) == 1);
	/* The directory is renamed and a symlink to another put at its path. */
	snprintf(moved, sizeof(moved), "%s", at("moved"));
	snprintf(elsewhere, sizeof(elsewhere), "%s", at("elsewhere"));
	CHECK_EQ(rename(at("d"), moved), 0);
	CHECK_EQ(symlink(elsewhere, at("d")), 0);
	CHECK_EQ(outfile_commit(&f, err, sizeof(err)), 0);
	CHECK(has(at("moved/x.jsonl"), "x"));
	CHECK(access(at("elsewhere/x.jsonl"), F_OK) < 0);
	/* The temporary file replaced by a symlink: refused, nothing written through it. */
	CHECK_EQ(outfile_open(&f, at("moved/y.jsonl"), false, err, sizeof(err)), 0);
	CHECK(write(f.fd, "y", 1) == 1);
	CHECK_EQ(unlink(f.tmp_path), 0);
	CHECK_EQ(symlink(at("elsewhere/victim"), f.tmp_path), 0);
	CHECK(outfile_commit(&f, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "replaced or removed during the run");
	CHECK(access(at("elsewhere/victim"), F_OK) < 0);
	CHECK(access(at("moved/y.jsonl"), F_OK) < 0);
	/* Abort leaves what is not its own. */
	CHECK_EQ(outfile_open(&f, at("moved/z.jsonl"), false, err, sizeof(err)), 0);
	CHECK_EQ(unlink(f.tmp_path), 0);
	put(f.tmp_path, "theirs");
	snprintf(moved, sizeof(moved), "%s", f.tmp_path);
	outfile_abort(&f);
	CHECK(has(moved, "theirs"));
	/* A path naming a directory, or in none. */
	CHECK(outfile_open(&f, at("moved/"), true, err, sizeof(err)) < 0);
	CHECK(outfile_open(&f, at("moved"), true, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "is a directory");
	CHECK(outfile_open(&f, at("nodir/x.jsonl"), true, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "cannot create");
	scratch_remove();
}

TEST(outfile_same_sees_through_spellings)
{
	struct stat st;
	char a[600], b[600];

	scratch_make();
	CHECK_EQ(mkdir(at("d"), 0755), 0);
	CHECK_EQ(symlink(at("d"), at("link")), 0);
	snprintf(a, sizeof(a), "%s", at("d/x.jsonl"));
	CHECK(outfile_same(a, a));
	CHECK(outfile_same(a, at("d/./x.jsonl")));
	CHECK(outfile_same(a, at("d/../d/x.jsonl")));
	CHECK(outfile_same(a, at("link/x.jsonl")));
	CHECK(!outfile_same(a, at("d/y.jsonl")));
	CHECK(!outfile_same(a, at("nodir/x.jsonl")));
	/* Relative to the working directory. */
	CHECK_EQ(chdir(scratch), 0);
	CHECK(outfile_same(a, "d/x.jsonl"));
	CHECK(outfile_same("link/x.jsonl", "./d/x.jsonl"));
	CHECK_EQ(chdir("/"), 0);
	/* Two names of one existing file. */
	put(a, "x");
	CHECK_EQ(link(a, at("d/hard.jsonl")), 0);
	CHECK(outfile_same(a, at("d/hard.jsonl")));
	/* The input under its own name, a hard link, or a symlink to it. */
	CHECK_EQ(symlink("x.jsonl", at("d/soft.jsonl")), 0);
	CHECK_EQ(stat(a, &st), 0);
	CHECK(outfile_is_input(a, &st));
	CHECK(outfile_is_input(at("link/x.jsonl"), &st));
	CHECK(outfile_is_input(at("d/hard.jsonl"), &st));
	CHECK(outfile_is_input(at("d/soft.jsonl"), &st));
	CHECK(!outfile_is_input(at("d/other.jsonl"), &st));
	snprintf(b, sizeof(b), "%s", at("d/soft.jsonl"));
	CHECK_EQ(stat(b, &st), 0); /* through the link, as a reader opens it */
	CHECK(outfile_is_input(a, &st));
	scratch_remove();
}

TEST(input_open_takes_regular_files_only)
{
	char err[512];
	int fd;

	scratch_make();
	put(at("cap.raw"), "data");
	fd = input_open(at("cap.raw"), err, sizeof(err));
	CHECK(fd >= 0);
	CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
	if (fd >= 0)
		close(fd);
	/* A FIFO without a writer: refused at once, not waited on. */
	CHECK_EQ(mkfifo(at("fifo"), 0600), 0);
	CHECK_EQ(input_open(at("fifo"), err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "is not a regular file (a FIFO)");
	CHECK_EQ(input_open(scratch, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "(a directory)");
	CHECK_EQ(input_open("/dev/null", err, sizeof(err)), -EINVAL);
	CHECK_EQ(input_open(at("none"), err, sizeof(err)), -ENOENT);
	CHECK_CONTAINS(err, "cannot open");
	scratch_remove();
}

int main(void)
{
	RUN(crc32_matches_zlib);
	RUN(numbers_format_like_printf);
	RUN(outfile_keeps_what_appeared_at_its_name);
	RUN(outfile_stays_in_the_directory_it_opened);
	RUN(outfile_same_sees_through_spellings);
	RUN(input_open_takes_regular_files_only);
	return unit_done();
}

// SPDX-License-Identifier: MIT
/*
 * badstr: string arguments a buggy or hostile program gives the string probes,
 * and strings in pages nobody has touched yet. Tracing must never crash it: a
 * bad pointer is an empty, unreadable string (counted), a good one in an
 * untouched page is read exactly.
 *
 * Each name probe has its own coroutine (create, name, exit), ids from 0xb1.
 * Then spans on the thread: an empty name, a bad pointer, an untouched page.
 *
 * Ground truth (COROBPF_TRUTH): one JSON line per string probe fired,
 *   {"probe": "name"|"span_begin"|"span_end", "id": "0xb1", "case": "...",
 *    "want": "text" or null (must be a string fault), "truncated": bool,
 *    "premise": bool}
 * and {"done": true} last. "premise" is false when a page that had to be
 * absent from the page tables (checked in /proc/self/pagemap, which faults
 * nothing in) was present after all: the case then proves nothing.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "corobpf.h"

#define PAGE 4096UL

/*
 * Literals in .rodata pages of their own, which nothing reads. Nothing but
 * corobpf: when it faults one in, the kernel may map pages around it too
 * (fault-around, a large folio of the file), so each case drops the pages of
 * its literal from the page tables again first (untouched()).
 */
#define UNTOUCHED(var, off, text)                                                                  \
	static const struct {                                                                      \
		char pad[off];                                                                     \
		char s[sizeof(text)];                                                              \
		char rest[3 * PAGE - (off) - sizeof(text)];                                        \
	} var __attribute__((aligned(PAGE))) = {{0}, text, {0}}

UNTOUCHED(rodata_name, 64, "rodata-literal");
/* 100 characters starting 20 bytes before a page boundary: two untouched pages. */
UNTOUCHED(rodata_long, PAGE - 20,
	  "long-literal-0123456789012345678901234567890123456789012345678901234567890123456789012345"
	  "678");
UNTOUCHED(rodata_span, 64, "rodata-span");

static FILE *truth;
static int pagemap_fd = -1;

/* Whether the page holding p is in this process's page tables (pagemap bit 63). */
static int page_present(const void *p)
{
	uint64_t e = 0;
	off_t off = (off_t)((uintptr_t)p / PAGE) * 8;

	if (pagemap_fd < 0 || pread(pagemap_fd, &e, sizeof(e), off) != sizeof(e))
		return -1;
	return (int)(e >> 63);
}

/*
 * Drop the pages of [p, p + len) from the page tables (a private file mapping:
 * the next read faults them in again from the page cache). Whether they are
 * all out now: the case's premise.
 */
static int untouched(const void *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p & ~(PAGE - 1);
	uintptr_t hi = ((uintptr_t)p + len + PAGE - 1) & ~(PAGE - 1);

	madvise((void *)lo, hi - lo, MADV_DONTNEED);
	for (uintptr_t a = lo; a < hi; a += PAGE)
		if (page_present((const void *)a) != 0)
			return 0;
	return 1;
}

static void json_str(const char *s)
{
	if (!s) {
		fputs("null", truth);
		return;
	}
	fputc('"', truth);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', truth);
		fputc(*s, truth);
	}
	fputc('"', truth);
}

static void record(const char *probe, unsigned long id, const char *what, const char *want,
		   int truncated, int premise)
{
	if (!truth)
		return;
	fprintf(truth, "{\"probe\":\"%s\",\"id\":\"0x%lx\",\"case\":\"%s\",\"want\":", probe, id,
		what);
	json_str(want);
	fprintf(truth, ",\"truncated\":%s,\"premise\":%s}\n", truncated ? "true" : "false",
		premise ? "true" : "false");
}

/* One coroutine named by `str`; `want`: what corobpf must read (NULL: a string fault). */
static void name_case(unsigned long id, const char *what, const char *str, const char *want,
		      int truncated, int premise)
{
	CORO_PROBE(create, id, 0);
	CORO_PROBE(name, id, str);
	CORO_PROBE(exit, id, 0);
	record("name", id, what, want, truncated, premise);
}

static void span_case(const char *what, const char *str, const char *want, int premise)
{
	CORO_PROBE(span_begin, str);
	CORO_PROBE(span_end, str);
	record("span_begin", 0, what, want, 0, premise);
	record("span_end", 0, what, want, 0, premise);
}

/*
 * A string laid across the boundary of two pages of a shared memory file:
 * `before` bytes in the first page (in the page tables), the rest in the
 * second (dropped from them, still in the file). Returns the string.
 */
static char *memfd_pages;

static const char *across(const char *s, size_t before, int *premise)
{
	memset(memfd_pages, 'z', 2 * PAGE);
	memcpy(memfd_pages + PAGE - before, s, strlen(s) + 1);
	madvise(memfd_pages + PAGE, PAGE, MADV_DONTNEED);
	*premise = page_present(memfd_pages) == 1 && page_present(memfd_pages + PAGE) == 0;
	return memfd_pages + PAGE - before;
}

int main(void)
{
	const char *path = getenv("COROBPF_TRUTH");
	char *one_page, *hole, *noaccess, *edge;
	char big[300];
	char s63[64], s70[71];
	const char *p;
	int memfd, premise;

	truth = path ? fopen(path, "w") : NULL;
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	/* Pointers to nothing. */
	name_case(0xb1, "one", (const char *)1, NULL, 0, 1);
	hole = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole == MAP_FAILED)
		return 2;
	strcpy(hole, "unmapped");
	munmap(hole, PAGE);
	name_case(0xb2, "unmapped", hole, NULL, 0, 1);
	name_case(0xb3, "kernel", (const char *)0xffff888000000000UL, NULL, 0, 1);
	noaccess = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (noaccess == MAP_FAILED)
		return 2;
	name_case(0xb4, "prot_none", noaccess, NULL, 0, 1);
	name_case(0xb5, "null", NULL, NULL, 0, 1);

	/* The last bytes of a mapping, an unmapped page after it (no mmap in between). */
	one_page = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (one_page == MAP_FAILED)
		return 2;
	munmap(one_page + PAGE, PAGE);
	edge = one_page + PAGE - 5;
	memcpy(edge, "edge", 5);
	name_case(0xb6, "edge", edge, "edge", 0, 1);
	memcpy(edge, "abcde", 5); /* no NUL before the hole */
	name_case(0xb7, "edge_unterminated", edge, NULL, 0, 1);

	/* Literals in .rodata pages out of the page tables. */
	premise = untouched(rodata_name.s, sizeof(rodata_name.s));
	name_case(0xb8, "rodata", rodata_name.s, "rodata-literal", 0, premise);
	premise = untouched(rodata_long.s, sizeof(rodata_long.s));
	name_case(0xb9, "rodata_long", rodata_long.s,
		  "long-literal-01234567890123456789012345678901234567890123456789", 1, premise);

	/* Present first page, the rest of the string in a page out of the page tables. */
	memfd = memfd_create("badstr", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, 2 * PAGE) < 0)
		return 2;
	memfd_pages = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (memfd_pages == MAP_FAILED)
		return 2;
	p = across("cross-the-page", 6, &premise);
	name_case(0xba, "cross", p, "cross-the-page", 0, premise);
	/* 70 characters: the 64th, which says "truncated", alone in the second page. */
	memset(s70, 'T', 70);
	s70[70] = 0;
	p = across(s70, 63, &premise);
	s70[63] = 0;
	name_case(0xbb, "truncated_at_edge", p, s70, 1, premise);
	/* Exactly 63 characters: the NUL alone in the second page. */
	memset(s63, 'E', 63);
	s63[63] = 0;
	p = across(s63, 63, &premise);
	name_case(0xbc, "exact63_at_edge", p, s63, 0, premise);

	/* A long string in a stack buffer. */
	memset(big, 'L', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memset(s63, 'L', 63);
	name_case(0xbd, "long_stack", big, s63, 1, 1);

	/* Spans: an empty name, a bad pointer, a literal in an untouched page. */
	span_case("empty", "", "", 1);
	span_case("bad", (const char *)1, NULL, 1);
	premise = untouched(rodata_span.s, sizeof(rodata_span.s));
	span_case("rodata", rodata_span.s, "rodata-span", premise);

	if (truth) {
		fputs("{\"done\":true}\n", truth);
		fclose(truth);
	}
	return 0;
}

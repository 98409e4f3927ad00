/* SPDX-License-Identifier: MIT */
/*
 * A minimal unit test harness: TEST(name) defines a test, RUN(name) runs it,
 * CHECK*() record failures without stopping the test, and unit_done()
 * prints the tally and gives main's exit code.
 *
 *     TEST(model_reuse) { CHECK_EQ(1, 1); }
 *     int main(void) { RUN(model_reuse); return unit_done(); }
 *
 * `UNIT_FILTER=substr` runs only the tests whose name contains substr.
 */
#ifndef COROBPF_UNIT_H
#define COROBPF_UNIT_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed_checks;
static int unit_tests_run, unit_tests_failed;
static const char *unit_current;

#define TEST(name) static void test_##name(void)

#define RUN(name)                                                                            \
	do {                                                                                 \
		const char *__f = getenv("UNIT_FILTER");                                     \
		int __before = unit_failed_checks;                                           \
		if (__f && !strstr(#name, __f))                                              \
			break;                                                               \
		unit_current = #name;                                                        \
		unit_tests_run++;                                                            \
		test_##name();                                                               \
		if (unit_failed_checks != __before) {                                        \
			unit_tests_failed++;                                                 \
			fprintf(stderr, "FAIL %s\n", #name);                                 \
		}                                                                            \
	} while (0)

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			unit_failed_checks++;                                                \
			fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__,  \
				unit_current, #cond);                                        \
		}                                                                            \
	} while (0)

#define CHECK_EQ(a, b)                                                                       \
	do {                                                                                 \
		long long __a = (long long)(a), __b = (long long)(b);                        \
		if (__a != __b) {                                                            \
			unit_failed_checks++;                                                \
			fprintf(stderr, "%s:%d: %s: %s == %s failed: %lld != %lld\n",          \
				__FILE__, __LINE__, unit_current, #a, #b, __a, __b);         \
		}                                                                            \
	} while (0)

#define CHECK_STR(a, b)                                                                      \
	do {                                                                                 \
		const char *__a = (a), *__b = (b);                                           \
		if (!__a || !__b || strcmp(__a, __b) != 0) {                                 \
			unit_failed_checks++;                                                \
			fprintf(stderr, "%s:%d: %s: %s == %s failed: \"%s\" != \"%s\"\n",      \
				__FILE__, __LINE__, unit_current, #a, #b, __a ? __a : "(null)", \
				__b ? __b : "(null)");                                       \
		}                                                                            \
	} while (0)

/* Substring check, for output produced by writers under test. */
#define CHECK_CONTAINS(hay, needle)                                                          \
	do {                                                                                 \
		const char *__h = (hay), *__n = (needle);                                    \
		if (!__h || !strstr(__h, __n)) {                                             \
			unit_failed_checks++;                                                \
			fprintf(stderr, "%s:%d: %s: expected to find \"%s\" in:\n%s\n",        \
				__FILE__, __LINE__, unit_current, __n, __h ? __h : "(null)");  \
		}                                                                            \
	} while (0)

/* The whole file as a NUL-terminated string (free it), or NULL if unreadable. */
static inline char *unit_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = calloc(1, n + 1);
		if (buf && fread(buf, 1, n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

static inline int unit_done_(const char *file)
{
	fprintf(stderr, "%s: %d tests, %d failed\n", file, unit_tests_run, unit_tests_failed);
	return unit_tests_failed ? 1 : 0;
}
#define unit_done() unit_done_(__FILE__)

#endif /* COROBPF_UNIT_H */

// SPDX-License-Identifier: MIT
/*
 * usdt_matrix: every corobpf probe once per way of passing its arguments, with the values
 * a tracer must decode printed beforehand, so a test can compare the two exactly.
 *
 *     usdt_matrix_c_O0 [--wait]
 *
 * Variants, in this order, each firing create, name, ready, switch, exit, span_begin,
 * span_end (ABI order): 28 probes in all, on the main thread.
 *   tls     thread-local variables (gcc would describe these as %fs:var@tpoff with the
 *           generic sdt.h constraint; corobpf.h must load them into registers)
 *   global  globals (RIP-relative, or through the GOT in a shared library)
 *   expr    expressions of values derived from argc, so no compiler can fold them
 *   const   literals (immediates)
 * Ids have the high bit set and statuses are negative, to catch sign and width bugs.
 *
 * Output: one JSON object per probe on stdout, before the probe fires:
 *   {"seq":0,"variant":"tls","probe":"create","id":"0xdeadbeefcafef00d","parent":"0x..."}
 * Fields are the probe's arguments as named in usdt/corobpf.h: ids and obj as lowercase hex
 * strings, reason and status as signed decimals, strings as JSON strings. The string probes
 * (name, span_begin, span_end) fire only while a tracer is attached (see CORO_PROBE_ENABLED);
 * their lines are printed either way.
 *
 * --wait: print "READY <pid>", then block until SIGUSR1 (as the scenarios program does).
 *
 * Built as C (-O0, -O2), as C++ (-O0, -O2), with clang (-O2), and with -DMATRIX_LIB into a
 * shared library whose matrix_fire() the -DMATRIX_MAIN executable calls (usdt_matrix_so).
 * The source stays valid C and C++.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "corobpf.h"

#ifdef __cplusplus
extern "C" {
#endif
void matrix_fire(int argc);
#ifdef __cplusplus
}
#endif

#ifndef MATRIX_MAIN

#define ID_TOP 0xdeadbeefcafef00dull	/* high bit set */

/* volatile: read from memory at the probe, never folded into an immediate. */
static __thread volatile uint64_t tls_id, tls_parent, tls_obj, tls_from, tls_to;
static __thread volatile int tls_reason, tls_status;
static __thread char tls_str[32];

volatile uint64_t matrix_global_id, matrix_global_parent, matrix_global_obj,
	matrix_global_from, matrix_global_to;
volatile int matrix_global_reason, matrix_global_status;
char matrix_global_str[32];

static int seq;

static void head(const char *variant, const char *probe)
{
	printf("{\"seq\":%d,\"variant\":\"%s\",\"probe\":\"%s\"", seq++, variant, probe);
}

/* The strings below need no JSON escaping. */
static void print_create(const char *v, uint64_t id, uint64_t parent)
{
	head(v, "create");
	printf(",\"id\":\"0x%llx\",\"parent\":\"0x%llx\"}\n", (unsigned long long)id,
	       (unsigned long long)parent);
}

static void print_name(const char *v, uint64_t id, const char *str)
{
	head(v, "name");
	printf(",\"id\":\"0x%llx\",\"str\":\"%s\"}\n", (unsigned long long)id, str);
}

static void print_ready(const char *v, uint64_t id)
{
	head(v, "ready");
	printf(",\"id\":\"0x%llx\"}\n", (unsigned long long)id);
}

static void print_switch(const char *v, uint64_t from, uint64_t to, int reason, uint64_t obj)
{
	head(v, "switch");
	printf(",\"from\":\"0x%llx\",\"to\":\"0x%llx\",\"reason\":%d,\"obj\":\"0x%llx\"}\n",
	       (unsigned long long)from, (unsigned long long)to, reason, (unsigned long long)obj);
}

static void print_exit(const char *v, uint64_t id, int status)
{
	head(v, "exit");
	printf(",\"id\":\"0x%llx\",\"status\":%d}\n", (unsigned long long)id, status);
}

static void print_span(const char *v, const char *probe, const char *str)
{
	head(v, probe);
	printf(",\"str\":\"%s\"}\n", str);
}

static void fire_tls(int argc)
{
	const char *v = "tls";

	tls_id = ID_TOP + (uint64_t)argc;
	tls_parent = 0x8000000000000001ull;
	tls_obj = 0xffff888812345678ull;
	tls_from = 0xfffffffffffffffeull;
	tls_to = ID_TOP;
	tls_reason = CORO_WAIT;
	tls_status = -5;	/* -EIO */
	snprintf(tls_str, sizeof(tls_str), "tls-name-%d", argc);

	print_create(v, tls_id, tls_parent);
	fflush(stdout);
	CORO_PROBE(create, tls_id, tls_parent);
	print_name(v, tls_id, tls_str);
	fflush(stdout);
	CORO_PROBE(name, tls_id, tls_str);
	print_ready(v, tls_id);
	fflush(stdout);
	CORO_PROBE(ready, tls_id);
	print_switch(v, tls_from, tls_to, tls_reason, tls_obj);
	fflush(stdout);
	CORO_PROBE(switch, tls_from, tls_to, tls_reason, tls_obj);
	print_exit(v, tls_id, tls_status);
	fflush(stdout);
	CORO_PROBE(exit, tls_id, tls_status);
	print_span(v, "span_begin", tls_str);
	fflush(stdout);
	CORO_PROBE(span_begin, tls_str);
	print_span(v, "span_end", tls_str);
	fflush(stdout);
	CORO_PROBE(span_end, tls_str);
}

static void fire_global(int argc)
{
	const char *v = "global";

	matrix_global_id = 0xc000000000000000ull | (uint64_t)argc;
	matrix_global_parent = ID_TOP;
	matrix_global_obj = 0x00007fff00001000ull;
	matrix_global_from = ID_TOP;
	matrix_global_to = 0x8000000000000000ull;
	matrix_global_reason = CORO_SLEEP;
	matrix_global_status = -125;	/* -ECANCELED */
	snprintf(matrix_global_str, sizeof(matrix_global_str), "global-span-%d", argc);

	print_create(v, matrix_global_id, matrix_global_parent);
	fflush(stdout);
	CORO_PROBE(create, matrix_global_id, matrix_global_parent);
	print_name(v, matrix_global_id, matrix_global_str);
	fflush(stdout);
	CORO_PROBE(name, matrix_global_id, matrix_global_str);
	print_ready(v, matrix_global_id);
	fflush(stdout);
	CORO_PROBE(ready, matrix_global_id);
	print_switch(v, matrix_global_from, matrix_global_to, matrix_global_reason,
		     matrix_global_obj);
	fflush(stdout);
	CORO_PROBE(switch, matrix_global_from, matrix_global_to, matrix_global_reason,
		   matrix_global_obj);
	print_exit(v, matrix_global_id, matrix_global_status);
	fflush(stdout);
	CORO_PROBE(exit, matrix_global_id, matrix_global_status);
	print_span(v, "span_begin", matrix_global_str);
	fflush(stdout);
	CORO_PROBE(span_begin, matrix_global_str);
	print_span(v, "span_end", matrix_global_str);
	fflush(stdout);
	CORO_PROBE(span_end, matrix_global_str);
}

static void fire_expr(int argc)
{
	const char *v = "expr";
	/* Unknown to the compiler: the probes get computed registers. */
	uint64_t x = (uint64_t)argc + 0x4000000000000000ull;
	int e = argc + 21;
	char buf[32];

	snprintf(buf, sizeof(buf), "expr-%d", argc * 7);

	print_create(v, x * 3 + 1, ~x);
	fflush(stdout);
	CORO_PROBE(create, x * 3 + 1, ~x);
	print_name(v, x ^ ID_TOP, buf);
	fflush(stdout);
	CORO_PROBE(name, x ^ ID_TOP, buf);
	print_ready(v, x << 1);
	fflush(stdout);
	CORO_PROBE(ready, x << 1);
	print_switch(v, x * 3 + 1, x << 1, e - 21, (uint64_t)(uintptr_t)&buf[argc]);
	fflush(stdout);
	CORO_PROBE(switch, x * 3 + 1, x << 1, e - 21, &buf[argc]);
	print_exit(v, x * 3 + 1, -e);
	fflush(stdout);
	CORO_PROBE(exit, x * 3 + 1, -e);
	print_span(v, "span_begin", buf + 1);
	fflush(stdout);
	CORO_PROBE(span_begin, buf + 1);
	print_span(v, "span_end", buf + 1);
	fflush(stdout);
	CORO_PROBE(span_end, buf + 1);
}

static void fire_const(void)
{
	const char *v = "const";

	print_create(v, 0xdeadbeefcafef00dull, 0x8000000000000001ull);
	fflush(stdout);
	CORO_PROBE(create, 0xdeadbeefcafef00dull, 0x8000000000000001ull);
	print_name(v, 0xdeadbeefcafef00dull, "const-name");
	fflush(stdout);
	CORO_PROBE(name, 0xdeadbeefcafef00dull, "const-name");
	print_ready(v, 0xffffffffffffffffull);
	fflush(stdout);
	CORO_PROBE(ready, 0xffffffffffffffffull);
	print_switch(v, 0, 0xdeadbeefcafef00dull, CORO_DONE, 0);
	fflush(stdout);
	CORO_PROBE(switch, 0, 0xdeadbeefcafef00dull, CORO_DONE, 0);
	print_exit(v, 0xdeadbeefcafef00dull, -2147483647 - 1);
	fflush(stdout);
	CORO_PROBE(exit, 0xdeadbeefcafef00dull, -2147483647 - 1);
	print_span(v, "span_begin", "const-span");
	fflush(stdout);
	CORO_PROBE(span_begin, "const-span");
	print_span(v, "span_end", "const-span");
	fflush(stdout);
	CORO_PROBE(span_end, "const-span");
}

#ifdef MATRIX_LIB
__attribute__((visibility("default")))
#endif
void matrix_fire(int argc)
{
	fire_tls(argc);
	fire_global(argc);
	fire_expr(argc);
	fire_const();
}

#endif /* !MATRIX_MAIN */

#ifndef MATRIX_LIB
int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--wait")) {
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("READY %d\n", (int)getpid());
		fflush(stdout);
		while (sigwait(&set, &sig) || sig != SIGUSR1)
			;
		/* The values do not depend on --wait. */
		argc = 1;
	}
	matrix_fire(argc);
	return 0;
}
#endif

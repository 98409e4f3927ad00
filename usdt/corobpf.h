/* SPDX-License-Identifier: MIT */
/*
 * corobpf.h: coroutine probes for corobpf, probe ABI v1 (provider "corobpf").
 *
 * Add this one header to a coroutine scheduler and put CORO_PROBE() lines
 * where coroutines are created, named, made runnable, switched and finished.
 * There is no library to link. When nobody traces the process, every probe
 * is a single one-byte nop; `sudo corobpf -p PID` attaches to them.
 *
 *     #include "corobpf.h"
 *
 *     CORO_PROBE(create, co->id, parent ? parent->id : 0);
 *     CORO_PROBE(name, co->id, co->label);
 *     CORO_PROBE(ready, co->id);
 *     CORO_PROBE(switch, cur ? cur->id : 0, next->id, CORO_WAIT, &chan);
 *     CORO_PROBE(exit, co->id, 0);
 *     CORO_PROBE(span_begin, "db.query");
 *     CORO_PROBE(span_end, "db.query");
 *
 * THE PROBES
 *
 *   CORO_PROBE(create, id, parent)
 *	Coroutine `id` now exists. `id` is any nonzero 64-bit value the
 *	scheduler chooses (a pointer, a counter); `parent` is the coroutine
 *	that created it, or 0 if the scheduler or a plain thread did.
 *
 *   CORO_PROBE(name, id, str)
 *	A label for `id`: a NUL-terminated C string, read at the probe (so it
 *	may be a stack buffer). corobpf keeps the first 63 bytes and marks
 *	longer strings as truncated (see STRINGS). May come before or after
 *	create, and again to rename. Like the span probes, it evaluates its
 *	arguments only while traced (see COST).
 *
 *   CORO_PROBE(ready, id)
 *	`id` became runnable (it was put on a run queue). The waker is not an
 *	argument: corobpf records the coroutine then running on this thread
 *	(from the last switch probe), or 0.
 *
 *   CORO_PROBE(switch, from, to, reason, obj)
 *	This OS thread stops running `from` and starts running `to`. 0 on
 *	either side is the scheduler (or the thread itself). `reason` says why
 *	`from` stopped, one of the CORO_* reasons below; `obj` is what it now
 *	waits on (the address of a mutex, a channel, an fd number), or 0.
 *	One probe per switch is deliberate: a traced probe costs about half a
 *	microsecond, so a switch must never need two.
 *
 *   CORO_PROBE(exit, id, status)
 *	`id` finished: 0 ok, -ECANCELED cancelled, another negative value an
 *	error code. May come from inside the coroutine (before its last
 *	switch out) or from the scheduler after it.
 *
 *   CORO_PROBE(span_begin, str) and CORO_PROBE(span_end, str)
 *	A named region (a request, a DB query, a message dispatch) opens or
 *	closes in the coroutine running on this thread. The coroutine may
 *	suspend and resume on another thread in between. Spans nest; span_end
 *	names the span it closes.
 *
 * WHAT EXISTS WHEN A TRACER ATTACHES (announce)
 *	A tracer that attaches to a running program has missed every create,
 *	name and switch before it. The scheduler can tell it what exists, from
 *	its loop, with three macros:
 *
 *	    if (CORO_ANNOUNCE_WANTED()) {
 *		    for (each coroutine co that has not exited)
 *			    CORO_PROBE(announce, co->id, co->parent, co->name,
 *				       co->reason, co->waits_on);
 *		    CORO_ANNOUNCE_DONE();
 *	    }
 *
 *   CORO_ANNOUNCE_WANTED()
 *	True when a tracer has attached since the scheduler last answered.
 *	While nothing traces the program it is a load and a branch, never a
 *	trap. Call it often enough that a tracer is not kept waiting (corobpf
 *	waits a second for the answer): from the loop that picks the next
 *	coroutine, and from an idle worker at least every 100 ms or so, if it
 *	can sleep longer. Call it, the announces and CORO_ANNOUNCE_DONE() from
 *	one thread at a time (under the scheduler's lock), with the list held
 *	still: a coroutine created or ended while the list is given goes to
 *	the tracer through its own probes.
 *
 *   CORO_PROBE(announce, id, parent, name, reason, obj)
 *	One per coroutine alive: `parent` as create gave it, `name` its label
 *	(a C string, or NULL), `reason` 0 if it is running now, CORO_YIELD if
 *	it is runnable (queued), or CORO_WAIT, CORO_SLEEP or CORO_IO with
 *	`obj` if it is suspended. Its arguments are evaluated only while
 *	traced; each traps (a few microseconds) once per attach.
 *
 *   CORO_ANNOUNCE_DONE()
 *	The list is complete. The tracer learns that every coroutine it was
 *	not told of did not exist (or had exited) when the list was given.
 *
 *	How the request reaches the program without the tracer writing into
 *	it: the kernel counts, in the announce semaphore, how many announce
 *	sites of the program are armed. The scheduler keeps, next to it, the
 *	count it last answered for; a tracer that finds that count unchanged
 *	arms one more of the spare sites this header emits (four per object,
 *	never executed), so the count differs and CORO_ANNOUNCE_WANTED()
 *	turns true. The layout of struct corobpf_announce is corobpf's too.
 *
 *   CORO_PROBE_ENABLED(name)
 *	True while some tracer is attached to probe `name` (the USDT
 *	semaphore, maintained by the kernel). Use it to skip argument set-up
 *	that costs more than a register move, such as formatting a name:
 *
 *	    if (CORO_PROBE_ENABLED(name)) {
 *		    char buf[64];
 *		    snprintf(buf, sizeof(buf), "worker-%d", n);
 *		    CORO_PROBE(name, co->id, buf);
 *	    }
 *
 *	Race: a tracer attaching between the check and the probe misses that
 *	one probe; a tracer detaching in between costs nothing.
 *
 * COST
 *	Not traced: create, ready, switch and exit are a load of the batch
 *	semaphore, a branch and one `nop` each (the `nop` alone with
 *	COROBPF_NO_BATCH), plus whatever moves the arguments into registers
 *	(usually nothing, since they are live already). The string probes (name, span_begin, span_end)
 *	are a load of their semaphore and a branch: they evaluate their
 *	arguments only while traced.
 *	Traced by corobpf: roughly 0.5-0.6 us per hit on x86-64 (several us on
 *	some VMs), dominated by the kernel's uprobe trap; on the batched path
 *	(below) a record in the thread's memory instead (see
 *	docs/performance.md).
 *
 * STRINGS
 *	The header passes a string's address and never dereferences it: a bad
 *	pointer (NULL, freed, garbage) costs the traced program nothing. corobpf
 *	keeps such an event with an empty string, flags it unreadable and
 *	counts it. A good string is read wherever it is, a literal in a page
 *	the program never read included (kernel 6.0 or later; before that such
 *	a string may come out unreadable).
 *
 * FIVE-BYTE SITES (x86-64, COROBPF_NOP5: not recommended)
 *	Define COROBPF_NOP5 before including this header to make each site a
 *	five-byte nop between two stack-pointer steps (three instructions,
 *	about 0.3 ns more when not traced). Kernels with optimized uprobes
 *	(those whose /proc/kallsyms lists arch_uprobe_optimize) replace a
 *	uprobe on such a nop with a call into a trampoline, but (6.18.44) a
 *	child the program forks afterwards has no trampoline and dies of
 *	SIGSEGV at its first pass through the site. corobpf therefore probes
 *	each such site at the stack step before it, which every kernel
 *	single-steps: a traced hit costs several times the default one-byte
 *	nop's (docs/probes.md). corobpf says so at attach. The option stays for
 *	programs already built with it.
 *
 * BATCHED PATH (corobpf's default; --probe-path trap for one trap per event)
 *	create, ready, switch and exit can skip the trap: while corobpf
 *	attaches the `batch` probe, the kernel raises its semaphore and each
 *	of those probes appends a 40-byte record (CLOCK_BOOTTIME from the vDSO,
 *	the probe and its arguments) to a buffer of COROBPF_BATCH_RECS records
 *	in the calling thread's own memory (thread-local, no lock, no system
 *	call: a few tens of nanoseconds). The thread's first record and every
 *	full buffer fire `batch` with the buffer's address: corobpf learns
 *	where the buffer is (and keeps it, for later sessions too: it never
 *	writes into the program), and copies what it has not read yet out of
 *	it at that trap, whenever the thread leaves the CPU, on a timer while
 *	it runs, and when it exits; the thread then starts the buffer again. The
 *	string probes still trap (corobpf reads the buffer first, so each
 *	thread's events stay in order). Not traced, the four probes cost a
 *	load of the batch semaphore and a branch more than a nop. Costs and
 *	limits: docs/probes.md, docs/performance.md. Define
 *	COROBPF_NO_BATCH to build the trap-only probes of earlier versions,
 *	COROBPF_BATCH_NO_LAST_SWITCH the buffer of headers before December
 *	2026 (no last_switch: corobpf reads back each copy's records for the
 *	thread's last switch; its tests use it to check such programs).
 *	A probe fired from a signal handler that interrupts an append of the
 *	same thread traps instead (a flag in the buffer says an append is
 *	under way), so neither record is lost.
 *
 * CONTRACT FOR ARGUMENTS
 *	Every argument is converted to a 64-bit integer and passed in a
 *	register or as an immediate. This is why the header does not use the
 *	generic <sys/sdt.h> constraint: that one lets the compiler describe an
 *	argument as a memory operand such as `%fs:var@tpoff` (a thread-local),
 *	which libbpf's and bpftrace's USDT decoders reject. Any C or C++
 *	expression works, at any optimisation level.
 *
 * DISABLING
 *	Define COROBPF_DISABLE before including this header to compile every
 *	probe away (arguments are still type-checked, never evaluated).
 *	Probes exist on 64-bit ELF targets (x86-64, arm64) with GCC or Clang;
 *	elsewhere they are disabled automatically. The note layout is the SystemTap SDT v3 format, so any
 *	USDT-aware tool (bpftrace, perf, gdb) also sees the probes.
 */
#ifndef COROBPF_USDT_H
#define COROBPF_USDT_H

#define COROBPF_PROBE_ABI 1

/* Why `from` stopped running in CORO_PROBE(switch, ...). Append-only. */
#define CORO_UNKNOWN	0
#define CORO_YIELD	1	/* still runnable, gave the thread up */
#define CORO_WAIT	2	/* waits on obj (mutex, channel, condition, join) */
#define CORO_SLEEP	3	/* timer */
#define CORO_IO		4	/* waits for an fd (obj) to become ready */
#define CORO_DONE	5	/* finished; will not run again */

/*
 * The batched path (see BATCHED PATH). Implementation details, but the
 * record and buffer layouts are also corobpf's (its BPF side reads them):
 * append-only, like the probe ABI.
 */
#define COROBPF_BATCH_RECS 256
#define __CORO_BK_CREATE 1 /* the record kinds are corobpf's event kinds */
#define __CORO_BK_READY 3
#define __CORO_BK_SWITCH 4
#define __CORO_BK_EXIT 5

struct corobpf_batch_rec {
	unsigned long long ts;	/* CLOCK_BOOTTIME, ns */
	unsigned int kind;	/* __CORO_BK_* */
	unsigned int aux;	/* switch: the reason */
	unsigned long long a0;	/* create: id, parent; ready: id; switch: from, to, obj; */
	unsigned long long a1;	/* exit: id, status */
	unsigned long long a2;
};

/*
 * `word` is the only field the thread writes that corobpf reads to know
 * what is new: (generation << 32) | records written, one store after the
 * record it covers. A new generation starts an empty buffer.
 */
struct corobpf_batch {
	unsigned long long word;
	/*
	 * The thread has told a tracer of this buffer (its first record's trap):
	 * set once, by the thread. corobpf keeps the address itself, for every
	 * later session, and never writes into the program.
	 */
	unsigned short registered;
	unsigned char busy;	   /* an append is under way: a nested probe traps instead */
	unsigned char flags;	   /* __CORO_BF_*: what else the thread keeps (0 in older headers) */
	unsigned int layout;	   /* sizeof(struct corobpf_batch_rec) */
	struct corobpf_batch_rec rec[COROBPF_BATCH_RECS];
	/*
	 * With __CORO_BF_LAST_SWITCH: the word as the append of the last switch
	 * record published it, (generation << 32) | its index + 1 (0: none yet),
	 * written before that word. corobpf learns the thread's coroutine from
	 * it without reading back every record it copies (older headers: it does).
	 */
	unsigned long long last_switch;
};
#define __CORO_BF_LAST_SWITCH 1

/*
 * The announce semaphore and the scheduler's side of the request (see WHAT
 * EXISTS WHEN A TRACER ATTACHES). `semaphore` is the kernel's: the number
 * of armed announce sites. `answered` is the value the scheduler last
 * answered for; `asked`, the value when the answer under way was asked
 * for. corobpf reads `answered` at the semaphore's address + 2.
 */
#define COROBPF_ANNOUNCE_LAYOUT 1
#define COROBPF_ANNOUNCE_SPARES 4
struct corobpf_announce {
	unsigned short semaphore;
	unsigned short answered;
	unsigned short asked;
	unsigned short layout; /* COROBPF_ANNOUNCE_LAYOUT once the scheduler asked */
};

#if !defined(COROBPF_DISABLE) && (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__) && \
	(defined(__x86_64__) || defined(__aarch64__))

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Semaphores: one per probe, hidden so that every executable and shared
 * object owns its own, weak so that every translation unit may define them.
 * The kernel increments them while a uprobe with a reference counter sits
 * on a site of that probe (libbpf and bpftrace both do this).
 */
#define __CORO_SEMAPHORE(name)                                                              \
	__attribute__((weak, used, visibility("hidden"), section(".probes")))               \
	volatile unsigned short corobpf_##name##_semaphore
__CORO_SEMAPHORE(create);
__CORO_SEMAPHORE(name);
__CORO_SEMAPHORE(ready);
__CORO_SEMAPHORE(switch);
__CORO_SEMAPHORE(exit);
__CORO_SEMAPHORE(span_begin);
__CORO_SEMAPHORE(span_end);
__CORO_SEMAPHORE(batch);
/* The announce semaphore with the scheduler's two counts beside it: see struct corobpf_announce. */
__attribute__((weak, used, visibility("hidden"), section(".probes"), aligned(8))) volatile struct
	corobpf_announce __coro_announce_state __asm__("corobpf_announce_semaphore");

/*
 * The semaphores start a page of their own. The kernel raises a semaphore
 * in the first writable private mapping of the file that covers its file
 * offset. lld does not pad the file between the RELRO segment and the data
 * segment, so the file page where one ends and the other starts is mapped
 * twice; a semaphore in that page was raised in the RELRO copy (writable
 * until ld.so protects it) and never seen by the code, which reads the
 * data segment's. One page-aligned byte in .probes, in a COMDAT group so
 * an object keeps a single copy, aligns the whole output section: at most
 * one page of padding per executable or shared object.
 */
#if defined(__aarch64__)
#define __CORO_PROBES_ALIGN "65536"
#else
#define __CORO_PROBES_ALIGN "4096"
#endif
__asm__(".pushsection .probes,\"awG\",\"progbits\",corobpf_probes_page,comdat\n"
	".balign " __CORO_PROBES_ALIGN "\n"
	".weak corobpf_probes_page\n"
	".hidden corobpf_probes_page\n"
	"corobpf_probes_page: .byte 0\n"
	".popsection\n");


#ifdef __cplusplus
}
#endif

#define CORO_PROBE_ENABLED(name) __builtin_expect(corobpf_##name##_semaphore != 0, 0)

/*
 * Implementation details below: not part of the API.
 *
 * The note is an ELF note of type 3, owner "stapsdt": the probe address,
 * the address of the .stapsdt.base anchor (lets readers correct for
 * prelinking), the semaphore address, then provider, name and the argument
 * string "8@%rax -8@$5 ...". The "?" flag puts the note into the section
 * group of the code around it, so a probe inside a C++ inline function whose
 * COMDAT copy the linker discards does not leave a dangling note behind.
 */
#if defined(COROBPF_NOP5) && defined(__x86_64__)
/*
 * A five-byte nop, which kernels with optimized uprobes turn into a call
 * to a trampoline instead of a trap (about four times cheaper per traced
 * hit here). The call pushes a return address below the stack pointer:
 * stepping the stack pointer over the 128-byte red zone around it keeps a
 * leaf function's data there intact. The arguments are registers or
 * immediates, so the step does not move them.
 */
#define __CORO_SITE                                                                          \
	"lea -128(%%rsp), %%rsp\n"                                                           \
	"990:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"                                        \
	"lea 128(%%rsp), %%rsp\n"
#else
#define __CORO_SITE "990:	nop\n"
#endif

#define __CORO_ASM_NOTE(name, args) __CORO_ASM_NOTE_SEM(name, name, args)
/* A probe whose note names another probe's semaphore (announce_done names announce's). */
#define __CORO_ASM_NOTE_SEM(name, sem, args) __CORO_SITE __CORO_NOTE_OF(name, sem, args)
/* The note of the site just before it, labelled 990. */
#define __CORO_NOTE_OF(name, sem, args) __CORO_NOTE_SYM(name, "corobpf_" #sem "_semaphore", args)
/* The note, its semaphore a symbol's name as a string ("0": none). */
#define __CORO_NOTE_SYM(name, semsym, args)                                                  \
	".pushsection .note.stapsdt,\"?\",\"note\"\n"                                       \
	".balign 4\n"                                                                        \
	".4byte 992f-991f, 994f-993f, 3\n"                                                   \
	"991:	.asciz \"stapsdt\"\n"                                                        \
	"992:	.balign 4\n"                                                                 \
	"993:	.8byte 990b\n"                                                               \
	".8byte _.stapsdt.base\n"                                                            \
	".8byte " semsym "\n"                                                                 \
	".asciz \"corobpf\"\n"                                                               \
	".asciz \"" #name "\"\n"                                                             \
	".asciz \"" args "\"\n"                                                              \
	"994:	.balign 4\n"                                                                 \
	".popsection\n"                                                                      \
	".ifndef _.stapsdt.base\n"                                                           \
	".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n"              \
	".weak _.stapsdt.base\n"                                                             \
	".hidden _.stapsdt.base\n"                                                           \
	"_.stapsdt.base: .space 1\n"                                                         \
	".size _.stapsdt.base, 1\n"                                                          \
	".popsection\n"                                                                      \
	".endif\n"

/* "nr": an immediate or a register, never a memory operand (see above). */
#define __CORO_U(x) ((unsigned long long)(x))
#define __CORO_S(x) ((long long)(x))

#define __CORO_PROBE1(name, s0, x0)                                                          \
	__asm__ __volatile__(__CORO_ASM_NOTE(name, s0 "@%[a0]") ::[a0] "nr"(x0))
#define __CORO_PROBE2(name, s0, x0, s1, x1)                                                  \
	__asm__ __volatile__(__CORO_ASM_NOTE(name, s0 "@%[a0] " s1 "@%[a1]")                 \
			     ::[a0] "nr"(x0), [a1] "nr"(x1))
/*
 * The string probes also clobber "memory": the string is read through the
 * pointer, so stores to it (a name formatted into a stack buffer) must not
 * be dropped as dead. They sit behind the semaphore, so this costs nothing
 * while untraced.
 */
#define __CORO_PROBE1M(name, s0, x0)                                                         \
	__asm__ __volatile__(__CORO_ASM_NOTE(name, s0 "@%[a0]") ::[a0] "nr"(x0) : "memory")
#define __CORO_PROBE2M(name, s0, x0, s1, x1)                                                 \
	__asm__ __volatile__(__CORO_ASM_NOTE(name, s0 "@%[a0] " s1 "@%[a1]")                 \
			     ::[a0] "nr"(x0), [a1] "nr"(x1) : "memory")
#define __CORO_PROBE4(name, s0, x0, s1, x1, s2, x2, s3, x3)                                  \
	__asm__ __volatile__(                                                                \
		__CORO_ASM_NOTE(name, s0 "@%[a0] " s1 "@%[a1] " s2 "@%[a2] " s3 "@%[a3]")    \
		::[a0] "nr"(x0), [a1] "nr"(x1), [a2] "nr"(x2), [a3] "nr"(x3))
#define __CORO_PROBE5M(name, s0, x0, s1, x1, s2, x2, s3, x3, s4, x4)                         \
	__asm__ __volatile__(__CORO_ASM_NOTE(name, s0 "@%[a0] " s1 "@%[a1] " s2 "@%[a2] " s3  \
					       "@%[a3] " s4 "@%[a4]")                         \
			     ::[a0] "nr"(x0), [a1] "nr"(x1), [a2] "nr"(x2), [a3] "nr"(x3),    \
			     [a4] "nr"(x4) : "memory")


#ifndef COROBPF_NO_BATCH
#ifdef __cplusplus
extern "C" {
#endif
/* One per thread and per executable or shared object, like the semaphores. */
__attribute__((weak, visibility("hidden"))) __thread struct corobpf_batch corobpf_batch_tls;
struct __coro_timespec {
	long tv_sec, tv_nsec;
};
/* The C library's, without <time.h> and its feature macros. */
extern int __coro_clock_gettime(int, struct __coro_timespec *) __asm__("clock_gettime");
#ifdef __cplusplus
}
#endif

#define __CORO_BATCHING() __builtin_expect(corobpf_batch_semaphore != 0, 0)
#define __CORO_CLOCK_BOOTTIME 7

/*
 * The trap of a full buffer (or of the thread's first record): corobpf
 * copies the records out during it, so the buffer starts again after it.
 */
static __attribute__((noinline, cold, unused)) void __coro_batch_flush(struct corobpf_batch *b)
{
	unsigned long long w;

#ifndef COROBPF_BATCH_NO_LAST_SWITCH
	/* Before the trap: from the thread's first record on, every copy can trust last_switch. */
	*(volatile unsigned char *)&b->flags = __CORO_BF_LAST_SWITCH;
#endif
	__asm__ __volatile__(__CORO_ASM_NOTE(batch, "8@%[a0]")::[a0] "r"(b) : "memory");
	*(volatile unsigned short *)&b->registered = 1;
	w = *(volatile unsigned long long *)&b->word;
	if ((unsigned int)w >= COROBPF_BATCH_RECS)
		*(volatile unsigned long long *)&b->word = ((w >> 32) + 1) << 32;
}

static __inline__ __attribute__((always_inline, unused)) void
__coro_batch_put(unsigned int kind, unsigned int aux, unsigned long long a0,
		 unsigned long long a1, unsigned long long a2)
{
	struct corobpf_batch *b = &corobpf_batch_tls;
	unsigned long long w;
	unsigned int n;
	struct corobpf_batch_rec *r;
	struct __coro_timespec t;

	/*
	 * From here until the append is published and a full buffer handed
	 * over, a probe fired by a signal handler that interrupts this one
	 * traps instead (__CORO_BATCH_OR): it would write the same record.
	 */
	*(volatile unsigned char *)&b->busy = 1;
	__asm__ __volatile__("" ::: "memory");
	w = *(volatile unsigned long long *)&b->word;
	n = (unsigned int)w;
	if (__builtin_expect(n >= COROBPF_BATCH_RECS, 0)) {
		/* Left full by a trap that found no tracer (it detached): start again. */
		w = ((w >> 32) + 1) << 32;
		n = 0;
	}
	r = &b->rec[n];
	__coro_clock_gettime(__CORO_CLOCK_BOOTTIME, &t);
	r->ts = (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
	r->kind = kind;
	r->aux = aux;
	r->a0 = a0;
	r->a1 = a1;
	r->a2 = a2;
	b->layout = sizeof(*r);
	if (kind == __CORO_BK_SWITCH) /* a constant: no test at run time */
		b->last_switch = w + 1;
	/* The record is complete before the word that makes it visible. */
	__asm__ __volatile__("" ::: "memory");
	*(volatile unsigned long long *)&b->word = w + 1;
	if (__builtin_expect(n + 1 == COROBPF_BATCH_RECS || !b->registered, 0))
		__coro_batch_flush(b);
	__asm__ __volatile__("" ::: "memory");
	*(volatile unsigned char *)&b->busy = 0;
}

#define __CORO_BATCH_OR(trap, kind, aux, a0, a1, a2)                                         \
	do {                                                                                 \
		if (__CORO_BATCHING() && !*(volatile unsigned char *)&corobpf_batch_tls.busy) \
			__coro_batch_put(kind, aux, a0, a1, a2);                             \
		else                                                                         \
			trap;                                                                \
	} while (0)
#else
#define __CORO_BATCH_OR(trap, kind, aux, a0, a1, a2) trap
#endif /* COROBPF_NO_BATCH */

#define __CORO_PROBE_create(id, parent)                                                      \
	do {                                                                                 \
		unsigned long long __coro_i = __CORO_U(id), __coro_p = __CORO_U(parent);     \
		__CORO_BATCH_OR(__CORO_PROBE2(create, "8", __coro_i, "8", __coro_p),         \
				__CORO_BK_CREATE, 0, __coro_i, __coro_p, 0);                 \
	} while (0)
/*
 * String probes fire only while traced. They never dereference the string
 * (see STRINGS): corobpf reads it, faulting its pages in where needed.
 */
#define __CORO_PROBE_name(id, str)                                                           \
	do {                                                                                 \
		if (CORO_PROBE_ENABLED(name)) {                                              \
			const char *__coro_s = (str);                                        \
			__CORO_PROBE2M(name, "8", __CORO_U(id), "8", __CORO_U(__coro_s));    \
		}                                                                            \
	} while (0)
#define __CORO_PROBE_ready(id)                                                               \
	do {                                                                                 \
		unsigned long long __coro_i = __CORO_U(id);                                  \
		__CORO_BATCH_OR(__CORO_PROBE1(ready, "8", __coro_i), __CORO_BK_READY, 0,     \
				__coro_i, 0, 0);                                             \
	} while (0)
#define __CORO_PROBE_switch(from, to, reason, obj)                                           \
	do {                                                                                 \
		unsigned long long __coro_f = __CORO_U(from), __coro_t = __CORO_U(to);       \
		unsigned long long __coro_r = __CORO_U(reason), __coro_o = __CORO_U(obj);    \
		__CORO_BATCH_OR(__CORO_PROBE4(switch, "8", __coro_f, "8", __coro_t, "8",     \
					      __coro_r, "8", __coro_o),                      \
				__CORO_BK_SWITCH, (unsigned int)__coro_r, __coro_f, __coro_t,  \
				__coro_o);                                                   \
	} while (0)
#define __CORO_PROBE_exit(id, status)                                                        \
	do {                                                                                 \
		unsigned long long __coro_i = __CORO_U(id);                                  \
		long long __coro_s = __CORO_S(status);                                       \
		__CORO_BATCH_OR(__CORO_PROBE2(exit, "8", __coro_i, "-8", __coro_s),          \
				__CORO_BK_EXIT, 0, __coro_i, (unsigned long long)__coro_s, 0); \
	} while (0)
#define __CORO_PROBE_STR1(name, str)                                                         \
	do {                                                                                 \
		if (CORO_PROBE_ENABLED(name)) {                                              \
			const char *__coro_s = (str);                                        \
			__CORO_PROBE1M(name, "8", __CORO_U(__coro_s));                       \
		}                                                                            \
	} while (0)
#define __CORO_PROBE_span_begin(str) __CORO_PROBE_STR1(span_begin, str)
#define __CORO_PROBE_span_end(str) __CORO_PROBE_STR1(span_end, str)

/* The announce (see WHAT EXISTS WHEN A TRACER ATTACHES). */
/*
 * The spare announce sites, jumped over: a tracer arms one only to change
 * the semaphore's count. They sit in the code of CORO_ANNOUNCE_DONE(), so
 * that whatever keeps that code (the linker's --gc-sections included) keeps
 * them.
 */
#if defined(__aarch64__)
#define __CORO_JUMP_SPARES "b 995f\n"
#else
#define __CORO_JUMP_SPARES "jmp 995f\n"
#endif
#define __CORO_SPARE "990:	nop\n" __CORO_NOTE_OF(announce_spare, announce, "")
#define __CORO_SPARES __CORO_JUMP_SPARES __CORO_SPARE __CORO_SPARE __CORO_SPARE __CORO_SPARE "995:\n"
#define __CORO_ANNOUNCING() __builtin_expect(__coro_announce_state.semaphore != 0, 0)
static __inline__ __attribute__((always_inline, unused)) int __coro_announce_wanted(void)
{
	unsigned short s = __coro_announce_state.semaphore;

	if (s == __coro_announce_state.answered)
		return 0;
	__coro_announce_state.asked = s;
	__coro_announce_state.layout = COROBPF_ANNOUNCE_LAYOUT;
	return 1;
}
#define CORO_ANNOUNCE_WANTED() (__CORO_ANNOUNCING() && __coro_announce_wanted())
#define __CORO_PROBE_announce(id, parent, name, reason, obj)                                 \
	do {                                                                                 \
		if (__CORO_ANNOUNCING()) {                                                   \
			const char *__coro_s = (name);                                       \
			__CORO_PROBE5M(announce, "8", __CORO_U(id), "8", __CORO_U(parent), "8", \
				       __CORO_U(__coro_s), "8", __CORO_U(reason), "8",        \
				       __CORO_U(obj));                                        \
		}                                                                            \
	} while (0)
#define CORO_ANNOUNCE_DONE()                                                                 \
	do {                                                                                 \
		unsigned long long __coro_a = __coro_announce_state.asked;                   \
		__asm__ __volatile__(__CORO_SITE __CORO_NOTE_SYM(announce_done, "0", "8@%[a0]") \
				     __CORO_SPARES ::[a0] "nr"(__coro_a) : "memory");       \
		__coro_announce_state.answered = (unsigned short)__coro_a;                   \
	} while (0)

#else /* probes disabled */

/* Type-check the arguments without evaluating them or emitting code (bit-fields too). */
#define CORO_PROBE_ENABLED(name) 0
#define __CORO_NOP1(a) ((void)sizeof((unsigned long long)(a)))
#define __CORO_PROBE_create(id, parent) (__CORO_NOP1(id), __CORO_NOP1(parent))
#define __CORO_PROBE_name(id, str) (__CORO_NOP1(id), __CORO_NOP1(str))
#define __CORO_PROBE_ready(id) __CORO_NOP1(id)
#define __CORO_PROBE_switch(from, to, reason, obj)                                           \
	(__CORO_NOP1(from), __CORO_NOP1(to), __CORO_NOP1(reason), __CORO_NOP1(obj))
#define __CORO_PROBE_exit(id, status) (__CORO_NOP1(id), __CORO_NOP1(status))
#define __CORO_PROBE_span_begin(str) __CORO_NOP1(str)
#define __CORO_PROBE_span_end(str) __CORO_NOP1(str)
#define __CORO_PROBE_announce(id, parent, name, reason, obj)                                 \
	(__CORO_NOP1(id), __CORO_NOP1(parent), __CORO_NOP1(name), __CORO_NOP1(reason),       \
	 __CORO_NOP1(obj))
#define CORO_ANNOUNCE_WANTED() 0
#define CORO_ANNOUNCE_DONE() ((void)0)

#endif

/*
 * CORO_PROBE(name, args...): fire probe `name` (create, name, ready, switch,
 * exit, span_begin, span_end, announce) with the arguments documented above. A wrong
 * probe name or argument count is a compile error.
 */
#define CORO_PROBE(name, ...) __CORO_PROBE_##name(__VA_ARGS__)

#endif /* COROBPF_USDT_H */

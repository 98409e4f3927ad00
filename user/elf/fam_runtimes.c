// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The switch-function families of language runtimes that switch stacks
 * with code of their own (see switchfam.h): Ruby's fibers, QEMU's
 * coroutines and Python's greenlets. Each is data the planner in
 * switchfam.c executes; what each sees, and what it cannot, is said in
 * docs/switch.md and in the summary (`limits`).
 *
 * The registers are those of the x86-64 calling convention at the entry,
 * checked against the Debian 12 builds (ruby3.1 3.1.2, qemu-utils 7.2,
 * python3-greenlet 2.0.2) with objdump.
 */
#include <stddef.h>
#include "fam_runtimes.h"
#include "x86dec.h"

#define NONE CORO_CTX_REG_NONE

static const struct switchfam_desc runtimes[] = {
	{
		/*
		 * libruby's coroutine_transfer(from, to) (coroutine/amd64/Context.S):
		 * hand-written, so its symbol is NOTYPE with size 0. It starts
		 * with push %rbp, which the kernel emulates. A fiber is its
		 * struct coroutine_context. libruby 3.1 exports nothing where a
		 * fiber starts or ends: fiber_initialize, fiber_entry and
		 * rb_fiber_terminate are static, coroutine_initialize is inline.
		 */
		.family = CORO_FAM_RUBY,
		.detect = { "coroutine_transfer", "rb_fiber_current" },
		.sites = {
			{ "coroutine_transfer", CORO_CTXOP_SWITCH, { X86_RDI, X86_RSI, NONE }, 0,
			  false, "" },
		},
		.limits = "creates, names and exits not visible (libruby exports no symbol where "
			  "a fiber starts or ends): a fiber appears at its first resume",
		.help = "  ruby           Ruby fibers (libruby coroutine_transfer); a fiber is its\n"
			"                 coroutine context; creates and exits are not visible\n",
	},
	{
		/*
		 * QEMU's qemu_coroutine_switch(from, to, action) (util/coroutine-
		 * ucontext.c) switches with sigsetjmp/siglongjmp; makecontext and
		 * swapcontext only set a new coroutine's stack up, so the ucontext
		 * view of such a process is wrong. `action` COROUTINE_TERMINATE
		 * says `from` returned (its Coroutine goes back to the pool, and a
		 * later switch to it is a new coroutine). qemu_coroutine_create
		 * returns the new one: probed at its ret (single-stepped, once per
		 * coroutine: no instruction after the value is known is emulated).
		 * Its entry function, at offset 0 of the Coroutine, names it.
		 */
		.family = CORO_FAM_QEMU,
		.detect = { "qemu_coroutine_switch", "qemu_coroutine_create" },
		.sites = {
			{ "qemu_coroutine_switch", CORO_CTXOP_SWITCH, { X86_RDI, X86_RSI, X86_RDX },
			  CORO_CTXC_ACTION_QEMU, false, "" },
			/* The new Coroutine is known only when it is returned. */
			{ "qemu_coroutine_create", CORO_CTXOP_CREATE, { X86_RAX, NONE, NONE },
			  CORO_CTXC_ENTRY_AT_A, true, "the new coroutine in %rax, its entry at 0(%rax)",
			  .at_return = true },
		},
		.excludes = 1u << CORO_FAM_UCONTEXT | 1u << CORO_FAM_PTH,
		.limits = "creates seen (qemu_coroutine_create's return, single-stepped), named "
			  "after the entry function; exits (COROUTINE_TERMINATE)",
		.help = "  qemu           QEMU coroutines (qemu_coroutine_switch in qemu-img, qemu-io,\n"
			"                 qemu-nbd, qemu-system-*); a coroutine is its Coroutine;\n"
			"                 creates (named after their entry) and exits seen; replaces\n"
			"                 ucontext in such a process\n",
	},
	{
		/*
		 * Python greenlet 2's Greenlet::g_switchstack() runs on the
		 * greenlet to switch to; it returns a struct, so `this` is the
		 * second register. g_initialstub() starts a new greenlet (the
		 * same way). PythonState::did_finish(tstate) runs when a greenlet's
		 * function returned, on its own stack; with tstate NULL it is the
		 * dealloc of a dead greenlet, on whatever runs then: not an end.
		 */
		.family = CORO_FAM_GREENLET,
		.detect = { "_ZN8greenlet8Greenlet13g_switchstackEv",
			    "_ZN8greenlet12UserGreenlet13g_initialstubEPv" },
		.sites = {
			{ "_ZN8greenlet8Greenlet13g_switchstackEv", CORO_CTXOP_SWITCH,
			  { NONE, X86_RSI, NONE }, 0, false, "" },
			{ "_ZN8greenlet12UserGreenlet13g_initialstubEPv", CORO_CTXOP_CREATE,
			  { X86_RSI, NONE, NONE }, 0, true, "the new greenlet in %rsi" },
			{ "_ZN8greenlet11PythonState10did_finishEP3_ts", CORO_CTXOP_EXIT,
			  { X86_RSI, NONE, NONE }, CORO_CTXC_EXIT_IF_A, true,
			  "a greenlet's function returned: %rsi not NULL" },
			/*
			 * A switch to a thread's main greenlet passes here first:
			 * greenlets share the thread's stack (their slices are
			 * copied in and out), so no stack tells main apart. It
			 * returns an object: `this` is the second register.
			 */
			{ "_ZN8greenlet12MainGreenlet8g_switchEv", CORO_CTXOP_MAIN,
			  { X86_RSI, NONE, NONE }, 0, true, "the thread's main greenlet in %rsi" },
		},
		.limits = "names not visible; a greenlet made before the module was attached "
			  "(it is loaded with dlopen) appears at its first switch",
		.help = "  greenlet       Python greenlets (greenlet 2: Greenlet::g_switchstack);\n"
			"                 a greenlet is its object; creates and exits seen\n",
	},
	{
		/*
		 * Go (docs/go.md): runtime.casgstatus(gp, oldval, newval) in the
		 * register ABI of Go 1.17 and later (rax, rbx, rcx), where nearly
		 * every change of a goroutine's status passes; newproc1 says the
		 * binary is a program, not a plugin of one. The cookie's slot of
		 * struct offsets is filled in at attach (goelf.h).
		 */
		.family = CORO_FAM_GO,
		.detect = { "runtime.casgstatus", "runtime.newproc1" },
		.sites = {
			{ "runtime.casgstatus", CORO_CTXOP_GO, { X86_RAX, X86_RBX, X86_RCX }, 0,
			  false, "goroutine %rax, from status %rbx to %rcx" },
			/* Once per `go` statement: the new g, its goid assigned, in %rax. */
			{ "runtime.newproc1", CORO_CTXOP_GO, { X86_RAX, NONE, NONE },
			  CORO_CTXC_GO_CREATED, false, "the new goroutine in %rax",
			  .at_return = true },
		},
		/*
		 * A cgo program maps libc, whose ucontext functions its goroutines
		 * never switch with: the process is Go's (its findings too).
		 */
		.excludes = 1u << CORO_FAM_UCONTEXT | 1u << CORO_FAM_PTH,
		.limits = "goroutines stopped by the GC's asynchronous preemption are seen again "
			  "when they next run",
		.help = "  go             Go programs (runtime.casgstatus): a coroutine is a\n"
			"                 goroutine (its goid), named after its function;\n"
			"                 creates, waits, wakeups and exits seen; Go 1.17+\n"
			"                 with DWARF, 1.19 without (docs/go.md)\n",
	},
};

const struct switchfam_desc *switchfam_runtime(uint32_t family)
{
	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++)
		if (runtimes[i].family == family)
			return &runtimes[i];
	return NULL;
}

uint32_t switchfam_excluded(uint32_t families)
{
	uint32_t out = 0;

	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++)
		if (families & (1u << runtimes[i].family))
			out |= runtimes[i].excludes;
	return out;
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Interpreted runtimes, unmodified: where CPython's asyncio runs a task's
 * step, and where Lua resumes a coroutine (docs/python.md, docs/lua.md).
 *
 * Neither switches stacks in a function of its own: an asyncio task is a
 * coroutine object the event loop steps through one C function call at a
 * time, and a Lua coroutine runs inside lua_resume until it yields or ends.
 * So each is traced through the entry and the return of the interpreter's
 * functions, as a uprobe session (bpf/interp.bpf.h), reading the
 * interpreter's structures at the offsets of its version:
 *
 * - asyncio (CPython's _asyncio module): TaskStepMethWrapper's tp_call and
 *   task_wakeup, the two ways a task's step runs, and Task.__init__. The
 *   module's functions are static (Debian's build keeps no symbol of them):
 *   they are found through its own tables, the static type objects (by
 *   tp_name) and method definitions (by ml_name) its relocations point at.
 *   The version is the module's: the tag in its file name, which CPython
 *   checks before it loads a module (`cpython-311`), and the sizes of its
 *   types must be that version's. A version without a layout here is
 *   refused by name.
 * - Lua: lua_resume, lua_newthread, lua_resetthread (5.4) and the calls of
 *   lua_yield in a host's module (nginx's: the reason of a yield).
 */
#ifndef COROBPF_INTERP_H
#define COROBPF_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "coro_abi.h"

#define INTERP_MAX_SITES 160

struct interp_site {
	uint64_t offset; /* file offset of the function's entry */
	uint64_t cookie; /* CORO_RT_COOKIE(op, 0, reason, flags): the slot is the attach's */
	bool emulated;	 /* the entry's instruction is one the kernel emulates */
};

struct interp_plan {
	uint32_t family; /* CORO_FAM_ASYNCIO or CORO_FAM_LUA */
	char version[48]; /* "CPython 3.11", "Lua 5.4.4", "LuaJIT 2.1.0-beta3" */
	struct interp_site sites[INTERP_MAX_SITES];
	uint32_t nsites;
	uint32_t stepped; /* sites whose entry is single-stepped */
	/* The layout its sites' cookies name a slot of (by family). */
	struct coro_py_layout py;
	struct coro_lua_layout lua;
	bool has_layout;
	char sites_text[512]; /* for the summary: what is probed where */
	char limits[160];     /* what it cannot see */
};

/* interp_detect's notes: what the object is, beside a family (for what is said when nothing is seen). */
#define INTERP_NOTE_CPYTHON (1u << 0) /* a CPython interpreter (Py_InitializeEx) */
#define INTERP_NOTE_LUAJIT (1u << 1)  /* LuaJIT (luaJIT_setmode) */

/*
 * The family (CORO_FAM_ASYNCIO, CORO_FAM_LUA) whose interpreter functions
 * the object at `path` defines, or 0; *notes (may be NULL): INTERP_NOTE_*.
 * `shown` is the object's path as the target maps it (its file name carries
 * CPython's version tag).
 */
uint32_t interp_detect(const char *path, const char *shown, uint32_t *notes);

/*
 * Plan the object's sites. 0, -ENOENT (not an interpreter corobpf knows),
 * or another negative errno with a message in err naming the runtime and
 * its version, and why it cannot be traced (-EPROTONOSUPPORT: a version
 * whose layout corobpf does not know).
 */
int interp_plan(const char *path, const char *shown, struct interp_plan *plan, char *err,
		size_t errlen);

/* asyncio: the coroutines whose await is a sleep or an I/O wait, by __qualname__. */
struct interp_py_wait {
	const char *qualname;
	uint32_t reason; /* enum coro_switch_reason */
};
extern const struct interp_py_wait interp_py_waits[];
extern const size_t interp_npy_waits;

#endif

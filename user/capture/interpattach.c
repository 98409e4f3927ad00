// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Interpreted runtimes (asyncio, Lua), attached (see interpattach.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cxxattach.h"
#include "interp.h"
#include "interpattach.h"
#include "log.h"

/*
 * The layouts given a slot this run, by family: binaries of one version
 * share one. Capture-thread only, like everything attach does.
 */
static struct coro_py_layout py_slots[CORO_RT_SLOTS];
static struct coro_lua_layout lua_slots[CORO_RT_SLOTS];
static u32 npy_slots, nlua_slots;
static bool py_waits_filled;
/* Said once a run: the kernel cannot attach uprobe sessions. */
static bool said_no_sessions;

/* What each process (of the first 64) showed of interpreters, for interpattach_say_unseen(). */
#define SEEN_PROCS 64
#define SEEN_ASYNCIO (1u << 8)	/* asyncio attached */
#define SEEN_LUA (1u << 9)	/* a Lua interpreter attached */
#define SEEN_NO_SESSIONS (1u << 10)
static struct seen_proc {
	u32 pid;
	u32 what; /* INTERP_NOTE_*, SEEN_* */
	char refused[800];
} seen[SEEN_PROCS];
static u32 nseen;

static struct seen_proc *seen_get(int pid)
{
	if (pid <= 0)
		return NULL;
	for (u32 i = 0; i < nseen; i++)
		if (seen[i].pid == (u32)pid)
			return &seen[i];
	if (nseen == SEEN_PROCS)
		return NULL;
	memset(&seen[nseen], 0, sizeof(seen[nseen]));
	seen[nseen].pid = (u32)pid;
	return &seen[nseen++];
}

void interpattach_free(void)
{
	npy_slots = nlua_slots = nseen = 0;
	py_waits_filled = said_no_sessions = false;
}

void interpattach_say_unseen(u32 pid)
{
	const struct seen_proc *s = NULL;

	for (u32 i = 0; i < nseen; i++)
		if (seen[i].pid == pid)
			s = &seen[i];
	if (!s)
		return;
	if (s->refused[0])
		log_warn("  not traced: %s", s->refused);
	if (s->what & SEEN_NO_SESSIONS)
		log_warn("  its interpreter's coroutines are not traced: this kernel has no uprobe "
			 "sessions (Linux 6.13 and later)");
	if ((s->what & INTERP_NOTE_CPYTHON) && !(s->what & SEEN_ASYNCIO) && !s->refused[0])
		log_warn("  CPython: the program never loaded asyncio's C module (_asyncio), so no "
			 "asyncio task ran (docs/python.md)");
	if (s->what & SEEN_ASYNCIO)
		log_warn("  asyncio: no task took a step (docs/python.md)");
	if ((s->what & INTERP_NOTE_LUAJIT) && (s->what & SEEN_LUA))
		log_warn("  LuaJIT: a coroutine resumed from Lua (coroutine.resume) runs inside "
			 "LuaJIT's VM and never passes through lua_resume, where corobpf sees "
			 "coroutines: only those a host's C code resumes (nginx's request threads) "
			 "are traced (docs/lua.md)");
	else if (s->what & SEEN_LUA)
		log_warn("  Lua: no coroutine was resumed (docs/lua.md)");
}

/* The slot of a layout, given one in the BPF map if new; -1 if there is no room. */
static int layout_slot(struct bpf_map *map, void *slots, u32 *nslots, const void *layout,
		       size_t size)
{
	u32 i;

	for (i = 0; i < *nslots; i++)
		if (!memcmp((char *)slots + i * size, layout, size))
			return (int)i;
	if (i == CORO_RT_SLOTS || !map || bpf_map_update_elem(bpf_map__fd(map), &i, layout, BPF_ANY))
		return -1;
	memcpy((char *)slots + i * size, layout, size);
	(*nslots)++;
	return (int)i;
}

/* asyncio's waits by the coroutine they are awaited in: once a run. */
static void fill_py_waits(struct attach_ctx *a)
{
	if (py_waits_filled || !a->py_waits)
		return;
	py_waits_filled = true;
	for (size_t i = 0; i < interp_npy_waits; i++) {
		char key[CORO_PY_QUALNAME] = { 0 };
		u32 reason = interp_py_waits[i].reason;

		snprintf(key, sizeof(key), "%s", interp_py_waits[i].qualname);
		if (bpf_map_update_elem(bpf_map__fd(a->py_waits), key, &reason, BPF_ANY))
			log_warn("asyncio: cannot fill the table of waits (%s): a task's sleeps and "
				 "I/O waits are said as waits", strerror(errno));
	}
}

u32 interpattach_object(struct attach_ctx *a, int pid, const char *path, const char *shown,
			bool late, bool unseen)
{
	const struct bpf_program *prog = attach_prog(a, "@rt");
	const char *fam_name;
	struct interp_plan *plan;
	u64 offs[INTERP_MAX_SITES], cookies[INTERP_MAX_SITES];
	char err[512];
	u32 fam, n = 0, notes;
	struct seen_proc *sp;
	int slot, fd;

	fam = interp_detect(path, shown, &notes);
	sp = notes || fam ? seen_get(pid) : NULL;
	if (sp)
		sp->what |= notes;
	if (!fam)
		return 0;
	fam_name = fam == CORO_FAM_ASYNCIO ? "asyncio" : "Lua";
	if (a->opts->switch_forced && !(a->opts->switch_families & (1u << fam)))
		return 0;
	if (!prog || bpf_program__fd(prog) < 0) {
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		if (!said_no_sessions)
			log_warn("%s: %s's coroutines are not traced: this kernel has no uprobe "
				 "sessions (Linux 6.13 and later), which corobpf sees them through",
				 shown, fam_name);
		said_no_sessions = true;
		if (sp)
			sp->what |= SEEN_NO_SESSIONS;
		return 0;
	}
	plan = xmalloc(sizeof(*plan));
	if (interp_plan(path, shown, plan, err, sizeof(err))) {
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_warn("%s: %s", shown, err);
		if (sp && !sp->refused[0])
			snprintf(sp->refused, sizeof(sp->refused), "%s: %s", shown, err);
		free(plan);
		return 0;
	}
	if (!plan->has_layout) /* a host's sites (its calls of lua_yield) read no structure */
		slot = 0;
	else if (fam == CORO_FAM_ASYNCIO)
		slot = layout_slot(a->py_layouts, py_slots, &npy_slots, &plan->py, sizeof(plan->py));
	else
		slot = layout_slot(a->lua_layouts, lua_slots, &nlua_slots, &plan->lua,
				   sizeof(plan->lua));
	if (slot < 0) {
		a->ustats[CORO_USTAT_ATTACH_FAIL]++;
		log_warn("%s: no room for another %s layout (%u in use): not traced", shown,
			 plan->version, CORO_RT_SLOTS);
		free(plan);
		return 0;
	}
	if (fam == CORO_FAM_ASYNCIO)
		fill_py_waits(a);
	for (u32 i = 0; i < plan->nsites; i++) {
		offs[i] = plan->sites[i].offset;
		cookies[i] = plan->sites[i].cookie | (u64)slot << 8 |
			     (unseen ? (u64)CORO_RT_F_NAME_UNSEEN << 24 : 0);
	}
	fd = attach_uprobe_link(a, prog, CORO_BPF_TRACE_UPROBE_SESSION, pid < 0 ? 0 : (u32)pid,
				path, offs, NULL, cookies, plan->nsites);
	if (fd < 0) {
		a->ustats[CORO_USTAT_ATTACH_FAIL]++;
		log_warn("cannot attach to the %s functions of %s (%s): %s", fam_name, shown,
			 pid < 0 ? "every process" : "its process", strerror(-fd));
	} else {
		n = plan->nsites;
		if (sp)
			sp->what |= fam == CORO_FAM_ASYNCIO ? SEEN_ASYNCIO : SEEN_LUA;
		log_verbose("process %d: %s in %s%s: %s", pid, fam_name, shown,
			    late ? " (loaded after start)" : "", plan->sites_text);
		attach_found_switch(a, pid < 0 ? 0 : (u32)pid, fam, shown, plan->sites_text,
				    plan->limits, n, plan->stepped);
	}
	free(plan);
	return n;
}

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

void interpattach_free(void)
{
	npy_slots = nlua_slots = 0;
	py_waits_filled = said_no_sessions = false;
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
	u32 fam, n = 0;
	int slot, fd;

	fam = interp_detect(path, shown);
	if (!fam)
		return 0;
	fam_name = fam == CORO_FAM_ASYNCIO ? "asyncio" : "Lua";
	if (a->opts.switch_forced && !(a->opts.switch_families & (1u << fam)))
		return 0;
	if (!prog || bpf_program__fd(prog) < 0) {
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		if (!said_no_sessions)
			log_warn("%s: %s's coroutines are not traced: this kernel has no uprobe "
				 "sessions (Linux 6.13 and later), which corobpf sees them through",
				 shown, fam_name);
		said_no_sessions = true;
		return 0;
	}
	plan = xmalloc(sizeof(*plan));
	if (interp_plan(path, shown, plan, err, sizeof(err))) {
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_warn("%s: %s", shown, err);
		free(plan);
		return 0;
	}
	if (fam == CORO_FAM_ASYNCIO)
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
		log_verbose("process %d: %s in %s%s: %s", pid, fam_name, shown,
			    late ? " (loaded after start)" : "", plan->sites_text);
		attach_found_switch(a, pid < 0 ? 0 : (u32)pid, fam, shown, plan->sites_text,
				    plan->limits, n, plan->stepped);
	}
	free(plan);
	return n;
}

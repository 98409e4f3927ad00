// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* C++20 coroutines of unmodified programs, attached (see cxxattach.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include "cxxattach.h"
#include "cxxcoro.h"
#include "log.h"

/*
 * The names of the run, by capture-wide index: one table for every object
 * and process, since the BPF side carries only the index. Capture-thread
 * only, like everything attach does.
 */
static char **names;
static u32 nnames, cap_names;

bool cxxattach_supported(void)
{
	static int known = -1;
	struct btf *btf;
	s32 id;

	if (known >= 0)
		return known;
	known = 0;
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return false;
	id = btf__find_by_name_kind(btf, "bpf_attach_type", BTF_KIND_ENUM);
	if (id > 0) {
		const struct btf_type *t = btf__type_by_id(btf, (u32)id);
		const struct btf_enum *e = btf_enum(t);

		for (u16 i = 0; i < btf_vlen(t); i++)
			if (!strcmp(btf__name_by_offset(btf, e[i].name_off), "BPF_TRACE_UPROBE_SESSION") &&
			    e[i].val == CORO_BPF_TRACE_UPROBE_SESSION)
				known = 1;
	}
	btf__free(btf);
	return known;
}

const char *cxxattach_name(u32 fn)
{
	return fn < nnames ? names[fn] : NULL;
}

void cxxattach_free(void)
{
	for (u32 i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	names = NULL;
	nnames = cap_names = 0;
}

u32 cxxattach_object(struct attach_ctx *a, int pid, const char *path, const char *shown, bool late)
{
	const struct bpf_program *prog = attach_prog(a, "@cxx");
	struct cxx_plan plan;
	char err[256], sites[256], limits[160];
	u64 *offs, *cookies;
	u32 base = nnames;
	int fd;

	if (!prog || bpf_program__fd(prog) < 0 || !cxxcoro_detect(path))
		return 0;
	if (cxxcoro_plan(path, CXXCORO_AWAITS, &plan, err, sizeof(err))) {
		log_warn("%s: cannot plan its C++ coroutines: %s", shown, err);
		return 0;
	}
	if (!plan.bodies) {
		if (plan.adapted)
			log_verbose("process %d: C++ coroutines in %s: all %u left to the promise "
				    "adapter", pid, shown, plan.adapted);
		cxxcoro_plan_free(&plan);
		return 0;
	}
	offs = xmalloc(plan.nsites * sizeof(*offs));
	cookies = xmalloc(plan.nsites * sizeof(*cookies));
	for (u32 i = 0; i < plan.nsites; i++) {
		u64 k = plan.sites[i].cookie;

		offs[i] = plan.sites[i].offset;
		cookies[i] = (k & 0xffffffffull) | (u64)(CORO_CXX_COOKIE_FN(k) + base) << 32;
	}
	/* A session link: the same program sees the entry and the return. */
	fd = attach_uprobe_link(a, prog, CORO_BPF_TRACE_UPROBE_SESSION, pid < 0 ? 0 : (u32)pid,
				path, offs, NULL, cookies, plan.nsites);
	free(offs);
	free(cookies);
	if (fd < 0) {
		a->ustats[CORO_USTAT_ATTACH_FAIL]++;
		log_warn("cannot attach to the C++ coroutines of %s (%s): %s", shown,
			 pid < 0 ? "every process" : "its process", strerror(-fd));
		cxxcoro_plan_free(&plan);
		return 0;
	}
	if (nnames + plan.nnames > cap_names) {
		cap_names = MAX(cap_names * 2, nnames + plan.nnames);
		names = xrealloc(names, cap_names * sizeof(*names));
	}
	for (u32 i = 0; i < plan.nnames; i++) {
		names[nnames++] = plan.names[i];
		plan.names[i] = NULL;
	}
	snprintf(sites, sizeof(sites),
		 "%u bodies (entry and return; %u single-stepped), %u destroys, %u creations, %u ramp starts, %u calls that transfer, "
		 "%u await_suspend calls",
		 plan.bodies, plan.stepped, plan.destroys, plan.creates, plan.starts, plan.xfers, plan.awaits);
	if (plan.eager_ramps)
		snprintf(sites + strlen(sites), sizeof(sites) - strlen(sites),
			 ", %u ramps running an eager coroutine's first run (entry and return)",
			 plan.eager_ramps);
	limits[0] = 0;
	if (plan.bodies_without_create)
		snprintf(limits, sizeof(limits),
			 "%u coroutines without a creation site (inlined ramps): created when first "
			 "resumed", plan.bodies_without_create);
	log_verbose("process %d: C++ coroutines in %s%s: %s (%u left to the promise adapter)", pid,
		    shown, late ? " (loaded after start)" : "", sites, plan.adapted);
	attach_found_switch(a, pid < 0 ? 0 : (u32)pid, CORO_FAM_CXX20, shown, sites, limits,
			    plan.nsites, plan.stepped);
	{
		u32 n = plan.nsites;

		cxxcoro_plan_free(&plan);
		return n;
	}
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which objects carry corobpf probes, and attaching to them: a running
 * process's executable mappings (-p), every process's (-a, --follow). What
 * a launched command will load is launch.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach.h"
#include "cxxattach.h"
#include "interpattach.h"
#include "elfnotes.h"
#include "goelf.h"
#include "gowalk.h"
#include "ldpaths.h"
#include "log.h"
#include "procview.h"
#include "safeopen.h"
#include "addrnames.h"
#include "switchfam.h"
#include "usdt.h"

static bool is_ldso(const char *path)
{
	return ld_path_is_loader(path);
}

/* The hook ld.so calls on every change of its link map: we learn of dlopen there. */
static bool attach_libload_pid(struct attach_ctx *a, int pid, const char *path)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
	struct bpf_link *link;

	if (a->usdt) {
		/* Its program is loaded for uprobe_multi links, as the probes' are. */
		u64 off, cookie = 0;
		int ret = switchfam_symbol_offset(path, "_dl_debug_state", &off);

		if (!ret)
			ret = attach_uprobe_multi(a, attach_prog(a, "@libload"),
							  pid < 0 ? 0 : (u32)pid, path, &off, NULL,
							  &cookie, 1);
		if (ret < 0) {
			log_warn("cannot watch %s for dlopen (%s): libraries loaded later will be "
				 "found only by chance", path, strerror(-ret));
			return false;
		}
		return true;
	}
	link = bpf_program__attach_uprobe_opts(attach_prog(a, "@libload"), pid, path, 0,
					       &opts);
	if (!link) {
		log_warn("cannot watch %s for dlopen (%s): libraries loaded later will be found "
			 "only by chance", path, strerror(errno));
		return false;
	}
	attach_add_link(a, link);
	return true;
}

/*
 * --follow attaches for every process (the BPF side admits the followed
 * ones), each object once whichever target maps it: the pid to attach
 * with, and the set of objects already examined.
 */
static int attach_pid(struct attach_ctx *a, struct target *t)
{
	/* -a has no targets: its global attaches ask, for every process; and its per-process ucontext. */
	if (t->own_pid)
		return (int)t->pid;
	return a->opts->follow || a->opts->system_wide ? -1 : (int)t->pid;
}

struct hmap *attach_examined(struct attach_ctx *a, struct target *t)
{
	return a->opts->follow ? &a->global_objects : &t->objects;
}

void attach_libload(struct attach_ctx *a, struct target *t, const char *path)
{
	if (!t->libload_attached)
		t->libload_attached = attach_libload_pid(a, attach_pid(a, t), path);
}

/*
 * Say what the sites cost here. Five-byte ones are probed at the stack step before them
 * (elfnotes.c: an optimized uprobe kills the program's forked children), which the kernel
 * single-steps whether or not it optimizes uprobes.
 */
static void note_site_kind(const struct elf_probes *probes, const char *shown)
{
	if (probes->sites_nop5)
		log_warn("%s: %u probe sites are five-byte nops (COROBPF_NOP5): corobpf probes each "
			 "at the instruction before it, which the kernel single-steps, because %s; a "
			 "traced hit costs several times a one-byte nop's: rebuild without "
			 "COROBPF_NOP5 (docs/probes.md)", shown, probes->sites_nop5,
			 attach_kernel_optimizes_uprobes()
				 ? "a uprobe on the nop itself this kernel turns into a call that a "
				   "child the program forks afterwards cannot follow (it dies of SIGSEGV)"
				 : "this kernel would single-step the nop as well");
}

/*
 * Attach every corobpf probe of one object. `path` opens the file in our
 * namespace; `shown` is how the target names it. Returns the sites attached.
 */
static u32 attach_object_pid(struct attach_ctx *a, int pid, const char *path, const char *shown,
			     bool late)
{
	struct elf_probes probes;
	char err[512];
	u32 sites = 0, need = 0;
	int ret;

	if (a->usdt) {
		int n = usdt_attach_object(a, pid, path, shown, &probes);

		if (n < 0)
			return 0;
		if (n)
			note_site_kind(&probes, shown);
		sites = (u32)n;
		goto attached;
	}
	ret = elf_probe_scan(path, "corobpf", &probes, err, sizeof(err));
	if (ret < 0) {
		usdt_object_unreadable(a, ret, path, shown, err);
		return 0;
	}
	if (usdt_object_refused(a, &probes, shown))
		return 0;
	if (probes.sites_nop5 && attach_kernel_optimizes_uprobes()) {
		/* libbpf probes the nop itself: see note_site_kind(). */
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_warn("%s: not attached: its %u probe sites are five-byte nops (COROBPF_NOP5), "
			 "which libbpf would probe as they are, and this kernel would turn those "
			 "uprobes into calls that a child the program forks cannot follow (it dies of "
			 "SIGSEGV); rebuild it without COROBPF_NOP5", shown, probes.sites_nop5);
		return 0;
	}
	for (unsigned i = 0; i < probes.n_names; i++)
		if (attach_prog(a, probes.names[i].name))
			need += probes.names[i].specs;
	if (!need || !usdt_budget_take(a, path, shown, need))
		return 0;
	note_site_kind(&probes, shown);
	for (unsigned i = 0; i < probes.n_names; i++) {
		const struct elf_probe_name *pn = &probes.names[i];
		struct bpf_program *prog = attach_prog(a, pn->name);
		struct bpf_link *link;

		if (!prog) {
			/*
			 * The batched path's probe stays untouched on the trap path; the
			 * spare announce sites are armed only to ask (announce.h).
			 */
			if (strcmp(pn->name, "batch") && strcmp(pn->name, "announce_spare"))
				log_warn("%s: probe corobpf:%s is not part of probe ABI v1; ignored",
					 shown, pn->name);
			continue;
		}
		link = bpf_program__attach_usdt(prog, pid, path, "corobpf", pn->name, NULL);
		if (!link) {
			a->ustats[CORO_USTAT_ATTACH_FAIL]++;
			log_warn("cannot attach to corobpf:%s in %s (process %d): %s", pn->name,
				 shown, pid, strerror(errno));
			continue;
		}
		attach_add_link(a, link);
		sites += pn->count;
	}
attached:
	if (sites) {
		if (pid < 0)
			log_verbose("all processes: %u probe sites in %s%s", sites, shown,
				    late ? " (loaded after start)" : "");
		else
			log_verbose("process %d: %u probe sites in %s%s", pid, sites, shown,
				    late ? " (loaded after start)" : "");
		attach_found_object(a, pid < 0 ? 0 : (u32)pid, shown, sites, late);
	}
	return sites;
}

/* ---- the switch-function path ---- */

/* The families to use: asked for with --switch, else every one there is. */
static u32 wanted_families(struct attach_ctx *a)
{
	u32 f = a->opts->switch_forced ? a->opts->switch_families : ~0u;

	/* Pth switches through ucontext: its names and exits need ucontext's switches. */
	if (f & (1u << CORO_FAM_PTH))
		f |= 1u << CORO_FAM_UCONTEXT;
	return f & ~(1u << CORO_FAM_CUSTOM);
}

static void join_sites(const struct switch_plan *plan, const bool *ok, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (u32 i = 0; i < plan->nsites && n + 1 < len; i++) {
		if (!ok[i])
			continue;
		n += snprintf(buf + n, len - n, "%s%s", n ? "; " : "", plan->sites[i].desc);
		if (n >= len)
			n = len - 1;
	}
}

/* Call-site plans list dozens of sites: say how many of each instead. */
static void count_sites(const struct switch_plan *plan, const bool *ok, char *buf, size_t len)
{
	u32 jump = 0, ontop = 0;

	for (u32 i = 0; i < plan->nsites; i++) {
		if (!ok[i])
			continue;
		if (!strncmp(plan->sites[i].func, "jump_fcontext", 13))
			jump++;
		else
			ontop++;
	}
	snprintf(buf, len, "calls of jump_fcontext at %u places, of ontop_fcontext at %u (emulated)",
		 jump, ontop);
}

/* Attach one plan's uprobes; returns how many. */
static u32 attach_plan(struct attach_ctx *a, struct target *t, const char *path, const char *shown,
		       const struct switch_plan *plan, bool late)
{
	bool ok[SWITCHFAM_MAX_SITES] = {0};
	char sites[1024];
	u32 n = 0, stepped = 0;
	/* --follow (Go only): for every process, the BPF side admits the followed ones. */
	int pid = attach_pid(a, t);

	if (a->uprobe_multi && plan->nsites) {
		u64 offs[SWITCHFAM_MAX_SITES], cookies[SWITCHFAM_MAX_SITES];
		int fd;

		for (u32 i = 0; i < plan->nsites; i++) {
			offs[i] = plan->sites[i].offset;
			cookies[i] = plan->sites[i].cookie;
		}
		/* uprobe_multi's pid 0 is every process. */
		fd = attach_uprobe_multi(a, attach_prog(a, "@ctx_multi"), pid < 0 ? 0 : (u32)pid,
					 path, offs, NULL, cookies, plan->nsites);
		if (fd < 0) {
			a->ustats[CORO_USTAT_ATTACH_FAIL]++;
			log_warn("cannot attach to the %s functions of %s (process %u): %s",
				 switchfam_name(plan->family), shown, t->pid, strerror(-fd));
			return 0;
		}
		for (u32 i = 0; i < plan->nsites; i++) {
			ok[i] = true;
			if (!plan->sites[i].emulated &&
			    CORO_CTX_COOKIE_OP(plan->sites[i].cookie) == CORO_CTXOP_SWITCH)
				stepped++;
		}
		n = plan->nsites;
	}
	for (u32 i = 0; !a->uprobe_multi && i < plan->nsites; i++) {
		const struct switch_site *s = &plan->sites[i];
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = s->cookie);
		struct bpf_link *link;

		link = bpf_program__attach_uprobe_opts(attach_prog(a, "@ctx"), pid, path,
						       s->offset, &opts);
		if (!link) {
			a->ustats[CORO_USTAT_ATTACH_FAIL]++;
			log_warn("cannot attach to %s in %s (process %u): %s", s->desc, shown, t->pid,
				 strerror(errno));
			continue;
		}
		attach_add_link(a, link);
		ok[i] = true;
		n++;
		if (!s->emulated && CORO_CTX_COOKIE_OP(s->cookie) == CORO_CTXOP_SWITCH)
			stepped++;
	}
	if (!n)
		return 0;
	if (plan->nsites && strstr(plan->sites[0].func, "@call"))
		count_sites(plan, ok, sites, sizeof(sites));
	else
		join_sites(plan, ok, sites, sizeof(sites));
	log_verbose("process %u: %s switch functions in %s%s: %s", t->pid,
		    switchfam_name(plan->family), shown, late ? " (loaded after start)" : "", sites);
	attach_found_switch(a, t->pid, plan->family, shown, sites, plan->limits, n, stepped);
	t->switch_sites += n;
	return n;
}

/* The call sites of Boost.Context's switch functions in one object (call-site mode). */
static bool attach_fcontext_callers(struct attach_ctx *a, struct target *t, const char *path,
				    const char *shown, bool late)
{
	struct switch_plan *plan = xmalloc(sizeof(*plan));
	char err[512];
	bool ok = true;

	if (switchfam_plan_callers(path, t->fc_delta_jump, t->fc_delta_ontop, plan, err,
				   sizeof(err))) {
		ok = false;
	} else if (plan->nsites) {
		snprintf(plan->limits, sizeof(plan->limits), "probed where they are called");
		attach_plan(a, t, path, shown, plan, late);
	}
	if (!ok && late) {
		/* Too late to go back to the entries: say what will be missing. */
		a->ustats[CORO_USTAT_ATTACH_FAIL]++;
		log_warn("%s: %s; Boost.Context switches made from it are not seen", shown, err);
	} else if (!ok) {
		log_verbose("%s", err);
	}
	free(plan);
	return ok;
}

/*
 * Go: where this binary keeps a goroutine's fields, in a slot of the BPF
 * side's go_offsets map (shared by binaries of one layout), named by every
 * site's cookie. False, said as an error, if the layout is not known.
 */
static bool go_prepare(struct attach_ctx *a, const char *path, const char *shown,
		       struct switch_plan *plan, struct goelf_info *gi)
{
	char err[512];
	u32 slot;
	int ret;

	ret = goelf_read(path, gi, err, sizeof(err));
	if (ret) {
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_err("%s: cannot trace its goroutines: %s", shown, err);
		return false;
	}
	for (slot = 0; slot < a->go_nslots; slot++)
		if (!memcmp(&a->go_slots[slot], &gi->offs, sizeof(gi->offs)))
			break;
	if (slot == a->go_nslots) {
		if (slot == CORO_GO_SLOTS || !a->go_offsets ||
		    bpf_map_update_elem(bpf_map__fd(a->go_offsets), &slot, &gi->offs, BPF_ANY)) {
			a->ustats[CORO_USTAT_ATTACH_FAIL]++;
			log_warn("%s: no room for another Go runtime layout (%u in use)", shown,
				 a->go_nslots);
			return false;
		}
		a->go_slots[a->go_nslots++] = gi->offs;
	}
	for (u32 i = 0; i < plan->nsites; i++)
		plan->sites[i].cookie = (plan->sites[i].cookie & ~(0xffffULL << 48)) |
					(u64)slot << 48;
	log_verbose("%s: %s, runtime.g layout from %s, wait reasons from %s", shown,
		    gi->version[0] ? gi->version : "Go (release unknown)",
		    gi->from_dwarf ? "its DWARF" : "the release table",
		    gi->reasons_by_text ? "its waitReasonStrings" : "the release table");
	return true;
}

/* Go, -p: the goroutines alive now, in their state (after the probe is in place). */
static void go_walk(struct attach_ctx *a, struct target *t, const char *shown,
		    const struct goelf_info *gi)
{
	struct coro_rec_go_g *gs;
	int n;

	if (t->launched)
		return;
	n = gowalk_process(t->pid, gi, a->opts->stacks, &gs);
	if (n < 0) {
		log_warn("%s (process %u): cannot list the goroutines alive now (%s); each "
			 "appears when its state next changes", shown, t->pid, strerror(-n));
		return;
	}
	log_verbose("process %u: %d goroutines alive at attach", t->pid, n);
	attach_found_go_walk(a, t->pid, gs, (u32)n);
}

static void attach_switch_object(struct attach_ctx *a, struct target *t, const char *path,
				 const char *shown, u32 families, bool late)
{
	for (u32 fam = CORO_FAM_UCONTEXT; fam <= SWITCHFAM_LAST; fam++) {
		struct switch_plan plan;
		char err[512];

		if (!(families & (1u << fam)))
			continue;
		if (switchfam_plan(path, fam, &plan, err, sizeof(err))) {
			log_warn("%s: cannot use its %s functions: %s", shown, switchfam_name(fam),
				 err);
			continue;
		}
		if (fam == CORO_FAM_FCONTEXT && t->fcontext_calls) {
			/* Switches are seen where they are called: keep only make_fcontext here. */
			u32 n = 0;

			for (u32 i = 0; i < plan.nsites; i++)
				if (CORO_CTX_COOKIE_OP(plan.sites[i].cookie) != CORO_CTXOP_SWITCH)
					plan.sites[n++] = plan.sites[i];
			plan.nsites = n;
			plan.stepped = 0;
		}
		if (fam == CORO_FAM_GO) {
			struct goelf_info gi;

			if (go_prepare(a, path, shown, &plan, &gi) &&
			    attach_plan(a, t, path, shown, &plan, late))
				go_walk(a, t, shown, &gi);
			continue;
		}
		attach_plan(a, t, path, shown, &plan, late);
	}
	if (t->fcontext_calls && (families & (SWITCHFAM_FCONTEXT_CALLER | (1u << CORO_FAM_FCONTEXT))))
		attach_fcontext_callers(a, t, path, shown, late);
}

/*
 * Boost.Context's jump_fcontext and ontop_fcontext have no instruction the
 * kernel emulates, but every `call` to them is one. Probe the calls, if
 * every object that can reach the functions reaches them only by direct
 * calls; else probe the entries (single-stepped, several times dearer).
 */
static void choose_fcontext_call_sites(struct attach_ctx *a, struct target *t)
{
	const char *lib = NULL;

	if (!(wanted_families(a) & (1u << CORO_FAM_FCONTEXT)))
		return;
	for (size_t i = 0; i < t->nswobjs; i++)
		if (t->swobjs[i].families & (1u << CORO_FAM_FCONTEXT))
			lib = t->swobjs[i].path;
	if (!lib)
		return;
	t->fc_delta_jump = switchfam_fcontext_delta(lib, "jump_fcontext");
	t->fc_delta_ontop = switchfam_fcontext_delta(lib, "ontop_fcontext");
	if (!t->fc_delta_jump || !t->fc_delta_ontop) {
		log_verbose("%s: the switch functions do not start as expected; probing their "
			    "entries", lib);
		return;
	}
	for (size_t i = 0; i < t->nswobjs; i++) {
		struct switch_plan *plan;
		char err[512];
		int ret;

		if (!(t->swobjs[i].families &
		      (SWITCHFAM_FCONTEXT_CALLER | (1u << CORO_FAM_FCONTEXT))))
			continue;
		plan = xmalloc(sizeof(*plan));
		ret = switchfam_plan_callers(t->swobjs[i].path, t->fc_delta_jump, t->fc_delta_ontop,
					     plan, err, sizeof(err));
		free(plan);
		if (ret) {
			log_verbose("%s; Boost.Context switches probed at the functions' entries",
				    err);
			return;
		}
	}
	t->fcontext_calls = true;
}

/*
 * --switch uprobe:PATH:SYMBOL...: the path as the target sees it. A spec
 * that cannot be placed is an error naming it: the user asked for exactly
 * that function.
 */
static int attach_custom(struct attach_ctx *a, struct target *t)
{
	for (size_t i = 0; i < a->opts->ncustom; i++) {
		const struct switch_custom *cs = &a->opts->custom[i];
		struct switch_plan plan;
		char path[32], err[512];
		/* Inside the target's root: symlinks planted there cannot lead out of it. */
		int fd = t->launched ? open_regular(cs->path) : open_regular_in_root(t->pid, cs->path);

		if (fd < 0) {
			log_err("--switch uprobe:%s:%s: cannot open %s in process %u: %s", cs->path,
				cs->symbol, cs->path, t->pid,
				fd == -EINVAL ? "not a regular file" : strerror(-fd));
			return EXIT_NO_PROBES;
		}
		fd_path(path, fd);
		if (switchfam_plan_custom(path, cs, &plan, err, sizeof(err))) {
			log_err("--switch uprobe:%s:%s: cannot be placed: %s", cs->path, cs->symbol,
				err);
			close(fd);
			return EXIT_NO_PROBES;
		}
		if (!attach_plan(a, t, path, cs->path, &plan, false)) {
			log_err("--switch uprobe:%s:%s: cannot be attached (the warning above says "
				"why)", cs->path, cs->symbol);
			close(fd);
			return EXIT_FAILURE_RUNTIME;
		}
		close(fd);
	}
	return 0;
}

int attach_switch_path(struct attach_ctx *a, struct target *t)
{
	const struct capture_opts *o = a->opts;
	u32 all = 0, drop;
	int ret;

	if (o->switch_none || o->system_wide || (t->probe_sites && !o->switch_forced))
		return 0;
	if (o->follow) {
		/* --follow: of the switch-function families, Go's alone (docs/go.md). */
		for (size_t i = 0; i < t->nswobjs; i++)
			attach_switch_object(a, t, t->swobjs[i].path, t->swobjs[i].shown,
					     t->swobjs[i].families & wanted_families(a) &
						     (1u << CORO_FAM_GO),
					     false);
		return 0;
	}
	t->switch_mode = true;
	choose_fcontext_call_sites(a, t);
	/* A runtime's own switches make another family's view of the process wrong (QEMU). */
	for (size_t i = 0; i < t->nswobjs; i++)
		all |= t->swobjs[i].families & wanted_families(a);
	drop = switchfam_excluded(all);
	for (size_t i = 0; i < t->nswobjs; i++)
		attach_switch_object(a, t, t->swobjs[i].path, t->swobjs[i].shown,
				     t->swobjs[i].families & wanted_families(a) & ~drop, false);
	ret = attach_custom(a, t);
	if (ret)
		return ret;
	if (t->probe_sites_ignored)
		log_info("process %u: %u corobpf probe sites left alone (--switch)", t->pid,
			 t->probe_sites_ignored);
	return 0;
}

static void global_go(struct attach_ctx *a, u32 pid, const char *path, const char *shown,
		      bool late, bool walk);

u32 attach_object(struct attach_ctx *a, struct target *t, int fd, const char *path,
			 const char *shown, bool late)
{
	u32 sites = 0, fams;

	if (a->opts->switch_forced) {
		struct elf_probes probes;
		char err[512];

		if (elf_probe_scan(path, "corobpf", &probes, err, sizeof(err)) == 0)
			t->probe_sites_ignored += probes.total;
	} else {
		sites = attach_object_pid(a, attach_pid(a, t), path, shown, late);
		t->probe_sites += sites;
	}
	if (a->opts->switch_none)
		return sites;
	/*
	 * C++20 coroutines: their own sites, whatever else the program has (the
	 * coroutines the promise adapter reports itself are left out, one by one:
	 * cxxcoro.h).
	 */
	if (!a->opts->switch_forced)
		t->switch_sites += cxxattach_object(a, attach_pid(a, t), path, shown, late);
	/* asyncio and Lua: their interpreters' functions, alongside whatever else (interp.h). */
	t->switch_sites += interpattach_object(a, attach_pid(a, t), path, shown, late, !t->launched);
	fams = switchfam_detect(path);
	if (!fams)
		return sites;
	/* A Go PIE: its goroutines made as it exits are named after it is gone (ringev.c). */
	if (fams & (1u << CORO_FAM_GO))
		addrname_learn_bias(t->pid, path);
	if (a->opts->follow && late) {
		/* A target's exec under --follow: Go's family, now (attach_switch_path is past). */
		global_go(a, t->pid, path, shown, late, true);
		return sites;
	}
	if (t->switch_mode) {
		/* Loaded later (dlopen, or a new program after exec): its families now. */
		attach_switch_object(a, t, path, shown, fams & wanted_families(a), late);
	} else {
		char kept[32];
		int keep = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;

		if (fd >= 0 && keep < 0) {
			log_warn("%s: cannot keep it open for the switch-function path: %s", shown,
				 strerror(errno));
			return sites;
		}
		if (keep >= 0) {
			fd_path(kept, keep);
			path = kept;
		}
		t->swobjs = xrealloc(t->swobjs, (t->nswobjs + 1) * sizeof(*t->swobjs));
		t->swobjs[t->nswobjs].fd = keep;
		t->swobjs[t->nswobjs].path = xstrdup(path);
		t->swobjs[t->nswobjs].shown = xstrdup(shown);
		t->swobjs[t->nswobjs].families = fams;
		t->nswobjs++;
	}
	return sites;
}

/* An object a process maps that cannot be opened: why, where a person needs to know it. */
static void object_open_failed(struct attach_ctx *a, u32 pid, const char *shown, int err)
{
	switch (err) {
	case EINVAL:
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_warn("process %u maps %s, which is now not a regular file: not opened", pid,
			 shown);
		break;
	case ESTALE:
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_warn("process %u maps %s, but the file at that path is another one: not "
			 "opened", pid, shown);
		break;
	case EACCES:
	case EPERM:
		a->open_denied++;
		a->open_denied_errno = err;
		if (!a->opts->system_wide)
			log_warn("cannot open %s mapped by process %u: %s (the files another "
				 "user's process maps need CAP_SYS_ADMIN, or CAP_SYS_PTRACE and "
				 "CAP_DAC_READ_SEARCH)", shown, pid, strerror(err));
		break;
	default:
		/* The process exited, or the mapping went away: tried again if it comes back. */
		log_debug("cannot open %s mapped by process %u: %s", shown, pid, strerror(err));
	}
}

/* An object on a filesystem that may hang: refused, counted, the first one kept to be said. */
static void object_may_hang(struct attach_ctx *a, u32 pid, const char *shown, const char *type)
{
	a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
	if (!a->may_hang_refused++)
		snprintf(a->may_hang_first, sizeof(a->may_hang_first), "%.400s (%s, mapped by "
			 "process %u)", shown, type, pid);
	log_debug("process %u maps %s, on %s, a filesystem that may hang: not opened", pid, shown,
		  type);
}

/*
 * Calls fn once for every executable file mapping of pid not yet in seen
 * (keyed by device and inode), with a descriptor of the exact file mapped
 * (safeopen.h: never a FIFO, a device or a file swapped in since) and the
 * path as mapped. fn returns false if the object could not be examined
 * (its process gone): it is tried again later. Returns -errno when the maps
 * cannot be read.
 */
typedef bool (*object_fn)(struct attach_ctx *a, void *arg, int fd, const char *shown);

static int for_each_new_object(u32 pid, struct hmap *seen, object_fn fn, struct attach_ctx *a,
			       void *arg)
{
	char path[64], line[4096 + 128], fstype[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, ino;
		unsigned maj, min;
		char perms[8];
		int off = 0, fd;
		const char *p;

		if (sscanf(line, "%lx-%lx %7s %*x %x:%x %lu %n", &start, &end, perms, &maj, &min,
			   &ino, &off) < 6 || !off)
			continue;
		p = line + off;
		if (perms[2] != 'x' || !ino || *p != '/')
			continue;
		line[strcspn(line, "\n")] = 0;
		if (hmap_get(seen, makedev(maj, min), ino))
			continue;
		hmap_put(seen, makedev(maj, min), ino, (void *)1);
		/*
		 * Every open and read of the file calls into its filesystem, and one that never
		 * answers (a user's FUSE daemon, a server gone) would hold this thread, and the
		 * capture with it, unkillably: decided by its mount's type first, and not opened
		 * (remembered as seen: refused once).
		 */
		if (dev_may_hang(pid, makedev(maj, min), fstype, sizeof(fstype))) {
			object_may_hang(a, pid, p, fstype);
			continue;
		}
		fd = open_mapped_object(pid, start, end, makedev(maj, min), ino, p);
		if (fd < 0) {
			object_open_failed(a, pid, p, -fd);
			if (fd != -EINVAL && fd != -ESTALE)
				hmap_del(seen, makedev(maj, min), ino);
			continue;
		}
		if (!fn(a, arg, fd, p))
			hmap_del(seen, makedev(maj, min), ino);
		close(fd);
	}
	fclose(f);
	return 0;
}

struct process_scan {
	struct target *t;
	bool late;
};

static bool process_object(struct attach_ctx *a, void *arg, int fd, const char *shown)
{
	struct process_scan *ps = arg;
	char open_path[32];

	if (!ps->late)
		attach_note_searched(a, shown);
	fd_path(open_path, fd);
	attach_object(a, ps->t, fd, open_path, shown, ps->late);
	if (is_ldso(shown))
		attach_libload(a, ps->t, open_path);
	return true;
}

int attach_scan_process(struct attach_ctx *a, struct target *t, bool late)
{
	struct process_scan ps = { .t = t, .late = late };
	int err = for_each_new_object(t->pid, attach_examined(a, t), process_object, a, &ps);

	if (err >= 0)
		return 0;
	if (late)
		return 0;
	if (err == -EACCES || err == -EPERM) {
		log_err("cannot read /proc/%u/maps: %s: process %u belongs to another user, and "
			"reading it needs CAP_SYS_PTRACE (run corobpf as root)", t->pid,
			strerror(-err), t->pid);
		return EXIT_PRIVILEGE;
	}
	log_err("cannot read /proc/%u/maps: %s", t->pid, strerror(-err));
	return err == -ENOENT ? EXIT_NO_PROCESS : EXIT_FAILURE_RUNTIME;
}

/*
 * Attached for every process. The file is used through the descriptor
 * for_each_new_object() opened: a short-lived process (a command exec'd
 * under --follow) may be gone before libbpf opens the path again, and the
 * object would then never be attached for anyone.
 */
struct global_scan {
	u32 pid;
	bool late;
};

/*
 * --follow and -a: a Go program a followed process runs, or any process
 * (-a), for every process (the BPF side admits the followed ones, or each
 * on its first probe); its switch record names the process that mapped it
 * first, whose goroutines alive by now are walked (walk: not a process
 * held at its exec, whose memory is still its old image's).
 */
static void global_go(struct attach_ctx *a, u32 pid, const char *path, const char *shown,
		      bool late, bool walk)
{
	struct target t = {.pid = pid, .launched = !walk};
	struct switch_plan *plan;
	struct goelf_info gi;
	char err[512];

	if (!(a->opts->follow || a->opts->system_wide) || a->opts->switch_none ||
	    !(wanted_families(a) & (1u << CORO_FAM_GO)) ||
	    !(switchfam_detect(path) & (1u << CORO_FAM_GO)))
		return;
	plan = xmalloc(sizeof(*plan));
	if (switchfam_plan(path, CORO_FAM_GO, plan, err, sizeof(err)))
		log_warn("%s: cannot use its go functions: %s", shown, err);
	else if (go_prepare(a, path, shown, plan, &gi) &&
		 attach_plan(a, &t, path, shown, plan, late))
		go_walk(a, &t, shown, &gi); /* it may have run a while before this */
	free(plan);
}

/*
 * -a: the switch-function families an object defines (ucontext, Boost.Context,
 * Pth, Ruby, QEMU, greenlet), attached for every process. The BPF side takes
 * their switches only in processes started after corobpf (docs/design.md, "System-wide").
 * Boost.Context is probed at its functions' entries: which objects of a
 * process call them is not known before it runs. libc's ucontext and libpth
 * are kept for each program that uses them instead (exec_ucontext_at).
 */
static void global_switch(struct attach_ctx *a, const char *path, const char *shown, bool late)
{
	u32 fams;

	if (!a->opts->system_wide || a->opts->switch_none)
		return;
	fams = switchfam_detect(path);
	/* libc's ucontext and libpth: attached per process (attach_exec_ucontext), kept open for it. */
	for (u32 fam = CORO_FAM_UCONTEXT; fam <= CORO_FAM_PTH; fam++) {
		int keep;

		/* `path` names an open descriptor (/proc/self/fd/N): the same file again. */
		if (fam == CORO_FAM_FCONTEXT || !(fams & (1u << fam)) ||
		    (keep = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		a->ctx_providers = xrealloc(a->ctx_providers,
					    (a->nctx_providers + 1) * sizeof(*a->ctx_providers));
		a->ctx_providers[a->nctx_providers].fd = keep;
		a->ctx_providers[a->nctx_providers].family = fam;
		a->ctx_providers[a->nctx_providers++].shown = xstrdup(shown);
	}
	fams &= ~(1u << CORO_FAM_UCONTEXT | 1u << CORO_FAM_PTH);
	fams &= wanted_families(a) & ~(1u << CORO_FAM_GO);
	for (u32 fam = CORO_FAM_UCONTEXT; fam <= SWITCHFAM_LAST; fam++) {
		struct target t = {.pid = 0};
		struct switch_plan *plan;
		char err[512];

		if (!(fams & (1u << fam)))
			continue;
		plan = xmalloc(sizeof(*plan));
		if (switchfam_plan(path, fam, plan, err, sizeof(err)))
			log_warn("%s: cannot use its %s functions: %s", shown, switchfam_name(fam), err);
		else
			a->global_sites += attach_plan(a, &t, path, shown, plan, late);
		free(plan);
	}
}

/*
 * -a: the program at `exe` (an open descriptor's path) that process pid now
 * runs: if it uses libc's ucontext or Pth (its imports say), those families
 * of every provider (libc, libpth) for pid alone, before it runs when its
 * exec is held by the gate (a program not seen yet), else as soon as its exec
 * is seen. Not in a process whose runtime leaves them out (QEMU's).
 */
static void exec_ucontext_at(struct attach_ctx *a, u32 pid, const char *exe)
{
	struct target t = {.pid = pid, .own_pid = true};
	u32 fams, own;
	struct stat st;

	if (!a->opts->system_wide || a->opts->switch_none || !a->nctx_providers || stat(exe, &st))
		return;
	/* Once per process and program (the gate's hold and the exec record both come here). */
	if ((u64)(uintptr_t)hmap_get(&a->ctx_pids, pid, 0) == (u64)st.st_ino + 1)
		return;
	hmap_put(&a->ctx_pids, pid, 0, (void *)(uintptr_t)(st.st_ino + 1));
	/* Every exec on the machine comes here: a program is read once. */
	fams = (u32)(uintptr_t)hmap_get(&a->ctx_exe_fams, st.st_dev, st.st_ino);
	if (!fams) {
		own = switchfam_detect(exe);
		fams = (switchfam_imports(exe) & ~switchfam_excluded(own & 0xffff)) + 1;
		hmap_put(&a->ctx_exe_fams, st.st_dev, st.st_ino, (void *)(uintptr_t)fams);
	}
	fams = (fams - 1) & wanted_families(a);
	for (size_t i = 0; fams && i < a->nctx_providers; i++) {
		const struct ctx_provider *cp = &a->ctx_providers[i];
		struct switch_plan *plan;
		char path[32], err[512];

		if (!(fams & (1u << cp->family)))
			continue;
		fd_path(path, cp->fd);
		plan = xmalloc(sizeof(*plan));
		if (switchfam_plan(path, cp->family, plan, err, sizeof(err))) {
			log_warn("%s: cannot use its %s functions: %s", cp->shown,
				 switchfam_name(cp->family), err);
		} else {
			for (u32 s = 0; s < plan->nsites; s++)
				plan->sites[s].cookie |= (u64)CORO_CTXC_THIS_PID << 40;
			attach_plan(a, &t, path, cp->shown, plan, false);
		}
		free(plan);
	}
}

/*
 * The device of the program process pid runs, from its mappings (no call into the program's
 * filesystem, as a stat would make): false if its exe link or its mapping cannot be read.
 */
static bool exe_device(u32 pid, dev_t *dev, char *shown, size_t len)
{
	char path[64], line[4096 + 128];
	bool found = false;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, shown, len - 1);
	if (n <= 0)
		return false;
	shown[n] = 0;
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		int off = 0;

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%*x-%*x %*7s %*x %x:%x %*u %n", &maj, &min, &off) < 2 || !off ||
		    strcmp(line + off, shown))
			continue;
		*dev = makedev(maj, min);
		found = true;
	}
	fclose(f);
	return found;
}

void attach_exec_ucontext(struct attach_ctx *a, u32 pid)
{
	char exe[64], fdp[32], shown[4096], fstype[64];
	dev_t dev;
	int fd;

	if (!a->opts->system_wide || !a->nctx_providers)
		return;
	/*
	 * Its program is opened and read: not on a filesystem that may hang. The scan of its
	 * mappings just before counted it refused, once.
	 */
	if (!exe_device(pid, &dev, shown, sizeof(shown)) ||
	    dev_may_hang(pid, dev, fstype, sizeof(fstype)))
		return;
	/* The exact file the process runs, whatever its path says now. */
	snprintf(exe, sizeof(exe), "/proc/%u/exe", pid);
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	fd_path(fdp, fd);
	exec_ucontext_at(a, pid, fdp);
	close(fd);
}

/*
 * -a, --follow: an object's families for every process (C++20's, the
 * interpreters', and under -a the switch functions'), and its plans kept for
 * the processes admitted later.
 */
static void global_families(struct attach_ctx *a, const char *path, const char *shown, bool late)
{
	size_t since = a->nfound;
	struct stat st;

	/* C++20 coroutines too: a program held at its exec is examined here, not when mapped. */
	if (!a->opts->switch_none && !a->opts->switch_forced)
		a->global_sites += cxxattach_object(a, -1, path, shown, late);
	if (!a->opts->switch_none)
		a->global_sites += interpattach_object(a, -1, path, shown, late, true);
	global_switch(a, path, shown, late);
	if (a->opts->system_wide && since < a->nfound && stat(path, &st) == 0)
		attach_global_plans_note(a, st.st_dev, st.st_ino, since);
}

static bool global_object(struct attach_ctx *a, void *arg, int fd, const char *shown)
{
	const struct global_scan *gs = arg;
	bool late = gs->late;
	char fd_path_buf[32];
	u32 sites;

	fd_path(fd_path_buf, fd);
	global_go(a, gs->pid, fd_path_buf, shown, late, true);
	sites = attach_object_pid(a, -1, fd_path_buf, shown, late);
	a->global_sites += sites;
	global_families(a, fd_path_buf, shown, late);
	if (is_ldso(shown))
		attach_libload_pid(a, -1, fd_path_buf);
	return true;
}

/*
 * -a: every object pid maps that carries probes, attached once for all
 * processes (the BPF side admits processes one by one). Objects are
 * examined once per (device, inode) whichever process maps them; a process
 * already gone (or a kernel thread) has nothing to add.
 */
void attach_scan_global(struct attach_ctx *a, u32 pid, bool late)
{
	struct global_scan gs = {.pid = pid, .late = late};

	for_each_new_object(pid, &a->global_objects, global_object, a, &gs);
}

/*
 * -a, --follow: one object ld.so will map for a program held at its exec, once per (dev,
 * inode), through the descriptor the gate's examiner opened (the file it examined).
 */
static void exec_needed_object(struct attach_ctx *a, const struct execgate_lib *lib)
{
	char fdp[32], shown[4096];
	struct stat st;
	ssize_t n;

	if (lib->fd < 0 || fstat(lib->fd, &st) < 0 ||
	    hmap_get(&a->global_objects, st.st_dev, st.st_ino))
		return;
	hmap_put(&a->global_objects, st.st_dev, st.st_ino, (void *)1);
	fd_path(fdp, lib->fd);
	/* Named as /proc/PID/maps will name it (from corobpf's root), not from the chroot's. */
	n = readlink(fdp, shown, sizeof(shown) - 1);
	shown[n > 0 ? n : 0] = 0;
	a->global_sites += attach_object_pid(a, -1, fdp, n > 0 ? shown : lib->path, false);
	global_families(a, fdp, n > 0 ? shown : lib->path, false);
	if (is_ldso(lib->path))
		attach_libload_pid(a, -1, fdp);
}

void attach_exec_object(struct attach_ctx *a, int fd, u32 pid, bool changed,
			const struct execgate_lib *libs, size_t nlibs)
{
	char fdp[32], link[64], shown[4096];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return;
	fd_path(fdp, fd);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, shown, sizeof(shown) - 1);
	shown[n > 0 ? n : 0] = 0;
	if (changed)
		hmap_del(&a->global_objects, st.st_dev, st.st_ino);
	if (!hmap_get(&a->global_objects, st.st_dev, st.st_ino)) {
		hmap_put(&a->global_objects, st.st_dev, st.st_ino, (void *)1);
		a->global_sites += attach_object_pid(a, -1, fdp, shown, false);
		if (is_ldso(shown))
			attach_libload_pid(a, -1, fdp);
		global_go(a, pid, fdp, shown, false, false);
		global_families(a, fdp, shown, false);
	}
	/*
	 * What ld.so will map, as the gate's examiner found it (execsearch.h): from
	 * the process's root, with the environment of the process before its exec
	 * (the new one is not readable yet). A library found another way, or not
	 * reached (a search cut short, a directory on a filesystem that can hang), is
	 * attached when ld.so maps it, late, as without the gate. Whatever was found
	 * is only examined, and attached if it has probes.
	 */
	for (size_t i = 0; i < nlibs; i++)
		exec_needed_object(a, &libs[i]);
	/* Its libraries examined (libpth among them): its ucontext and Pth, for it. */
	exec_ucontext_at(a, pid, fdp);
}

void attach_target_free(struct target *t)
{
	hmap_free(&t->objects);
	for (size_t j = 0; j < t->nswobjs; j++) {
		if (t->swobjs[j].fd >= 0)
			close(t->swobjs[j].fd);
		free(t->swobjs[j].path);
		free(t->swobjs[j].shown);
	}
	free(t->swobjs);
	t->swobjs = NULL;
	t->nswobjs = 0;
	for (size_t i = 0; i < t->nheld; i++)
		attach_found_release(&t->held[i]);
	free(t->held);
	t->held = NULL;
	t->nheld = 0;
}

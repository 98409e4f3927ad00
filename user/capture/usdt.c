// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* USDT through uprobe_multi links, argument specs decoded here: see usdt.h. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <asm/ptrace.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "log.h"
#include "announce.h"
#include "usdt.h"

/* ---- argument strings ---- */

static const struct {
	const char *names[4]; /* 64, 32, 16, 8 bits */
	short off;
} usdt_regs[] = {
	{ { "rip", "eip", "", "" }, offsetof(struct pt_regs, rip) },
	{ { "rax", "eax", "ax", "al" }, offsetof(struct pt_regs, rax) },
	{ { "rbx", "ebx", "bx", "bl" }, offsetof(struct pt_regs, rbx) },
	{ { "rcx", "ecx", "cx", "cl" }, offsetof(struct pt_regs, rcx) },
	{ { "rdx", "edx", "dx", "dl" }, offsetof(struct pt_regs, rdx) },
	{ { "rsi", "esi", "si", "sil" }, offsetof(struct pt_regs, rsi) },
	{ { "rdi", "edi", "di", "dil" }, offsetof(struct pt_regs, rdi) },
	{ { "rbp", "ebp", "bp", "bpl" }, offsetof(struct pt_regs, rbp) },
	{ { "rsp", "esp", "sp", "spl" }, offsetof(struct pt_regs, rsp) },
	{ { "r8", "r8d", "r8w", "r8b" }, offsetof(struct pt_regs, r8) },
	{ { "r9", "r9d", "r9w", "r9b" }, offsetof(struct pt_regs, r9) },
	{ { "r10", "r10d", "r10w", "r10b" }, offsetof(struct pt_regs, r10) },
	{ { "r11", "r11d", "r11w", "r11b" }, offsetof(struct pt_regs, r11) },
	{ { "r12", "r12d", "r12w", "r12b" }, offsetof(struct pt_regs, r12) },
	{ { "r13", "r13d", "r13w", "r13b" }, offsetof(struct pt_regs, r13) },
	{ { "r14", "r14d", "r14w", "r14b" }, offsetof(struct pt_regs, r14) },
	{ { "r15", "r15d", "r15w", "r15b" }, offsetof(struct pt_regs, r15) },
};

/* "%rax" at s: its pt_regs offset, and the characters taken; -1 if no register. */
static int parse_reg(const char *s, short *off)
{
	size_t best = 0;

	if (*s != '%')
		return -1;
	s++;
	for (size_t i = 0; i < sizeof(usdt_regs) / sizeof(usdt_regs[0]); i++) {
		for (int w = 0; w < 4; w++) {
			size_t n = strlen(usdt_regs[i].names[w]);

			/* The longest name that matches: "r8" is a prefix of "r8d". */
			if (n > best && !strncmp(s, usdt_regs[i].names[w], n)) {
				best = n;
				*off = usdt_regs[i].off;
			}
		}
	}
	return best ? (int)best + 1 : -1;
}

int usdt_parse_args(const char *args, struct usdt_spec *spec, char *err, size_t errlen)
{
	const char *s = args;

	memset(spec, 0, sizeof(*spec));
	while (*s) {
		struct usdt_arg *a;
		long long size, val = 0;
		char *end;
		int n;

		while (*s == ' ')
			s++;
		if (!*s)
			break;
		if (spec->nargs == USDT_MAX_ARGS) {
			snprintf(err, errlen, "more than %d arguments in \"%s\"", USDT_MAX_ARGS, args);
			return -EINVAL;
		}
		a = &spec->args[spec->nargs];
		size = strtoll(s, &end, 10);
		if (end == s || *end != '@' ||
		    (llabs(size) != 1 && llabs(size) != 2 && llabs(size) != 4 && llabs(size) != 8)) {
			snprintf(err, errlen, "argument %d of \"%s\": no size of 1, 2, 4 or 8 bytes",
				 spec->nargs, args);
			return -EINVAL;
		}
		a->is_signed = size < 0;
		a->bitshift = (int8_t)(64 - 8 * llabs(size));
		s = end + 1;
		if (*s == '$') {
			val = strtoll(s + 1, &end, 0);
			if (end == s + 1) {
				snprintf(err, errlen, "argument %d of \"%s\": bad constant",
					 spec->nargs, args);
				return -EINVAL;
			}
			a->type = USDT_ARG_CONST;
			a->val_off = (u64)val;
			s = end;
		} else if ((n = parse_reg(s, &a->reg_off)) > 0) {
			a->type = USDT_ARG_REG;
			s += n;
		} else {
			/* off(%reg), or (%reg) */
			if (*s != '(') {
				val = strtoll(s, &end, 0);
				if (end == s) {
					snprintf(err, errlen, "argument %d of \"%s\" is of a form "
						 "corobpf does not read", spec->nargs, args);
					return -EINVAL;
				}
				s = end;
			}
			if (*s != '(' || (n = parse_reg(s + 1, &a->reg_off)) < 0 ||
			    s[1 + n] != ')') {
				snprintf(err, errlen, "argument %d of \"%s\" is of a form corobpf "
					 "does not read (index registers, segments)", spec->nargs,
					 args);
				return -EINVAL;
			}
			a->type = USDT_ARG_REG_DEREF;
			a->val_off = (u64)val;
			s += n + 2;
		}
		if (*s && *s != ' ') {
			snprintf(err, errlen, "argument %d of \"%s\" is of a form corobpf does not "
				 "read", spec->nargs, args);
			return -EINVAL;
		}
		spec->nargs++;
	}
	return 0;
}

/* ---- the run's spec slots, shared by content ---- */

struct usdt_table {
	struct hmap ids;	/* (hash, probe) -> slot + 1 */
	struct usdt_spec *specs;
	u32 n, cap;
};

static u64 spec_hash(const struct usdt_spec *s)
{
	const unsigned char *p = (const void *)s;
	u64 h = 1469598103934665603ULL;

	for (size_t i = 0; i < sizeof(*s); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

/* The slot + 1 of a spec with this content in t, or 0. */
static u32 table_find(const struct usdt_table *t, const struct usdt_spec *s, u64 h)
{
	for (u64 probe = 0;; probe++) {
		u32 id = (u32)(uintptr_t)hmap_get(&t->ids, h, probe);

		if (!id || !memcmp(&t->specs[id - 1], s, sizeof(*s)))
			return id;
	}
}

static u32 table_add(struct usdt_table *t, const struct usdt_spec *s, u64 h)
{
	u64 probe = 0;

	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->specs = xrealloc(t->specs, t->cap * sizeof(*t->specs));
	}
	t->specs[t->n++] = *s;
	while (hmap_get(&t->ids, h, probe))
		probe++;
	hmap_put(&t->ids, h, probe, (void *)(uintptr_t)t->n);
	return t->n;
}

void usdt_free(struct attach_ctx *a)
{
	if (!a->usdt)
		return;
	hmap_free(&a->usdt->ids);
	free(a->usdt->specs);
	free(a->usdt);
	a->usdt = NULL;
}

bool usdt_object_refused(struct attach_ctx *a, const struct elf_probes *probes, const char *shown)
{
	if (!probes->sites_refused)
		return false;
	a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
	log_warn("%s: refusing its probes, nothing attached in it: %s (%u of %u sites refused; "
		 "see \"What corobpf refuses\" in docs/probes.md)", shown, probes->refused,
		 probes->sites_refused, probes->total);
	return true;
}

void usdt_object_unreadable(struct attach_ctx *a, int ret, const char *path, const char *shown,
			    const char *err)
{
	size_t n = strlen(path);

	/* elfnotes names the file by the path it was given: a descriptor's, often. */
	if (!strncmp(err, path, n) && !strncmp(err + n, ": ", 2))
		err += n + 2;
	if (ret != -EINVAL) {
		log_debug("skipping %s: %s", shown, err);
		return;
	}
	a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
	log_warn("%s: refusing its probes, nothing attached in it: %s (see \"What corobpf "
		 "refuses\" in docs/probes.md)", shown, err);
}

bool usdt_budget_take(struct attach_ctx *a, const char *path, const char *shown, u32 need)
{
	bool found = a->opts->system_wide || a->opts->follow;
	struct stat st;
	u64 owner = 0, mine = 0;
	const char *why = NULL;

	if (stat(path, &st) == 0)
		owner = st.st_uid;
	if (owner)
		mine = (u64)(uintptr_t)hmap_get(&a->usdt_specs_by_owner, owner, 0);
	if (need > USDT_SPECS_PER_OBJECT)
		why = "more than one object may have", need = USDT_SPECS_PER_OBJECT + 1;
	else if (found && owner && mine + need > USDT_SPECS_PER_USER)
		why = "more than its owner's objects may have together";
	else if (found && owner && a->usdt_specs_users + need > USDT_SPECS_ALL_USERS)
		why = "more than other users' objects may have together";
	else if (a->usdt_specs_used + need > USDT_SPEC_SLOTS)
		why = "more than are left";
	if (why) {
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_warn("%s (owner uid %llu): not attached: its probes need %s%u more USDT "
			 "argument specifications, %s (%u of %u are taken); corobpf's SDK needs "
			 "a few per probe, so this object was built to exhaust them or is not ours",
			 shown, (unsigned long long)owner,
			 need > USDT_SPECS_PER_OBJECT ? "more than " : "",
			 need > USDT_SPECS_PER_OBJECT ? USDT_SPECS_PER_OBJECT : need, why,
			 a->usdt_specs_used, USDT_SPEC_SLOTS);
		return false;
	}
	a->usdt_specs_used += need;
	if (found && owner && need) {
		hmap_put(&a->usdt_specs_by_owner, owner, 0, (void *)(uintptr_t)(mine + need));
		a->usdt_specs_users += need;
	}
	return true;
}

/* ---- setup ---- */

/*
 * Attached in this order, one link each. The batched path's probe (batch.h:
 * attached only when it is the run's) comes first: once its semaphore is
 * up, create, ready, switch and exit go to the threads' buffers whole,
 * rather than each trapping from the moment its own link is in (a program
 * running through the attach would show a switch in and not its switch out).
 */
static const char *const probe_names[] = {
	"batch", "create", "name", "ready", "switch", "exit", "span_begin", "span_end",
	"announce_done", "announce",
};
/*
 * announce_done before announce: its site counts in no semaphore, announce's
 * does; once announce's is armed the scheduler answers, and its done is seen.
 */
#define PROBE_BATCH 0
#define PROBE_ANNOUNCE_DONE 8
#define PROBE_ANNOUNCE 9
#define NPROBES (sizeof(probe_names) / sizeof(probe_names[0]))

bool usdt_multi_setup(struct attach_ctx *a)
{
	struct bpf_map *specs = a->usdt_specs;

	if (!a->uprobe_multi)
		return false;
	if (bpf_map__value_size(specs) != sizeof(struct usdt_spec)) {
		log_verbose("libbpf's USDT spec is %u bytes here, not the %zu corobpf writes: "
			    "USDT probes attached through libbpf", bpf_map__value_size(specs),
			    sizeof(struct usdt_spec));
		return false;
	}
	for (size_t i = 0; i < NPROBES; i++)
		if (attach_prog(a, probe_names[i]))
			bpf_program__set_expected_attach_type(attach_prog(a, probe_names[i]),
							      CORO_BPF_TRACE_UPROBE_MULTI);
	bpf_program__set_expected_attach_type(attach_prog(a, "@libload"),
					      CORO_BPF_TRACE_UPROBE_MULTI);
	a->usdt = xcalloc(1, sizeof(*a->usdt));
	hmap_init(&a->usdt->ids);
	return true;
}

/* ---- one object ---- */

struct site_vec {
	u64 *offs, *refs, *cookies;
	u32 n, cap;
};

struct walk {
	struct attach_ctx *a;
	struct site_vec v[NPROBES];
	/* The trap path reading buffers: the instruction after each batch site (coro_batch_full). */
	struct site_vec full;
	/* The spare announce sites (announce.h): armed only to ask a running scheduler. */
	u64 spares[ANNOUNCE_SPARES_MAX];
	u32 nspares;
	struct usdt_table local; /* this object's distinct specs */
	char why[512];
};

static int probe_index(const char *name)
{
	for (size_t i = 0; i < NPROBES; i++)
		if (!strcmp(name, probe_names[i]))
			return (int)i;
	return -1;
}

static void site_push(struct site_vec *v, u64 off, u64 ref, u64 cookie)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 16;
		v->offs = xrealloc(v->offs, v->cap * sizeof(u64));
		v->refs = xrealloc(v->refs, v->cap * sizeof(u64));
		v->cookies = xrealloc(v->cookies, v->cap * sizeof(u64));
	}
	v->offs[v->n] = off;
	v->refs[v->n] = ref;
	v->cookies[v->n] = cookie;
	v->n++;
}

static void walk_site(void *ctx, const struct elf_probe_site *site)
{
	struct walk *w = ctx;
	int k = probe_index(site->name);
	struct usdt_spec spec;
	char err[256];
	bool full;
	u64 h;
	u32 id;

	if (!strcmp(site->name, "announce_spare") && site->off && w->nspares < ANNOUNCE_SPARES_MAX) {
		w->spares[w->nspares++] = site->off;
		return;
	}
	if (k < 0 || w->why[0])
		return;
	/*
	 * The batch probe belongs to the batched path; on the trap path, when this session reads
	 * buffers, a probe of its own on the instruction after it, no semaphore, copies out a full
	 * buffer (another session's batch semaphore makes the program append; batch.bpf.h,
	 * coro_batch_full). The nop before changed no register: the site's argument is read there
	 * as at the site, when it is one.
	 */
	full = k == PROBE_BATCH && !attach_prog(w->a, site->name);
	if (full && (!site->off_after || !attach_prog(w->a, "@batch_full")))
		return;
	if (!full && !attach_prog(w->a, site->name))
		return;
	/* A launched command is traced from its start: nothing existed before to ask about. */
	if ((k == PROBE_ANNOUNCE || k == PROBE_ANNOUNCE_DONE) && w->a->opts->argv &&
	    !w->a->opts->system_wide)
		return;
	if (!site->off) {
		snprintf(w->why, sizeof(w->why), "site of corobpf:%s at 0x%llx is in no "
			 "executable segment", site->name, (unsigned long long)site->pc);
		return;
	}
	/*
	 * The probe after a batch site is this path's own help, not a probe the object asks for:
	 * what it cannot use is left out, never the object refused for it (its semaphore is
	 * another session's). After the site, only a register holds what it held at the site.
	 */
	if (full) {
		if (usdt_parse_args(site->args, &spec, err, sizeof(err)) || spec.nargs < 1 ||
		    spec.args[0].type != USDT_ARG_REG)
			return;
	} else if (site->sema && !site->sema_off) {
		snprintf(w->why, sizeof(w->why), "semaphore of corobpf:%s at 0x%llx is in no "
			 "writable segment", site->name, (unsigned long long)site->sema);
		return;
	} else if (usdt_parse_args(site->args, &spec, err, sizeof(err))) {
		snprintf(w->why, sizeof(w->why), "corobpf:%s at 0x%llx: %s", site->name,
			 (unsigned long long)site->pc, err);
		return;
	}
	h = spec_hash(&spec);
	id = table_find(&w->local, &spec, h);
	if (!id) {
		if (w->local.n >= USDT_SPECS_PER_OBJECT + 1)
			return; /* refused whole below; keep the walk cheap */
		id = table_add(&w->local, &spec, h);
	}
	/* The spec's id: local for now. */
	if (full)
		site_push(&w->full, site->off_after, 0, id - 1);
	else
		site_push(&w->v[k], site->off, site->sema_off, id - 1);
}

static void site_vec_free(struct site_vec *v)
{
	free(v->offs);
	free(v->refs);
	free(v->cookies);
}

static void walk_free(struct walk *w)
{
	for (size_t i = 0; i < NPROBES; i++)
		site_vec_free(&w->v[i]);
	site_vec_free(&w->full);
	hmap_free(&w->local.ids);
	free(w->local.specs);
}

int usdt_attach_object(struct attach_ctx *a, int pid, const char *path, const char *shown,
		       struct elf_probes *probes)
{
	struct usdt_table *t = a->usdt;
	struct walk w = {.a = a};
	u32 *global = NULL, need = 0, sites = 0;
	char err[512];
	int map_fd = bpf_map__fd(a->usdt_specs), ret;

	hmap_init(&w.local.ids);
	ret = elf_probe_walk(path, "corobpf", walk_site, &w, probes, err, sizeof(err));
	if (ret < 0) {
		usdt_object_unreadable(a, ret, path, shown, err);
		walk_free(&w);
		return -EINVAL;
	}
	if (usdt_object_refused(a, probes, shown))
		goto out;
	if (w.why[0]) {
		a->ustats[CORO_USTAT_ATTACH_REFUSED]++;
		log_warn("%s: not attached: %s", shown, w.why);
		goto out;
	}
	/* The slots this object adds to the run's: the specs no earlier object had. */
	global = xcalloc(w.local.n ? w.local.n : 1, sizeof(*global));
	for (u32 i = 0; i < w.local.n; i++) {
		global[i] = table_find(t, &w.local.specs[i], spec_hash(&w.local.specs[i]));
		need += !global[i];
	}
	/*
	 * An object with more specs of its own than one may have is refused whatever earlier
	 * objects share with it (the walk stopped counting past the limit: the shared ones
	 * would otherwise bring it under, depending on which object came first).
	 */
	if (w.local.n > USDT_SPECS_PER_OBJECT)
		need = w.local.n;
	if (!w.local.n || !usdt_budget_take(a, path, shown, need))
		goto out;
	for (u32 i = 0; i < w.local.n; i++) {
		u32 slot;

		if (global[i])
			continue;
		global[i] = table_add(t, &w.local.specs[i], spec_hash(&w.local.specs[i]));
		slot = global[i] - 1;
		if (bpf_map_update_elem(map_fd, &slot, &w.local.specs[i], BPF_ANY)) {
			a->ustats[CORO_USTAT_ATTACH_FAIL]++;
			log_warn("%s: not attached: cannot store USDT spec %u: %s", shown, slot,
				 strerror(errno));
			goto out;
		}
	}
	/*
	 * A scheduler that can say what exists: asked once attached (capture_run()), noted
	 * before, with its count as it was (announce.h).
	 */
	if (pid >= 0 && w.v[PROBE_ANNOUNCE].n && w.v[PROBE_ANNOUNCE_DONE].n)
		announce_note(a, (u32)pid, path, shown, w.v[PROBE_ANNOUNCE].refs[0], w.spares,
			      w.nspares, global[w.v[PROBE_ANNOUNCE_DONE].cookies[0]] - 1);
	for (size_t k = 0; k < NPROBES; k++) {
		struct site_vec *v = &w.v[k];
		int fd;

		if (!v->n)
			continue;
		for (u32 i = 0; i < v->n; i++)
			v->cookies[i] = global[v->cookies[i]] - 1;
		fd = attach_uprobe_multi(a, attach_prog(a, probe_names[k]),
						 pid < 0 ? 0 : (u32)pid, path, v->offs, v->refs,
						 v->cookies, v->n);
		if (fd < 0) {
			a->ustats[CORO_USTAT_ATTACH_FAIL]++;
			log_warn("cannot attach to corobpf:%s in %s (%s): %s", probe_names[k],
				 shown, pid < 0 ? "every process" : "its process", strerror(-fd));
			continue;
		}
		sites += v->n;
	}
	if (sites && w.full.n) {
		int fd;

		for (u32 i = 0; i < w.full.n; i++)
			w.full.cookies[i] = global[w.full.cookies[i]] - 1;
		fd = attach_uprobe_multi(a, attach_prog(a, "@batch_full"), pid < 0 ? 0 : (u32)pid,
					 path, w.full.offs, NULL, w.full.cookies, w.full.n);

		if (fd < 0)
			log_warn("%s: cannot probe the instruction after its batch sites (%s): what a "
				 "thread appends while another session's batched path is on is read "
				 "at its switches, ticks and end, and a buffer it fills in between is "
				 "lost, counted", shown, strerror(-fd));
	}
out:
	free(global);
	walk_free(&w);
	return (int)sites;
}

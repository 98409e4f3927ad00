// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The attach context: links kept, programs by name, what was found. See attachctx.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attachctx.h"
#include "log.h"
#include "safeopen.h"
#include "x86dec.h"

void attach_ctx_init(struct attach_ctx *a)
{
	memset(a, 0, sizeof(*a));
	hmap_init(&a->usdt_specs_by_owner);
	hmap_init(&a->global_objects);
	hmap_init(&a->global_plans);
	hmap_init(&a->ctx_pids);
	hmap_init(&a->ctx_exe_fams);
}

void attach_ctx_detach_since(struct attach_ctx *a, size_t nlinks, size_t nlink_fds)
{
	for (size_t i = nlink_fds; i < a->nlink_fds; i++)
		close(a->link_fds[i]);
	if (a->nlink_fds > nlink_fds)
		a->nlink_fds = nlink_fds;
	for (size_t i = nlinks; i < a->nlinks; i++)
		bpf_link__destroy(a->links[i]);
	if (a->nlinks > nlinks)
		a->nlinks = nlinks;
}

void attach_ctx_detach(struct attach_ctx *a)
{
	attach_ctx_detach_since(a, 0, 0);
}

void attach_ctx_free(struct attach_ctx *a)
{
	attach_ctx_detach(a);
	free(a->link_fds);
	free(a->links);
	attach_found_clear(a);
	free(a->found);
	for (size_t i = 0; i < a->nsearched; i++)
		free(a->searched[i]);
	free(a->searched);
	hmap_free(&a->global_objects);
	{
		size_t it = 0;
		u64 k1, k2;
		void *v;

		while (hmap_next(&a->global_plans, &it, &k1, &k2, &v)) {
			struct attach_plans *p = v;

			for (size_t i = 0; i < p->n; i++)
				attach_found_release(&p->v[i]);
			free(p->v);
			free(p);
		}
		hmap_free(&a->global_plans);
	}
	for (size_t i = 0; i < a->nctx_providers; i++) {
		close(a->ctx_providers[i].fd);
		free(a->ctx_providers[i].shown);
	}
	free(a->ctx_providers);
	hmap_free(&a->ctx_pids);
	hmap_free(&a->ctx_exe_fams);
	hmap_free(&a->usdt_specs_by_owner);
}

static const char *const prog_names[ATTACH_NPROGS] = {
	[ATTACH_PROG_CREATE] = "create",
	[ATTACH_PROG_NAME] = "name",
	[ATTACH_PROG_READY] = "ready",
	[ATTACH_PROG_SWITCH] = "switch",
	[ATTACH_PROG_EXIT] = "exit",
	[ATTACH_PROG_SPAN_BEGIN] = "span_begin",
	[ATTACH_PROG_SPAN_END] = "span_end",
	[ATTACH_PROG_LIBLOAD] = "@libload",
	[ATTACH_PROG_CTX] = "@ctx",
	[ATTACH_PROG_CTX_MULTI] = "@ctx_multi",
	[ATTACH_PROG_CXX] = "@cxx",
	[ATTACH_PROG_RT] = "@rt",
	[ATTACH_PROG_BATCH] = "batch",
	[ATTACH_PROG_BATCH_FULL] = "@batch_full",
	[ATTACH_PROG_ANNOUNCE] = "announce",
	[ATTACH_PROG_ANNOUNCE_DONE] = "announce_done",
};

struct bpf_program *attach_prog(const struct attach_ctx *a, const char *name)
{
	for (size_t i = 0; i < ATTACH_NPROGS; i++)
		if (!strcmp(name, prog_names[i]))
			return a->progs[i];
	return NULL;
}

void attach_add_link(struct attach_ctx *a, struct bpf_link *link)
{
	if (a->nlinks == a->cap_links) {
		a->cap_links = a->cap_links ? a->cap_links * 2 : 32;
		a->links = xrealloc(a->links, a->cap_links * sizeof(*a->links));
	}
	a->links[a->nlinks++] = link;
}

bool attach_kernel_optimizes_uprobes(void)
{
	static int known = -1;
	char line[256];
	FILE *f;

	if (known >= 0)
		return known;
	known = 0;
	f = fopen("/proc/kallsyms", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		const char *sym = strrchr(line, ' ');

		if (sym && !strcmp(sym + 1, "arch_uprobe_optimize\n")) {
			known = 1;
			break;
		}
	}
	fclose(f);
	return known;
}

/*
 * A uprobe the kernel may turn into a call (x86_uprobe_may_optimize) is refused where it
 * optimizes uprobes: on 6.18 a child the target forks after the call is written inherits
 * the call but not the trampoline page it goes to, and dies of SIGSEGV there
 * (docs/probes.md). The USDT walk never asks for one (elfnotes.c probes the step before a
 * five-byte site); this keeps every other plan (a switch function that begins with a
 * five-byte nop, a site found by decoding) from harming the target. 0, or -ENOTSUP said.
 */
static int refuse_optimizable(const char *path, const u64 *offsets, u32 n)
{
	char shown[PATH_MAX];
	u8 code[16];
	ssize_t got, len;
	int fd;

	if (!attach_kernel_optimizes_uprobes())
		return 0;
	fd = open_regular(path);
	if (fd < 0) {
		log_warn("%s: cannot read it to check the instructions to probe (%s): not attached",
			 path, strerror(-fd));
		return fd;
	}
	for (u32 i = 0; i < n; i++) {
		got = pread(fd, code, sizeof(code), (off_t)offsets[i]);
		if (got <= 0 || !x86_uprobe_may_optimize(code, (size_t)got))
			continue;
		/* A descriptor's path says nothing: the file it names. */
		len = strncmp(path, "/proc/", 6) ? -1 : readlink(path, shown, sizeof(shown) - 1);
		if (len > 0)
			shown[len] = 0;
		else
			snprintf(shown, sizeof(shown), "%s", path);
		log_warn("%s: not attached at file offset 0x%llx: the instruction there is a nop "
			 "this kernel would turn the uprobe into a call over, which a child the "
			 "program forks afterwards cannot follow (it dies of SIGSEGV); probe the "
			 "instruction after it (with --switch uprobe:, SYMBOL+OFFSET past the nop)",
			 shown, (unsigned long long)offsets[i]);
		close(fd);
		return -ENOTSUP;
	}
	close(fd);
	return 0;
}

/*
 * libbpf 1.1 has no wrapper and Debian 12's uapi headers predate it, so the
 * attr is laid out here (its fields are the kernel's ABI: link_create.uprobe_multi).
 */
int attach_uprobe_link(struct attach_ctx *a, const struct bpf_program *prog, u32 attach_type,
		       u32 pid, const char *path, const u64 *offsets, const u64 *refs,
		       const u64 *cookies, u32 n)
{
	struct {
		u32 prog_fd, target_fd, attach_type, flags;
		u64 path, offsets, ref_ctr_offsets, cookies;
		u32 cnt, mflags, pid, __pad;
		u8 rest[64]; /* the rest of union bpf_attr, zero */
	} attr;
	int fd = refuse_optimizable(path, offsets, n);

	if (fd < 0)
		return fd;
	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = bpf_program__fd(prog);
	attr.attach_type = attach_type;
	attr.path = (u64)(uintptr_t)path;
	attr.offsets = (u64)(uintptr_t)offsets;
	attr.ref_ctr_offsets = (u64)(uintptr_t)refs;
	attr.cookies = (u64)(uintptr_t)cookies;
	attr.cnt = n;
	attr.pid = pid;
	fd = (int)syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (fd < 0)
		return -errno;
	if (a->nlink_fds == a->cap_link_fds) {
		a->cap_link_fds = a->cap_link_fds ? a->cap_link_fds * 2 : 16;
		a->link_fds = xrealloc(a->link_fds, a->cap_link_fds * sizeof(*a->link_fds));
	}
	a->link_fds[a->nlink_fds++] = fd;
	return fd;
}

int attach_uprobe_multi(struct attach_ctx *a, const struct bpf_program *prog, u32 pid,
			const char *path, const u64 *offsets, const u64 *refs, const u64 *cookies,
			u32 n)
{
	return attach_uprobe_link(a, prog, CORO_BPF_TRACE_UPROBE_MULTI, pid, path, offsets, refs,
				  cookies, n);
}

static struct attach_found *found_add(struct attach_ctx *a, u32 kind, u32 pid, const char *path)
{
	struct attach_found *f;

	if (a->nfound == a->cap_found) {
		a->cap_found = a->cap_found ? a->cap_found * 2 : 16;
		a->found = xrealloc(a->found, a->cap_found * sizeof(*a->found));
	}
	f = &a->found[a->nfound++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->pid = pid;
	f->ts = now_boottime_ns();
	f->path = xstrdup(path);
	return f;
}

void attach_found_object(struct attach_ctx *a, u32 pid, const char *path, u32 probes, bool late)
{
	struct attach_found *f = found_add(a, ATTACH_FOUND_OBJECT, pid, path);

	f->sites = probes;
	f->late = late;
}

void attach_found_switch(struct attach_ctx *a, u32 pid, u32 family, const char *path,
			 const char *sites, const char *limits, u32 nsites, u32 stepped)
{
	struct attach_found *f = found_add(a, ATTACH_FOUND_SWITCH, pid, path);

	f->family = family;
	f->site_text = xstrdup(sites);
	f->limits = xstrdup(limits);
	f->sites = nsites;
	f->stepped = stepped;
}

void attach_found_go_walk(struct attach_ctx *a, u32 pid, struct coro_rec_go_g *gs, u32 n)
{
	struct attach_found *f = found_add(a, ATTACH_FOUND_GO_WALK, pid, "");

	f->go_gs = gs;
	f->ngo_gs = n;
}

void attach_global_plans_note(struct attach_ctx *a, u64 dev, u64 ino, size_t since)
{
	struct attach_plans *p = hmap_get(&a->global_plans, dev, ino);

	for (size_t i = since; i < a->nfound; i++) {
		const struct attach_found *f = &a->found[i];
		struct attach_found *c;

		if (f->kind != ATTACH_FOUND_SWITCH)
			continue;
		if (!p) {
			p = xcalloc(1, sizeof(*p));
			hmap_put(&a->global_plans, dev, ino, p);
		}
		p->v = xrealloc(p->v, (p->n + 1) * sizeof(*p->v));
		c = &p->v[p->n++];
		*c = *f;
		c->path = xstrdup(f->path);
		c->site_text = xstrdup(f->site_text ? f->site_text : "");
		c->limits = xstrdup(f->limits ? f->limits : "");
		c->go_gs = NULL;
		c->ngo_gs = 0;
	}
}

void attach_found_release(struct attach_found *f)
{
	free(f->go_gs);
	free(f->path);
	free(f->site_text);
	free(f->limits);
}

void attach_found_clear(struct attach_ctx *a)
{
	for (size_t i = 0; i < a->nfound; i++)
		attach_found_release(&a->found[i]);
	a->nfound = 0;
}

void attach_note_searched(struct attach_ctx *a, const char *path)
{
	a->searched = xrealloc(a->searched, (a->nsearched + 1) * sizeof(*a->searched));
	a->searched[a->nsearched++] = xstrdup(path);
}

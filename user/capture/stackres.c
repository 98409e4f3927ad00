// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The capture side of --stacks (stacks.h): kernel stack ids and dwarf samples to capture stack ids. */
#include <bpf/bpf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "capture_opts.h"
#include "kinds.h"
#include "log.h"
#include "raw.h"
#include "safeopen.h"
#include "stackres.h"

struct map_ent {
	u64 start, end, pgoff;
	char *path;
	u64 dev, ino;	/* of the file mapped (it may since have been replaced at `path`) */
	u32 build_id_len;
	u8 build_id[24];
};

static u64 hash_ips(const u64 *ips, u32 n)
{
	u64 h = 0xcbf29ce484222325ull ^ n;

	for (u32 i = 0; i < n; i++) {
		h ^= ips[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

/* ======================= capture side ======================= */


/*
 * What the resolver knows of one process (one image: an exec starts
 * another). All of it goes when the process ends.
 */
struct rproc {
	u32 pid;
	struct hmap kids;     /* fp: (kernel stack id, 0) -> capture id */
	struct hmap dedup;    /* (hash of the frames, 0) -> capture id */
	struct map_ent *maps; /* emitted so far */
	size_t nmaps;
	bool reset_next;      /* the next MAP record says the earlier ones are gone */
	Dwfl *dwfl;	      /* dwarf: the process's modules, for unwinding */
	size_t dwfl_nmaps;    /* ...built from this many of maps[] */
	bool dwfl_failed;
	bool warned;	      /* said once that its stacks cannot be unwound */
	u64 refreshed_ts;     /* the last re-read of its mappings for an unknown address */
	struct hmap memo;     /* dwarf: (ip, sp and bp) -> struct uw_memo */
};

/*
 * An unwind remembered: the same ip, sp and bp, and the same values at
 * every stack address the unwinder read (or failed to read), give the same
 * frames: libdw's answer is a function of those alone. A loop or a
 * coroutine parking at the same place again costs a lookup and a few
 * compares instead of an unwind.
 */
#define UW_READS_MAX 48
#define UW_MEMO_MAX 4096 /* per process: ~5 MiB at most */
struct uw_read {
	u64 addr, val;
	bool ok;
};

struct uw_memo {
	u64 ip, sp, bp;
	u32 id; /* the capture stack it gave */
	u32 nreads;
	struct uw_read reads[];
};

struct build_id {
	u32 len;
	u8 id[24];
};

struct stack_resolver {
	u32 mode;
	struct hmap build_ids; /* (hash of path, 0) -> struct build_id (read once per path) */
	int stackmap_fd;
	struct hmap procs; /* (pid, 0) -> struct rproc, while the process lives */
	u32 next_id;
	struct stack_resolver_stats st;
	/* The sample being unwound (dwarf), and what the unwinder read of it. */
	const struct coro_stack_sample *smp;
	const u8 *smp_bytes;
	struct uw_read reads[UW_READS_MAX];
	u32 nreads;
	bool reads_overflow;
};

static const Dwfl_Callbacks uw_dwfl_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

struct stack_resolver *stack_resolver_new(u32 mode, int stackmap_fd)
{
	struct stack_resolver *r = xcalloc(1, sizeof(*r));

	r->mode = mode;
	r->stackmap_fd = stackmap_fd;
	hmap_init(&r->procs);
	hmap_init(&r->build_ids);
	elf_version(EV_CURRENT);
	r->next_id = 1;
	return r;
}

static struct rproc *rproc_get(struct stack_resolver *r, u32 pid)
{
	struct rproc *p = hmap_get(&r->procs, pid, 0);

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pid = pid;
		hmap_init(&p->memo);
		hmap_init(&p->kids);
		hmap_init(&p->dedup);
		/* A pid can be reused: mappings of an earlier process of that pid are gone. */
		p->reset_next = true;
		hmap_put(&r->procs, pid, 0, p);
	}
	return p;
}

static void memo_clear(struct rproc *p);

/* Its image's stacks and mappings: an exec replaced it, or the process ended. */
static void rproc_drop_image(struct rproc *p)
{
	memo_clear(p);
	hmap_clear(&p->kids);
	hmap_clear(&p->dedup);
	for (size_t i = 0; i < p->nmaps; i++)
		free(p->maps[i].path);
	free(p->maps);
	p->maps = NULL;
	p->nmaps = 0;
	if (p->dwfl)
		dwfl_end(p->dwfl);
	p->dwfl = NULL;
	p->dwfl_failed = false;
}

void stack_resolver_forget(struct stack_resolver *r, u32 pid)
{
	struct rproc *p = hmap_get(&r->procs, pid, 0);

	if (!p)
		return;
	rproc_drop_image(p);
	p->reset_next = true;
}

static void rproc_free(struct rproc *p)
{
	rproc_drop_image(p);
	hmap_free(&p->memo);
	hmap_free(&p->kids);
	hmap_free(&p->dedup);
	free(p);
}

void stack_resolver_ended(struct stack_resolver *r, u32 pid)
{
	struct rproc *p = hmap_del(&r->procs, pid, 0);

	if (p)
		rproc_free(p);
}

static bool maps_cover(const struct rproc *p, u64 ip)
{
	for (size_t i = 0; i < p->nmaps; i++)
		if (ip >= p->maps[i].start && ip < p->maps[i].end)
			return true;
	return false;
}

/*
 * The build-id of the file a mapping maps, read once per (device, inode):
 * through /proc/PID/map_files, which is the file mapped even if another has
 * replaced it at its path since (a rebuild during the run), else the path.
 */
static const struct build_id *build_id_of(struct stack_resolver *r, u32 pid,
					  const struct map_ent *m)
{
	struct build_id *b = hmap_get(&r->build_ids, m->dev, m->ino);
	char mf[96];
	const void *id;
	Elf *elf;
	ssize_t n;
	int fd;

	if (b && m->ino)
		return b;
	if (!b) {
		b = xcalloc(1, sizeof(*b));
		hmap_put(&r->build_ids, m->dev, m->ino, b);
	}
	if (m->path[0] != '/')
		return b;
	snprintf(mf, sizeof(mf), "/proc/%u/map_files/%llx-%llx", pid, (unsigned long long)m->start,
		 (unsigned long long)m->end);
	fd = open_regular(mf);
	if (fd < 0)
		fd = open_regular(m->path);
	if (fd < 0)
		return b;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	n = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
	if (n > 0 && (size_t)n <= sizeof(b->id)) {
		b->len = (u32)n;
		memcpy(b->id, id, (size_t)n);
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return b;
}

static void emit_map(struct stack_resolver *r, struct rproc *p, const struct map_ent *m, u64 ts,
		     stack_emit_fn emit, void *ctx)
{
	size_t plen = strlen(m->path) + 1, size = ROUND_UP(sizeof(struct coro_rec_map) + plen, 8);
	struct coro_rec_map *rec = xcalloc(1, size);

	rec->hdr.size = (u16)size;
	rec->hdr.kind = CORO_REC_MAP;
	rec->hdr.pid = rec->hdr.tid = p->pid;
	rec->hdr.ts = ts;
	rec->start = m->start;
	rec->end = m->end;
	rec->pgoff = m->pgoff;
	rec->flags = p->reset_next ? CORO_MAPF_RESET : 0;
	p->reset_next = false;
	rec->build_id_len = m->build_id_len;
	memcpy(rec->build_id, m->build_id, m->build_id_len);
	memcpy(rec->path, m->path, plen);
	emit(ctx, &rec->hdr);
	free(rec);
}

/* Read the process's executable file mappings; emit those not emitted yet. */
static void refresh_maps(struct stack_resolver *r, struct rproc *p, u64 ts, stack_emit_fn emit,
			 void *ctx)
{
	char path[64], line[4096 + 128];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", p->pid);
	f = fopen(path, "re");
	if (!f)
		return; /* gone: its stacks keep raw addresses */
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off, ino;
		unsigned int maj, min;
		char perms[8];
		int pos = 0;
		struct map_ent m;
		const struct build_id *bid;
		bool have = false;
		char *file, *nl;

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj,
			   &min, &ino, &pos) < 7 ||
		    !pos || perms[2] != 'x')
			continue;
		file = line + pos;
		if ((nl = strchr(file, '\n')))
			*nl = 0;
		/* Files, and the vDSO (named, though there is no file to read symbols from). */
		if (file[0] != '/' && strcmp(file, "[vdso]"))
			continue;
		for (size_t i = 0; i < p->nmaps && !have; i++)
			have = p->maps[i].start == start && p->maps[i].end == end &&
			       p->maps[i].pgoff == off && !strcmp(p->maps[i].path, file);
		if (have)
			continue;
		m = (struct map_ent){.start = start, .end = end, .pgoff = off, .path = xstrdup(file),
				     .dev = (u64)maj << 32 | min, .ino = ino};
		bid = build_id_of(r, p->pid, &m);
		m.build_id_len = bid->len;
		memcpy(m.build_id, bid->id, bid->len);
		p->maps = xrealloc(p->maps, (p->nmaps + 1) * sizeof(*p->maps));
		p->maps[p->nmaps++] = m;
		emit_map(r, p, &m, ts, emit, ctx);
	}
	fclose(f);
}

static u32 define_stack(struct stack_resolver *r, struct rproc *p, const struct coro_event_hdr *h,
			const u64 *ips, u32 n, stack_emit_fn emit, void *ctx)
{
	u64 hash = hash_ips(ips, n);
	u32 id = (u32)(uintptr_t)hmap_get(&p->dedup, hash, 0);
	struct coro_rec_stack *rec;
	size_t size;

	if (id)
		return id;
	for (u32 i = 0; i < n; i++) {
		/* At most once per 10 ms: a stack ending in garbage would re-read every time. */
		if (!maps_cover(p, ips[i]) && (!p->refreshed_ts || h->ts - p->refreshed_ts > 10000000)) {
			p->refreshed_ts = h->ts;
			refresh_maps(r, p, h->ts, emit, ctx);
			break;
		}
	}
	for (u32 i = 0; i < n; i++) {
		if (maps_cover(p, ips[i]))
			continue;
		if (i && p->nmaps) {
			/*
			 * A return address in no code: the unwinder ran past the
			 * stack's end (the bottom of a makecontext stack, say).
			 */
			n = i;
			hash = hash_ips(ips, n);
			id = (u32)(uintptr_t)hmap_get(&p->dedup, hash, 0);
			if (id)
				return id;
		} else {
			/* Gone before its mappings were read, or code in no file (JIT, vdso). */
			r->st.unmapped++;
		}
		break;
	}
	id = r->next_id++;
	hmap_put(&p->dedup, hash, 0, (void *)(uintptr_t)id);
	size = sizeof(*rec) + (size_t)n * sizeof(u64);
	rec = xcalloc(1, size);
	rec->hdr.size = (u16)size;
	rec->hdr.kind = CORO_REC_STACK;
	rec->hdr.pid = h->pid;
	rec->hdr.tid = h->tid;
	rec->hdr.ts = h->ts;
	rec->id = id;
	rec->nframes = n;
	memcpy(rec->ips, ips, (size_t)n * sizeof(u64));
	emit(ctx, &rec->hdr);
	free(rec);
	r->st.stacks++;
	return id;
}

/* ---- dwarf: libdw unwinds the copied stack ---- */

static pid_t uw_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl, (void)arg, (void)thread_argp;
	return 0; /* threads are named by the sample, never listed */
}

static bool uw_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl, (void)tid;
	*thread_argp = arg;
	return true;
}

/* Only the copied stack is memory: an unwinder reading elsewhere stops there. */
static bool uw_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct stack_resolver *r = arg;
	const struct coro_stack_sample *s = r->smp;

	bool ok;

	(void)dwfl;
	if (!s)
		return false;
	ok = !(addr < s->sp || addr + sizeof(*result) > s->sp + s->len ||
	       addr + sizeof(*result) < addr);
	if (ok)
		memcpy(result, r->smp_bytes + (addr - s->sp), sizeof(*result));
	if (r->nreads < UW_READS_MAX)
		r->reads[r->nreads++] = (struct uw_read){addr, ok ? *result : 0, ok};
	else
		r->reads_overflow = true;
	return ok;
}

static void memo_clear(struct rproc *p)
{
	size_t it = 0;
	void *v;

	while (hmap_next(&p->memo, &it, NULL, NULL, &v))
		free(v);
	hmap_clear(&p->memo);
}

static u64 memo_key(const struct coro_stack_sample *s)
{
	return s->sp * 0x9e3779b97f4a7c15ull ^ s->bp;
}

/* The stack an earlier unwind gave for this very context, or 0. */
static u32 memo_find(struct rproc *p, const struct coro_stack_sample *s)
{
	const struct uw_memo *m = hmap_get(&p->memo, s->ip, memo_key(s));
	const u8 *bytes = (const u8 *)(s + 1);

	if (!m || m->ip != s->ip || m->sp != s->sp || m->bp != s->bp)
		return 0;
	for (u32 i = 0; i < m->nreads; i++) {
		const struct uw_read *rd = &m->reads[i];
		bool ok = !(rd->addr < s->sp || rd->addr + 8 > s->sp + s->len);
		u64 v;

		if (ok != rd->ok)
			return 0;
		if (!ok)
			continue;
		memcpy(&v, bytes + (rd->addr - s->sp), sizeof(v));
		if (v != rd->val)
			return 0;
	}
	return m->id;
}

static void memo_put(struct stack_resolver *r, struct rproc *p, const struct coro_stack_sample *s,
		     u32 id)
{
	struct uw_memo *m;

	if (r->reads_overflow || !id)
		return;
	if (p->memo.len >= UW_MEMO_MAX)
		memo_clear(p);
	m = xmalloc(sizeof(*m) + r->nreads * sizeof(m->reads[0]));
	m->ip = s->ip;
	m->sp = s->sp;
	m->bp = s->bp;
	m->id = id;
	m->nreads = r->nreads;
	memcpy(m->reads, r->reads, r->nreads * sizeof(m->reads[0]));
	free(hmap_del(&p->memo, s->ip, memo_key(s)));
	hmap_put(&p->memo, s->ip, memo_key(s), m);
}

static bool uw_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct stack_resolver *r = arg;
	/* DWARF numbering on x86-64: 6 rbp, 7 rsp. */
	Dwarf_Word regs[2] = {r->smp->bp, r->smp->sp};

	dwfl_thread_state_register_pc(thread, r->smp->ip);
	return dwfl_thread_state_registers(thread, 6, 2, regs);
}

static const Dwfl_Thread_Callbacks uw_callbacks = {
	.next_thread = uw_next_thread,
	.get_thread = uw_get_thread,
	.memory_read = uw_memory_read,
	.set_initial_registers = uw_set_initial_registers,
};

/*
 * Where the object's virtual address 0 sits in the process: 0 for ET_EXEC;
 * for shared objects and PIEs, from a mapping and the load segment it maps
 * (the kernel maps page-down(p_offset) at page-down(p_vaddr) + base, which
 * start - pgoff assumes only when offsets and addresses are page-congruent;
 * lld does not make them so). false if the file cannot say.
 */
static bool load_base(int fd, const char *path, const struct map_ent *maps, size_t nmaps,
		      u64 *base)
{
	Elf *elf;
	GElf_Ehdr eh;
	size_t nph;
	bool ok = false;

	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && gelf_getehdr(elf, &eh) && elf_getphdrnum(elf, &nph) == 0) {
		if (eh.e_type == ET_EXEC) {
			*base = 0;
			ok = true;
		}
		for (size_t i = 0; i < nph && !ok; i++) {
			GElf_Phdr ph;

			/*
			 * Only executable mappings are kept: match the executable
			 * segment (a read-only one may start in the same page).
			 */
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    !(ph.p_flags & PF_X))
				continue;
			for (size_t j = 0; j < nmaps && !ok; j++) {
				if (strcmp(maps[j].path, path) || maps[j].pgoff != (ph.p_offset & ~4095ull))
					continue;
				*base = maps[j].start - (ph.p_vaddr & ~4095ull);
				ok = true;
			}
		}
	}
	if (elf)
		elf_end(elf);
	return ok;
}

/*
 * The file to unwind m's code with, opened (safeopen.h: regular files
 * only): the file at its path if it has the build-id m was mapped with,
 * else the mapped file itself while the process lives (/proc/PID/map_files),
 * else -1.
 */
static int unwind_file(const struct rproc *p, const struct map_ent *m)
{
	int fd = open_regular(m->path);
	bool same = !m->build_id_len;
	const void *id;
	char mf[96];
	Elf *elf;

	if (fd >= 0 && !same) {
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		same = elf && dwelf_elf_gnu_build_id(elf, &id) == (ssize_t)m->build_id_len &&
		       !memcmp(id, m->build_id, m->build_id_len);
		if (elf)
			elf_end(elf);
	}
	if (fd >= 0 && same)
		return fd;
	if (fd >= 0)
		close(fd);
	snprintf(mf, sizeof(mf), "/proc/%u/map_files/%llx-%llx", p->pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	fd = open_regular(mf);
	return fd >= 0 ? fd : -1;
}

/*
 * The modules to unwind with, from the mappings read so far (not from
 * /proc: the process may be gone by the time its records are read). Built
 * again when mappings were added since.
 */
static bool rproc_dwfl(struct stack_resolver *r, struct rproc *p)
{
	if (p->dwfl && p->dwfl_nmaps == p->nmaps)
		return true;
	if (p->dwfl_failed && p->dwfl_nmaps == p->nmaps)
		return false;
	if (p->dwfl)
		dwfl_end(p->dwfl);
	/* New modules may unwind further than before. */
	memo_clear(p);
	p->dwfl_nmaps = p->nmaps;
	p->dwfl_failed = true;
	p->dwfl = dwfl_begin(&uw_dwfl_callbacks);
	if (!p->dwfl)
		return false;
	dwfl_report_begin(p->dwfl);
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct map_ent *m = &p->maps[i];
		bool seen = false;
		u64 base;
		int fd;

		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(p->maps[j].path, m->path);
		if (seen || m->path[0] != '/')
			continue; /* one module per file; the vDSO has none */
		fd = unwind_file(p, m);
		/* libdw keeps fd when it takes the module. */
		if (fd < 0 || !load_base(fd, m->path, p->maps, p->nmaps, &base) ||
		    !dwfl_report_elf(p->dwfl, m->path, m->path, fd, base, false)) {
			log_debug("stacks: cannot read %s for unwinding: %s", m->path,
				  fd >= 0 ? dwfl_errmsg(-1) : "replaced since it was mapped");
			if (fd >= 0)
				close(fd);
		}
	}
	if (dwfl_report_end(p->dwfl, NULL, NULL) != 0 ||
	    !dwfl_attach_state(p->dwfl, NULL, (pid_t)p->pid, &uw_callbacks, r)) {
		log_debug("stacks: cannot prepare unwinding for process %u: %s", p->pid,
			  dwfl_errmsg(-1));
		dwfl_end(p->dwfl);
		p->dwfl = NULL;
		return false;
	}
	p->dwfl_failed = false;
	return true;
}

struct uw_frames {
	u64 ips[CORO_STACK_DEPTH];
	u32 n;
};

static int uw_frame(Dwfl_Frame *frame, void *arg)
{
	struct uw_frames *f = arg;
	Dwarf_Addr pc;
	bool act;

	if (!dwfl_frame_pc(frame, &pc, &act) || !pc)
		return DWARF_CB_ABORT;
	f->ips[f->n++] = pc;
	return f->n < CORO_STACK_DEPTH ? DWARF_CB_OK : DWARF_CB_ABORT;
}

static u32 unwind(struct stack_resolver *r, struct rproc *p, const struct coro_event_hdr *h,
		  const struct coro_stack_sample *s, struct uw_frames *out, stack_emit_fn emit,
		  void *ctx)
{
	out->n = 0;
	/* Code mapped since the mappings were read (dlopen): read them again. */
	if (!maps_cover(p, s->ip))
		refresh_maps(r, p, h->ts, emit, ctx);
	if (!rproc_dwfl(r, p))
		goto fallback;
	r->smp = s;
	r->smp_bytes = (const u8 *)(s + 1);
	r->nreads = 0;
	r->reads_overflow = false;
	dwfl_getthread_frames(p->dwfl, (pid_t)h->tid, uw_frame, out);
	r->smp = NULL;
	r->st.unwound++;
	r->st.unwind_frames += out->n;
	if (out->n)
		return out->n;
fallback:
	/* Nothing to unwind with: where it was is still worth saying. */
	if (!p->warned) {
		p->warned = true;
		log_warn("stacks of process %u cannot be unwound (%s): they keep their innermost "
			 "frame only", p->pid, p->nmaps ? "its objects cannot be read" :
			 "its mappings could not be read; it ended first?");
	}
	r->reads_overflow = true; /* not a result to remember */
	out->ips[0] = s->ip;
	out->n = 1;
	return 1;
}

void stack_resolver_snapshot(struct stack_resolver *r, u32 pid, u64 ts, stack_emit_fn emit,
			     void *ctx)
{
	refresh_maps(r, rproc_get(r, pid), ts, emit, ctx);
}

static u32 stack_resolve_in(struct stack_resolver *r, struct rproc *p,
			    const struct coro_event_hdr *h, const struct coro_stack_ref *ref,
			    stack_emit_fn emit, void *ctx)
{
	if (ref->how == CORO_STACK_KERNEL_ID) {
		u32 id = (u32)(uintptr_t)hmap_get(&p->kids, ref->id, 0);
		u64 ips[CORO_STACK_DEPTH] = {0};
		u32 n = 0;

		if (id)
			return id;
		if (r->stackmap_fd < 0 || bpf_map_lookup_elem(r->stackmap_fd, &ref->id, ips)) {
			r->st.unresolved++;
			return 0;
		}
		while (n < CORO_STACK_DEPTH && ips[n])
			n++;
		if (!n) {
			r->st.unresolved++;
			return 0;
		}
		id = define_stack(r, p, h, ips, n, emit, ctx);
		hmap_put(&p->kids, ref->id, 0, (void *)(uintptr_t)id);
		return id;
	}
	if (ref->how == CORO_STACK_SAMPLE) {
		const struct coro_stack_sample *s = (const void *)(ref + 1);
		size_t base = (size_t)((const char *)(s + 1) - (const char *)h);
		struct uw_frames f;

		if (h->size < base || s->len > h->size - base) {
			r->st.unresolved++;
			return 0;
		}
		u32 id = memo_find(p, s);

		if (id) {
			r->st.memo_hits++;
			return id;
		}
		unwind(r, p, h, s, &f, emit, ctx);
		id = define_stack(r, p, h, f.ips, f.n, emit, ctx);
		memo_put(r, p, s, id);
		return id;
	}
	if (ref->how == CORO_STACK_IPS) {
		/* Walked by user space already (gowalk.c): only defined here. */
		const u64 *ips = (const void *)(ref + 1);
		size_t base = (size_t)((const char *)ips - (const char *)h);

		if (!ref->id || ref->id > CORO_STACK_DEPTH || h->size < base + ref->id * 8ull) {
			r->st.unresolved++;
			return 0;
		}
		return define_stack(r, p, h, ips, ref->id, emit, ctx);
	}
	if (ref->how == CORO_STACK_CAPTURE_ID)
		return ref->id;
	return 0;
}


u32 stack_resolve(struct stack_resolver *r, const struct coro_event_hdr *h, stack_emit_fn emit,
		  void *ctx)
{
	const struct coro_stack_ref *ref = coro_stack_ref_of(h);
	struct rproc *p;
	u32 id;

	if (!ref)
		return 0;
	if ((p = hmap_get(&r->procs, h->pid, 0)))
		return stack_resolve_in(r, p, h, ref, emit, ctx);
	/*
	 * A process the resolver does not hold: one that just ended (a
	 * thread's last records can follow the process's end record). What it
	 * takes is let go again at once if the process's mappings are gone.
	 */
	p = rproc_get(r, h->pid);
	id = stack_resolve_in(r, p, h, ref, emit, ctx);
	if (!p->nmaps)
		stack_resolver_ended(r, h->pid);
	return id;
}

const struct stack_resolver_stats *stack_resolver_stats(struct stack_resolver *r)
{
	size_t it = 0;
	void *v;

	r->st.procs = r->procs.len;
	r->st.remembered = 0;
	while (hmap_next(&r->procs, &it, NULL, NULL, &v)) {
		const struct rproc *p = v;

		r->st.remembered += p->kids.len + p->dedup.len + p->memo.len;
	}
	return &r->st;
}

void stack_resolver_free(struct stack_resolver *r)
{
	size_t it = 0;
	void *v;

	if (!r)
		return;
	while (hmap_next(&r->procs, &it, NULL, NULL, &v))
		rproc_free(v);
	hmap_free(&r->procs);
	it = 0;
	while (hmap_next(&r->build_ids, &it, NULL, NULL, &v))
		free(v);
	hmap_free(&r->build_ids);
	free(r);
}


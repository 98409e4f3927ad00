// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "goelf.h"
#include "log.h"
#include "raw.h"
#include "stacks.h"
#include "safeopen.h"

/* libstdc++'s demangler (a C ABI function): C++ names read as written. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct map_ent {
	u64 start, end, pgoff;
	char *path;
	u32 build_id_len;
	u8 build_id[24];
};

/* One object file, opened once for every process that maps it. */
struct sym_obj {
	char *path;
	u32 build_id_len; /* as the capture saw it (0: not known) */
	u8 build_id[24];
	Dwfl *dwfl;
	Dwfl_Module *mod;
	struct {
		u64 off, vaddr, filesz;
	} *loads;
	size_t nloads;
	/* A Go binary's own function table: names what its symbol tables do not (stripped). */
	struct goelf_funcs *gofuncs;
	struct hmap frames; /* (vaddr, is_return) -> struct sym_frame (template, ip 0) */
};

struct sym_proc {
	struct map_ent *maps;
	size_t nmaps;
};

struct symbolizer {
	struct sym_obj **objv;
	size_t nobjs;
	struct hmap procs;  /* (pid, 0) -> struct sym_proc */
	struct hmap stacks; /* (id, 0) -> struct sym_stack */
	char **strs;	    /* strings owned */
	size_t nstrs;
};

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

struct symbolizer *symbolizer_new(void)
{
	struct symbolizer *s = xcalloc(1, sizeof(*s));

	hmap_init(&s->procs);
	hmap_init(&s->stacks);
	return s;
}

static const char *own(struct symbolizer *s, char *str)
{
	if (!str)
		return NULL;
	s->strs = xrealloc(s->strs, (s->nstrs + 1) * sizeof(*s->strs));
	s->strs[s->nstrs++] = str;
	return str;
}

/* The module of ELF file `file` at its own addresses, or NULL (*dwflp set when opened). */
static Dwfl_Module *open_module(Dwfl **dwflp, const char *file)
{
	Dwfl_Module *mod;
	/* Regular files only, checked on what is opened: a capture could name a FIFO or a device. */
	int fd = open_regular(file);

	*dwflp = NULL;
	if (fd < 0)
		return NULL;
	*dwflp = dwfl_begin(&offline_callbacks);
	if (!*dwflp) {
		close(fd);
		return NULL;
	}
	dwfl_report_begin(*dwflp);
	/* At base 0: module addresses are the file's own virtual addresses. libdw keeps fd. */
	mod = dwfl_report_elf(*dwflp, file, file, fd, 0, false);
	dwfl_report_end(*dwflp, NULL, NULL);
	if (!mod) {
		close(fd);
		log_debug("stacks: cannot read %s: %s", file, dwfl_errmsg(-1));
		dwfl_end(*dwflp);
		*dwflp = NULL;
	}
	return mod;
}

static bool build_id_is(Dwfl_Module *mod, const u8 *id, u32 len)
{
	const unsigned char *bits;
	GElf_Addr vaddr;

	return dwfl_module_build_id(mod, &bits, &vaddr) == (int)len && !memcmp(bits, id, len);
}

/*
 * The object mapped from `path` when the capture was taken: the file there
 * now if its build-id is the one the capture saw, else the separate debug
 * file of that build-id in /usr/lib/debug. Neither: its frames keep their
 * addresses (a rebuilt binary's symbols would name the wrong functions).
 */
static struct sym_obj *obj_get(struct symbolizer *s, const char *path, const u8 *bid, u32 bidlen)
{
	struct sym_obj *o;
	GElf_Addr bias;
	Elf *elf;
	size_t nph;
	bool mismatch = false;

	for (size_t i = 0; i < s->nobjs; i++)
		if (!strcmp(s->objv[i]->path, path) && s->objv[i]->build_id_len == bidlen &&
		    !memcmp(s->objv[i]->build_id, bid, bidlen))
			return s->objv[i];
	o = xcalloc(1, sizeof(*o));
	o->path = xstrdup(path);
	o->build_id_len = bidlen;
	memcpy(o->build_id, bid, bidlen);
	hmap_init(&o->frames);
	s->objv = xrealloc(s->objv, (s->nobjs + 1) * sizeof(*s->objv));
	s->objv[s->nobjs++] = o;
	o->mod = open_module(&o->dwfl, path);
	if (o->mod && bidlen && !build_id_is(o->mod, bid, bidlen)) {
		dwfl_end(o->dwfl);
		o->dwfl = NULL;
		o->mod = NULL;
		mismatch = true;
	}
	if (!o->mod && bidlen) {
		char dbg[128];
		int n = snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%02x/", bid[0]);

		for (u32 i = 1; i < bidlen && n + 3 < (int)sizeof(dbg); i++)
			n += snprintf(dbg + n, sizeof(dbg) - n, "%02x", bid[i]);
		snprintf(dbg + n, sizeof(dbg) - n, ".debug");
		o->mod = open_module(&o->dwfl, dbg);
		if (o->mod && !build_id_is(o->mod, bid, bidlen)) {
			dwfl_end(o->dwfl);
			o->dwfl = NULL;
			o->mod = NULL;
		}
	}
	if (!o->mod) {
		if (mismatch)
			log_warn("stacks: %s changed since the capture (its build-id differs) and "
				 "/usr/lib/debug has no file of the old one: its frames keep their "
				 "addresses", path);
		else
			log_debug("stacks: no symbols for %s (its frames keep their addresses)", path);
		return o;
	}
	elf = dwfl_module_getelf(o->mod, &bias);
	if (elf && elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			o->loads = xrealloc(o->loads, (o->nloads + 1) * sizeof(*o->loads));
			o->loads[o->nloads].off = ph.p_offset;
			o->loads[o->nloads].vaddr = ph.p_vaddr + bias;
			o->loads[o->nloads].filesz = ph.p_filesz;
			o->nloads++;
		}
	}
	o->gofuncs = goelf_funcs_open(elf);
	return o;
}

static char *demangle(const char *name)
{
	int status = 0;
	char *d;

	if (!name)
		return NULL;
	if (name[0] == '_' && name[1] == 'Z') {
		d = __cxa_demangle(name, NULL, NULL, &status);
		if (d && status == 0)
			return d;
		free(d);
	}
	return xstrdup(name);
}

/* The frame at file offset `rel` of object o (is_ret: a return address: look up rel - 1). */
static const struct sym_frame *obj_frame(struct symbolizer *s, struct sym_obj *o, u64 rel,
					 bool is_ret)
{
	struct sym_frame *f = hmap_get(&o->frames, rel, is_ret);
	u64 vaddr = 0, look;
	bool have = false;

	if (f)
		return f;
	f = xcalloc(1, sizeof(*f));
	f->obj = o->path;
	f->rel = rel;
	for (size_t i = 0; i < o->nloads; i++) {
		if (rel >= o->loads[i].off && rel < o->loads[i].off + o->loads[i].filesz) {
			vaddr = rel - o->loads[i].off + o->loads[i].vaddr;
			have = true;
			break;
		}
	}
	if (have && o->mod) {
		GElf_Off off = 0;
		GElf_Sym sym;
		const char *name;
		Dwfl_Line *line;

		look = is_ret && vaddr ? vaddr - 1 : vaddr;
		name = dwfl_module_addrinfo(o->mod, look, &off, &sym, NULL, NULL, NULL);
		/*
		 * No symbol whose extent holds it (-ldflags=-s keeps at most the
		 * .dynsym of a cgo binary, whose nearest entry is another function):
		 * the Go binary's own table knows every function.
		 */
		if (o->gofuncs && (!name || off >= sym.st_size)) {
			u64 goff;
			const char *gname = goelf_funcs_at(o->gofuncs, look, &goff);

			if (gname) {
				name = gname;
				off = goff;
			}
		}
		if (name) {
			f->func = own(s, demangle(name));
			f->func_off = off + (look != vaddr);
		}
		line = dwfl_module_getsrc(o->mod, look);
		if (line) {
			int lineno = 0;
			const char *file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);

			if (file) {
				f->file = own(s, xstrdup(file));
				f->line = lineno > 0 ? (u32)lineno : 0;
			}
		}
	}
	hmap_put(&o->frames, rel, is_ret, f);
	return f;
}

void symbolizer_map(struct symbolizer *s, const struct coro_rec_map *m)
{
	struct sym_proc *p = hmap_get(&s->procs, m->hdr.pid, 0);

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		hmap_put(&s->procs, m->hdr.pid, 0, p);
	}
	if (m->flags & CORO_MAPF_RESET) {
		for (size_t i = 0; i < p->nmaps; i++)
			free(p->maps[i].path);
		p->nmaps = 0;
	}
	p->maps = xrealloc(p->maps, (p->nmaps + 1) * sizeof(*p->maps));
	p->maps[p->nmaps++] = (struct map_ent){
		.start = m->start,
		.end = m->end,
		.pgoff = m->pgoff,
		.path = xstrdup(m->path), /* NUL-terminated: checked by coro_record_valid() */
		.build_id_len = m->build_id_len, /* at most 24: checked there too */
	};
	memcpy(p->maps[p->nmaps - 1].build_id, m->build_id, m->build_id_len);
}

void symbolizer_define(struct symbolizer *s, const struct coro_rec_stack *rec)
{
	struct sym_proc *p = hmap_get(&s->procs, rec->hdr.pid, 0);
	struct sym_stack *st;

	if (hmap_get(&s->stacks, rec->id, 0))
		return; /* defined once; a second definition is damage: the first stands */
	st = xcalloc(1, sizeof(*st));
	st->id = rec->id;
	st->pid = rec->hdr.pid;
	st->n = rec->nframes;
	st->frames = xcalloc(st->n ? st->n : 1, sizeof(*st->frames));
	for (u32 i = 0; i < st->n; i++) {
		u64 ip = rec->ips[i];
		const struct map_ent *m = NULL;
		struct sym_frame *f;
		const struct sym_frame *tmpl;

		/* Newest first: a library dlclose'd and another mapped at its place. */
		for (size_t j = p ? p->nmaps : 0; j-- > 0;) {
			if (ip >= p->maps[j].start && ip < p->maps[j].end) {
				m = &p->maps[j];
				break;
			}
		}
		/* Each stack's frames are its own (ip and mapping differ per process). */
		f = xcalloc(1, sizeof(*f));
		if (m) {
			tmpl = obj_frame(s, obj_get(s, m->path, m->build_id, m->build_id_len),
					 ip - m->start + m->pgoff, i > 0);
			*f = *tmpl;
			f->map_start = m->start;
			f->map_end = m->end;
			f->map_pgoff = m->pgoff;
		}
		f->ip = ip;
		st->frames[i] = f;
	}
	hmap_put(&s->stacks, rec->id, 0, st);
}

const struct sym_stack *symbolizer_stack(const struct symbolizer *s, u32 id)
{
	return id ? hmap_get(&s->stacks, id, 0) : NULL;
}

const struct sym_stack *symbolizer_next(const struct symbolizer *s, size_t *it)
{
	void *v;

	return hmap_next(&s->stacks, it, NULL, NULL, &v) ? v : NULL;
}

u64 symbolizer_nstacks(const struct symbolizer *s)
{
	return s->stacks.len;
}

const struct sym_frame *sym_stack_key_frame(const struct sym_stack *st)
{
	for (u32 i = 0; st && i < st->n; i++)
		if (st->frames[i]->func)
			return st->frames[i];
	return st && st->n ? st->frames[0] : NULL;
}

void sym_frame_format(const struct sym_frame *f, char *buf, size_t len)
{
	const char *obj = f->obj ? strrchr(f->obj, '/') : NULL;
	int n;

	obj = obj ? obj + 1 : f->obj;
	if (f->func)
		n = snprintf(buf, len, "%s+0x%" PRIx64, f->func, f->func_off);
	else
		n = snprintf(buf, len, "0x%" PRIx64, f->ip);
	if (n < 0 || (size_t)n >= len)
		return;
	if (obj)
		n += snprintf(buf + n, len - (size_t)n, " (%s)", obj);
	if (f->file && (size_t)n < len) {
		const char *base = strrchr(f->file, '/');

		snprintf(buf + n, len - (size_t)n, " %s:%u", base ? base + 1 : f->file, f->line);
	}
}

void symbolizer_free(struct symbolizer *s)
{
	size_t it = 0;
	void *v;

	if (!s)
		return;
	for (size_t i = 0; i < s->nobjs; i++) {
		struct sym_obj *o = s->objv[i];
		size_t jt = 0;
		void *f;

		while (hmap_next(&o->frames, &jt, NULL, NULL, &f))
			free(f);
		hmap_free(&o->frames);
		goelf_funcs_free(o->gofuncs); /* before dwfl_end: it points into the ELF's data */
		if (o->dwfl)
			dwfl_end(o->dwfl);
		free(o->loads);
		free(o->path);
		free(o);
	}
	free(s->objv);
	while (hmap_next(&s->procs, &it, NULL, NULL, &v)) {
		struct sym_proc *p = v;

		for (size_t i = 0; i < p->nmaps; i++)
			free(p->maps[i].path);
		free(p->maps);
		free(p);
	}
	hmap_free(&s->procs);
	it = 0;
	while (hmap_next(&s->stacks, &it, NULL, NULL, &v)) {
		struct sym_stack *st = v;

		for (u32 i = 0; i < st->n; i++)
			free((void *)st->frames[i]);
		free(st->frames);
		free(st);
	}
	hmap_free(&s->stacks);
	for (size_t i = 0; i < s->nstrs; i++)
		free(s->strs[i]);
	free(s->strs);
	free(s);
}

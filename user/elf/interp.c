// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Interpreted runtimes: planning the uprobe sessions on CPython's asyncio
 * and on Lua (see interp.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elfnotes.h"
#include "interp.h"
#include "switchfam.h"
#include "util.h"
#include "x86dec.h"

/* ---- reading an object's data ---- */

/* Up to len bytes at vaddr of any loaded segment's file image; how many were read. */
static size_t obj_read(const struct elf_image *o, uint64_t vaddr, void *buf, size_t len)
{
	for (size_t i = 0; i < o->nloads; i++) {
		const GElf_Phdr *ph = &o->loads[i];
		ssize_t n;

		if (vaddr < ph->p_vaddr || vaddr >= ph->p_vaddr + ph->p_filesz)
			continue;
		if (len > ph->p_vaddr + ph->p_filesz - vaddr)
			len = (size_t)(ph->p_vaddr + ph->p_filesz - vaddr);
		n = pread(o->fd, buf, len, (off_t)(ph->p_offset + (vaddr - ph->p_vaddr)));
		return n > 0 ? (size_t)n : 0;
	}
	return 0;
}

/*
 * The pointers of a position-independent object's data are written by its
 * R_X86_64_RELATIVE relocations (the pointer is the addend, plus the load
 * bias): kept sorted by the place they write.
 */
struct relocs {
	uint64_t *at, *to;
	size_t n;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void relocs_read(const struct elf_image *o, struct relocs *r)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0;
	uint64_t *pairs = NULL;

	memset(r, 0, sizeof(*r));
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela rel;

			if (!gelf_getrela(d, (int)i, &rel) ||
			    GELF_R_TYPE(rel.r_info) != R_X86_64_RELATIVE)
				continue;
			if (r->n == cap) {
				cap = cap ? cap * 2 : 256;
				pairs = xrealloc(pairs, cap * 2 * sizeof(*pairs));
			}
			pairs[2 * r->n] = rel.r_offset;
			pairs[2 * r->n + 1] = (uint64_t)rel.r_addend;
			r->n++;
		}
	}
	/* Sorted as pairs: the place first. */
	qsort(pairs, r->n, 2 * sizeof(*pairs), cmp_u64);
	r->at = xmalloc((r->n + 1) * sizeof(*r->at));
	r->to = xmalloc((r->n + 1) * sizeof(*r->to));
	for (size_t i = 0; i < r->n; i++) {
		r->at[i] = pairs[2 * i];
		r->to[i] = pairs[2 * i + 1];
	}
	free(pairs);
}

static void relocs_free(struct relocs *r)
{
	free(r->at);
	free(r->to);
}

/* The pointer the object holds at vaddr once loaded (its link-time value); 0 if none. */
static uint64_t obj_pointer(const struct elf_image *o, const struct relocs *r, uint64_t vaddr)
{
	size_t lo = 0, hi = r->n;
	uint64_t v = 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->at[mid] < vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < r->n && r->at[lo] == vaddr)
		return r->to[lo];
	/* A fixed-address executable (a CPython with _asyncio built in) holds it as it is. */
	if (o->eh.e_type == ET_EXEC && obj_read(o, vaddr, &v, sizeof(v)) == sizeof(v))
		return v;
	return 0;
}

/* The vaddr of the NUL-terminated string `s` in the object's read-only data; 0 if absent. */
static uint64_t obj_string(const struct elf_image *o, const char *s)
{
	size_t len = strlen(s) + 1, shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(o->elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & (SHF_EXECINSTR | SHF_WRITE)))
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && d->d_buf && i + len <= d->d_size; i++) {
			const char *p = (const char *)d->d_buf + i;

			if ((i == 0 || p[-1] == 0) && !memcmp(p, s, len))
				return sh.sh_addr + i;
		}
	}
	return 0;
}

/* Every place the object's data points at `target`: up to max, how many. */
static size_t pointers_to(const struct relocs *r, uint64_t target, uint64_t *at, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n && n < max; i++)
		if (r->to[i] == target)
			at[n++] = r->at[i];
	return n;
}

static void add_site(struct interp_plan *p, const struct elf_image *o, uint64_t vaddr,
		     uint64_t cookie)
{
	struct interp_site *s;
	uint64_t off, avail;
	uint8_t code[16];
	struct x86_insn in;
	size_t n;

	if (p->nsites >= INTERP_MAX_SITES || !elf_image_text_offset(o, vaddr, &off, &avail))
		return;
	s = &p->sites[p->nsites++];
	s->offset = off;
	s->cookie = cookie;
	n = pread(o->fd, code, sizeof(code), (off_t)off) > 0 ? sizeof(code) : 0;
	s->emulated = n && x86_decode(code, n, vaddr, &in) && in.uprobe == X86_UPROBE_EMULATED;
	if (!s->emulated)
		p->stepped++;
}

/* ---- CPython asyncio ---- */

/*
 * Where each CPython release keeps what the BPF side reads, and where its
 * static type objects keep their size, tp_call and tp_init. Checked with
 * ctypes against Debian's python3.11 (3.11.2) and pyenv's 3.11.7 (the test
 * suite's suite_28_python.py does it again on the machine it runs on).
 */
struct py_release {
	int minor; /* 3.minor */
	uint32_t task_size, future_size, stepw_size; /* their types' tp_basicsize */
	uint16_t tp_name, tp_basicsize, tp_call, tp_init;
	struct coro_py_layout l;
};

static const struct py_release py_releases[] = {
	{
		.minor = 11,
		.task_size = 176,
		.future_size = 128,
		.stepw_size = 32,
		.tp_name = 24,
		.tp_basicsize = 32,
		.tp_call = 128,
		.tp_init = 296,
		.l = {
			.sw_task = 16,
			.fut_state = 88,
			.fut_exception = 48,
			.task_waiter = 128,
			.task_coro = 136,
			.task_name = 144,
			.ob_type = 8,
			.tp_name = 24,
			.coro_qualname = 40,
			.coro_state = 75,
			.coro_frame = 80,
			.frame_stacktop = 64,
			.frame_locals = 72,
			.str_state = 32,
			.str_ascii = 48,
			.str_utf8 = 56,
			.suspended = -1, /* FRAME_SUSPENDED */
		},
	},
};

/*
 * The coroutines of asyncio (3.11's Lib/asyncio) whose await is a sleep or
 * the event loop's wait for a socket: a task suspended in one of them waits
 * for that. Any other await is a wait on the future or task awaited.
 */
const struct interp_py_wait interp_py_waits[] = {
	{ "sleep", CORO_R_SLEEP },
	{ "BaseSelectorEventLoop.sock_recv", CORO_R_IO },
	{ "BaseSelectorEventLoop.sock_recv_into", CORO_R_IO },
	{ "BaseSelectorEventLoop.sock_recvfrom", CORO_R_IO },
	{ "BaseSelectorEventLoop.sock_recvfrom_into", CORO_R_IO },
	{ "BaseSelectorEventLoop.sock_sendall", CORO_R_IO },
	{ "BaseSelectorEventLoop.sock_sendto", CORO_R_IO },
	{ "BaseSelectorEventLoop.sock_connect", CORO_R_IO },
	{ "BaseSelectorEventLoop.sock_accept", CORO_R_IO },
	{ "BaseSelectorEventLoop._accept_connection2", CORO_R_IO },
	{ "BaseEventLoop._create_connection_transport", CORO_R_IO },
	{ "StreamReader._wait_for_data", CORO_R_IO },
	{ "FlowControlMixin._drain_helper", CORO_R_IO },
	{ "_SendfileFallbackProtocol.drain", CORO_R_IO },
};
const size_t interp_npy_waits = sizeof(interp_py_waits) / sizeof(interp_py_waits[0]);

/*
 * CPython's minor version from the module's name: the tag CPython checks
 * before it loads an extension module (_asyncio.cpython-311-x86_64-linux-gnu.so),
 * or, for a module built into the interpreter, the interpreter's name
 * (libpython3.11.so, python3.11). 0 if neither says.
 */
static int py_minor(const char *shown)
{
	const char *base = strrchr(shown, '/'), *p;
	int minor;

	base = base ? base + 1 : shown;
	/* cpython-311 (3.11), cpython-37m (3.7): the digits after the major version. */
	if ((p = strstr(base, ".cpython-3")) && p[10] >= '0' && p[10] <= '9' &&
	    sscanf(p + 10, "%d", &minor) == 1)
		return minor;
	if (!strncmp(base, "_asyncio", 8))
		return 0; /* a module without a tag: any version could load it */
	if ((p = strstr(base, "python3.")) && sscanf(p + 8, "%d", &minor) == 1)
		return minor;
	return 0;
}

/* A static type object of the module by its tp_name: its vaddr, 0 if not found. */
static uint64_t py_type(const struct elf_image *o, const struct relocs *r, const char *name,
			uint16_t tp_name)
{
	uint64_t s = obj_string(o, name), at[4];
	size_t n = s ? pointers_to(r, s, at, 4) : 0;

	/* The one place that is a type's tp_name: the type's tp_basicsize follows it. */
	for (size_t i = 0; i < n; i++) {
		uint64_t size = 0;

		if (at[i] >= tp_name && obj_read(o, at[i] + 8, &size, 8) == 8 && size &&
		    size < 4096)
			return at[i] - tp_name;
	}
	return 0;
}

/* A module function by its PyMethodDef's name and flags: its vaddr, 0 if not found. */
static uint64_t py_method(const struct elf_image *o, const struct relocs *r, const char *name,
			  int flags)
{
	uint64_t s = obj_string(o, name), at[4];
	size_t n = s ? pointers_to(r, s, at, 4) : 0;

	for (size_t i = 0; i < n; i++) {
		int32_t f = 0;
		uint64_t fn = obj_pointer(o, r, at[i] + 8);

		if (fn && obj_read(o, at[i] + 16, &f, 4) == 4 && f == flags)
			return fn;
	}
	return 0;
}

static int plan_asyncio(const struct elf_image *o, const char *shown, struct interp_plan *p,
			char *err, size_t errlen)
{
	const struct py_release *rel = NULL;
	int minor = py_minor(shown);
	uint64_t task_t, fut_t, stepw_t, step, wakeup, init;
	uint64_t sz[3] = { 0 };
	struct relocs r;

	for (size_t i = 0; i < sizeof(py_releases) / sizeof(py_releases[0]); i++)
		if (py_releases[i].minor == minor)
			rel = &py_releases[i];
	if (!minor) {
		errfmt(err, errlen, "CPython's asyncio module, of a version its name does not say "
		       "(no cpython-3XY tag): its task layout cannot be known");
		return -EPROTONOSUPPORT;
	}
	snprintf(p->version, sizeof(p->version), "CPython 3.%d", minor);
	if (!rel) {
		errfmt(err, errlen, "CPython 3.%d's asyncio: its task layout is not known to this "
		       "corobpf (it knows CPython 3.11): its tasks are not traced", minor);
		return -EPROTONOSUPPORT;
	}
	relocs_read(o, &r);
	task_t = py_type(o, &r, "_asyncio.Task", rel->tp_name);
	fut_t = py_type(o, &r, "_asyncio.Future", rel->tp_name);
	stepw_t = py_type(o, &r, "TaskStepMethWrapper", rel->tp_name);
	if (task_t)
		obj_read(o, task_t + rel->tp_basicsize, &sz[0], 8);
	if (fut_t)
		obj_read(o, fut_t + rel->tp_basicsize, &sz[1], 8);
	if (stepw_t)
		obj_read(o, stepw_t + rel->tp_basicsize, &sz[2], 8);
	step = stepw_t ? obj_pointer(o, &r, stepw_t + rel->tp_call) : 0;
	init = task_t ? obj_pointer(o, &r, task_t + rel->tp_init) : 0;
	wakeup = py_method(o, &r, "task_wakeup", 0x0008 /* METH_O */);
	relocs_free(&r);
	if (!task_t || !fut_t || !stepw_t) {
		errfmt(err, errlen, "%s's asyncio module: its Task, Future or TaskStepMethWrapper "
		       "type was not found (a build corobpf does not know)", p->version);
		return -EPROTONOSUPPORT;
	}
	if (sz[0] != rel->task_size || sz[1] != rel->future_size || sz[2] != rel->stepw_size) {
		errfmt(err, errlen, "%s's asyncio module: its Task, Future and TaskStepMethWrapper "
		       "are %llu, %llu and %llu bytes, not the %u, %u and %u of the layout corobpf "
		       "knows for 3.%d: not traced", p->version, (unsigned long long)sz[0],
		       (unsigned long long)sz[1], (unsigned long long)sz[2], rel->task_size,
		       rel->future_size, rel->stepw_size, minor);
		return -EPROTONOSUPPORT;
	}
	if (!step || !wakeup || !init) {
		errfmt(err, errlen, "%s's asyncio module: %s not found", p->version,
		       !step ? "TaskStepMethWrapper's tp_call" :
		       !wakeup ? "task_wakeup" : "Task.__init__");
		return -EPROTONOSUPPORT;
	}
	p->py = rel->l;
	p->has_layout = true;
	add_site(p, o, step, CORO_RT_COOKIE(CORO_RT_PY_STEP, 0, 0, 0));
	add_site(p, o, wakeup, CORO_RT_COOKIE(CORO_RT_PY_WAKEUP, 0, 0, 0));
	add_site(p, o, init, CORO_RT_COOKIE(CORO_RT_PY_INIT, 0, 0, 0));
	if (p->nsites != 3) {
		errfmt(err, errlen, "%s's asyncio module: its functions are not in its code",
		       p->version);
		return -ENOEXEC;
	}
	snprintf(p->sites_text, sizeof(p->sites_text),
		 "%s: task steps (TaskStepMethWrapper's tp_call at 0x%llx, task_wakeup at 0x%llx) "
		 "and Task.__init__ at 0x%llx, entry and return%s", p->version,
		 (unsigned long long)step, (unsigned long long)wakeup, (unsigned long long)init,
		 p->stepped ? " (some single-stepped)" : "");
	snprintf(p->limits, sizeof(p->limits),
		 "no ready events (a task's wakeup is seen when it runs); tasks of a pure-Python "
		 "Task class (asyncio.tasks._PyTask) are not seen");
	return 0;
}

/* ---- detection and planning ---- */

uint32_t interp_detect(const char *path, const char *shown)
{
	struct elf_image o;
	uint64_t v, s;
	uint32_t fam = 0;

	(void)shown;
	if (elf_image_open(&o, path, NULL, 0))
		return 0;
	if (switchfam_obj_symbol(&o, "PyInit__asyncio", &v, &s))
		fam = CORO_FAM_ASYNCIO;
	elf_image_close(&o);
	return fam;
}

int interp_plan(const char *path, const char *shown, struct interp_plan *plan, char *err,
		size_t errlen)
{
	struct elf_image o;
	uint64_t v, s;
	int ret = -ENOENT;

	memset(plan, 0, sizeof(*plan));
	ret = elf_image_open(&o, path, err, errlen);
	if (ret)
		return ret;
	ret = -ENOENT;
	if (switchfam_obj_symbol(&o, "PyInit__asyncio", &v, &s)) {
		plan->family = CORO_FAM_ASYNCIO;
		ret = plan_asyncio(&o, shown, plan, err, errlen);
	}
	elf_image_close(&o);
	return ret;
}

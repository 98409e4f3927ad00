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
	/* The summary's count is of switches made dearer: sites that fire once a run or a coroutine are not. */
	if (!s->emulated && (CORO_RT_COOKIE_OP(cookie) == CORO_RT_PY_STEP ||
			     CORO_RT_COOKIE_OP(cookie) == CORO_RT_PY_WAKEUP ||
			     CORO_RT_COOKIE_OP(cookie) == CORO_RT_LUA_RESUME))
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

/* ---- Lua ---- */

/*
 * Where each Lua release keeps what the BPF side reads (lua_State, a stack
 * slot, a Lua closure, its prototype, a string), checked against Debian
 * 12's lua5.4 (5.4.4) by its own lua_resume and lua_getinfo with objdump,
 * and by reading a running coroutine's memory with bpftrace; LuaJIT's
 * against OpenResty's luajit2 (libluajit2-5.1-2, 2.1-20230119, GC64).
 */
static const struct coro_lua_layout lua54 = {
	.l_status = 10,
	.l_top = 16,
	.l_ci = 32,
	.l_base_ci = 96,
	.tv_size = 16,
	.tv_tag = 8,
	.fn_proto = 24,
	.pt_source = 112,
	.pt_line = 44,
	.str_tag = 8,
	.str_len = 11,
	.str_lnglen = 16,
	.str_data = 24,
	.l_global = 24,
	.g_mainthread = 264,
	.tag_lclosure = 0x46, /* LUA_VLCL | BIT_ISCOLLECTABLE */
	.tag_shrstr = 0x04,   /* LUA_VSHRSTR */
};

static const struct coro_lua_layout luajit21 = {
	.l_status = 11,
	.l_top = 40,
	.l_ci = 80, /* cframe */
	.tv_size = 8,
	.fn_proto = 32, /* GCfuncL.pc */
	.fn_ffid = 10,
	.proto_size = 104,
	.pt_source = 64, /* GCproto.chunkname */
	.pt_line = 72,	 /* GCproto.firstline */
	.str_len = 20, /* after reserved, hashalg, sid and hash */
	.str_data = 24,
	.luajit = 1,
};

/* A defined symbol of any type (lua_ident is data) by name: its vaddr, 0 if none. */
static uint64_t obj_any_symbol(const struct elf_image *o, const char *name)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *s;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
				continue;
			s = elf_strptr(o->elf, sh.sh_link, sym.st_name);
			if (s && !strcmp(s, name))
				return sym.st_value;
		}
	}
	return 0;
}

/* The NUL-terminated string at vaddr into buf (len bytes at most); false if unreadable. */
static bool obj_cstr(const struct elf_image *o, uint64_t vaddr, char *buf, size_t len)
{
	size_t n = obj_read(o, vaddr, buf, len - 1);

	buf[n] = 0;
	return n > 0;
}

/* True if the 8 bytes of `word` occur in the first `len` bytes of the code at vaddr. */
static bool code_has_word(const struct elf_image *o, uint64_t vaddr, size_t len, uint64_t word)
{
	uint8_t code[512];
	uint64_t off, avail;
	size_t n;

	if (len > sizeof(code) || !elf_image_text_offset(o, vaddr, &off, &avail))
		return false;
	n = pread(o->fd, code, len < avail ? len : avail, (off_t)off) > 0 ? len : 0;
	for (size_t i = 0; i + 8 <= n; i++)
		if (!memcmp(code + i, &word, 8))
			return true;
	return false;
}

static int plan_lua(const struct elf_image *o, struct interp_plan *p, char *err, size_t errlen)
{
	uint64_t resume, newthread, close = 0, v, sz, rsz, nsz;
	char ident[128] = "";
	bool jit = switchfam_obj_symbol(o, "luaJIT_setmode", &v, &sz);
	const char *ver;

	if (!switchfam_obj_symbol(o, "lua_resume", &resume, &rsz) ||
	    !switchfam_obj_symbol(o, "lua_newthread", &newthread, &nsz))
		return -ENOENT;
	if (jit) {
		uint64_t s = obj_string(o, "LuaJIT 2.1.0-beta3");

		snprintf(p->version, sizeof(p->version), "LuaJIT 2.1");
		/* GC64: a new thread is tagged 0xfffc8 in its stack slot (LJ_TTHREAD). */
		if (!s || !code_has_word(o, newthread, nsz, 0xfffc800000000000ULL)) {
			errfmt(err, errlen, "a LuaJIT that is not 2.1 in its GC64 mode (the layout "
			       "corobpf knows): its coroutines are not traced");
			return -EPROTONOSUPPORT;
		}
		p->lua = luajit21;
	} else {
		v = obj_any_symbol(o, "lua_ident");
		if (!v || !obj_cstr(o, v, ident, sizeof(ident)))
			snprintf(ident, sizeof(ident), "(no lua_ident)");
		/* "$LuaVersion: Lua 5.4.4  Copyright ...": "Lua 5.4.4". */
		ver = strstr(ident, "Lua ");
		if (ver)
			snprintf(p->version, sizeof(p->version), "%.*s",
				 (int)(4 + strcspn(ver + 4, " \t")), ver);
		if (!ver || strncmp(ver, "Lua 5.4.", 8)) {
			errfmt(err, errlen, "%s: a Lua release whose layout corobpf does not know (it "
			       "knows Lua 5.4 and LuaJIT 2.1): its coroutines are not traced",
			       ver ? p->version : "Lua of an unknown release");
			return -EPROTONOSUPPORT;
		}
		p->lua = lua54;
		if (!switchfam_obj_symbol(o, "lua_resetthread", &close, &sz))
			switchfam_obj_symbol(o, "lua_closethread", &close, &sz);
	}
	p->has_layout = true;
	add_site(p, o, resume, CORO_RT_COOKIE(CORO_RT_LUA_RESUME, 0, 0,
					      jit ? CORO_RT_F_FROM_CURRENT : 0));
	/*
	 * LuaJIT: a coroutine is made at its first lua_resume. coroutine.create
	 * calls lua_newthread, but Lua's own resumes of it are not seen (they
	 * run in the VM): made there, it would be a coroutine that never runs.
	 * And OpenResty's lua_resetthread(L, th) reuses a finished thread for a
	 * new coroutine, seen the same way, at its first resume.
	 */
	if (!jit)
		add_site(p, o, newthread, CORO_RT_COOKIE(CORO_RT_LUA_NEWTHREAD, 0, 0, 0));
	if (close)
		add_site(p, o, close, CORO_RT_COOKIE(CORO_RT_LUA_CLOSE, 0, 0, 0));
	snprintf(p->sites_text, sizeof(p->sites_text), "%s: lua_resume at 0x%llx", p->version,
		 (unsigned long long)resume);
	if (!jit)
		snprintf(p->sites_text + strlen(p->sites_text),
			 sizeof(p->sites_text) - strlen(p->sites_text), ", lua_newthread at 0x%llx",
			 (unsigned long long)newthread);
	if (close)
		snprintf(p->sites_text + strlen(p->sites_text),
			 sizeof(p->sites_text) - strlen(p->sites_text), ", lua_resetthread at 0x%llx",
			 (unsigned long long)close);
	snprintf(p->sites_text + strlen(p->sites_text), sizeof(p->sites_text) - strlen(p->sites_text),
		 ", entry and return");
	snprintf(p->limits, sizeof(p->limits), "%s",
		 jit ? "made at its first lua_resume; a coroutine resumed from Lua "
		       "(coroutine.resume) runs in LuaJIT's VM, not lua_resume, and is not seen" :
		       "no ready events; a coroutine collected without finishing has no exit");
	return 0;
}

/*
 * nginx's Lua module (lua-nginx-module) yields a request's coroutine from
 * its C functions (ngx.sleep, a cosocket's read, ...) with lua_yield. Each
 * call of lua_yield is probed with the reason of the API it serves, so that
 * the lua_resume it returns through says what the coroutine waits for. The
 * module is stripped of its static functions: the API a call belongs to is
 * found from the module's exported ngx_http_lua_inject_*_api functions,
 * which register the API's C functions with Lua (a lea of each): a call of
 * lua_yield inside one of those (their extents from .eh_frame), or inside a
 * function one of those refers to, belongs to that API.
 */
static const struct lua_host_api {
	const char *inject;
	uint32_t reason;
} lua_host_apis[] = {
	{ "ngx_http_lua_inject_sleep_api", CORO_R_SLEEP },	      /* ngx.sleep */
	{ "ngx_http_lua_inject_socket_tcp_api", CORO_R_IO },	      /* cosockets */
	{ "ngx_http_lua_inject_socket_udp_api", CORO_R_IO },
	{ "ngx_http_lua_inject_req_body_api", CORO_R_IO },	      /* ngx.req.read_body */
	{ "ngx_http_lua_inject_output_api", CORO_R_IO },	      /* ngx.flush(true) */
	{ "ngx_http_lua_inject_uthread_api", CORO_R_WAIT },	      /* ngx.thread.wait */
	{ "ngx_http_lua_inject_subrequest_api", CORO_R_WAIT },     /* ngx.location.capture */
	{ "ngx_http_lua_inject_worker_thread_api", CORO_R_WAIT },  /* ngx.run_worker_thread */
};

#define HOST_APIS (sizeof(lua_host_apis) / sizeof(lua_host_apis[0]))
#define HOST_FUNCS 256

/*
 * The functions of an object by their starts, from the sorted table of
 * .eh_frame_hdr (every function with unwind information, static ones of a
 * stripped object included): its usual encoding only (table entries as
 * 4-byte offsets from the header, DW_EH_PE_datarel | DW_EH_PE_sdata4).
 */
struct fn_starts {
	uint64_t *v;
	size_t n;
};

static bool fn_starts_read(const struct elf_image *o, struct fn_starts *f)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	memset(f, 0, sizeof(*f));
	if (elf_getshdrstrndx(o->elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const uint8_t *b;
		const char *name;
		uint32_t count;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(o->elf, shstrndx, sh.sh_name)) ||
		    strcmp(name, ".eh_frame_hdr"))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < 12)
			return false;
		b = d->d_buf;
		/* version 1, eh_frame_ptr pcrel|sdata4, fde_count udata4, table datarel|sdata4 */
		if (b[0] != 1 || b[1] != 0x1b || b[2] != 0x03 || b[3] != 0x3b)
			return false;
		memcpy(&count, b + 8, 4);
		if ((uint64_t)count * 8 > d->d_size - 12)
			return false;
		f->v = xmalloc((count + 1) * sizeof(*f->v));
		for (uint32_t i = 0; i < count; i++) {
			int32_t loc;

			memcpy(&loc, b + 12 + 8 * (size_t)i, 4);
			f->v[f->n++] = sh.sh_addr + (int64_t)loc;
		}
		return f->n > 0;
	}
	return false;
}

/* The function holding vaddr: its start, and the next one's (its end at most); false if none. */
static bool fn_extent(const struct fn_starts *f, uint64_t vaddr, uint64_t *start, uint64_t *end)
{
	size_t lo = 0, hi = f->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->v[mid] <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	*start = f->v[lo - 1];
	*end = lo < f->n ? f->v[lo] : *start + 4096;
	return true;
}

/*
 * The functions the code [start, end) refers to: call and jmp targets, and
 * rip-relative lea of code (a function registered with Lua), each by the
 * start of its .eh_frame extent. Appended to fn (at most HOST_FUNCS).
 */
static void code_refs(const struct elf_image *o, const struct fn_starts *cfi, uint64_t start,
		      uint64_t end, uint64_t *fn, size_t *n)
{
	uint8_t *code;
	uint64_t a, off, avail;
	size_t len = end > start && end - start < (1u << 20) ? (size_t)(end - start) : 0;

	if (!len || !elf_image_text_offset(o, start, &off, &avail))
		return;
	code = xmalloc(len);
	len = pread(o->fd, code, len < avail ? len : avail, (off_t)off) > 0 ? len : 0;
	for (a = start; a < start + len;) {
		struct x86_insn in;
		int l = x86_decode(code + (a - start), start + len - a, a, &in);
		uint64_t t = 0, fs, fe;

		if (!l)
			break;
		if ((in.flow == X86_FLOW_CALL || in.flow == X86_FLOW_JMP) && in.target)
			t = in.target;
		/* lea disp32(%rip), reg */
		if (!in.vex && in.map == 0 && in.opcode == 0x8d && (in.modrm & 0xc7) == 0x05) {
			const uint8_t *p = code + (a - start) + l - 4;

			t = a + l + (int64_t)(int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
						       (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		}
		if (t && fn_extent(cfi, t, &fs, &fe) && fs == t && *n < HOST_FUNCS)
			fn[(*n)++] = t;
		a += l;
	}
	free(code);
}

static bool in_set(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static int plan_lua_host(const struct elf_image *o, struct interp_plan *p, char *err,
			 size_t errlen)
{
	uint64_t *l1[HOST_APIS], *l2[HOST_APIS], site[INTERP_MAX_SITES];
	size_t n1[HOST_APIS] = { 0 }, n2[HOST_APIS] = { 0 };
	uint32_t by_reason[8] = { 0 };
	bool tail[INTERP_MAX_SITES];
	struct fn_starts fns, *cfi = &fns;
	bool have_fns = fn_starts_read(o, &fns);
	int nsites = switchfam_call_sites(o, "lua_yield", site, tail, INTERP_MAX_SITES);

	snprintf(p->version, sizeof(p->version), "nginx's Lua module");
	if (nsites < 0 || !have_fns) {
		free(fns.v);
		errfmt(err, errlen, "nginx's Lua module: %s: what a request's coroutine waits for "
		       "is not said", nsites == -EXDEV ? "it reaches lua_yield other than by calls" :
		       nsites < 0 ? "its calls of lua_yield could not be found" :
		       "its .eh_frame_hdr is missing or not of the usual encoding");
		return -ENOEXEC;
	}
	for (size_t g = 0; g < HOST_APIS; g++) {
		uint64_t start, size;

		l1[g] = xcalloc(HOST_FUNCS, sizeof(uint64_t));
		l2[g] = xcalloc(HOST_FUNCS, sizeof(uint64_t));
		if (!switchfam_obj_symbol(o, lua_host_apis[g].inject, &start, &size))
			continue;
		code_refs(o, cfi, start, start + size, l1[g], &n1[g]);
		for (size_t i = 0; i < n1[g]; i++) {
			uint64_t fs, fe;

			if (fn_extent(cfi, l1[g][i], &fs, &fe))
				code_refs(o, cfi, fs, fe, l2[g], &n2[g]);
		}
	}
	for (int i = 0; i < nsites; i++) {
		uint64_t fs, fe;
		int g1 = -1, g2 = -1, c1 = 0, c2 = 0;

		if (!fn_extent(cfi, site[i], &fs, &fe))
			continue;
		for (size_t g = 0; g < HOST_APIS; g++) {
			if (in_set(l1[g], n1[g], fs)) {
				g1 = (int)g;
				c1++;
			} else if (in_set(l2[g], n2[g], fs)) {
				g2 = (int)g;
				c2++;
			}
		}
		/* One API's own function, else one API's helper; a function several share says nothing. */
		if (c1 == 1 || (!c1 && c2 == 1)) {
			uint32_t r = lua_host_apis[c1 ? g1 : g2].reason;

			add_site(p, o, site[i], CORO_RT_COOKIE(CORO_RT_LUA_YIELD_AT, 0, r, 0));
			by_reason[r & 7]++;
		}
	}
	for (size_t g = 0; g < HOST_APIS; g++) {
		free(l1[g]);
		free(l2[g]);
	}
	free(fns.v);
	if (!p->nsites) {
		errfmt(err, errlen, "nginx's Lua module: none of its %d calls of lua_yield belongs to "
		       "an API corobpf knows: what a request's coroutine waits for is not said",
		       nsites);
		return -ENOEXEC;
	}
	snprintf(p->sites_text, sizeof(p->sites_text),
		 "%s: %u of its %d calls of lua_yield, each the reason of its API (%u sleep, %u io, "
		 "%u wait)", p->version, p->nsites, nsites, by_reason[CORO_R_SLEEP],
		 by_reason[CORO_R_IO], by_reason[CORO_R_WAIT]);
	snprintf(p->limits, sizeof(p->limits),
		 "a yield from another call (coroutine.yield, ngx.exit) is a plain yield");
	return 0;
}

/* ---- detection and planning ---- */

uint32_t interp_detect(const char *path, const char *shown, uint32_t *notes)
{
	struct elf_image o;
	uint64_t v, s;
	uint32_t fam = 0, n = 0;

	(void)shown;
	if (notes)
		*notes = 0;
	if (elf_image_open(&o, path, NULL, 0))
		return 0;
	if (switchfam_obj_symbol(&o, "Py_InitializeEx", &v, &s))
		n |= INTERP_NOTE_CPYTHON;
	if (switchfam_obj_symbol(&o, "luaJIT_setmode", &v, &s))
		n |= INTERP_NOTE_LUAJIT;
	if (notes)
		*notes = n;
	if (switchfam_obj_symbol(&o, "PyInit__asyncio", &v, &s))
		fam = CORO_FAM_ASYNCIO;
	else if ((switchfam_obj_symbol(&o, "lua_resume", &v, &s) &&
		  switchfam_obj_symbol(&o, "lua_newthread", &v, &s)) ||
		 switchfam_obj_symbol(&o, "ngx_http_lua_inject_sleep_api", &v, &s))
		fam = CORO_FAM_LUA;
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
	} else if (switchfam_obj_symbol(&o, "lua_resume", &v, &s)) {
		plan->family = CORO_FAM_LUA;
		ret = plan_lua(&o, plan, err, errlen);
	} else if (switchfam_obj_symbol(&o, "ngx_http_lua_inject_sleep_api", &v, &s)) {
		plan->family = CORO_FAM_LUA;
		ret = plan_lua_host(&o, plan, err, errlen);
	}
	elf_image_close(&o);
	return ret;
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Interpreted runtimes, unmodified: CPython's asyncio tasks and Lua's
 * coroutines (docs/python.md, docs/lua.md). Included by corobpf.bpf.c after
 * its helpers.
 *
 * One program, attached as a uprobe session (kernel 6.13+) to the
 * interpreter's own functions user/elf/interp.c found: at an entry it says
 * what starts to run and keeps it in the session cookie, and the return
 * runs the program again to say how that run ended. It reads the
 * interpreter's structures at the offsets of its version (a slot of
 * py_layouts or lua_layouts) and sends the probe ABI's records, CREATE,
 * NAME, SWITCH and EXIT, as a scheduler with probes would: the event loop
 * (or the C code that resumes a coroutine) is the scheduler, coroutine 0.
 *
 * Every read of the target's memory is checked; a field that cannot be
 * read gives the plainest answer (a wait on nothing named, no name).
 */
#ifndef COROBPF_INTERP_BPF_H
#define COROBPF_INTERP_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CORO_RT_SLOTS);
	__type(key, __u32);
	__type(value, struct coro_py_layout);
} py_layouts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CORO_RT_SLOTS);
	__type(key, __u32);
	__type(value, struct coro_lua_layout);
} lua_layouts SEC(".maps");

/*
 * asyncio: the coroutines a task waits in, by __qualname__, and what that
 * wait is (CORO_R_SLEEP for asyncio.sleep, CORO_R_IO for the event loop's
 * socket and stream waits). User space fills it (interp.c); any other
 * await is a wait on the future or task awaited.
 */
struct py_wait_key {
	char q[CORO_PY_QUALNAME];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct py_wait_key);
	__type(value, __u32);
} py_waits SEC(".maps");

/*
 * Attached mid-life (CORO_RT_F_NAME_UNSEEN): the tasks and coroutines of a
 * process named already, so that one made before the attach is named the
 * first time it runs, and once. Forgotten at its exit; LRU, so a process
 * that never lets its tasks end cannot fill it for the others.
 */
struct rt_named_key {
	__u32 pid;
	__u32 __pad;
	__u64 id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rt_named_key);
	__type(value, __u8);
} rt_named SEC(".maps");

#define RT_ECANCELED 125
/* x86-64 register numbers, as ctx_reg() takes them. */
#define RT_RAX 0
#define RT_RDX 2
#define RT_RSI 6
#define RT_RDI 7

/* The record's interpreter (CORO_EVF_RT_*), set by coro_rt for this thread's run of it. */
static __always_inline void rt_mark(struct coro_event_hdr *h, struct coro_task_state *st)
{
	if (st)
		h->flags |= st->rt_mark;
}

static __always_inline __u32 rt_u32(__u64 addr, bool *fault)
{
	__u32 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (const void *)addr)) {
		*fault = true;
		return 0;
	}
	return v;
}

/* A switch of the probe ABI; the thread's coroutine is `to` from now, the record kept or not. */
static __always_inline void rt_switch(struct pt_regs *regs, struct coro_task_state *st, __u64 from,
				      __u64 to, __u32 reason, __u64 obj)
{
	struct stk_rec r;
	struct coro_ev_switch *e = stk_reserve(&r, st, sizeof(*e), CORO_EV_SWITCH);

	if (st) {
		st->cur = to;
		st->cur_valid = 1;
	}
	if (!e)
		return;
	rt_mark(&e->hdr, st);
	e->from = from;
	e->to = to;
	e->obj = obj;
	e->reason = reason;
	e->__pad = 0;
	stk_take(&r, regs, regs, sizeof(*e));
	stk_submit(&r);
}

static __always_inline void rt_exit(struct coro_task_state *st, __u64 id, __s64 status)
{
	struct coro_ev_exit *e = event_reserve(st, sizeof(*e), CORO_EV_EXIT);

	if (!e)
		return;
	rt_mark(&e->hdr, st);
	e->id = id;
	e->status = status;
	event_submit(e);
}

static __always_inline void rt_create(struct pt_regs *regs, struct coro_task_state *st, __u64 id,
				      __u64 parent)
{
	struct stk_rec r;
	struct coro_ev_create *e = stk_reserve(&r, st, sizeof(*e), CORO_EV_CREATE);

	if (!e)
		return;
	rt_mark(&e->hdr, st);
	e->id = id;
	e->parent = parent;
	stk_take(&r, regs, regs, sizeof(*e));
	stk_submit(&r);
}

/* True the first time: id of this process was not named yet (and is from now). */
static __always_inline bool rt_first_sight(__u64 id)
{
	struct rt_named_key k = { .pid = bpf_get_current_pid_tgid() >> 32, .id = id };
	__u8 one = 1;

	return !bpf_map_update_elem(&rt_named, &k, &one, BPF_NOEXIST);
}

static __always_inline void rt_forget(__u64 id)
{
	struct rt_named_key k = { .pid = bpf_get_current_pid_tgid() >> 32, .id = id };

	bpf_map_delete_elem(&rt_named, &k);
}

/* ---- CPython asyncio ---- */

/*
 * A str's characters into dst (32 bytes: at most 31 and a NUL): a compact
 * ASCII string's own, else its UTF-8 copy if it has one. The bytes read
 * with the NUL, or <= 0.
 */
static __always_inline long py_str(char *dst, __u64 s, const struct coro_py_layout *o)
{
	bool fault = false;
	__u32 state = rt_u32(s + o->str_state, &fault);
	__u64 src;

	if (fault)
		return -1;
	src = state & CORO_PY_STR_ASCII ? s + o->str_ascii : go_word(s + o->str_utf8, &fault);
	if (fault || !src)
		return -1;
	return bpf_probe_read_user_str(dst, 32, (const void *)src);
}

/* obj is a native coroutine (its type's tp_name is "coroutine"): its type, else 0. */
static __always_inline __u64 py_coro_type(__u64 obj, const struct coro_py_layout *o)
{
	char name[10] = {};
	bool fault = false;
	__u64 type = go_word(obj + o->ob_type, &fault), tp_name;

	tp_name = type ? go_word(type + o->tp_name, &fault) : 0;
	if (fault || !tp_name || bpf_probe_read_user(name, sizeof(name), (const void *)tp_name))
		return 0;
	/* Byte by byte: BPF has no memcmp. */
	return name[0] == 'c' && name[1] == 'o' && name[2] == 'r' && name[3] == 'o' &&
			       name[4] == 'u' && name[5] == 't' && name[6] == 'i' && name[7] == 'n' &&
			       name[8] == 'e' && !name[9] ?
		       type :
		       0;
}

/* "Task-12 fetch()": the task's name and its coroutine's __qualname__. */
static __always_inline void py_name(struct coro_task_state *st, __u64 task,
				    const struct coro_py_layout *o)
{
	struct coro_ev_name *n = event_reserve(st, sizeof(*n), CORO_EV_NAME);
	bool fault = false;
	__u64 name, coro, qual;
	long len, len2;
	__u32 off, end;

	if (!n)
		return;
	__builtin_memset(n->name, 0, CORO_STR_LEN);
	rt_mark(&n->hdr, st);
	n->id = task;
	name = go_word(task + o->task_name, &fault);
	len = name ? py_str(n->name, name, o) : -1;
	off = 0;
	if (len > 1) {
		off = ((__u32)len - 1) & 31;
		n->name[off++] = ' ';
	}
	coro = go_word(task + o->task_coro, &fault);
	qual = coro && py_coro_type(coro, o) ? go_word(coro + o->coro_qualname, &fault) : 0;
	len2 = qual ? py_str(&n->name[off & 63], qual, o) : -1;
	if (len2 > 1) {
		end = (off + (__u32)len2 - 1) & 63;
		if (end <= CORO_STR_LEN - 3) {
			n->name[end] = '(';
			n->name[end + 1] = ')';
		}
	} else if (off) {
		n->name[(off - 1) & 63] = 0; /* no coroutine name after the space */
	}
	if (!n->name[0])
		n->hdr.flags |= CORO_EVF_STR_FAULT;
	event_submit(n);
}

/*
 * What a suspended task waits in: its coroutine's innermost await (each
 * coroutine suspended at an await has the one it awaits on top of its
 * frame's stack), looked up by __qualname__ in py_waits. CORO_R_WAIT when it
 * is not one of those, or cannot be followed.
 */
static __always_inline __u32 py_wait_reason(__u64 task, const struct coro_py_layout *o)
{
	struct py_wait_key k = {};
	bool fault = false;
	__u64 c = go_word(task + o->task_coro, &fault), type, tos, q;
	__u32 *r;

	type = c ? py_coro_type(c, o) : 0;
	if (!type)
		return CORO_R_WAIT;
	for (int i = 0; i < 16; i++) {
		__s8 state = 0;
		__s32 top;

		if (bpf_probe_read_user(&state, 1, (const void *)(c + o->coro_state)) ||
		    state != o->suspended)
			break;
		top = (__s32)rt_u32(c + o->coro_frame + o->frame_stacktop, &fault);
		if (fault || top < 1 || top > 65536)
			break;
		tos = go_word(c + o->coro_frame + o->frame_locals + 8 * (__u64)(top - 1), &fault);
		if (fault || !tos || go_word(tos + o->ob_type, &fault) != type)
			break;
		c = tos;
	}
	q = go_word(c + o->coro_qualname, &fault);
	if (!q || py_str(k.q, q, o) <= 0)
		return CORO_R_WAIT;
	r = bpf_map_lookup_elem(&py_waits, &k);
	return r ? *r : CORO_R_WAIT;
}

/*
 * A step of a task: switched in at the entry of the function that runs it;
 * at its return, done (an exit: 0, -ECANCELED, or -1 for an exception) or
 * suspended on what it awaits, or runnable again (a bare yield, as
 * asyncio.sleep(0)).
 */
static __always_inline void py_step(struct pt_regs *regs, __u64 k, __u64 *cookie, bool ret,
				    struct coro_task_state *st, const struct coro_py_layout *o)
{
	bool fault = false;
	__u64 task, waiter;
	__u32 state;

	if (!ret) {
		task = CORO_RT_COOKIE_OP(k) == CORO_RT_PY_STEP ?
			       go_word(regs->di + o->sw_task, &fault) : regs->di;
		*cookie = task;
		if (!task)
			return;
		if ((CORO_RT_COOKIE_FLAGS(k) & CORO_RT_F_NAME_UNSEEN) && rt_first_sight(task))
			py_name(st, task, o);
		rt_switch(regs, st, st && st->cur_valid ? st->cur : 0, task, CORO_R_UNKNOWN, 0);
		return;
	}
	task = *cookie;
	if (!task)
		return;
	state = rt_u32(task + o->fut_state, &fault);
	if (!fault && state != CORO_PY_PENDING) {
		__s64 status = 0;

		if (state == CORO_PY_CANCELLED)
			status = -RT_ECANCELED;
		else if (go_word(task + o->fut_exception, &fault))
			status = -1;
		rt_exit(st, task, status);
		rt_switch(regs, st, task, 0, CORO_R_DONE, 0);
		if (CORO_RT_COOKIE_FLAGS(k) & CORO_RT_F_NAME_UNSEEN)
			rt_forget(task);
		return;
	}
	waiter = go_word(task + o->task_waiter, &fault);
	if (!waiter)
		rt_switch(regs, st, task, 0, CORO_R_YIELD, 0);
	else
		rt_switch(regs, st, task, 0, py_wait_reason(task, o), waiter);
}

/* Task.__init__: the task is made when it returns 0, by what runs (its parent), and named. */
static __always_inline void py_init(struct pt_regs *regs, __u64 k, __u64 *cookie, bool ret,
				    struct coro_task_state *st, const struct coro_py_layout *o)
{
	__u64 task;

	if (!ret) {
		*cookie = regs->di;
		return;
	}
	task = *cookie;
	if (!task || regs->ax)
		return;
	rt_create(regs, st, task, st && st->cur_valid ? st->cur : 0);
	py_name(st, task, o);
	if (CORO_RT_COOKIE_FLAGS(k) & CORO_RT_F_NAME_UNSEEN)
		rt_first_sight(task);
}

/* ---- Lua 5.4 and LuaJIT ---- */

/* Up to 7 digits of v after ':' at name[off]: a line number. */
static __always_inline void lua_put_line(char *name, __u32 off, __u32 v)
{
	char d[8];
	int n = 0;

	if (!v || v > 9999999 || off > CORO_STR_LEN - 10)
		return;
	for (int i = 0; i < 7 && v; i++) {
		d[i] = '0' + v % 10;
		v /= 10;
		n = i + 1;
	}
	name[off++ & 63] = ':';
	for (int i = 6; i >= 0; i--)
		if (i < n)
			name[off++ & 63] = d[i];
	name[off & 63] = 0;
}

/*
 * "tasks.lua:12": the coroutine's function (in the stack slot at fn), by
 * where its source is (the tail of a long path, without Lua's leading '@'
 * or '=') and the line it is defined at; a main chunk (line 0) by its
 * source alone: OpenResty's content_by_lua(nginx.conf:42).
 */
static __always_inline void lua_name(struct coro_task_state *st, __u64 L, __u64 fn,
				     const struct coro_lua_layout *o)
{
	struct coro_ev_name *n;
	bool fault = false;
	__u64 v = go_word(fn, &fault), cl, proto, src, len, start = 0;
	__u32 line;
	char first = 0;
	long got;

	if (fault)
		return;
	if (o->luajit) {
		__u8 ffid = 0xff;

		if ((v >> 47) != 0x1fff7) /* LJ_TFUNC */
			return;
		cl = v & ((1ULL << 47) - 1);
		if (bpf_probe_read_user(&ffid, 1, (const void *)(cl + o->fn_ffid)) || ffid)
			return;
		proto = go_word(cl + o->fn_proto, &fault) - o->proto_size;
	} else {
		__u8 tag = 0;

		if (bpf_probe_read_user(&tag, 1, (const void *)(fn + o->tv_tag)) ||
		    tag != o->tag_lclosure)
			return;
		cl = v;
		proto = go_word(cl + o->fn_proto, &fault);
	}
	src = go_word(proto + o->pt_source, &fault);
	line = rt_u32(proto + o->pt_line, &fault);
	if (fault || !src)
		return;
	if (o->luajit) {
		len = rt_u32(src + o->str_len, &fault);
	} else {
		__u8 tag = 0, shr = 0;

		bpf_probe_read_user(&tag, 1, (const void *)(src + o->str_tag));
		bpf_probe_read_user(&shr, 1, (const void *)(src + o->str_len));
		len = tag == o->tag_shrstr ? shr : go_word(src + o->str_lnglen, &fault);
	}
	if (fault || !len)
		return;
	bpf_probe_read_user(&first, 1, (const void *)(src + o->str_data));
	if (first == '@' || first == '=')
		start = 1;
	n = event_reserve(st, sizeof(*n), CORO_EV_NAME);
	if (!n)
		return;
	__builtin_memset(n->name, 0, CORO_STR_LEN);
	rt_mark(&n->hdr, st);
	n->id = L;
	if (len > start + 40) {
		/* As Lua shortens a long source in its messages: "..." and the end of it. */
		n->name[0] = n->name[1] = n->name[2] = '.';
		got = bpf_probe_read_user_str(&n->name[3], 38, (const void *)(src + o->str_data +
									     len - 37));
		got = got > 0 ? got + 3 : got;
	} else {
		got = bpf_probe_read_user_str(n->name, 41, (const void *)(src + o->str_data + start));
	}
	if (got > 1)
		lua_put_line(n->name, (__u32)got - 1, line);
	else
		n->hdr.flags |= CORO_EVF_STR_FAULT;
	event_submit(n);
}

/*
 * 5.4: the state calling lua_resume or lua_newthread runs on this thread: a
 * fact, if the thread had no switch yet (a launched lua5.4's main thread
 * ran from the start, as a thread's first coroutine).
 */
static __always_inline void lua_known_running(struct coro_task_state *st, __u64 L)
{
	if (st && !st->cur_valid && L) {
		st->cur = L;
		st->cur_valid = 1;
	}
}

static __always_inline void lua_name_main(struct coro_task_state *st, __u64 L,
					  const struct coro_lua_layout *o)
{
	bool fault = false;
	__u64 g = go_word(L + o->l_global, &fault);
	struct coro_ev_name *n;

	if (fault || !g || go_word(g + o->g_mainthread, &fault) != L || fault)
		return;
	n = event_reserve(st, sizeof(*n), CORO_EV_NAME);
	if (!n)
		return;
	__builtin_memset(n->name, 0, CORO_STR_LEN);
	rt_mark(&n->hdr, st);
	n->id = L;
	__builtin_memcpy(n->name, "main", 5);
	event_submit(n);
}

/*
 * lua_resume's entry: can L run (else lua_resume fails at once, and the
 * session ends here)? A coroutine suspended by a yield, or one not started
 * with its function on its stack. *fn: that function's slot, when not
 * started (0 else).
 */
static __always_inline bool lua_resumable(__u64 L, __u64 nargs, const struct coro_lua_layout *o,
					  __u64 *fn)
{
	bool fault = false;
	__u8 status = 0xff;
	__u64 top;

	*fn = 0;
	if (bpf_probe_read_user(&status, 1, (const void *)(L + o->l_status)))
		return false;
	top = go_word(L + o->l_top, &fault);
	if (o->luajit) {
		if (go_word(L + o->l_ci, &fault) || fault || status > 1)
			return false;
		if (status == 0)
			*fn = top - (nargs + 1) * o->tv_size;
		return true;
	}
	if (status == 1)
		return true;
	if (status || go_word(L + o->l_ci, &fault) != L + o->l_base_ci || fault)
		return false;
	/* Not started: something more than the arguments above base_ci's slot (its function). */
	if ((top - go_word(L + o->l_base_ci, &fault) - o->tv_size) / o->tv_size == nargs)
		return false;
	*fn = top - (nargs + 1) * o->tv_size;
	return !fault;
}

/*
 * lua_resume(L, from, nargs, ...) (5.4), lua_resume(L, nargs) (LuaJIT): L
 * runs from its entry to its return, switched in from the resumer (`from`,
 * or what the thread runs) and back; its return says yielded (with the
 * reason a lua_yield site left), returned (exit 0) or failed (exit -status).
 */
static __always_inline void lua_resume_session(struct pt_regs *regs, __u64 k, __u64 *cookie,
					       bool ret, struct coro_task_state *st,
					       const struct coro_lua_layout *o, bool *want_return)
{
	__u64 from, L, fn, cur = st && st->cur_valid ? st->cur : 0;
	__s32 status;

	*want_return = false;
	if (!ret) {
		bool jit = CORO_RT_COOKIE_FLAGS(k) & CORO_RT_F_FROM_CURRENT, first;
		/* Loaded one by one (ctx_reg): the verifier takes no computed offset into regs. */
		__u64 si = ctx_reg(regs, RT_RSI), dx = ctx_reg(regs, RT_RDX);

		L = ctx_reg(regs, RT_RDI);
		from = jit || !si ? cur : si;
		if (!L || !lua_resumable(L, jit ? si : dx, o, &fn))
			return;
		*cookie = from;
		*want_return = true;
		/* The thread's first record, from the state lua_newstate made: name it. */
		first = st && !st->cur_valid;
		lua_known_running(st, from);
		if (first && o->g_mainthread && from)
			lua_name_main(st, from, o);
		/* LuaJIT: made at its first resume (interp.c says why), by what resumes it. */
		if (fn && o->luajit)
			rt_create(regs, st, L, from);
		if (fn)
			lua_name(st, L, fn, o);
		if (st)
			st->rt_reason = 0;
		/* The resumer waits for what it resumed (0, a host's C code, is no coroutine). */
		rt_switch(regs, st, from, L, from ? CORO_R_WAIT : CORO_R_UNKNOWN, from ? L : 0);
		return;
	}
	L = cur;
	from = *cookie;
	status = (__s32)regs->ax;
	if (status == 1) {
		rt_switch(regs, st, L, from, st && st->rt_reason ? st->rt_reason : CORO_R_YIELD, 0);
	} else {
		rt_exit(st, L, status ? -(__s64)status : 0);
		rt_switch(regs, st, L, from, CORO_R_DONE, 0);
	}
	if (st)
		st->rt_reason = 0;
}

SEC("uprobe")
int coro_rt(struct pt_regs *regs)
{
	__u64 k = bpf_get_attach_cookie(regs), *cookie;
	__u32 op = CORO_RT_COOKIE_OP(k), slot = CORO_RT_COOKIE_SLOT(k) & (CORO_RT_SLOTS - 1);
	/* Masked: the verifier knows a kfunc's bool only as a scalar, and checks the return value. */
	bool ret = (__u32)bpf_session_is_return() & 1;
	struct coro_task_state *st;

	if (!admitted())
		return 1;
	cookie = bpf_session_cookie();
	if (!cookie)
		return 1;
	st = task_state_running();
	if (st)
		st->rt_mark = op <= CORO_RT_PY_INIT ? CORO_EVF_RT_ASYNCIO : CORO_EVF_RT_LUA;
	switch (op) {
	case CORO_RT_PY_STEP:
	case CORO_RT_PY_WAKEUP:
	case CORO_RT_PY_INIT: {
		struct coro_py_layout *o = bpf_map_lookup_elem(&py_layouts, &slot);

		if (!o)
			return 1;
		if (op == CORO_RT_PY_INIT)
			py_init(regs, k, cookie, ret, st, o);
		else
			py_step(regs, k, cookie, ret, st, o);
		return 0;
	}
	case CORO_RT_LUA_RESUME: {
		struct coro_lua_layout *o = bpf_map_lookup_elem(&lua_layouts, &slot);
		bool want = false;

		if (o)
			lua_resume_session(regs, k, cookie, ret, st, o, &want);
		return want ? 0 : 1;
	}
	case CORO_RT_LUA_NEWTHREAD: {
		/* 5.4's lua_newthread(L): made when it returns, by L. */
		__u64 th = ctx_reg(regs, RT_RAX);

		if (!ret) {
			struct coro_lua_layout *o = bpf_map_lookup_elem(&lua_layouts, &slot);
			bool first = st && !st->cur_valid;

			*cookie = ctx_reg(regs, RT_RDI);
			lua_known_running(st, *cookie);
			if (first && o && o->g_mainthread)
				lua_name_main(st, *cookie, o);
		} else if (th) {
			rt_create(regs, st, th, *cookie);
		}
		return 0;
	}
	case CORO_RT_LUA_CLOSE: {
		/* 5.4's lua_resetthread(L): a coroutine suspended in a yield is closed (cancelled). */
		struct coro_lua_layout *o = bpf_map_lookup_elem(&lua_layouts, &slot);
		__u8 status = 0;

		if (o && !bpf_probe_read_user(&status, 1, (const void *)(regs->di + o->l_status)) &&
		    status == 1)
			rt_exit(st, regs->di, -RT_ECANCELED);
		return 1;
	}
	case CORO_RT_LUA_YIELD_AT:
		/* A host's call of lua_yield (nginx's ngx.sleep, a cosocket): why it yields. */
		if (st)
			st->rt_reason = CORO_RT_COOKIE_REASON(k);
		return 1;
	}
	return 1;
}

#endif /* COROBPF_INTERP_BPF_H */

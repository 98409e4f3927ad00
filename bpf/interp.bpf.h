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
	e->id = id;
	e->status = status;
	event_submit(e);
}

static __always_inline void rt_create(struct pt_regs *regs, struct coro_task_state *st, __u64 id)
{
	struct stk_rec r;
	struct coro_ev_create *e = stk_reserve(&r, st, sizeof(*e), CORO_EV_CREATE);

	if (!e)
		return;
	e->id = id;
	e->parent = e->hdr.flags & CORO_EVF_CUR_UNKNOWN ? 0 : e->hdr.cur;
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
	rt_create(regs, st, task);
	py_name(st, task, o);
	if (CORO_RT_COOKIE_FLAGS(k) & CORO_RT_F_NAME_UNSEEN)
		rt_first_sight(task);
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
	}
	return 1;
}

#endif /* COROBPF_INTERP_BPF_H */

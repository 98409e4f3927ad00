// SPDX-License-Identifier: MIT
/*
 * The observer contract (user/record/event.h, user/record/kinds.h, model.h):
 * records decode to the payloads writers use, and the model fills in what
 * applying them found (the coroutines, thread and process concerned); an
 * observer gets its slot in one step. The table of record kinds agrees with
 * itself and with the model's table of what each kind does.
 */
#include "unit.h"
#include "stream.h"
#include "apply.h"
#include "kinds.h"

static union rec_buf B;

TEST(decode_payloads)
{
	struct event ev;
	struct coro_rec_switch *sw = (void *)B.raw;
	static const char text[] = "/lib/libc.so.6\0swapcontext+0x93\0";

	CHECK(event_decode(&ev, mk_name(&B, 7, 10, 0, 0x42, "worker")));
	CHECK_EQ(ev.kind, EV_NAME);
	CHECK_EQ(ev.name.id, 0x42);
	CHECK_EQ(ev.name.name.len, 6);
	CHECK(!memcmp(ev.name.name.s, "worker", 6));
	CHECK_EQ(ev.tid, 7);
	CHECK_EQ(ev.ts, 10);
	CHECK(ev.per_thread);

	CHECK(event_decode(&ev, mk_off_end(&B, 7, 100, 150, 0x42, CORO_OFF_SLEEPING, 20)));
	CHECK_EQ(ev.offcpu.start, 100);
	CHECK_EQ(ev.offcpu.runq_ns, 20);
	CHECK_EQ(ev.offcpu.state, CORO_OFF_SLEEPING);
	CHECK_EQ(ev.ts, 150);

	CHECK(event_decode(&ev, mk_process(&B, 5, CORO_PROC_LAUNCHED)));
	CHECK_EQ(ev.kind, EV_PROCESS);
	CHECK_EQ(ev.process.comm.len, 4);
	CHECK_EQ(ev.process.exe.len, 5);
	CHECK(!memcmp(ev.process.exe.s, "/test", 5));
	CHECK(!ev.per_thread);

	/* Three strings one after the other; the last one empty. */
	hdr_fill(&B.hdr, ROUND_UP(sizeof(*sw) + sizeof(text), 8), CORO_REC_SWITCH, TPID, 1, 0);
	memcpy(sw->text, text, sizeof(text));
	sw->family = 1;
	sw->sites = 3;
	sw->stepped = 1;
	CHECK(event_decode(&ev, &B.hdr));
	CHECK_EQ(ev.kind, EV_SWITCH_PATH);
	CHECK_EQ(ev.switch_path.path.len, strlen("/lib/libc.so.6"));
	CHECK_EQ(ev.switch_path.sites.len, strlen("swapcontext+0x93"));
	CHECK(!memcmp(ev.switch_path.sites.s, "swapcontext+0x93", ev.switch_path.sites.len));
	CHECK_EQ(ev.switch_path.limits.len, 0);
	CHECK_EQ(ev.switch_path.uprobes, 3);
	CHECK_EQ(ev.switch_path.stepped, 1);

	CHECK(event_decode(&ev, mk_proc_exit(&B, 9, 0x0900)));
	CHECK_EQ(ev.kind, EV_PROC_EXIT);
	CHECK_EQ(ev.proc_exit.status, 0x0900);

	/* Contexts of the switch-function path become coroutines before the model. */
	hdr_fill(&B.hdr, sizeof(struct coro_ev_ctx_switch), CORO_EV_CTX_SWITCH, 7, 1, 0);
	CHECK(!event_decode(&ev, &B.hdr));
	CHECK_STR(event_kind_name(EV_OFFCPU_END), "offcpu");
}

/*
 * Every kind the record table decodes has its function in the model, and
 * only those; every name is one kind's, found back; a kind that may carry a
 * stack has the size its ref follows.
 */
TEST(kinds_table_is_whole)
{
	for (unsigned k = 1; k < 256; k++) {
		const struct record_kind *rk = record_kind(k);

		CHECK_EQ(rk->decode != NULL, model_applies(k));
		if (rk->name)
			CHECK_EQ(record_kind_by_name(rk->name), k);
		if (rk->flags & RK_STACK)
			CHECK(rk->size >= sizeof(struct coro_event_hdr));
		if (rk->size)
			CHECK(rk->size >= sizeof(struct coro_event_hdr) && rk->size % 8 == 0);
		if (rk->decode && k <= CORO_EV_BPF_MAX)
			CHECK(rk->name != NULL);
	}
	CHECK_EQ(record_kind_by_name("offcpu"), CORO_EV_OFFCPU_END);
	CHECK_EQ(record_kind_by_name("process_exit"), CORO_REC_PROC_EXIT);
	CHECK_EQ(record_kind_by_name("no such kind"), 0);
	CHECK_EQ(coro_stack_base_size(CORO_EV_SWITCH), sizeof(struct coro_ev_switch));
	CHECK_EQ(coro_stack_base_size(CORO_EV_EXIT), 0);
}

#define MAX_SEEN 64
static struct {
	struct model *m;
	int slot;
	struct event ev[MAX_SEEN]; /* its pointers dangle once the callback returns */
	u32 n;
	bool create_ok, switch_out_ok;
	u32 entered_during_apply, entered_outside;
	u64 last_seq;
	bool seq_ok;
} O;

static void o_event(void *ctx, const struct event *ev)
{
	O.seq_ok = O.seq_ok && ev->seq == O.last_seq + 1;
	O.last_seq = ev->seq;
	/* What the event points to lives during the callback: looked at here. */
	if (ev->kind == EV_CREATE)
		O.create_ok = ev->c && ev->c->id == 0x10 && ev->proc && ev->proc->pid == TPID &&
			      ev->thread && ev->thread->tid == 7 && ev->c->priv[O.slot] == ev->c;
	if (ev->kind == EV_SWITCH && ev->sw.from == 0x10)
		O.switch_out_ok = ev->c && ev->c->id == 0x10 && !ev->to &&
				  ev->c->state == CS_SUSPENDED;
	if (O.n < MAX_SEEN)
		O.ev[O.n++] = *ev;
}

static void o_enter(void *ctx, const struct coro *c, u64 ts)
{
	if (model_applying(O.m))
		O.entered_during_apply++;
	else
		O.entered_outside++;
	model_set_priv(c->priv, O.slot, (void *)c);
}

static const struct event *seen_kind(enum event_kind kind)
{
	for (u32 i = 0; i < O.n; i++)
		if (O.ev[i].kind == kind)
			return &O.ev[i];
	return NULL;
}

TEST(model_fills_the_event)
{
	struct pipeline p;
	struct capture_info ci = {0};
	struct model_observer obs = {.slot = &O.slot, .event = o_event, .enter = o_enter};
	const struct event *e;
	const struct coro_process *proc;
	size_t it = 0;

	memset(&O, 0, sizeof(O));
	O.slot = -1;
	O.seq_ok = true;
	pipeline_init(&p, &ci, NULL);
	O.m = &p.model;
	CHECK_EQ(pipeline_add_observer(&p, &obs, NULL), 0);
	CHECK_EQ(O.slot, 0); /* bound in one step */
	pipeline_begin(&p);
	pipeline_feed(&p, mk_process(&B, 1, CORO_PROC_LAUNCHED));
	pipeline_feed(&p, mk_create(&B, 7, 2, 0, 0x10, 0));
	pipeline_feed(&p, mk_switch(&B, 7, 3, 0, 0x10, 0, 0));
	pipeline_feed(&p, mk_span(&B, false, 7, 4, 0x10, "never opened"));
	pipeline_feed(&p, mk_switch(&B, 7, 5, 0x10, 0, CORO_R_WAIT, 0xabc));
	pipeline_feed(&p, mk_proc_exit(&B, 6, 0));
	pipeline_finish(&p);

	CHECK(O.seq_ok);
	CHECK(O.create_ok);
	CHECK(O.switch_out_ok);
	e = seen_kind(EV_SPAN_END);
	CHECK(e && !e->span.matched && e->span.owner == 0x10 && e->span.owner_known);
	CHECK(e && e->span.name.len == strlen("never opened"));
	for (u32 i = 0; i < O.n; i++)
		if (O.ev[i].kind == EV_SWITCH && O.ev[i].sw.from == 0x10) {
			CHECK_EQ(O.ev[i].sw.reason, CORO_R_WAIT);
			CHECK_EQ(O.ev[i].sw.obj, 0xabc);
		}
	/* The process's end freed its threads: the event names none. */
	e = seen_kind(EV_PROC_EXIT);
	CHECK(e && !e->thread && e->proc == model_process_peek(&p.model, TPID));
	CHECK(O.entered_during_apply >= 3);
	CHECK_EQ(O.entered_outside, 0);
	proc = model_next_process(&p.model, &it);
	CHECK(proc && proc->pid == TPID);
	CHECK(!model_next_process(&p.model, &it));
	CHECK_EQ(model_nprocesses(&p.model), 1);
	CHECK(!model_thread_peek(&p.model, TPID, 7));
	pipeline_free(&p);
}

int main(void)
{
	RUN(decode_payloads);
	RUN(kinds_table_is_whole);
	RUN(model_fills_the_event);
	return unit_done();
}

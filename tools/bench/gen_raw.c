// SPDX-License-Identifier: MIT
/*
 * gen_raw: write a synthetic raw capture of N events, for the throughput
 * benchmarks of the replay path (corobpf report). An M:N workload in the
 * shape the demo has: W worker threads, C coroutines alive at a time, each
 * coroutine created, named, then cycling ready -> switch in -> switch out
 * (wait on a channel, sleep or yield), with a span now and then, until it
 * exits and a new one takes its place; off-CPU stretches of the workers
 * between runs. Timestamps advance 200 ns per event, in order.
 *
 *     gen_raw N OUT.raw [COROUTINES [WORKERS]]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "raw.h"

static struct raw_writer *w;
static u64 ts = 1000000000, written, target;
static u32 pid = 4242;

static void hdr(struct coro_event_hdr *h, size_t size, unsigned kind, u32 tid, u64 cur)
{
	memset(h, 0, size);
	h->size = size;
	h->kind = kind;
	h->pid = pid;
	h->tid = tid;
	h->ts = ts;
	h->cur = cur;
	ts += 200;
}

static void put(struct coro_event_hdr *h)
{
	raw_writer_append(w, h);
	if (h->kind <= CORO_EV_BPF_MAX)
		written++;
}

int main(int argc, char **argv)
{
	u32 ncoros = argc > 3 ? atoi(argv[3]) : 1000, nworkers = argc > 4 ? atoi(argv[4]) : 4;
	struct capture_info ci;
	char err[256];
	u64 next_id = 1, *ids, *life, seed = 1;
	int fd;

	if (argc < 3 || !ncoros || !nworkers) {
		fprintf(stderr, "usage: gen_raw N OUT.raw [COROUTINES [WORKERS]]\n");
		return 2;
	}
	target = strtoull(argv[1], NULL, 10);
	fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	capture_info_init_live(&ci, &pid, 1);
	ci.start_ts = ts;
	w = raw_writer_open(fd, &ci, err, sizeof(err));
	if (!w) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	{
		struct coro_rec_process p;
		char buf[sizeof(p) + 16];
		struct coro_rec_process *pp = (void *)buf;

		hdr(&pp->hdr, ROUND_UP(sizeof(p) + 5, 8), CORO_REC_PROCESS, pid, 0);
		pp->mode = CORO_PROC_LAUNCHED;
		strcpy(pp->comm, "synthetic");
		strcpy(pp->exe, "/gen");
		put(&pp->hdr);
	}
	ids = calloc(ncoros, sizeof(*ids));
	life = calloc(ncoros, sizeof(*life));
	while (written < target) {
		/* A pseudo-random coroutine slot and worker for this step. */
		u32 slot, tid;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		slot = (seed >> 33) % ncoros;
		tid = pid + 1 + (u32)((seed >> 20) % nworkers);
		if (!ids[slot]) {
			struct coro_ev_create c;
			struct coro_ev_name n;

			ids[slot] = next_id++;
			life[slot] = 3 + (seed >> 50) % 20;
			hdr(&c.hdr, sizeof(c), CORO_EV_CREATE, pid, 0);
			c.id = ids[slot];
			put(&c.hdr);
			hdr(&n.hdr, sizeof(n), CORO_EV_NAME, pid, 0);
			n.id = ids[slot];
			snprintf(n.name, sizeof(n.name), "req-%llu", (unsigned long long)ids[slot]);
			put(&n.hdr);
		}
		{
			struct coro_ev_ready r;
			struct coro_ev_switch in, out;
			struct coro_ev_span sp;
			struct coro_ev_offcpu_begin ob;
			struct coro_ev_offcpu_end oe;
			bool done = --life[slot] == 0;

			hdr(&r.hdr, sizeof(r), CORO_EV_READY, tid, 0);
			r.id = ids[slot];
			put(&r.hdr);
			hdr(&in.hdr, sizeof(in), CORO_EV_SWITCH, tid, 0);
			in.to = ids[slot];
			put(&in.hdr);
			if (slot % 4 == 0) {
				hdr(&sp.hdr, sizeof(sp), CORO_EV_SPAN_BEGIN, tid, ids[slot]);
				strcpy(sp.name, "db.query");
				put(&sp.hdr);
				hdr(&sp.hdr, sizeof(sp), CORO_EV_SPAN_END, tid, ids[slot]);
				strcpy(sp.name, "db.query");
				put(&sp.hdr);
			}
			if (done) {
				struct coro_ev_exit x;

				hdr(&x.hdr, sizeof(x), CORO_EV_EXIT, tid, ids[slot]);
				x.id = ids[slot];
				put(&x.hdr);
			}
			hdr(&out.hdr, sizeof(out), CORO_EV_SWITCH, tid, ids[slot]);
			out.from = ids[slot];
			out.reason = done ? CORO_R_DONE : 1 + (seed >> 40) % 3;
			out.obj = out.reason == CORO_R_WAIT ? 0x5500 + slot % 7 : 0;
			put(&out.hdr);
			if (slot % 8 == 0) {
				/* The worker sleeps a little between runs. */
				hdr(&ob.hdr, sizeof(ob), CORO_EV_OFFCPU_BEGIN, tid, 0);
				ob.state = CORO_OFF_SLEEPING;
				put(&ob.hdr);
				hdr(&oe.hdr, sizeof(oe), CORO_EV_OFFCPU_END, tid, 0);
				oe.start = ob.hdr.ts;
				oe.state = CORO_OFF_SLEEPING;
				oe.runq_ns = 50;
				put(&oe.hdr);
			}
			if (done)
				ids[slot] = 0;
		}
	}
	{
		struct coro_rec_stats st;
		struct coro_rec_end e;

		hdr(&st.hdr, sizeof(st), CORO_REC_STATS, 0, 0);
		put(&st.hdr);
		hdr(&e.hdr, sizeof(e), CORO_REC_END, 0, 0);
		e.reason = CORO_END_TARGETS_EXITED;
		put(&e.hdr);
	}
	if (raw_writer_close(w) < 0 || close(fd) < 0) {
		perror("write");
		return 1;
	}
	printf("%llu events\n", (unsigned long long)written);
	capture_info_free(&ci);
	free(ids);
	free(life);
	return 0;
}

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * From raw C++20 coroutine facts to coroutines: the stage after ctxmap
 * (the reorder buffer, then ctxmap, then this, then the model).
 *
 * The BPF side reports, per thread (CORO_EV_CXX, CORO_EV_CXX_AWAIT): a body
 * entered (frame, stack pointer), a body returned (frame, its first word
 * now), a destroy clone entered, a frame's resume pointer stored (its
 * creation), an await_suspend called. This stage keeps each thread's stack
 * of running bodies and emits the probe ABI's records (docs/cxx20.md):
 *
 * - CREATE at the store of the resume pointer, the parent being the
 *   coroutine on top of the thread's stack. A body a ramp calls itself (a
 *   start record, GCC without optimization) is the ramp's own first run:
 *   part of the creation, no switch. A create for a frame
 *   still alive ends the old incarnation first (its frame was freed
 *   unseen, and reused).
 * - A body entered: SWITCH from the coroutine on top of the stack (0: the
 *   thread's scheduler) to the frame. At the stack pointer of the one on
 *   top it is a symmetric transfer (a tail call: it replaces it);
 *   below, a nested resume (it is pushed).
 * - A body returned: SWITCH from it to the one below it (or 0). If its
 *   frame's first word changed (0 at the final suspend point, or the frame
 *   freed) it ended: EXIT first, the switch's reason DONE.
 * - A destroy clone entered: EXIT (if not ended already); the body GCC's
 *   destroy runs next for that frame is no resume.
 * - An await_suspend called at the frame's final suspend point (its first
 *   word 0 then, CORO_CXXF_FINAL): the next switch out of that frame is its
 *   end, EXIT first and the switch's reason DONE, whether the body returns
 *   or hands over by transfer (GCC -O0's call to the continuation).
 * - Any other await_suspend called: the next switch out of that frame is a wait
 *   (reason WAIT, the awaiter's address as object; its type, from the
 *   CORO_EV_CXX_AWAITER record just before, in `awaiter` while that switch
 *   is emitted: the model puts it on the switch event). Called for a frame
 *   whose body was never entered, it ends the first run its ramp gave it
 *   (Clang's eager coroutine): SWITCH from the creator to it and back.
 * - A Clang ramp of an eager coroutine returned (CORO_CXX_RAMP_RETURN,
 *   paired with its entry by stack pointer) while the frame it made (its
 *   creation between the two, of the same coroutine) was neither entered
 *   nor said to suspend: its first run ended in the ramp at a suspension
 *   compiled inline, the same two switches, at the return.
 *
 * Records of processes without C++ records pass untouched; in those with
 * them, hdr.cur of a thread running a C++ coroutine is that coroutine.
 */
#ifndef COROBPF_CXXMAP_H
#define COROBPF_CXXMAP_H

#include "coro_abi.h"
#include "util.h"

struct cxxmap {
	struct hmap threads; /* (pid, tid) -> struct cxx_thread */
	struct hmap live;    /* (pid, frame) -> 1: created or seen, not ended */
	struct hmap waits;   /* (pid, frame) -> awaiter address, until its next switch out */
	struct hmap on;	     /* (pid, frame) -> tid + 1 of the thread it runs on */
	struct hmap procs;   /* pid -> 1: a process with C++ records */
	struct hmap fresh;   /* (pid, frame) -> 1: created, its body never entered */
	struct hmap awaiters; /* (pid, frame) -> its awaiter's type (owned), until its next switch out */
	struct hmap finals;   /* (pid, frame) -> 1: at its final suspend point, until its exit */
	/* The awaiter's type of the wait being emitted (a SWITCH), else NULL: valid during emit. */
	const char *awaiter;
	bool active;
	union {
		struct coro_event_hdr hdr;
		u8 bytes[512]; /* the longest record: a name made in user space (kinds.h) */
	} buf;
	/* What the stage could not make sense of. */
	u64 frames_reused;  /* creations of a frame whose coroutine never ended */
	u64 returns_unknown; /* a body returned that was not seen entered (attached mid-run) */
};

typedef void (*cxxmap_emit_fn)(void *ctx, const struct coro_event_hdr *rec);

void cxxmap_init(struct cxxmap *x);
/* Pass `rec` on to emit (translated, or as it is), possibly with records it implies. */
void cxxmap_apply(struct cxxmap *x, const struct coro_event_hdr *rec, cxxmap_emit_fn emit,
		  void *ctx);
void cxxmap_free(struct cxxmap *x);

#endif

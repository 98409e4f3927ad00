/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * C++20 coroutines in an unmodified object: where they are and where to
 * probe them (docs/cxx20.md).
 *
 * Every compiler splits a coroutine `f` into a ramp (the function callers
 * call, which allocates the frame) and clones that take the frame pointer
 * as their one argument:
 *
 *   GCC 12    f(f()::_Z1fv.Frame*) [clone .actor]   the body, entered at every resume
 *             ... [clone .destroy]                  sets the destroy bit, runs the actor
 *   Clang 14  f() [clone .resume]                   the body
 *             f() [clone .destroy], [clone .cleanup] free the frame (cleanup: an elided one)
 *
 * The scan finds them by symbol (.symtab, else .dynsym: a stripped object
 * has none to find) and plans three kinds of sites, each a uprobe whose
 * cookie (CORO_CXX_COOKIE, bpf/coro_abi.h) says what it means:
 *
 *   body     the entry of each body: frame = rdi; attached as a session,
 *            so the body's return is seen too (the kernel's return probe,
 *            cheaper here than a single-stepped `ret`)
 *   destroy  the entry of each destroy and cleanup clone: frame = rdi
 *   create   wherever code stores a body's address into memory: that is a
 *            frame's resume pointer (its first word, or a frame elided into
 *            another one at an offset), written by the ramp, or by a caller
 *            the ramp was inlined into; frame = base register + offset
 *   start    a direct call of a GCC actor (from anything but a destroy): a
 *            ramp, or a body it was inlined into, running the body up to
 *            the initial suspend point itself; frame = rdi (Clang's ramps
 *            run that part inline, and its direct calls of a body are
 *            resumes made devirtualized)
 *   xfer     in a GCC body, the symmetric transfer GCC compiles as a call
 *            without optimization (`call coroutine_handle::address()`,
 *            then `call *reg`): probed at the first, an emulated call
 *   ramp     the entry of a Clang ramp of its own whose line info says it
 *            runs the body to a first suspension (an eager coroutine):
 *            a session, its return ends that first run
 *   await    each direct call of an `Awaiter::await_suspend(handle)`
 *            (not inlined): rsi is the frame, the awaiter's type is what
 *            the coroutine waits on (only with CXXCORO_AWAITS); in a body,
 *            or in a Clang ramp that is a function of its own, where it
 *            ends an eager coroutine's first run (but the initial awaiter's,
 *            which suspends a lazy one: the first after a call of
 *            initial_suspend(), or with no such call left, any of
 *            std::suspend_always)
 *
 * A coroutine whose promise is corobpf::traced<P> (usdt/corobpf_coro.hpp)
 * gets no site: the adapter reports it through the probes of corobpf.h.
 * Its body says so (a site of the switch probe in it, or a call of a
 * traced<P> member); the object's other coroutines keep their sites,
 * whatever else of corobpf.h it uses.
 *
 * Names are demangled with the C++ runtime's __cxa_demangle, which the
 * binary links already (libstdc++, through libdw); a name it cannot
 * demangle is kept mangled.
 */
#ifndef COROBPF_CXXCORO_H
#define COROBPF_CXXCORO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cxx_site {
	uint64_t offset; /* file offset of the probed instruction */
	uint64_t cookie; /* CORO_CXX_COOKIE(op, reg, disp, name index in the plan) */
	bool emulated;	 /* the kernel emulates the instruction: no single step */
};

struct cxx_plan {
	struct cxx_site *sites;
	uint32_t nsites;
	char **names; /* coroutine and awaiter names, by the index the cookies carry */
	uint32_t nnames;
	/* What was found, for the summary and -v. */
	uint32_t bodies, destroys, creates, starts, xfers, awaits;
	uint32_t stepped; /* body entries the kernel single-steps (the per-resume cost class) */
	uint32_t bodies_without_create; /* no store of its address found: created when first seen */
	uint32_t adapted; /* coroutines left to the promise adapter (corobpf::traced<P>): no site */
	uint32_t eager_ramps; /* Clang ramps running an eager coroutine's first run: probed */
};

enum { CXXCORO_AWAITS = 1 << 0 };

/*
 * True if the object at `path` has symbols of coroutine bodies (a cheap
 * test: symbol names only).
 */
bool cxxcoro_detect(const char *path);

/*
 * Plan the sites for every coroutine of the object at `path`. Returns 0
 * (plan filled, possibly empty), or a negative errno with a message in err.
 */
int cxxcoro_plan(const char *path, unsigned flags, struct cxx_plan *plan, char *err,
		 size_t errlen);
void cxxcoro_plan_free(struct cxx_plan *plan);

/*
 * `name` demangled into buf (len bytes), the coroutine's clone suffix
 * dropped; the mangled name if it cannot be demangled.
 */
void cxxcoro_demangle(const char *name, char *buf, size_t len);

#endif

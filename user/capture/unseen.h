/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * unseen.h: a target traced through the switch-function path that made no
 * switch seen is said at the end of the run, with what corobpf looked for
 * there: each family attached and in which object ("lua
 * (libluajit-5.1.so.2.1.0: LuaJIT 2.1)"), the reasons an interpreter it
 * knows was not traced or may show nothing (interpattach.h), then what to do
 * if the program switches some other way.
 */
#ifndef COROBPF_UNSEEN_H
#define COROBPF_UNSEEN_H

#include "attachctx.h"

#define UNSEEN_MAX 16 /* families and objects remembered, every target's */

struct unseen {
	struct looked_for {
		u32 pid;
		char what[128];
	} looked[UNSEEN_MAX];
	u32 nlooked;
};

/* A switch-function plan attached for a target (f: ATTACH_FOUND_SWITCH): remembered. */
void unseen_note(struct unseen *u, const struct attach_found *f);
/* Target pid (comm) made no switch seen: said, with what was looked for. */
void unseen_say(const struct unseen *u, u32 pid, const char *comm);

#endif /* COROBPF_UNSEEN_H */

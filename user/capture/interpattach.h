/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Interpreted runtimes (asyncio, Lua), attached: the uprobe sessions
 * user/elf/interp.c plans, with the layout of the interpreter's version in a
 * slot of the BPF side's maps (docs/python.md, docs/lua.md).
 */
#ifndef COROBPF_INTERPATTACH_H
#define COROBPF_INTERPATTACH_H

#include <stdbool.h>
#include "attachctx.h"

/*
 * The object at `path` (shown as `shown`) if it is an interpreter's: its
 * sessions, for process pid (-1: every process, -a). unseen: the process
 * ran before (attached mid-life, or -a): a task or coroutine made before is
 * named when first seen running. Returns the sites attached; an interpreter
 * that cannot be traced (an unknown version, a kernel without uprobe
 * sessions) is said, naming it and why.
 */
u32 interpattach_object(struct attach_ctx *a, int pid, const char *path, const char *shown,
			bool late, bool unseen);

/* Frees what the run's attaches kept (the layouts given a slot). */
void interpattach_free(void);

/*
 * Process pid made no switch seen: warn why it may be, for the interpreters
 * interpattach_object() found in it (a version refused, LuaJIT's resumes
 * from Lua, a CPython that never loaded asyncio's module).
 */
void interpattach_say_unseen(u32 pid);

#endif

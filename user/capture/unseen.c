// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target that made no switch seen: what corobpf looked for there (unseen.h).
 */
#include <stdio.h>
#include <string.h>
#include "interpattach.h"
#include "log.h"
#include "unseen.h"

void unseen_note(struct unseen *u, const struct attach_found *f)
{
	const char *base = strrchr(f->path, '/');
	size_t vlen = f->site_text ? strcspn(f->site_text, ":") : 0;
	struct looked_for *l;

	if (u->nlooked == UNSEEN_MAX)
		return;
	l = &u->looked[u->nlooked++];
	/* A version before a ':' (interp.c's "LuaJIT 2.1: ..."), not a site's offset. */
	if (vlen && f->site_text[vlen] == ':' && !strchr(f->site_text, '+'))
		snprintf(l->what, sizeof(l->what), "%s (%s: %.*s)", coro_family_name(f->family),
			 base ? base + 1 : f->path, (int)vlen, f->site_text);
	else
		snprintf(l->what, sizeof(l->what), "%s (%s)", coro_family_name(f->family),
			 base ? base + 1 : f->path);
	l->pid = f->pid;
}

/*
 * A target traced through the switch-function path that made no switch
 * seen: which families corobpf looked through (and in which objects), the
 * reasons an interpreter it knows was not traced or may show nothing
 * (interpattach.h), then what to do if the program switches some other way.
 */
void unseen_say(const struct unseen *u, u32 pid, const char *comm)
{
	char list[1024] = "";
	size_t n = 0;
	u32 fams = 0;

	for (u32 i = 0; i < u->nlooked && n + 1 < sizeof(list); i++) {
		if (u->looked[i].pid != pid)
			continue;
		n += snprintf(list + n, sizeof(list) - n, "%s%s", n ? ", " : "", u->looked[i].what);
		if (n >= sizeof(list))
			n = sizeof(list) - 1;
		fams++;
	}
	log_warn("no context switch seen in process %u (%s); corobpf looked for %s", pid, comm,
		 fams ? list : "none of its families (none of their functions is in its objects)");
	interpattach_say_unseen(pid);
	log_warn("if the program has coroutines of another kind, name its switch function with "
		 "--switch uprobe:PATH:SYMBOL:from=ARG,to=ARG (--switch help lists the families corobpf "
		 "knows)");
}

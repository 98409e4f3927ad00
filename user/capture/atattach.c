// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a process attached while it runs was doing, read from the kernel at
 * the attach (atattach.h).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "atattach.h"
#include "log.h"
#include "corobpf.skel.h"

/*
 * -p: each thread of a process attached while it runs, off the CPU now,
 * starts an off-CPU stretch (coro_attach_offcpu): a coroutine the model
 * takes for running on a thread blocked since before the attach (a Go
 * goroutine in read(2), found by the walk) is blocked, not running. After
 * the tracepoints are attached, so the stretch's end is seen. Without it
 * (an old kernel) such a thread's time is taken for running until it
 * returns, as before: said with -v.
 */
void offcpu_at_attach(struct corobpf_bpf *skel, bool no_sched, u32 pid)
{
	DECLARE_LIBBPF_OPTS(bpf_iter_attach_opts, opts);
	union bpf_iter_link_info linfo;
	struct bpf_link *link;
	char buf[64];
	int fd;

	if (no_sched)
		return;
	memset(&linfo, 0, sizeof(linfo));
	linfo.task.pid = pid;
	opts.link_info = &linfo;
	opts.link_info_len = sizeof(linfo);
	link = bpf_program__attach_iter(skel->progs.coro_attach_offcpu, &opts);
	if (!link) {
		log_verbose("process %u: cannot read its threads' states at the attach: %s; a "
			    "thread blocked since before is taken for running until it returns",
			    pid, strerror(errno));
		return;
	}
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd >= 0) {
		/* The program writes to the ring; reading runs it over every thread. */
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
	bpf_link__destroy(link);
}

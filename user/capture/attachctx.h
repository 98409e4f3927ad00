/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * attachctx.h: what attaching (attach.c, usdt.c) needs of the run and what
 * it gives back, without knowing the capture that owns it.
 *
 * The capture fills in the settings and the BPF programs once the skeleton
 * is open, and lends the context to every attach call. Attaching gives
 * back three things:
 *
 *   - links, kept here until the capture detaches them all at the end;
 *   - what it attached, in order (struct attach_found): the capture turns
 *     each into a CORO_REC_OBJECT or CORO_REC_SWITCH record, those of its
 *     attach step after the targets' process records, later ones at once;
 *   - why nothing was attached (the objects searched, those it may not
 *     open), for the capture's "no probes" error.
 *
 * Failures and refusals are counted in the capture's user stats (ustats).
 */
#ifndef COROBPF_ATTACHCTX_H
#define COROBPF_ATTACHCTX_H

#include <stdbool.h>
#include <sys/types.h>
#include "capture_info.h" /* CORO_USTAT_*: the counters attaching adds to */
#include "capture_opts.h"
#include "records.h" /* the records attaching finds (Go's goroutines) */
#include "switchfam.h"
#include "util.h"

struct bpf_link;
struct bpf_map;
struct bpf_program;
struct usdt_table;

/* enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI (kernel 6.6), absent from Debian 12's headers. */
#define CORO_BPF_TRACE_UPROBE_MULTI 48

/* The BPF programs attaching uses; attach_prog() finds them by probe name. */
enum attach_prog {
	ATTACH_PROG_CREATE,
	ATTACH_PROG_NAME,
	ATTACH_PROG_READY,
	ATTACH_PROG_SWITCH,
	ATTACH_PROG_EXIT,
	ATTACH_PROG_SPAN_BEGIN,
	ATTACH_PROG_SPAN_END,
	ATTACH_PROG_LIBLOAD,	/* "@libload": ld.so's hook */
	ATTACH_PROG_CTX,	/* "@ctx": one switch-function site per uprobe */
	ATTACH_PROG_CTX_MULTI,	/* "@ctx_multi": a plan's sites in one uprobe_multi link */
	ATTACH_PROG_CXX,	/* "@cxx": C++20 coroutine sites, one uprobe session link per object */
	ATTACH_PROG_RT,		/* "@rt": asyncio's and Lua's functions, one session link per object */
	ATTACH_PROG_BATCH,	/* "batch": --probe-path batched only (else NULL: not attached) */
	/*
	 * "@batch_full": the trap path beside another session's batched one, after each
	 * batch site (NULL when it does not read buffers, or without uprobe_multi)
	 */
	ATTACH_PROG_BATCH_FULL,
	ATTACH_PROG_ANNOUNCE,	   /* "announce": what exists at the attach (announce.h) */
	ATTACH_PROG_ANNOUNCE_DONE, /* "announce_done" */
	ATTACH_NPROGS
};

/* One thing attached, in the order found: a record of the capture's. */
enum attach_found_kind {
	ATTACH_FOUND_OBJECT, /* an object's probes: a CORO_REC_OBJECT record */
	ATTACH_FOUND_SWITCH, /* an object's switch functions: a CORO_REC_SWITCH record */
	ATTACH_FOUND_GO_WALK, /* Go: the goroutines alive at attach, CORO_REC_GO_G records */
};

struct attach_found {
	u32 kind; /* enum attach_found_kind */
	u32 pid;  /* 0: every process */
	u64 ts;	  /* when it was attached */
	char *path; /* the object as the target names it */
	u32 sites;  /* probe sites, or switch sites attached */
	bool late;  /* object: loaded after the start */
	/* switch: the family, the sites (text), the plan's limits, the sites single-stepped */
	u32 family;
	char *site_text, *limits;
	u32 stepped;
	/* go walk: the records, each with its own ts */
	struct coro_rec_go_g *go_gs;
	u32 ngo_gs;
};

struct announce_reqs;

struct attach_ctx {
	/* Set by the capture before the first attach. */
	const struct capture_opts *opts; /* the run's: -a, --follow, --switch, --stacks */
	struct bpf_program *progs[ATTACH_NPROGS];
	struct bpf_map *usdt_specs; /* libbpf's __bpf_usdt_specs */
	bool uprobe_multi;	    /* the kernel has them (6.6+) */
	u64 *ustats;		    /* the capture's CORO_USTAT_* counters */
	/* USDT attached by corobpf through uprobe_multi (usdt.h), or NULL: libbpf's. */
	struct usdt_table *usdt;
	/* Processes to ask what exists at the attach (announce.h; the capture's). */
	struct announce_reqs *announce;
	/*
	 * USDT argument-spec slots (libbpf's spec map, USDT_SPEC_SLOTS) taken so
	 * far: in all, and per owner of the object file (uid -> count) for the
	 * objects -a and --follow find on their own.
	 */
	u32 usdt_specs_used;
	u32 usdt_specs_users; /* taken by objects owned by other users than root */
	struct hmap usdt_specs_by_owner;

	/* Links that must live until the end. */
	struct bpf_link **links;
	size_t nlinks, cap_links;
	int *link_fds; /* uprobe_multi links (raw fds: libbpf 1.1 cannot make them) */
	size_t nlink_fds, cap_link_fds;

	/* What was attached, not yet turned into records (attach_found_clear empties it). */
	struct attach_found *found;
	size_t nfound, cap_found;
	/* Objects a process maps that corobpf was not allowed to open, and why. */
	u32 open_denied;
	int open_denied_errno;
	/* Objects not opened: on a filesystem that may hang (FUSE, NFS...); the first, said. */
	u32 may_hang_refused;
	char may_hang_first[512];
	/* Objects searched, for the "no probes" error. */
	char **searched;
	size_t nsearched;
	/* -a, --follow: objects on disk examined (dev, inode), and their sites. */
	struct hmap global_objects;
	u32 global_sites;
	/* Go: the BPF side's go_offsets map, and the layouts given a slot so far. */
	struct bpf_map *go_offsets;
	struct coro_go_offsets go_slots[CORO_GO_SLOTS];
	u32 go_nslots;
	/* asyncio and Lua (interpattach.c): their layouts' maps, and asyncio's waits. */
	struct bpf_map *py_layouts, *lua_layouts, *py_waits;
	/*
	 * -a: the switch-function plans attached for every process, by object
	 * (dev, inode) -> struct attach_plans: each process admitted that maps
	 * the object gets their switch_path records (ringev.c).
	 */
	struct hmap global_plans;
	/*
	 * -a: the objects that define ucontext or Pth (libc, libpth), kept open,
	 * attached per process (attach_exec_ucontext); the processes done
	 * (pid -> their executable's inode).
	 */
	struct ctx_provider {
		int fd;
		u32 family;
		char *shown;
	} *ctx_providers;
	size_t nctx_providers;
	struct hmap ctx_pids;
	struct hmap ctx_exe_fams; /* (dev, inode) of a program -> the families it uses, + 1 */
};

/* An object's plans attached for every process (-a): copies of their found records, pid 0. */
struct attach_plans {
	struct attach_found *v;
	size_t n;
};

void attach_ctx_init(struct attach_ctx *a);
/* Frees what it holds, destroying any link still attached. */
void attach_ctx_free(struct attach_ctx *a);
/* Destroys every link (slow: ~50 ms a perf-event uprobe); safe from another thread. */
void attach_ctx_detach(struct attach_ctx *a);
/* Destroys the links made after there were nlinks and nlink_fds (a launched script's last image). */
void attach_ctx_detach_since(struct attach_ctx *a, size_t nlinks, size_t nlink_fds);

/* The program of a probe name ("create", ...) or an internal one ("@libload", "@ctx", ...). */
struct bpf_program *attach_prog(const struct attach_ctx *a, const char *name);
/* Kept until the end. */
void attach_add_link(struct attach_ctx *a, struct bpf_link *link);
/*
 * One uprobe_multi link: prog at n offsets of path for pid (0: every
 * process), each with its cookie and semaphore (refs may be NULL). Kept
 * until the end. Returns the link fd or -errno.
 */
int attach_uprobe_multi(struct attach_ctx *a, const struct bpf_program *prog, u32 pid,
			const char *path, const u64 *offsets, const u64 *refs, const u64 *cookies,
			u32 n);
/*
 * Whether this kernel optimizes uprobes (6.17+ on x86-64: a uprobe on a five-byte nop becomes
 * a call to a trampoline page, which children forked afterwards do not inherit on 6.18).
 * attach_uprobe_link() refuses an offset such a kernel would optimize, saying so.
 */
bool attach_kernel_optimizes_uprobes(void);
/*
 * The same with another attach type of the uprobe_multi attr layout
 * (CORO_BPF_TRACE_UPROBE_SESSION for cxxattach); attach_uprobe_multi() is
 * this with CORO_BPF_TRACE_UPROBE_MULTI.
 */
int attach_uprobe_link(struct attach_ctx *a, const struct bpf_program *prog, u32 attach_type,
		       u32 pid, const char *path, const u64 *offsets, const u64 *refs,
		       const u64 *cookies, u32 n);

/* The probes of an object attached (a CORO_REC_OBJECT record to be). */
void attach_found_object(struct attach_ctx *a, u32 pid, const char *path, u32 probes, bool late);
/* The switch-function path attached in an object (a CORO_REC_SWITCH record to be). */
void attach_found_switch(struct attach_ctx *a, u32 pid, u32 family, const char *path,
			 const char *sites, const char *limits, u32 nsites, u32 stepped);
/* Go: the goroutines alive at attach, read from process pid (taken over: freed with the entry). */
void attach_found_go_walk(struct attach_ctx *a, u32 pid, struct coro_rec_go_g *gs, u32 n);
/* Empties the list of what was found (after the capture has turned it into records). */
void attach_found_clear(struct attach_ctx *a);
/*
 * -a: the switch-function entries found since there were `since` (attach_found) are plans
 * for every process of object (dev, ino): kept for the processes admitted later.
 */
void attach_global_plans_note(struct attach_ctx *a, u64 dev, u64 ino, size_t since);
/* Frees what one entry holds (its strings, its records), not the entry. */
void attach_found_release(struct attach_found *f);

void attach_note_searched(struct attach_ctx *a, const char *path);

#endif /* COROBPF_ATTACHCTX_H */

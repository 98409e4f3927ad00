/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * usdt.h: corobpf's USDT probes attached through uprobe_multi links, with
 * their argument specifications decoded here (x86-64).
 *
 * libbpf 1.1 attaches USDT probes one perf-event uprobe per site: that
 * needs CAP_SYS_ADMIN (the kernel's uprobe PMU checks it; CAP_BPF and
 * CAP_PERFMON are not enough), takes ~50 ms per site to detach, and hands
 * out argument specs from a small pool that one hostile object can use up
 * (libbpf 1.1.2 then double-frees). On kernels with uprobe_multi links
 * (6.6+) corobpf does it itself:
 *
 *   - the notes are walked once (elfnotes.h, elf_probe_walk); each site's
 *     argument string ("8@%rax -4@$3 8@-16(%rbp)") becomes the spec libbpf's
 *     BPF side reads (struct __bpf_usdt_spec in <bpf/usdt.bpf.h>, written
 *     into its map __bpf_usdt_specs), so the BPF programs are unchanged;
 *   - specs are shared by content for the whole run: thirty processes of
 *     one program take the slots of one;
 *   - one link per probe name, object and process (or all processes), with
 *     each site's semaphore as a reference-counter offset and its spec id
 *     as the cookie.
 *
 * The slots are shared out (usdt_budget_take) so that no object, and no
 * user other than root, can take what the others need.
 */
#ifndef COROBPF_USER_USDT_H
#define COROBPF_USER_USDT_H

#include <stdbool.h>
#include "attachctx.h"
#include "elfnotes.h"

/*
 * USDT spec slots: the pool, and what one object, one user other than
 * root, and all such users together may take of it. Root's own objects
 * (system libraries, the invoker's programs) always find room.
 */
#define USDT_SPEC_SLOTS		16384
#define USDT_SPECS_PER_OBJECT	512
#define USDT_SPECS_PER_USER	(USDT_SPEC_SLOTS / 8)
#define USDT_SPECS_ALL_USERS	(USDT_SPEC_SLOTS / 2)

/* Layout of libbpf's struct __bpf_usdt_spec (usdt.bpf.h), which the BPF side reads. */
#define USDT_MAX_ARGS 12
enum usdt_arg_type { USDT_ARG_CONST = 0, USDT_ARG_REG = 1, USDT_ARG_REG_DEREF = 2 };
struct usdt_spec {
	struct usdt_arg {
		u64 val_off;	/* the constant, or the offset from the register */
		u32 type;	/* enum usdt_arg_type */
		int16_t reg_off;	/* offsetof(struct pt_regs, reg) */
		bool is_signed;
		int8_t bitshift;	/* 64 - 8 * size */
	} args[USDT_MAX_ARGS];
	u64 cookie;
	int16_t nargs;
};

/*
 * Decode one site's argument string into spec (zeroed first). -EINVAL with
 * the reason in err for a form corobpf does not read (SIB addressing,
 * segment prefixes, sizes other than 1, 2, 4, 8).
 */
int usdt_parse_args(const char *args, struct usdt_spec *spec, char *err, size_t errlen);

/*
 * Whether this run attaches USDT itself: the kernel has uprobe_multi and the
 * BPF object's spec map (a->usdt_specs) has the layout above. Called
 * between open and load; sets the programs' attach type accordingly.
 */
bool usdt_multi_setup(struct attach_ctx *a);

/*
 * Attach every corobpf probe of the object at path (opened by us; `shown`
 * as the target names it) for pid (-1: every process). probes gets the
 * scan. Returns the sites attached, or -errno if the object cannot be read
 * (probes then holds nothing).
 */
int usdt_attach_object(struct attach_ctx *a, int pid, const char *path, const char *shown,
		       struct elf_probes *probes);

/*
 * Whether elfnotes refused some site of the object (a site that is not our
 * nop, a semaphore outside .probes: attaching would harm the target): if
 * so, counted and said, and nothing of it may be attached.
 */
bool usdt_object_refused(struct attach_ctx *a, const struct elf_probes *probes, const char *shown);

/*
 * elf_probe_walk() or elf_probe_scan() of the object at `path` failed with
 * ret and err: a malformed or hostile object (-EINVAL: notes that do not
 * parse, a section past the end of the file or larger than ELF_READ_MAX)
 * is counted as refused and said, naming it as `shown`; anything else (not
 * an x86-64 ELF, unreadable) is left to the debug log.
 */
void usdt_object_unreadable(struct attach_ctx *a, int ret, const char *path, const char *shown,
			    const char *err);

/*
 * Whether an object that needs `need` new spec slots may have them: false,
 * having counted and said why, when it would take more than its share.
 */
bool usdt_budget_take(struct attach_ctx *a, const char *path, const char *shown, u32 need);

void usdt_free(struct attach_ctx *a);

#endif /* COROBPF_USER_USDT_H */

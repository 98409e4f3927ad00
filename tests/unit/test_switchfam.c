// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/elf/switchfam.c: where the switch-function path puts its
 * uprobes. Hand-written functions (assembled here with the system's cc)
 * check the choice of instruction and the register following; the real
 * libraries of this machine (glibc, Boost.Context, GNU Pth) check that
 * every family finds its functions and the cheap sites the docs promise.
 */
#include <errno.h>
#include <unistd.h>
#include "unit.h"
#include "switchfam.h"
#include "x86dec.h"

static char dir[] = "/tmp/corobpf-test-sf-XXXXXX";
static char so[256];

static const char asm_src[] =
	"	.text\n"
	/* Arguments moved away, then clobbered; the first jcc is the site (r9, r12). */
	"	.globl moved\n	.type moved,@function\nmoved:\n"
	"	mov %rdi,%r9\n	mov %rsi,%r12\n	mov $1,%edi\n	lea 8(%rsp),%rsi\n"
	"	test %rax,%rax\n	jne 1f\n	nop\n1:	ret\n	.size moved,.-moved\n"
	/* A push at the entry: emulated there, nothing to follow. */
	"	.globl pushes\n	.type pushes,@function\npushes:\n"
	"	push %rdi\n	pop %rax\n	ret\n	.size pushes,.-pushes\n"
	/* A loop back into the straight line: the entry is the only safe place. */
	"	.globl loops\n	.type loops,@function\nloops:\n"
	"	mov %rdi,%r9\n2:	mov %rsi,%r12\n	dec %rax\n	jne 2b\n	ret\n"
	"	.size loops,.-loops\n"
	/* The argument is overwritten without a copy before the first jcc: the entry. */
	"	.globl lost\n	.type lost,@function\nlost:\n"
	"	mov $3,%edi\n	test %rax,%rax\n	jne 3f\n3:	ret\n	.size lost,.-lost\n"
	/*
	 * Saved by a push (REX.W-prefixed, which we class as stepped), restored
	 * by a pop into another register, then a jcc: followed through the stack.
	 */
	"	.globl stacked\n	.type stacked,@function\nstacked:\n"
	"	mov %rsp,%rax\n	.byte 0x48, 0x56\n	mov $0,%esi\n	pop %rdx\n	cmp $1,%rax\n	je 4f\n4:	ret\n"
	"	.size stacked,.-stacked\n"
	/* Hand-written assembly's habit: no .type, no .size (NOTYPE, size 0). */
	"	.globl untyped\nuntyped:\n	push %rbp\n	pop %rbp\n	ret\n"
	/* Larger than the 4 KiB the planner reads at a time. */
	"	.globl big\n	.type big,@function\nbig:\n	.fill 5000,1,0x90\n	mov %rdi,%rax\n	ret\n"
	"	.size big,.-big\n"
	"	.section .note.GNU-stack,\"\",@progbits\n";

/* Callers of Boost.Context's switch functions, for the call-site planner. */
static const char callers_ok[] =
	"	.text\n	.globl a\n	.type a,@function\na:\n"
	"	sub $8,%rsp\n	call jump_fcontext@PLT\n	add $8,%rsp\n	ret\n	.size a,.-a\n"
	"	.globl b\n	.type b,@function\nb:\n	jmp ontop_fcontext@PLT\n	.size b,.-b\n"
	"	.section .note.GNU-stack,\"\",@progbits\n";
static const char callers_addr[] =
	"	.text\n	.globl a\n	.type a,@function\na:\n"
	"	call jump_fcontext@PLT\n	mov jump_fcontext@GOTPCREL(%rip),%rax\n	ret\n"
	"	.size a,.-a\n	.section .note.GNU-stack,\"\",@progbits\n";

/* QEMU's two functions, shaped as qemu-img 7.2's: a call after the arguments moved; two rets. */
static const char qemu_like[] =
	"	.text\n	.globl qemu_coroutine_switch\n	.type qemu_coroutine_switch,@function\n"
	"qemu_coroutine_switch:\n	sub $0x18,%rsp\n	mov %rdi,%rax\n	mov %rsi,%rdi\n"
	"	xor %esi,%esi\n	call 1f\n1:	add $0x18,%rsp\n	ret\n"
	"	.size qemu_coroutine_switch,.-qemu_coroutine_switch\n"
	"	.globl qemu_coroutine_create\n	.type qemu_coroutine_create,@function\n"
	"qemu_coroutine_create:\n	push %rbx\n	mov %rdi,%rbx\n	test %rdi,%rdi\n	je 2f\n"
	"	mov %rbx,%rax\n	pop %rbx\n	ret\n2:	xor %eax,%eax\n	pop %rbx\n	ret\n"
	"	.size qemu_coroutine_create,.-qemu_coroutine_create\n"
	"	.section .note.GNU-stack,\"\",@progbits\n";

static bool assemble(const char *text, const char *name)
{
	char src[300], out[300], cmd[1024];
	FILE *f;

	snprintf(src, sizeof(src), "%s/%s.S", dir, name);
	snprintf(out, sizeof(out), "%s/lib%s.so", dir, name);
	f = fopen(src, "w");
	if (!f)
		return false;
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -nostdlib -o %s %s", out, src);
	return system(cmd) == 0;
}

static bool build(void)
{
	char src[300], cmd[1024];
	FILE *f;

	if (!mkdtemp(dir))
		return false;
	if (!assemble(callers_ok, "callers_ok") || !assemble(callers_addr, "callers_addr") ||
	    !assemble(qemu_like, "qemu_like"))
		return false;
	snprintf(src, sizeof(src), "%s/f.S", dir);
	snprintf(so, sizeof(so), "%s/libf.so", dir);
	f = fopen(src, "w");
	if (!f)
		return false;
	fputs(asm_src, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -nostdlib -o %s %s", so, src);
	return system(cmd) == 0;
}

static int plan_custom(const char *sym, const char *args, struct switch_plan *p)
{
	struct switch_custom cs;
	char spec[512], err[256];

	snprintf(spec, sizeof(spec), "uprobe:%s:%s:%s", so, sym, args);
	if (switchfam_parse_custom(spec, &cs, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	return switchfam_plan_custom(so, &cs, p, err, sizeof(err));
}

TEST(site_choice)
{
	struct switch_plan p;

	CHECK_EQ(plan_custom("moved", "from=arg0,to=arg1", &p), 0);
	CHECK_EQ(p.nsites, 1);
	CHECK(p.sites[0].emulated);
	CHECK_EQ(p.sites[0].insn_off, 3 + 3 + 5 + 5 + 3); /* the jne */
	CHECK_EQ(CORO_CTX_COOKIE_A(p.sites[0].cookie), X86_R9);
	CHECK_EQ(CORO_CTX_COOKIE_B(p.sites[0].cookie), X86_R12);
	CHECK_EQ(CORO_CTX_COOKIE_OP(p.sites[0].cookie), CORO_CTXOP_SWITCH);

	CHECK_EQ(plan_custom("pushes", "from=current,to=arg0", &p), 0);
	CHECK(p.sites[0].emulated);
	CHECK_EQ(p.sites[0].insn_off, 0);
	CHECK_EQ(CORO_CTX_COOKIE_A(p.sites[0].cookie), CORO_CTX_REG_NONE);
	CHECK_EQ(CORO_CTX_COOKIE_B(p.sites[0].cookie), X86_RDI);

	CHECK_EQ(plan_custom("loops", "from=arg0,to=arg1", &p), 0);
	CHECK(!p.sites[0].emulated);
	CHECK_EQ(p.sites[0].insn_off, 0);
	CHECK_EQ(CORO_CTX_COOKIE_A(p.sites[0].cookie), X86_RDI);
	CHECK_EQ(p.stepped, 1);

	CHECK_EQ(plan_custom("lost", "from=arg1,to=arg0", &p), 0);
	CHECK(!p.sites[0].emulated);
	CHECK_EQ(p.sites[0].insn_off, 0);
	CHECK_EQ(CORO_CTX_COOKIE_A(p.sites[0].cookie), X86_RSI);
	CHECK_EQ(CORO_CTX_COOKIE_B(p.sites[0].cookie), X86_RDI);

	CHECK_EQ(plan_custom("stacked", "from=current,to=arg1", &p), 0);
	CHECK(p.sites[0].emulated);
	CHECK_EQ(p.sites[0].insn_off, 3 + 2 + 5 + 1 + 4); /* the je; rsi came back in rdx */
	CHECK_EQ(CORO_CTX_COOKIE_B(p.sites[0].cookie), X86_RDX);

	/* An offset the user names must be an instruction boundary. */
	CHECK_EQ(plan_custom("moved+1", "from=arg0,to=arg1", &p), -EINVAL);
	CHECK_EQ(plan_custom("moved+3", "from=arg0,to=arg1", &p), 0);
	CHECK_EQ(p.sites[0].insn_off, 3);
	/* Anywhere inside a function, past 4 KiB too; not inside an instruction, nor past it. */
	CHECK_EQ(plan_custom("big+5000", "from=arg0,to=arg1", &p), 0);
	CHECK_EQ(p.sites[0].insn_off, 5000);
	CHECK_EQ(plan_custom("big+5003", "from=arg0,to=arg1", &p), 0);
	CHECK(!p.sites[0].emulated); /* the ret */
	CHECK_EQ(plan_custom("big+5001", "from=arg0,to=arg1", &p), -EINVAL);
	CHECK_EQ(plan_custom("big+5004", "from=arg0,to=arg1", &p), -ERANGE);
	/* A NOTYPE symbol in code is a function; its push is emulated at the entry. */
	CHECK_EQ(plan_custom("untyped", "from=arg0,to=arg1", &p), 0);
	CHECK(p.sites[0].emulated);
	CHECK_EQ(p.sites[0].insn_off, 0);
	CHECK_EQ(plan_custom("untyped+1", "from=arg0,to=arg1", &p), 0);
	CHECK_EQ(plan_custom("nothere", "from=arg0,to=arg1", &p), -ENOENT);
}

TEST(custom_spec_errors)
{
	struct switch_custom cs;
	char err[256];

	CHECK(switchfam_parse_custom("uprobe:/x:f:from=arg0,to=arg1", &cs, err, sizeof(err)) == 0);
	CHECK_STR(cs.path, "/x");
	CHECK_STR(cs.symbol, "f");
	CHECK_EQ(cs.from_reg, X86_RDI);
	CHECK_EQ(cs.to_reg, X86_RSI);
	CHECK(switchfam_parse_custom("uprobe:/x:f+0x10:from=r12,to=%rbx", &cs, err, sizeof(err)) == 0);
	CHECK_EQ(cs.sym_offset, 0x10);
	CHECK_EQ(cs.from_reg, X86_R12);
	CHECK_EQ(cs.to_reg, X86_RBX);
	CHECK(switchfam_parse_custom("uprobe:x:f:from=arg0,to=arg1", &cs, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "absolute");
	CHECK(switchfam_parse_custom("uprobe:/x:f:from=arg0", &cs, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "both from= and to=");
	CHECK(switchfam_parse_custom("uprobe:/x:f:from=arg7,to=arg0", &cs, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "arg7");
	CHECK(switchfam_parse_custom("uprobe:/x:f:to=current,from=arg0", &cs, err, sizeof(err)) < 0);
	CHECK(switchfam_parse_custom("uprobe:/x:f+zz:from=arg0,to=arg1", &cs, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "bad offset");
	CHECK(switchfam_parse_custom("/x:f:from=arg0,to=arg1", &cs, err, sizeof(err)) < 0);
	CHECK(switchfam_parse_custom("uprobe:/x:0x1f0:from=arg0,to=arg1", &cs, err, sizeof(err)) == 0);
	CHECK(cs.at_address && cs.address == 0x1f0);
	CHECK(switchfam_parse_custom("uprobe:/x:0x1f0+4:from=arg0,to=arg1", &cs, err,
				     sizeof(err)) < 0);
	CHECK_CONTAINS(err, "bad address");
	CHECK(switchfam_parse_custom("uprobe:/x:0xzz:from=arg0,to=arg1", &cs, err, sizeof(err)) < 0);
}

static const struct switch_site *find(const struct switch_plan *p, const char *func)
{
	for (uint32_t i = 0; i < p->nsites; i++)
		if (!strcmp(p->sites[i].func, func))
			return &p->sites[i];
	return NULL;
}

TEST(system_libraries)
{
	const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
	const char *boost = "/usr/lib/x86_64-linux-gnu/libboost_context.so.1.74.0";
	const char *pth = "/usr/lib/x86_64-linux-gnu/libpth.so.20";
	struct switch_plan p;
	const struct switch_site *s;
	char err[256];

	CHECK(switchfam_detect(libc) & (1u << CORO_FAM_UCONTEXT));
	CHECK_EQ(switchfam_plan(libc, CORO_FAM_UCONTEXT, &p, err, sizeof(err)), 0);
	/* glibc's swapcontext starts with a store; its jae after the syscall is emulated. */
	s = find(&p, "swapcontext");
	CHECK(s && s->emulated && s->insn_off > 0);
	CHECK(s && CORO_CTX_COOKIE_A(s->cookie) != CORO_CTX_COOKIE_B(s->cookie));
	s = find(&p, "makecontext");
	CHECK(s && CORO_CTX_COOKIE_OP(s->cookie) == CORO_CTXOP_CREATE &&
	      (CORO_CTX_COOKIE_FLAGS(s->cookie) & CORO_CTXC_STACK_UCONTEXT));
	s = find(&p, "__start_context");
	CHECK(s && CORO_CTX_COOKIE_OP(s->cookie) == CORO_CTXOP_EXIT && s->emulated);
	CHECK(find(&p, "setcontext") != NULL);
	CHECK_EQ(p.stepped, 0);
	CHECK_STR(p.limits, "");

	if (access(boost, R_OK) == 0) {
		CHECK_EQ(switchfam_detect(boost), 1u << CORO_FAM_FCONTEXT);
		CHECK_EQ(switchfam_plan(boost, CORO_FAM_FCONTEXT, &p, err, sizeof(err)), 0);
		s = find(&p, "jump_fcontext");
		/* Nothing emulated in it: the entry, rsp with the frame it is about to push. */
		CHECK(s && !s->emulated && s->insn_off == 0);
		CHECK(s && CORO_CTX_COOKIE_A(s->cookie) == X86_RSP &&
		      CORO_CTX_COOKIE_B(s->cookie) == X86_RDI);
		CHECK(s && CORO_CTX_COOKIE_DELTA(s->cookie) == -0x38); /* Boost 1.74's lea -0x38(%rsp) */
		CHECK(find(&p, "ontop_fcontext") && find(&p, "make_fcontext"));
		CHECK_EQ(p.stepped, 2);
	} else {
		fprintf(stderr, "test_switchfam: %s missing (libboost-context-dev): skipped\n", boost);
	}
	if (access(pth, R_OK) == 0) {
		CHECK_EQ(switchfam_detect(pth), 1u << CORO_FAM_PTH);
		CHECK_EQ(switchfam_plan(pth, CORO_FAM_PTH, &p, err, sizeof(err)), 0);
		CHECK_EQ(p.nsites, 3);
		s = find(&p, "pth_attr_set");
		CHECK(s && CORO_CTX_COOKIE_OP(s->cookie) == CORO_CTXOP_NAME);
	}
	CHECK_EQ(switchfam_plan(libc, CORO_FAM_FCONTEXT, &p, err, sizeof(err)), -ENOENT);
	CHECK_CONTAINS(err, "no boost-context functions");
	CHECK(switchfam_plan("/nonexistent", CORO_FAM_UCONTEXT, &p, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "/nonexistent");
}

TEST(call_sites)
{
	char path[300], err[256];
	struct switch_plan p;
	const char *fiberlib = "/usr/lib/x86_64-linux-gnu/libboost_fiber.so.1.74.0";

	snprintf(path, sizeof(path), "%s/libcallers_ok.so", dir);
	CHECK(switchfam_detect(path) & SWITCHFAM_FCONTEXT_CALLER);
	CHECK_EQ(switchfam_plan_callers(path, -0x38, -0x38, &p, err, sizeof(err)), 0);
	CHECK_EQ(p.nsites, 2);
	if (p.nsites == 2) {
		/* The call: rsp there is 8 above the entry's. The tail jump: the same rsp. */
		CHECK_EQ(CORO_CTX_COOKIE_OP(p.sites[0].cookie), CORO_CTXOP_SWITCH);
		CHECK_EQ(CORO_CTX_COOKIE_A(p.sites[0].cookie), X86_RSP);
		CHECK_EQ(CORO_CTX_COOKIE_B(p.sites[0].cookie), X86_RDI);
		CHECK_EQ(CORO_CTX_COOKIE_DELTA(p.sites[0].cookie), -0x40);
		CHECK(!strncmp(p.sites[0].func, "jump_fcontext", 13));
		CHECK_EQ(CORO_CTX_COOKIE_DELTA(p.sites[1].cookie), -0x38);
		CHECK(!strncmp(p.sites[1].func, "ontop_fcontext", 14));
		CHECK(p.sites[0].emulated && p.sites[1].emulated);
	}
	/* Its address taken through the GOT: calls could hide anywhere. */
	snprintf(path, sizeof(path), "%s/libcallers_addr.so", dir);
	CHECK_EQ(switchfam_plan_callers(path, -0x38, -0x38, &p, err, sizeof(err)), -EXDEV);
	CHECK_CONTAINS(err, "other than by direct calls");
	if (access(fiberlib, R_OK) == 0) {
		CHECK_EQ(switchfam_plan_callers(fiberlib, -0x38, -0x38, &p, err, sizeof(err)), 0);
		CHECK(p.nsites > 4);
	}
}

TEST(runtime_family_qemu)
{
	struct switch_plan p;
	char path[300], err[256];

	snprintf(path, sizeof(path), "%s/libqemu_like.so", dir);
	CHECK(switchfam_detect(path) & (1u << CORO_FAM_QEMU));
	CHECK(!(switchfam_detect(path) & (1u << CORO_FAM_RUBY)));
	CHECK_EQ(switchfam_plan(path, CORO_FAM_QEMU, &p, err, sizeof(err)), 0);
	CHECK_EQ(p.nsites, 3);
	/* The switch at the call: from in rax, to in rdi, the action still in rdx. */
	CHECK_EQ(CORO_CTX_COOKIE_OP(p.sites[0].cookie), CORO_CTXOP_SWITCH);
	CHECK(p.sites[0].emulated);
	CHECK_EQ(p.sites[0].insn_off, 4 + 3 + 3 + 2);
	CHECK_EQ(CORO_CTX_COOKIE_A(p.sites[0].cookie), X86_RAX);
	CHECK_EQ(CORO_CTX_COOKIE_B(p.sites[0].cookie), X86_RDI);
	CHECK_EQ(CORO_CTX_COOKIE_C(p.sites[0].cookie), X86_RDX);
	CHECK_EQ(CORO_CTX_COOKIE_FLAGS(p.sites[0].cookie), CORO_CTXC_ACTION_QEMU);
	/* The creates at both rets, the value in rax. */
	for (int i = 1; i < 3; i++) {
		CHECK_EQ(CORO_CTX_COOKIE_OP(p.sites[i].cookie), CORO_CTXOP_CREATE);
		CHECK_EQ(CORO_CTX_COOKIE_A(p.sites[i].cookie), X86_RAX);
	}
	CHECK_EQ(p.sites[1].insn_off, 1 + 3 + 3 + 2 + 3 + 1);
	CHECK_EQ(p.sites[2].insn_off, 1 + 3 + 3 + 2 + 3 + 1 + 1 + 2 + 1);
	CHECK_EQ(switchfam_excluded(1u << CORO_FAM_QEMU) & (1u << CORO_FAM_UCONTEXT),
		 1u << CORO_FAM_UCONTEXT);
	CHECK_EQ(switchfam_parse("qemu"), CORO_FAM_QEMU);
	CHECK_EQ(switchfam_parse("greenlet"), CORO_FAM_GREENLET);
}

int main(void)
{
	char cmd[300];
	int rc;

	if (!build()) {
		fprintf(stderr, "test_switchfam: cannot assemble the test functions\n");
		return 1;
	}
	RUN(site_choice);
	RUN(custom_spec_errors);
	RUN(runtime_family_qemu);
	RUN(call_sites);
	RUN(system_libraries);
	rc = unit_done();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		rc = 1;
	return rc;
}

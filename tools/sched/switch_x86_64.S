/* SPDX-License-Identifier: MIT */
/*
 * Context switch for corosched, x86-64 System V.
 *
 * Our own few instructions rather than swapcontext(): corobpf can put
 * uprobes on glibc's swapcontext to follow unmodified schedulers, and the
 * probes of this scheduler must be the only thing that reports its
 * switches. A switch is a plain function call, so only what the ABI says a
 * callee preserves needs saving: rbx, rbp, r12-r15, the MXCSR control bits
 * and the x87 control word. No signal mask syscall, unlike swapcontext.
 */

	.text

/*
 * void corosched_switch(void **save_sp, void *load_sp)
 *
 * Push the callee-saved state, store rsp in *save_sp, load rsp from
 * load_sp and pop the state saved there. The `ret` returns into whatever
 * called corosched_switch on that stack, or into corosched_trampoline for
 * a coroutine that has never run.
 */
	.globl	corosched_switch
	.hidden	corosched_switch
	.type	corosched_switch, @function
	.p2align 4
corosched_switch:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)

	movq	%rsp, (%rdi)
	movq	%rsi, %rsp

	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%r15
	.cfi_adjust_cfa_offset -8
	popq	%r14
	.cfi_adjust_cfa_offset -8
	popq	%r13
	.cfi_adjust_cfa_offset -8
	popq	%r12
	.cfi_adjust_cfa_offset -8
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	ret
	.cfi_endproc
	.size	corosched_switch, .-corosched_switch

/*
 * First return address of every new coroutine. corosched_init_stack() put
 * the coroutine in r12 and its entry function in r13; rsp is 16-byte
 * aligned here, so the call enters the function with the ABI's alignment.
 * The entry function never returns (it ends in a final switch out).
 */
	.globl	corosched_trampoline
	.hidden	corosched_trampoline
	.type	corosched_trampoline, @function
	.p2align 4
corosched_trampoline:
	.cfi_startproc
	/* The outermost frame of a coroutine: unwinders stop here. */
	.cfi_undefined rip
	movq	%r12, %rdi
	callq	*%r13
	ud2
	.cfi_endproc
	.size	corosched_trampoline, .-corosched_trampoline

	.section .note.GNU-stack, "", @progbits

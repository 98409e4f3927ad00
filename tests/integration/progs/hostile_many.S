/* SPDX-License-Identifier: MIT */
/*
 * hostile_many.S, linked after hostile.c into build/tests/hostile_many: an
 * object with tens of thousands of probe notes, as a hostile file may have
 * them. 50,000 sites of corobpf:bulk and one site each of 40 more names
 * (more names than corobpf keeps), all on a real one-byte nop, and 5,000
 * notes of another provider. Names outside probe ABI v1 are never
 * attached; corobpf must still scan every note, in linear time, and trace
 * the program's real probes (which come first, from hostile.c).
 */
	.text
	.globl hostile_bulk_site
	.type hostile_bulk_site, @function
hostile_bulk_site:
	nop
	ret
	.size hostile_bulk_site, .-hostile_bulk_site

	/* The anchor libbpf adjusts sites by, as usdt/corobpf.h defines it. */
	.ifndef _.stapsdt.base
	.pushsection .stapsdt.base,"aG","progbits",.stapsdt.base,comdat
	.weak _.stapsdt.base
	.hidden _.stapsdt.base
_.stapsdt.base: .space 1
	.size _.stapsdt.base, 1
	.popsection
	.endif

	.macro stapsdt_note provider, name
	.pushsection .note.stapsdt,"?","note"
	.balign 4
	.4byte 992f-991f, 994f-993f, 3
991:	.asciz "stapsdt"
992:	.balign 4
993:	.8byte hostile_bulk_site, _.stapsdt.base, 0
	.asciz "\provider"
	.asciz "\name"
	.asciz "8@%rdi"
994:	.balign 4
	.popsection
	.endm

	/* \@ counts macro expansions: a new name each time. */
	.macro numbered_note
	stapsdt_note corobpf, bulk\@
	.endm

	.rept 50000
	stapsdt_note corobpf, bulk
	.endr
	.rept 40
	numbered_note
	.endr
	.rept 5000
	stapsdt_note other, bulk
	.endr

	.section .note.GNU-stack,"",@progbits

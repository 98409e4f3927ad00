/* SPDX-License-Identifier: MIT */
/*
 * ldhwcaps.h: the CPU-dependent parts of ld.so's search (ldpaths.c): the
 * subdirectories tried in every directory of the search, first
 * glibc-hwcaps/x86-64-v4, -v3, -v2 (those the CPU supports), then the
 * legacy hwcap subdirectories glibc 2.36 still searches, and the $PLATFORM
 * a path may name ("x86_64", or "haswell"/"xeon_phi" on some Intel CPUs).
 * CPUID is read here, as glibc reads it.
 */
#ifndef COROBPF_LDHWCAPS_H
#define COROBPF_LDHWCAPS_H

#include <stddef.h>

/* 3 glibc-hwcaps levels + 2^4 legacy subsets (tls, 2 hwcaps, platform) */
#define LD_MAX_SUBDIRS		19
#define LD_SUBDIR_LEN		48

struct ld_hwcaps {
	char subdirs[LD_MAX_SUBDIRS][LD_SUBDIR_LEN]; /* each ending in '/'; the last is "" */
	size_t n_subdirs;
	char platform[16];
};

/* This CPU's subdirectories, in search order, and its $PLATFORM. */
void ld_hwcaps_init(struct ld_hwcaps *st);

#endif /* COROBPF_LDHWCAPS_H */

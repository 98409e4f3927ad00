/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * elfread.h: how much of an object corobpf reads whole, for every reader
 * of ELF files (elfnotes.c, dynlink.c, sitebounds.c, switchfam.c, goelf.c,
 * cxxcoro.c). A size is only what the file's headers declare: a sparse file
 * can declare gigabytes in a few KiB of disk, which a read would turn into
 * as many bytes of memory.
 */
#ifndef COROBPF_ELFREAD_H
#define COROBPF_ELFREAD_H

/*
 * The most corobpf reads whole of one section or table of an object
 * (notes, symbols and their names, the dynamic table and its names, unwind
 * tables): 64 MiB. The largest on this project's machine are a few MiB
 * (libLLVM's .eh_frame: 5 MiB).
 */
#define ELF_READ_MAX (64ULL << 20)

#endif /* COROBPF_ELFREAD_H */

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Text a traced program chose, made safe for the terminal of whoever reads
 * corobpf's text output (often root): coroutine and span names, process
 * names, object paths and the symbols in them. Any of these may hold an
 * escape sequence that retitles a window, clears the screen or, on some
 * terminals, answers back with input.
 *
 * term_safe() keeps printable UTF-8 as it is and writes every other byte as
 * \xNN: C0 controls and DEL, the C1 controls in their UTF-8 form
 * (U+0080-U+009F, which some terminals obey), the bidirectional overrides
 * and isolates (U+202A-U+202E, U+2066-U+2069, which reorder what follows
 * on the line), and bytes that are not valid UTF-8. A backslash is written
 * \\, so what is shown reads back to the exact bytes.
 *
 * JSONL, SQLite and Perfetto escape in their own formats; this is for text.
 */
#ifndef COROBPF_TERMSAFE_H
#define COROBPF_TERMSAFE_H

#include <stddef.h>

/* Room for any n source bytes once escaped, and the NUL. */
#define TERM_SAFE_MAX(n) (4 * (n) + 1)

/*
 * src: up to srclen bytes or its first NUL. dst is always NUL-terminated; a
 * character or escape that does not fit is left out whole, never cut.
 * Returns dst.
 */
char *term_safe(char *dst, size_t dstlen, const char *src, size_t srclen);

/*
 * Length of the valid UTF-8 sequence at s (at most n bytes: no overlong
 * forms, surrogates or values past U+10FFFF), or 0 if there is none.
 */
size_t utf8_seq_len(const unsigned char *s, size_t n);

#endif

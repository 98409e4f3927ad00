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
 * (U+0080-U+009F, which some terminals obey), the line and paragraph
 * separators (U+2028, U+2029, which break a line where a reader expects
 * none), the bidirectional overrides and isolates (U+202A-U+202E,
 * U+2066-U+2069, which reorder what follows on the line), and bytes that
 * are not valid UTF-8. A backslash is written
 * \\, so what is shown reads back to the exact bytes.
 *
 * JSONL, SQLite and Perfetto escape in their own formats; this is for text.
 */
#ifndef COROBPF_TERMSAFE_H
#define COROBPF_TERMSAFE_H

#include <stddef.h>
#include <stdint.h>

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
 * Inline: the JSON and terminal escapers call it per character.
 */
static inline size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are invalid. */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

#endif

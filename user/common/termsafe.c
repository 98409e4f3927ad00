// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <string.h>
#include "termsafe.h"

/* A valid sequence of len bytes a terminal would act on rather than show. */
static bool is_control(const unsigned char *s, size_t len)
{
	switch (len) {
	case 1:
		return s[0] < 0x20 || s[0] == 0x7f;
	case 2: /* U+0080-U+009F */
		return s[0] == 0xc2 && s[1] <= 0x9f;
	/*
	 * U+2028 and U+2029 (line and paragraph separators, which some terminals and every
	 * browser console break the line at), U+202A-U+202E (embeddings, overrides),
	 * U+2066-U+2069 (isolates).
	 */
	case 3:
		return s[0] == 0xe2 && ((s[1] == 0x80 && s[2] >= 0xa8 && s[2] <= 0xae) ||
					(s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9));
	}
	return false;
}

char *term_safe(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)src;
	size_t n = strnlen(src, srclen), i = 0, o = 0;

	if (!dstlen)
		return dst;
	while (i < n) {
		size_t k = utf8_seq_len(s + i, n - i);

		if (k && !is_control(s + i, k) && s[i] != '\\') {
			if (o + k >= dstlen)
				break;
			memcpy(dst + o, s + i, k);
			o += k;
			i += k;
			continue;
		}
		if (s[i] == '\\') {
			if (o + 2 >= dstlen)
				break;
			dst[o++] = '\\';
			dst[o++] = '\\';
			i++;
			continue;
		}
		/* An invalid byte alone; a control character whole, so it stays recognisable. */
		if (!k)
			k = 1;
		if (o + 4 * k >= dstlen)
			break;
		for (size_t j = 0; j < k; j++, i++) {
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[s[i] >> 4];
			dst[o++] = hex[s[i] & 15];
		}
	}
	dst[o] = 0;
	return dst;
}

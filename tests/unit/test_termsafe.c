// SPDX-License-Identifier: MIT
/* term_safe(): what a traced program names reaches a terminal with no control byte left. */
#include "unit.h"
#include "termsafe.h"

/* Escaped with room to spare. */
static const char *safe(const char *s)
{
	static char buf[TERM_SAFE_MAX(256)];

	return term_safe(buf, sizeof(buf), s, 256);
}

/* Nothing a terminal acts on: no C0, DEL or C1 byte, no ESC in any form. */
static int has_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
			return 1;
	return 0;
}

TEST(termsafe_printable_unchanged)
{
	CHECK_STR(safe("req-17"), "req-17");
	CHECK_STR(safe("db.query (users) #3 ~!@$%^&*"), "db.query (users) #3 ~!@$%^&*");
	/* Two-, three- and four-byte characters stay readable, U+00A0 just past C1 too. */
	CHECK_STR(safe("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x8d \xc2\xa0"),
		  "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x8d \xc2\xa0");
	CHECK_STR(safe(""), "");
}

TEST(termsafe_c0_and_del)
{
	/* A window title (OSC 0), a screen clear (CSI 2J), a bell, tabs and newlines. */
	CHECK_STR(safe("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
	CHECK_STR(safe("\x1b[2J"), "\\x1b[2J");
	CHECK_STR(safe("a\tb\nc\rd"), "a\\x09b\\x0ac\\x0dd");
	CHECK_STR(safe("\x01\x1f\x7f"), "\\x01\\x1f\\x7f");
}

TEST(termsafe_c1_in_utf8)
{
	/* U+009B (CSI) and U+009D (OSC): one byte each in 8-bit terminals, two in UTF-8. */
	CHECK_STR(safe("\xc2\x9b" "2J"), "\\xc2\\x9b" "2J");
	CHECK_STR(safe("\xc2\x80\xc2\x9d\xc2\x9f"), "\\xc2\\x80\\xc2\\x9d\\xc2\\x9f");
}

TEST(termsafe_bidi_overrides)
{
	/* U+202E (right-to-left override) and U+2066 (left-to-right isolate). */
	CHECK_STR(safe("a\xe2\x80\xae" "b"), "a\\xe2\\x80\\xae" "b");
	CHECK_STR(safe("\xe2\x81\xa6"), "\\xe2\\x81\\xa6");
	/* A neighbour, U+2030 (per mille), is ordinary text. */
	CHECK_STR(safe("\xe2\x80\xb0"), "\xe2\x80\xb0");
}

TEST(termsafe_line_and_paragraph_separators)
{
	/* U+2028 and U+2029 start a new line on some terminals: a name could forge a line. */
	CHECK_STR(safe("a\xe2\x80\xa8" "b"), "a\\xe2\\x80\\xa8" "b");
	CHECK_STR(safe("\xe2\x80\xa9" "forged"), "\\xe2\\x80\\xa9" "forged");
	/* Their neighbours, U+2027 (hyphenation point) and U+202F (narrow no-break space), stay. */
	CHECK_STR(safe("\xe2\x80\xa7\xe2\x80\xaf"), "\xe2\x80\xa7\xe2\x80\xaf");
}

TEST(termsafe_invalid_utf8)
{
	CHECK_STR(safe("\xff\xfe"), "\\xff\\xfe");
	/* A lone continuation byte, a cut sequence, a surrogate, past U+10FFFF. */
	CHECK_STR(safe("\x80" "a"), "\\x80" "a");
	CHECK_STR(safe("\xe6\x97"), "\\xe6\\x97");
	CHECK_STR(safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");
	CHECK_STR(safe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
	/* An overlong ESC (C0 9B) must not decode to anything. */
	CHECK_STR(safe("\xc0\x9b"), "\\xc0\\x9b");
	CHECK_STR(safe("\xe0\x80\x9b"), "\\xe0\\x80\\x9b");
}

TEST(termsafe_backslash_unambiguous)
{
	/* A name that spells an escape is not shown as the escape of a real ESC. */
	CHECK_STR(safe("\\x1b"), "\\\\x1b");
	CHECK_STR(safe("a\\b"), "a\\\\b");
}

TEST(termsafe_srclen_and_nul)
{
	char name[64];
	char buf[TERM_SAFE_MAX(sizeof(name))];

	/* A name filling its field with no NUL (a 64-byte record field): no read past it. */
	memset(name, '\x1b', sizeof(name));
	term_safe(buf, sizeof(buf), name, sizeof(name));
	CHECK_EQ(strlen(buf), 4 * sizeof(name));
	CHECK(!has_control(buf));
	CHECK_STR(term_safe(buf, sizeof(buf), "abcdef", 3), "abc");
}

TEST(termsafe_truncation_never_splits)
{
	char buf[8];

	/* "ab" and one escape fit in 7 bytes; the second escape is left out whole. */
	CHECK_STR(term_safe(buf, sizeof(buf), "ab\x1b\x1b", 16), "ab\\x1b");
	/* A three-byte character that does not fit is dropped, not cut. */
	CHECK_STR(term_safe(buf, 6, "abcd\xe6\x97\xa5", 16), "abcd");
	CHECK_STR(term_safe(buf, 3, "a\\", 16), "a");
	CHECK_STR(term_safe(buf, 1, "abc", 16), "");
	/* Worst case fits exactly in TERM_SAFE_MAX. */
	{
		char out[TERM_SAFE_MAX(2)];

		CHECK_STR(term_safe(out, sizeof(out), "\xff\xff", 2), "\\xff\\xff");
	}
}

TEST(termsafe_every_byte)
{
	/* Any byte pair: the result carries no control byte, and printable text survives. */
	char in[3] = {0}, out[TERM_SAFE_MAX(2)];

	for (int a = 1; a < 256; a++) {
		for (int b = 0; b < 256; b++) {
			in[0] = (char)a;
			in[1] = (char)b;
			term_safe(out, sizeof(out), in, 2);
			if (has_control(out)) {
				CHECK(!has_control(out));
				fprintf(stderr, "  bytes %02x %02x\n", a, b);
				return;
			}
		}
	}
}

int main(void)
{
	RUN(termsafe_printable_unchanged);
	RUN(termsafe_c0_and_del);
	RUN(termsafe_c1_in_utf8);
	RUN(termsafe_bidi_overrides);
	RUN(termsafe_line_and_paragraph_separators);
	RUN(termsafe_invalid_utf8);
	RUN(termsafe_backslash_unambiguous);
	RUN(termsafe_srclen_and_nul);
	RUN(termsafe_truncation_never_splits);
	RUN(termsafe_every_byte);
	return unit_done();
}

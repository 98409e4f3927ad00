// SPDX-License-Identifier: MIT
/*
 * The hand-made fast paths of util: the carry-less-multiply CRC-32 against
 * zlib's, and the in-place number formatting against printf, over every
 * length and alignment around their internal steps and random values.
 */
#include <zlib.h>
#include "unit.h"
#include "util.h"

static u64 rnd_state = 0x9e3779b97f4a7c15ULL;

static u64 rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

TEST(crc32_matches_zlib)
{
	static u8 buf[70000];
	int bad = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (u8)rnd();
	/* Every length through the 64-byte and 16-byte folds and the tail, at several alignments. */
	for (size_t len = 0; len < 1100; len++)
		for (size_t off = 0; off < 16; off += 3)
			for (int seed = 0; seed < 2; seed++) {
				u32 c = seed ? 0xdeadbeef : 0;

				if (crc32_buf(c, buf + off, len) != (u32)crc32(c, buf + off, len))
					bad++;
			}
	CHECK_EQ(bad, 0);
	CHECK_EQ(crc32_buf(0, buf, sizeof(buf)), (u32)crc32(0, buf, sizeof(buf)));
	/* A known value: the CRC-32 check string. */
	CHECK_EQ(crc32_buf(0, "123456789", 9), 0xcbf43926);
	memset(buf, 0, 256);
	CHECK_EQ(crc32_buf(0, buf, 256), (u32)crc32(0, buf, 256));
}

TEST(numbers_format_like_printf)
{
	static const u64 edges[] = {0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 12345,
				    9999999999999999999ULL, 10000000000000000000ULL, ~0ULL,
				    1ULL << 63, (1ULL << 63) - 1, 0xf, 0x10, 0xffffffff};
	char got[32], want[32];
	int bad = 0;

	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]) + 200000; i++) {
		u64 v = i < sizeof(edges) / sizeof(edges[0]) ? edges[i] : rnd() >> (rnd() & 63);

		*fmt_u64(got, v) = 0;
		snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
		bad += strcmp(got, want) != 0;
		*fmt_hex(got, v) = 0;
		snprintf(want, sizeof(want), "0x%llx", (unsigned long long)v);
		bad += strcmp(got, want) != 0;
	}
	CHECK_EQ(bad, 0);
	/* Every power of ten and its neighbours: where the digit count changes. */
	for (u64 p = 1; p <= 1000000000000000000ULL; p *= 10)
		for (u64 v = p - 1; v <= p + 1; v++) {
			*fmt_u64(got, v) = 0;
			snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
			CHECK_STR(got, want);
		}
}

int main(void)
{
	RUN(crc32_matches_zlib);
	RUN(numbers_format_like_printf);
	return unit_done();
}

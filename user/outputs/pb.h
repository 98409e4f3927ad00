/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A minimal protobuf encoder for writing one message at a time into a fixed
 * buffer: varints, fixed64, strings and nested messages. Nested lengths are
 * written minimally: pb_begin() reserves one byte, enough for the usual
 * content under 128 bytes; pb_end() moves longer content up to make room for
 * a longer length. The buffer must keep 4 spare bytes per open message.
 *
 * Overflow is sticky (pb->overflow) and the message must then be dropped;
 * writers size their buffer for the largest message they build.
 */
#ifndef COROBPF_PB_H
#define COROBPF_PB_H

#include <string.h>
#include "util.h"

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2 };

struct pb {
	u8 *buf;
	size_t len, cap;
	bool overflow;
};

static inline __attribute__((always_inline)) void pb_init(struct pb *pb, u8 *buf, size_t cap)
{
	pb->buf = buf;
	pb->cap = cap;
	pb->len = 0;
	pb->overflow = false;
}

static inline __attribute__((always_inline)) bool pb_room(struct pb *pb, size_t n)
{
	if (pb->len + n > pb->cap) {
		pb->overflow = true;
		return false;
	}
	return true;
}

static inline __attribute__((always_inline)) size_t pb_varint_size(u64 v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline __attribute__((always_inline)) void pb_raw_varint(struct pb *pb, u64 v)
{
	/* Locals, so a byte stored through buf is not thought to change len. */
	size_t len = pb->len;
	u8 *p;

	if (len + 10 > pb->cap) {
		pb->overflow = true;
		return;
	}
	p = pb->buf + len;
	while (v >= 0x80) {
		*p++ = (u8)(v | 0x80);
		v >>= 7;
	}
	*p++ = (u8)v;
	pb->len = p - pb->buf;
}

static inline __attribute__((always_inline)) void pb_tag(struct pb *pb, u32 field, u32 wire)
{
	pb_raw_varint(pb, (u64)field << 3 | wire);
}

static inline __attribute__((always_inline)) void pb_uint(struct pb *pb, u32 field, u64 v)
{
	pb_tag(pb, field, PB_VARINT);
	pb_raw_varint(pb, v);
}

/* int32/int64 fields: negative values are ten-byte two's complement varints. */
static inline __attribute__((always_inline)) void pb_int(struct pb *pb, u32 field, s64 v)
{
	pb_uint(pb, field, (u64)v);
}

static inline __attribute__((always_inline)) void pb_bool(struct pb *pb, u32 field, bool v)
{
	pb_uint(pb, field, v ? 1 : 0);
}

static inline __attribute__((always_inline)) void pb_fixed64(struct pb *pb, u32 field, u64 v)
{
	pb_tag(pb, field, PB_I64);
	if (!pb_room(pb, 8))
		return;
	for (int i = 0; i < 8; i++)
		pb->buf[pb->len++] = (u8)(v >> (8 * i));
}

static inline __attribute__((always_inline)) void pb_bytes(struct pb *pb, u32 field, const void *p, size_t n)
{
	pb_tag(pb, field, PB_LEN);
	pb_raw_varint(pb, n);
	if (!pb_room(pb, n))
		return;
	memcpy(pb->buf + pb->len, p, n);
	pb->len += n;
}

static inline __attribute__((always_inline)) void pb_str(struct pb *pb, u32 field, const char *s)
{
	pb_bytes(pb, field, s, strlen(s));
}

/* Open a nested message; returns the mark pb_end() needs. */
static inline __attribute__((always_inline)) size_t pb_begin(struct pb *pb, u32 field)
{
	size_t mark;

	pb_tag(pb, field, PB_LEN);
	mark = pb->len;
	if (pb_room(pb, 1 + 4))
		pb->len += 1;
	return mark;
}

static inline __attribute__((always_inline)) void pb_end(struct pb *pb, size_t mark)
{
	size_t content, k;
	u8 *start;

	if (pb->overflow)
		return;
	content = pb->len - mark - 1;
	start = pb->buf + mark;
	if (content < 0x80) {
		start[0] = (u8)content;
		return;
	}
	k = pb_varint_size(content);
	if (!pb_room(pb, k - 1))
		return;
	memmove(start + k, start + 1, content);
	for (size_t i = 0; i < k; i++)
		start[i] = (u8)((content >> (7 * i)) & 0x7f) | (i + 1 < k ? 0x80 : 0);
	pb->len = mark + k + content;
}

/*
 * Unchecked writers at a cursor, for a message whose size the caller has
 * bounded and reserved room for: no length or bounds bookkeeping per field,
 * so the cursor stays in a register. Each returns the cursor past what it
 * wrote. A nested message needs 4 bytes of room beyond its content (its
 * length, when 128 bytes or more).
 */
enum { PBW_VARINT_MAX = 10, PBW_NESTED = 5 /* tag and length of a nested message */ };

static inline __attribute__((always_inline)) u8 *pbw_varint(u8 *p, u64 v)
{
	while (v >= 0x80) {
		*p++ = (u8)(v | 0x80);
		v >>= 7;
	}
	*p++ = (u8)v;
	return p;
}

static inline __attribute__((always_inline)) u8 *pbw_uint(u8 *p, u32 field, u64 v)
{
	return pbw_varint(pbw_varint(p, (u64)field << 3 | PB_VARINT), v);
}

static inline __attribute__((always_inline)) u8 *pbw_fixed64(u8 *p, u32 field, u64 v)
{
	p = pbw_varint(p, (u64)field << 3 | PB_I64);
	for (int i = 0; i < 8; i++)
		p[i] = (u8)(v >> (8 * i));
	return p + 8;
}

static inline __attribute__((always_inline)) u8 *pbw_bytes(u8 *p, u32 field, const void *s,
							  size_t n)
{
	p = pbw_varint(pbw_varint(p, (u64)field << 3 | PB_LEN), n);
	memcpy(p, s, n);
	return p + n;
}

/* Open a nested message: one byte left for its length, filled in by pbw_end(). */
static inline __attribute__((always_inline)) u8 *pbw_begin(u8 *p, u32 field, u8 **mark)
{
	p = pbw_varint(p, (u64)field << 3 | PB_LEN);
	*mark = p;
	return p + 1;
}

static inline __attribute__((always_inline)) u8 *pbw_end(u8 *p, u8 *mark)
{
	size_t content = p - mark - 1, k;

	if (__builtin_expect(content < 0x80, 1)) {
		*mark = (u8)content;
		return p;
	}
	k = pb_varint_size(content);
	memmove(mark + k, mark + 1, content);
	pbw_varint(mark, content);
	return mark + k + content;
}

#endif

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>
#include "log.h"
#include "util.h"

static void oom(size_t n)
{
	log_err("out of memory (allocating %zu bytes)", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (!p)
		oom(n * sz);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom(strlen(s));
	return p;
}

/* ---- hash map ---- */

static inline u64 hmap_hash(u64 k1, u64 k2)
{
	/* splitmix64 finalizer over both words: ids are often pointers or counters */
	u64 x = k1 * 0x9e3779b97f4a7c15ULL ^ (k2 + 0x632be59bd9b4e019ULL);

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

void hmap_init(struct hmap *m)
{
	m->cap = 64;
	m->len = 0;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
}

void hmap_free(struct hmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}

void hmap_clear(struct hmap *m)
{
	memset(m->slots, 0, m->cap * sizeof(*m->slots));
	m->len = 0;
}

static struct hmap_slot *hmap_find(const struct hmap *m, u64 k1, u64 k2)
{
	size_t mask = m->cap - 1, i = hmap_hash(k1, k2) & mask;

	for (;;) {
		struct hmap_slot *s = &m->slots[i];

		if (!s->val || (s->k1 == k1 && s->k2 == k2))
			return s;
		i = (i + 1) & mask;
	}
}

void *hmap_get(const struct hmap *m, u64 k1, u64 k2)
{
	return hmap_find(m, k1, k2)->val;
}

static void hmap_grow(struct hmap *m)
{
	struct hmap old = *m;

	m->cap = old.cap * 2;
	m->len = 0;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].val)
			hmap_put(m, old.slots[i].k1, old.slots[i].k2, old.slots[i].val);
	free(old.slots);
}

void hmap_put(struct hmap *m, u64 k1, u64 k2, void *val)
{
	struct hmap_slot *s;

	if ((m->len + 1) * 4 > m->cap * 3)
		hmap_grow(m);
	s = hmap_find(m, k1, k2);
	if (!s->val)
		m->len++;
	s->k1 = k1;
	s->k2 = k2;
	s->val = val;
}

void *hmap_del(struct hmap *m, u64 k1, u64 k2)
{
	size_t mask = m->cap - 1;
	struct hmap_slot *s = hmap_find(m, k1, k2);
	size_t i = s - m->slots, j = i;
	void *val = s->val;

	if (!val)
		return NULL;
	m->len--;
	/* Backward shift: pull later members of the probe run into the hole. */
	for (;;) {
		size_t home;

		j = (j + 1) & mask;
		if (!m->slots[j].val)
			break;
		home = hmap_hash(m->slots[j].k1, m->slots[j].k2) & mask;
		/* Move j into i unless its home lies cyclically in (i, j]. */
		if ((i <= j) ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		m->slots[i] = m->slots[j];
		i = j;
	}
	m->slots[i].val = NULL;
	return val;
}

bool hmap_next(const struct hmap *m, size_t *iter, u64 *k1, u64 *k2, void **val)
{
	while (*iter < m->cap) {
		struct hmap_slot *s = &m->slots[(*iter)++];

		if (s->val) {
			if (k1)
				*k1 = s->k1;
			if (k2)
				*k2 = s->k2;
			*val = s->val;
			return true;
		}
	}
	return false;
}

/* ---- buffered output ---- */

#define OBUF_CAP (256 * 1024)

int obuf_open_fd(struct obuf *o, int fd, bool gzip)
{
	memset(o, 0, sizeof(*o));
	o->fd = fd;
	o->cap = OBUF_CAP;
	o->buf = xmalloc(o->cap);
	if (gzip) {
		int gfd = dup(fd);

		if (gfd < 0)
			return -errno;
		/* Level 1: the point of .gz here is size at streaming speed. */
		o->gz = gzdopen(gfd, "wb1");
		if (!o->gz) {
			close(gfd);
			return -ENOMEM;
		}
	}
	return 0;
}

static void obuf_drain(struct obuf *o)
{
	size_t off = 0;

	if (o->err) {
		o->len = 0;
		return;
	}
	if (o->gz) {
		if (o->len && gzwrite(o->gz, o->buf, o->len) != (int)o->len) {
			int e;

			gzerror(o->gz, &e);
			o->err = (e == Z_ERRNO && errno) ? errno : EIO;
		}
		o->len = 0;
		return;
	}
	while (off < o->len) {
		ssize_t n = write(o->fd, o->buf + off, o->len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			o->err = errno;
			break;
		}
		off += n;
	}
	o->len = 0;
}

void obuf_write_slow(struct obuf *o, const void *p, size_t n)
{
	if (o->len + n > o->cap) {
		obuf_drain(o);
		if (n > o->cap) {
			size_t off = 0;

			/* Larger than the buffer: pass it through in buffer-sized pieces. */
			while (off < n) {
				size_t k = MIN(n - off, o->cap);

				memcpy(o->buf, (const char *)p + off, k);
				o->len = k;
				obuf_drain(o);
				off += k;
			}
			return;
		}
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

void *obuf_reserve_slow(struct obuf *o, size_t n)
{
	if (o->len + n > o->cap)
		obuf_drain(o);
	return o->buf + o->len;
}

void obuf_printf(struct obuf *o, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	obuf_write(o, tmp, MIN((size_t)n, sizeof(tmp) - 1));
}

/* Two digits per division: timestamps have 13 or more. */
const char obuf_digit_pairs[200] = "00010203040506070809101112131415161718192021222324"
				   "25262728293031323334353637383940414243444546474849"
				   "50515253545556575859606162636465666768697071727374"
				   "75767778798081828384858687888990919293949596979899";

void obuf_u64_slow(struct obuf *o, u64 v)
{
	char tmp[24];

	obuf_write(o, tmp, fmt_u64(tmp, v) - tmp);
}

void obuf_s64(struct obuf *o, s64 v)
{
	if (v < 0) {
		obuf_putc(o, '-');
		obuf_u64(o, (u64)0 - (u64)v);
	} else {
		obuf_u64(o, v);
	}
}

void obuf_hex_slow(struct obuf *o, u64 v)
{
	char tmp[24];

	obuf_write(o, tmp, fmt_hex(tmp, v) - tmp);
}

/* Length of a valid UTF-8 sequence at s (at most n bytes), or 0 if invalid. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	size_t len;
	u32 cp;

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

void utf8_sanitize(char *dst, size_t dstlen, const char *src, size_t maxlen)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t n = strnlen(src, maxlen), i = 0, o = 0;

	if (!dstlen)
		return;
	while (i < n) {
		size_t k = utf8_seq_len(s + i, n - i);

		if (k) {
			if (o + k >= dstlen)
				break;
			memcpy(dst + o, s + i, k);
			o += k;
			i += k;
		} else {
			if (o + 3 >= dstlen)
				break;
			memcpy(dst + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	dst[o] = 0;
}

char *json_str_at(char *p, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	*p++ = '"';
	while (i < n) {
		unsigned char c = s[i];
		size_t k;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			*p++ = (char)c;
			i++;
			continue;
		}
		i++;
		switch (c) {
		case '"':
			p = mempcpy(p, "\\\"", 2);
			continue;
		case '\\':
			p = mempcpy(p, "\\\\", 2);
			continue;
		case '\n':
			p = mempcpy(p, "\\n", 2);
			continue;
		case '\t':
			p = mempcpy(p, "\\t", 2);
			continue;
		case '\r':
			p = mempcpy(p, "\\r", 2);
			continue;
		}
		if (c < 0x20) {
			p = mempcpy(p, "\\u00", 4);
			*p++ = "0123456789abcdef"[c >> 4];
			*p++ = "0123456789abcdef"[c & 15];
			continue;
		}
		k = utf8_seq_len(s + i - 1, n - i + 1);
		if (k) {
			p = mempcpy(p, s + i - 1, k);
			i += k - 1;
		} else {
			p = mempcpy(p, "\\ufffd", 6);
		}
	}
	*p++ = '"';
	return p;
}

void obuf_json_str(struct obuf *o, const char *str, size_t maxlen)
{
	size_t n = strnlen(str, maxlen), room = JSON_STR_ROOM(n);
	char *tmp;

	if (room <= OBUF_CAP / 4) {
		char *p = obuf_reserve(o, room);

		obuf_commit(o, json_str_at(p, str, n) - p);
		return;
	}
	tmp = xmalloc(room);
	obuf_write(o, tmp, json_str_at(tmp, str, n) - tmp);
	free(tmp);
}

int obuf_flush(struct obuf *o)
{
	obuf_drain(o);
	if (o->gz && !o->err && gzflush(o->gz, Z_SYNC_FLUSH) != Z_OK)
		o->err = EIO;
	return o->err ? -o->err : 0;
}

int obuf_close(struct obuf *o)
{
	int err;

	obuf_drain(o);
	if (o->gz) {
		if (gzclose(o->gz) != Z_OK && !o->err)
			o->err = EIO;
		o->gz = NULL;
	}
	err = o->err;
	free(o->buf);
	o->buf = NULL;
	return err ? -err : 0;
}

/* ---- output files ---- */

/* Temporary names in use, for the second Ctrl-C, which leaves through _exit. */
#define OUTFILE_MAX_OPEN 32
static char *volatile open_tmp_paths[OUTFILE_MAX_OPEN];

static void tmp_register(char *path)
{
	for (int i = 0; i < OUTFILE_MAX_OPEN; i++) {
		if (!open_tmp_paths[i]) {
			open_tmp_paths[i] = path;
			return;
		}
	}
}

static void tmp_unregister(char *path)
{
	for (int i = 0; i < OUTFILE_MAX_OPEN; i++)
		if (open_tmp_paths[i] == path)
			open_tmp_paths[i] = NULL;
}

void outfile_emergency_cleanup(void)
{
	for (int i = 0; i < OUTFILE_MAX_OPEN; i++)
		if (open_tmp_paths[i])
			unlink(open_tmp_paths[i]);
}

int outfile_open(struct outfile *f, const char *path, bool force, char *err, size_t errlen)
{
	struct stat st;
	const char *sudo_uid = getenv("SUDO_UID"), *sudo_gid = getenv("SUDO_GID");
	size_t n = strlen(path) + 32;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (!force && stat(path, &st) == 0) {
		snprintf(err, errlen, "%s already exists; remove it or add --force", path);
		return -EEXIST;
	}
	f->path = xstrdup(path);
	f->tmp_path = xmalloc(n);
	snprintf(f->tmp_path, n, "%s.tmp-%d", path, (int)getpid());
	/* Never follow a link planted at the temporary name, never reuse a file there. */
	unlink(f->tmp_path);
	f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (f->fd < 0) {
		int e = errno;

		snprintf(err, errlen, "cannot create %s: %s", f->tmp_path, strerror(e));
		free(f->path);
		free(f->tmp_path);
		f->path = f->tmp_path = NULL;
		return -e;
	}
	tmp_register(f->tmp_path);
	/* Run under sudo: the trace belongs to whoever asked for it. */
	if (geteuid() == 0 && sudo_uid && sudo_gid) {
		if (fchown(f->fd, atoi(sudo_uid), atoi(sudo_gid)) < 0)
			log_debug("chown %s to SUDO_UID: %s", f->tmp_path, strerror(errno));
	}
	return 0;
}

int outfile_commit(struct outfile *f, char *err, size_t errlen)
{
	int ret = 0;

	if (!f->path)
		return 0;
	if (f->fd >= 0 && close(f->fd) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot write %s: %s", f->path, strerror(errno));
	}
	f->fd = -1;
	if (!ret && rename(f->tmp_path, f->path) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot rename %s to %s: %s", f->tmp_path, f->path,
			 strerror(errno));
	}
	if (ret)
		unlink(f->tmp_path);
	tmp_unregister(f->tmp_path);
	free(f->path);
	free(f->tmp_path);
	f->path = f->tmp_path = NULL;
	return ret;
}

void outfile_abort(struct outfile *f)
{
	if (!f->path)
		return;
	if (f->fd >= 0)
		close(f->fd);
	unlink(f->tmp_path);
	tmp_unregister(f->tmp_path);
	free(f->path);
	free(f->tmp_path);
	f->path = f->tmp_path = NULL;
	f->fd = -1;
}

/* ---- time ---- */

u64 now_boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

s64 realtime_minus_boottime_ns(void)
{
	struct timespec a, b, c;
	s64 best = 0, best_gap = INT64_MAX;

	/* Bracket a realtime read with boottime reads; keep the tightest of a few tries. */
	for (int i = 0; i < 5; i++) {
		s64 gap, mid;

		clock_gettime(CLOCK_BOOTTIME, &a);
		clock_gettime(CLOCK_REALTIME, &b);
		clock_gettime(CLOCK_BOOTTIME, &c);
		gap = (c.tv_sec - a.tv_sec) * 1000000000LL + (c.tv_nsec - a.tv_nsec);
		mid = a.tv_sec * 1000000000LL + a.tv_nsec + gap / 2;
		if (gap < best_gap) {
			best_gap = gap;
			best = b.tv_sec * 1000000000LL + b.tv_nsec - mid;
		}
	}
	return best;
}

void fmt_duration(char *buf, size_t len, u64 ns)
{
	if (ns >= 10000000000ULL)
		snprintf(buf, len, "%.1f s", ns / 1e9);
	else if (ns >= 1000000000ULL)
		snprintf(buf, len, "%.2f s", ns / 1e9);
	else if (ns >= 1000000ULL)
		snprintf(buf, len, "%.1f ms", ns / 1e6);
	else if (ns >= 1000ULL)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
}

void errfmt(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

bool fmt_wall_time(char *buf, size_t len, u64 ts, s64 offset, bool frac)
{
	s64 wall;
	time_t secs;
	struct tm tm;
	char date[40];

	buf[0] = 0;
	if (ts > (u64)INT64_MAX || __builtin_add_overflow((s64)ts, offset, &wall) || wall < 0 ||
	    wall / 1000000000LL > 253402300799LL) /* 9999-12-31T23:59:59Z */
		return false;
	secs = (time_t)(wall / 1000000000LL);
	if (!gmtime_r(&secs, &tm) || !strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm))
		return false;
	if (frac)
		snprintf(buf, len, "%s.%09lldZ", date, (long long)(wall % 1000000000LL));
	else
		snprintf(buf, len, "%sZ", date);
	return true;
}

/*
 * zlib's CRC-32, computed by folding with carry-less multiplication where
 * the CPU has it (x86-64 PCLMULQDQ): the raw capture checks one per block,
 * and zlib's table-driven loop took a fifth of the replay's instructions.
 * The method is the one of Intel's white paper "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction": fold 64 bytes at a time
 * by x^(512+32) and x^(512-32) mod P, then 16, then reduce 128 bits to 32
 * with a Barrett reduction. The constants are those powers of x modulo the
 * bit-reflected polynomial 0x1DB710641, and mu = floor(x^64 / P).
 */
#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("pclmul,sse4.1"))) static u32 crc32_fold(u32 crc, const u8 *p, size_t len)
{
	/* len >= 64 and a multiple of 16; crc already inverted */
	const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i poly_mu = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i x[4], t, r;

	for (int i = 0; i < 4; i++)
		x[i] = _mm_loadu_si128((const __m128i *)(p + 16 * i));
	x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)crc));
	p += 64;
	len -= 64;
	while (len >= 64) {
		for (int i = 0; i < 4; i++) {
			t = _mm_clmulepi64_si128(x[i], k1k2, 0x00);
			x[i] = _mm_clmulepi64_si128(x[i], k1k2, 0x11);
			x[i] = _mm_xor_si128(_mm_xor_si128(x[i], t),
					     _mm_loadu_si128((const __m128i *)(p + 16 * i)));
		}
		p += 64;
		len -= 64;
	}
	r = x[0];
	for (int i = 1; i < 4 + (int)(len / 16); i++) {
		__m128i next = i < 4 ? x[i] : _mm_loadu_si128((const __m128i *)(p + 16 * (i - 4)));

		t = _mm_clmulepi64_si128(r, k3k4, 0x00);
		r = _mm_clmulepi64_si128(r, k3k4, 0x11);
		r = _mm_xor_si128(_mm_xor_si128(r, t), next);
	}
	/* 128 bits to 64, then 96 to 64 */
	t = _mm_clmulepi64_si128(r, k3k4, 0x10);
	r = _mm_xor_si128(_mm_srli_si128(r, 8), t);
	t = _mm_srli_si128(r, 4);
	r = _mm_clmulepi64_si128(_mm_and_si128(r, mask32), k5, 0x00);
	r = _mm_xor_si128(r, t);
	/* Barrett reduction to 32 bits */
	t = r;
	r = _mm_clmulepi64_si128(_mm_and_si128(r, mask32), poly_mu, 0x10);
	r = _mm_clmulepi64_si128(_mm_and_si128(r, mask32), poly_mu, 0x00);
	r = _mm_xor_si128(r, t);
	return (u32)_mm_extract_epi32(r, 1);
}
#endif

u32 crc32_buf(u32 crc, const void *buf, size_t len)
{
	const u8 *p = buf;

#if defined(__x86_64__)
	static int have = -1;

	if (have < 0) {
		__builtin_cpu_init();
		have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
	}
	if (have && len >= 64) {
		size_t n = len & ~(size_t)15;

		crc = ~crc32_fold(~crc, p, n);
		p += n;
		len -= n;
	}
#endif
	return (u32)crc32_z(crc, p, len);
}

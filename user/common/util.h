/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Small shared pieces: exit codes, a hash map keyed by two u64s, a buffered
 * writer that never allocates per write, JSON string escaping, and output
 * files that appear under their name only when complete.
 */
#ifndef COROBPF_UTIL_H
#define COROBPF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;

/* Exit codes; documented in --help and the README. */
enum exit_code {
	EXIT_OK = 0,
	EXIT_FAILURE_RUNTIME = 1, /* BPF load/attach failed, or another runtime failure */
	EXIT_USAGE = 2,		  /* bad command line */
	EXIT_PRIVILEGE = 3,	  /* not root / missing CAP_BPF or CAP_PERFMON */
	EXIT_KERNEL = 4,	  /* kernel lacks BTF or BPF ring buffers */
	EXIT_NO_PROCESS = 5,	  /* a -p PID does not exist (or is a thread) */
	EXIT_NO_PROBES = 6,	  /* the target carries no corobpf probes */
	EXIT_OUTPUT = 7,	  /* an output cannot be written (or exists, without --force) */
	EXIT_BAD_CAPTURE = 8,	  /* a raw capture is truncated, corrupt or of another version */
	EXIT_LAUNCH = 9,	  /* the command after -- cannot be run */
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ROUND_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* zlib's crc32() (same values), faster where the CPU multiplies carry-less. */
u32 crc32_buf(u32 crc, const void *buf, size_t len);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* Host-order integers at any alignment in a file's bytes (ELF tables, ld.so.cache). */
static inline u32 load_u32(const void *p)
{
	u32 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline u64 load_u64(const void *p)
{
	u64 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* splitmix64's finalizer: every input bit moves every output bit. */
static inline u64 mix64(u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/*
 * Open-addressing hash map, key (k1, k2), value a pointer. Linear probing
 * with backward-shift deletion, so there are no tombstones and lookups stay
 * short however many keys come and go.
 */
struct hmap_slot {
	u64 k1, k2;
	void *val; /* NULL: empty slot */
};

struct hmap {
	struct hmap_slot *slots;
	size_t cap; /* power of two */
	size_t len;
};

void hmap_init(struct hmap *m);
void hmap_free(struct hmap *m);
void hmap_clear(struct hmap *m); /* empty, keeping its room */
void *hmap_get(const struct hmap *m, u64 k1, u64 k2);
void hmap_put(struct hmap *m, u64 k1, u64 k2, void *val); /* val != NULL; replaces */
void *hmap_del(struct hmap *m, u64 k1, u64 k2);		  /* returns the removed value */
/* Iterate: for (size_t i = 0; hmap_next(m, &i, &k1, &k2, &val);) ... (no changes while iterating) */
bool hmap_next(const struct hmap *m, size_t *iter, u64 *k1, u64 *k2, void **val);
/*
 * Remove every entry whose first key is k1 (all of a process's, say), handing
 * each removed value to drop() when it is not NULL. Costs a walk of the table.
 */
void hmap_del_k1(struct hmap *m, u64 k1, void (*drop)(void *val));

/*
 * Buffered output to a file descriptor or a gzip stream. Writes copy into
 * a fixed buffer; errors are sticky and reported once by obuf_close().
 */
struct obuf {
	char *buf;
	size_t len, cap;
	int fd;
	void *gz; /* gzFile when compressing */
	int err;  /* first errno seen */
};

int obuf_open_fd(struct obuf *o, int fd, bool gzip);
void obuf_write_slow(struct obuf *o, const void *p, size_t n);

/*
 * Inline: most writes are a few bytes of a literal, whose length and copy
 * the compiler then folds to a handful of moves.
 */
static inline __attribute__((always_inline)) void obuf_write(struct obuf *o, const void *p, size_t n)
{
	if (__builtin_expect(o->len + n <= o->cap, 1)) {
		memcpy(o->buf + o->len, p, n);
		o->len += n;
		return;
	}
	obuf_write_slow(o, p, n);
}

static inline __attribute__((always_inline)) void obuf_puts(struct obuf *o, const char *s)
{
	obuf_write(o, s, strlen(s));
}

static inline __attribute__((always_inline)) void obuf_putc(struct obuf *o, char c)
{
	obuf_write(o, &c, 1);
}

/* Room for n bytes written in place (n <= the buffer's size); then obuf_commit() what was used. */
void *obuf_reserve_slow(struct obuf *o, size_t n);

static inline void *obuf_reserve(struct obuf *o, size_t n)
{
	if (__builtin_expect(o->len + n <= o->cap, 1))
		return o->buf + o->len;
	return obuf_reserve_slow(o, n);
}
static inline void obuf_commit(struct obuf *o, size_t n)
{
	o->len += n;
}
void obuf_printf(struct obuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void obuf_s64(struct obuf *o, s64 v);

extern const char obuf_digit_pairs[200];

/* Decimal digits of v, written at p (room for 20); returns the end. */
static inline char *fmt_u64(char *p, u64 v)
{
	static const u64 p10[20] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
				    10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL,
				    100000000000ULL, 1000000000000ULL, 10000000000000ULL,
				    100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
				    100000000000000000ULL, 1000000000000000000ULL,
				    10000000000000000000ULL};
	/* floor(log10(v)) from the bit length (1233/4096 ~ log10(2)), corrected by one compare */
	int t = ((64 - __builtin_clzll(v | 1)) * 1233) >> 12;
	int n = t - ((v | 1) < p10[t]) + 1;
	char *e;

	e = p + n;
	p = e;
	while (v >= 100) {
		unsigned r = (unsigned)(v % 100);

		v /= 100;
		p -= 2;
		memcpy(p, obuf_digit_pairs + 2 * r, 2);
	}
	if (v >= 10)
		memcpy(p - 2, obuf_digit_pairs + 2 * v, 2);
	else
		p[-1] = (char)('0' + v);
	return e;
}

/* "0x" and the hex digits of v without leading zeros, written at p (room for 18); returns the end. */
static inline char *fmt_hex(char *p, u64 v)
{
	int n = v ? 16 - __builtin_clzll(v) / 4 : 1;
	char *e = p + 2 + n;

	p[0] = '0';
	p[1] = 'x';
	for (char *q = e; q > p + 2; v >>= 4)
		*--q = "0123456789abcdef"[v & 15];
	return e;
}

void obuf_u64_slow(struct obuf *o, u64 v);
void obuf_hex_slow(struct obuf *o, u64 v);

/* Numbers are formatted in place in the buffer when it has room (nearly always). */
static inline __attribute__((always_inline)) void obuf_u64(struct obuf *o, u64 v)
{
	if (__builtin_expect(o->len + 20 <= o->cap, 1))
		o->len = fmt_u64(o->buf + o->len, v) - o->buf;
	else
		obuf_u64_slow(o, v);
}

static inline __attribute__((always_inline)) void obuf_hex(struct obuf *o, u64 v) /* "0x..." without quotes */
{
	if (__builtin_expect(o->len + 18 <= o->cap, 1))
		o->len = fmt_hex(o->buf + o->len, v) - o->buf;
	else
		obuf_hex_slow(o, v);
}
/* A JSON string, quoted and escaped; invalid UTF-8 bytes become \u00XX escapes of U+FFFD. */
void obuf_json_str(struct obuf *o, const char *s, size_t maxlen);
/* The same for the n bytes at str, written at p (room: JSON_STR_ROOM(n)); returns the end. */
char *json_str_at(char *p, const char *str, size_t n);
#define JSON_STR_ROOM(n) (6 * (size_t)(n) + 2)
/*
 * Copy at most `maxlen` bytes of `src` into `dst` (always NUL-terminated) as
 * valid UTF-8: each invalid byte becomes U+FFFD, as in the JSON output.
 */
void utf8_sanitize(char *dst, size_t dstlen, const char *src, size_t maxlen);
int obuf_flush(struct obuf *o);
int obuf_close(struct obuf *o); /* flushes; returns 0 or -errno (the first error) */

/*
 * Output files. outfile_open() resolves the directory of `path` once (its
 * symbolic links then, none after) and keeps it open: every later step is
 * relative to it, so whoever can rename in that directory, or above it,
 * cannot move the output elsewhere. The file is written as
 * "<name>.tmp-<pid>", created there without following a link or reusing a
 * file, and outfile_commit() renames it to <name> in the same directory:
 * a file under the requested name is always complete, and nothing that
 * appeared there meanwhile is replaced unless `force` (a directory never
 * is). A rename that fails keeps the finished file and says where it is.
 * Created 0600 when run as root (a trace holds other users' data), 0644
 * less the umask otherwise; under sudo, given to the invoking user once
 * in place, never before (a temporary file of theirs could be swapped).
 */
struct outfile {
	char *path;	/* as given, for messages */
	char *tmp_path; /* the temporary file's path, for messages */
	char *name;	/* the file's name in dirfd */
	char *tmp_name; /* the temporary file's name in dirfd */
	int dirfd;	/* the directory, O_PATH */
	int fd;		/* the temporary file, read-write */
	bool force;
	dev_t dev; /* the temporary file: unlinked only while the name is still it */
	ino_t ino;
};

int outfile_open(struct outfile *f, const char *path, bool force, char *err, size_t errlen);
int outfile_commit(struct outfile *f, char *err, size_t errlen);
void outfile_abort(struct outfile *f);
/* From a signal handler: unlink every temporary output file (async-signal-safe). */
void outfile_emergency_cleanup(void);
/*
 * True when output paths a and b are one file: the same name in the same
 * directory however spelled (symbolic links, ".", ".."), or the same file
 * now. False when either directory cannot be found (outfile_open says why).
 */
bool outfile_same(const char *a, const char *b);
/* True when writing output `path` would replace or write through the file of `input`. */
bool outfile_is_input(const char *path, const struct stat *input);

/*
 * Opens an input for reading (O_CLOEXEC, no controlling terminal): only a
 * regular file, as a FIFO or a device could block forever or never end.
 * The descriptor, or -errno with the reason in err (when not NULL).
 */
int input_open(const char *path, char *err, size_t errlen);

u64 now_boottime_ns(void);
s64 realtime_minus_boottime_ns(void);

/* "1.25 s", "310 ms", "42 us", "12 ns" */
/* vsnprintf into err[errlen] when err is non-NULL: for functions that report errors to a buffer. */
void errfmt(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fmt_duration(char *buf, size_t len, u64 ns);
/*
 * The wall-clock time of boottime `ts` given `offset` (realtime - boottime,
 * ns) as "YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ" (frac false: without the
 * fraction). False, and "" in buf, if it is not a time between 1970 and
 * 9999 (a damaged or hostile capture can hold any values).
 */
bool fmt_wall_time(char *buf, size_t len, u64 ts, s64 offset, bool frac);

#endif

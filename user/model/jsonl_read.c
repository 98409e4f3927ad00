// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A strict little JSON reader for corobpf's own JSONL: one object per line,
 * nested objects flattened to dotted keys ("lost.events"), arrays of
 * numbers kept for the header's pids, everything bounds-checked (the input
 * may be anything).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "counters.h"
#include "jsonl_read.h"
#include "kinds.h"
#include "model.h"
#include "raw.h"

#define JV_MAX 128
#define POOL_MAX (64 * 1024)
#define ARR_MAX 4096
#define LINE_MAX_BYTES (1 << 20)
#define DEPTH_MAX 4

enum jv_type { JV_STR, JV_NUM, JV_BOOL, JV_NULL };

struct jv {
	const char *key; /* in the pool */
	enum jv_type type;
	const char *s;	 /* JV_STR, in the pool */
	size_t slen;
	s64 num;
	bool b;
};

struct jobj {
	struct jv v[JV_MAX];
	int n;
	char pool[POOL_MAX];
	size_t pool_len;
	u64 arr[ARR_MAX]; /* numbers of the first array of numbers met ("pids") */
	int narr;
	const char *arr_key;
};

struct jp {
	const char *p, *end;
	struct jobj *o;
	const char *err;
};

static void jp_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n'))
		j->p++;
}

static char *pool_alloc(struct jp *j, size_t n)
{
	char *r;

	if (j->o->pool_len + n > POOL_MAX) {
		j->err = "line too large";
		return NULL;
	}
	r = j->o->pool + j->o->pool_len;
	j->o->pool_len += n;
	return r;
}

static void utf8_put(char *dst, size_t *n, u32 cp)
{
	if (cp < 0x80) {
		dst[(*n)++] = (char)cp;
	} else if (cp < 0x800) {
		dst[(*n)++] = (char)(0xc0 | cp >> 6);
		dst[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		dst[(*n)++] = (char)(0xe0 | cp >> 12);
		dst[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		dst[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		dst[(*n)++] = (char)(0xf0 | cp >> 18);
		dst[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
		dst[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		dst[(*n)++] = (char)(0x80 | (cp & 0x3f));
	}
}

static int hex4(const char *p, const char *end, u32 *out)
{
	u32 v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* A string at j->p (after the quote has been checked): into the pool, NUL-terminated. */
static const char *jp_string(struct jp *j, size_t *len)
{
	const char *p = j->p + 1, *q;
	size_t n = 0, max;
	char *dst;

	/* An unescaped string never grows: its raw length bounds the decoded one (x4 for \u). */
	for (q = p; q < j->end && *q != '"'; q++)
		if (*q == '\\')
			q++;
	if (q >= j->end) {
		j->err = "unterminated string";
		return NULL;
	}
	max = (size_t)(q - p) * 2 + 1;
	dst = pool_alloc(j, max);
	if (!dst)
		return NULL;
	while (p < q) {
		char c = *p++;

		if ((unsigned char)c < 0x20) {
			j->err = "control character in a string";
			return NULL;
		}
		if (c != '\\') {
			dst[n++] = c;
			continue;
		}
		c = *p++;
		switch (c) {
		case '"': dst[n++] = '"'; break;
		case '\\': dst[n++] = '\\'; break;
		case '/': dst[n++] = '/'; break;
		case 'b': dst[n++] = '\b'; break;
		case 'f': dst[n++] = '\f'; break;
		case 'n': dst[n++] = '\n'; break;
		case 'r': dst[n++] = '\r'; break;
		case 't': dst[n++] = '\t'; break;
		case 'u': {
			u32 cp, lo;

			if (hex4(p, q, &cp)) {
				j->err = "bad \\u escape";
				return NULL;
			}
			p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && q - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
			    !hex4(p + 2, q, &lo) && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			} else if (cp >= 0xd800 && cp < 0xe000) {
				cp = 0xfffd; /* a lone surrogate */
			}
			utf8_put(dst, &n, cp);
			break;
		}
		default:
			j->err = "bad escape";
			return NULL;
		}
	}
	dst[n] = 0;
	*len = n;
	j->p = q + 1;
	return dst;
}

static int jp_value(struct jp *j, const char *key, int depth);

/*
 * An object at j->p. keep: its fields are kept, under "prefix.key" (or key
 * at the top); else it is read past (an object in an array: a stack's
 * frames, a finding's chain), so that its fields never pose as the line's.
 */
static int jp_object(struct jp *j, const char *prefix, bool keep, int depth)
{
	if (depth > DEPTH_MAX) {
		j->err = "nested too deep";
		return -1;
	}
	j->p++; /* '{' */
	jp_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		const char *k;
		char *full;
		size_t klen, mark, plen = prefix ? strlen(prefix) : 0;

		jp_ws(j);
		if (j->p >= j->end || *j->p != '"') {
			j->err = "expected a key";
			return -1;
		}
		mark = j->o->pool_len;
		k = jp_string(j, &klen);
		if (!k)
			return -1;
		full = NULL;
		if (!keep)
			j->o->pool_len = mark; /* a key read past takes no room */
		if (keep) {
			full = pool_alloc(j, plen + klen + 2);
			if (!full)
				return -1;
			if (prefix)
				snprintf(full, plen + klen + 2, "%s.%s", prefix, k);
			else
				memcpy(full, k, klen + 1);
		}
		jp_ws(j);
		if (j->p >= j->end || *j->p != ':') {
			j->err = "expected ':'";
			return -1;
		}
		j->p++;
		jp_ws(j);
		if (jp_value(j, full, depth + 1))
			return -1;
		jp_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			return 0;
		}
		j->err = "expected ',' or '}'";
		return -1;
	}
}

static struct jv *jv_new(struct jp *j, const char *key)
{
	struct jv *v;

	if (j->o->n == JV_MAX) {
		j->err = "too many fields";
		return NULL;
	}
	v = &j->o->v[j->o->n++];
	memset(v, 0, sizeof(*v));
	v->key = key;
	return v;
}

static int jp_array(struct jp *j, const char *key, int depth)
{
	bool numbers = key && !j->o->arr_key;

	if (depth > DEPTH_MAX) {
		j->err = "nested too deep";
		return -1;
	}
	j->p++; /* '[' */
	jp_ws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		if (numbers)
			j->o->arr_key = key;
		return 0;
	}
	for (;;) {
		jp_ws(j);
		if (numbers && j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))) {
			char *e;
			long long v = strtoll(j->p, &e, 10);

			if (e > j->end || e == j->p) {
				j->err = "bad number";
				return -1;
			}
			if (j->o->narr < ARR_MAX)
				j->o->arr[j->o->narr++] = (u64)v;
			j->p = e;
		} else {
			numbers = false;
			/* Other arrays (threads lists, chains) are read past, not kept. */
			if (jp_value(j, NULL, depth + 1))
				return -1;
		}
		jp_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			if (numbers && !j->o->arr_key)
				j->o->arr_key = key;
			return 0;
		}
		j->err = "expected ',' or ']'";
		return -1;
	}
}

/*
 * The literal `word` (null, true, false) at j->p: read past, and kept as a
 * value of `type` under key when there is one. 0 when read, 1 when j->p holds
 * another word, -1 on error.
 */
static int jp_word(struct jp *j, const char *key, const char *word, enum jv_type type, bool b)
{
	size_t len = strlen(word);
	struct jv *v;

	if ((size_t)(j->end - j->p) < len || memcmp(j->p, word, len))
		return 1;
	j->p += len;
	if (!key)
		return 0;
	v = jv_new(j, key);
	if (!v)
		return -1;
	v->type = type;
	v->b = b;
	return 0;
}

static int jp_value(struct jp *j, const char *key, int depth)
{
	struct jv *v = NULL;
	int ret;

	if (j->p >= j->end) {
		j->err = "missing value";
		return -1;
	}
	switch (*j->p) {
	case '{':
		return jp_object(j, key, key != NULL, depth);
	case '[':
		return jp_array(j, key, depth);
	case '"': {
		size_t len, mark = j->o->pool_len;
		const char *s = jp_string(j, &len);

		if (!s)
			return -1;
		if (!key) {
			/* Read past: no room kept, so a stack's many frames fit any line. */
			j->o->pool_len = mark;
			return 0;
		}
		v = jv_new(j, key);
		if (!v)
			return -1;
		v->type = JV_STR;
		v->s = s;
		v->slen = len;
		return 0;
	}
	}
	if ((ret = jp_word(j, key, "null", JV_NULL, false)) <= 0 ||
	    (ret = jp_word(j, key, "true", JV_BOOL, true)) <= 0 ||
	    (ret = jp_word(j, key, "false", JV_BOOL, false)) <= 0)
		return ret;
	if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
		char *e, buf[40];
		size_t n = 0;
		const char *q = j->p;

		/* Copy the number out: strtoll must not read past the line. */
		while (q < j->end && n < sizeof(buf) - 1 && strchr("-+0123456789.eE", *q))
			buf[n++] = *q++;
		buf[n] = 0;
		if (key && !(v = jv_new(j, key)))
			return -1;
		if (strpbrk(buf, ".eE")) {
			double d = strtod(buf, &e);

			/* 1e999 is inf; anything outside s64 is no value we wrote. */
			if (!(d > -9.2e18 && d < 9.2e18)) {
				j->err = "number out of range";
				return -1;
			}
			if (key)
				v->num = (s64)d;
		} else {
			errno = 0;
			long long ll = strtoll(buf, &e, 10);

			if (errno == ERANGE) {
				/* Above 2^63: our u64 counters; keep the bits. */
				if (key)
					v->num = (s64)strtoull(buf, &e, 10);
			} else if (key) {
				v->num = ll;
			}
		}
		if (*e || e == buf) {
			j->err = "bad number";
			return -1;
		}
		if (key)
			v->type = JV_NUM;
		j->p = q;
		return 0;
	}
	j->err = "unexpected character";
	return -1;
}

static int parse_line(struct jobj *o, const char *line, size_t len, const char **err)
{
	struct jp j = {.p = line, .end = line + len, .o = o};

	o->n = 0;
	o->pool_len = 0;
	o->narr = 0;
	o->arr_key = NULL;
	jp_ws(&j);
	if (j.p >= j.end || *j.p != '{') {
		*err = "not a JSON object";
		return -1;
	}
	if (jp_object(&j, NULL, true, 0)) {
		*err = j.err ? j.err : "malformed";
		return -1;
	}
	jp_ws(&j);
	if (j.p != j.end) {
		*err = "text after the object";
		return -1;
	}
	return 0;
}

static const struct jv *get(const struct jobj *o, const char *key)
{
	for (int i = 0; i < o->n; i++)
		if (!strcmp(o->v[i].key, key))
			return &o->v[i];
	return NULL;
}

static const char *gets_(const struct jobj *o, const char *key)
{
	const struct jv *v = get(o, key);

	return v && v->type == JV_STR ? v->s : NULL;
}

static bool getn(const struct jobj *o, const char *key, u64 *out)
{
	const struct jv *v = get(o, key);

	if (!v || v->type != JV_NUM)
		return false;
	*out = (u64)v->num;
	return true;
}

/* "0x1f" ids; false if absent, null or malformed. (__u64: the event ABI's type.) */
static bool getid(const struct jobj *o, const char *key, __u64 *out)
{
	const char *s = gets_(o, key);
	char *e;

	if (!s || strncmp(s, "0x", 2))
		return false;
	errno = 0;
	*out = strtoull(s + 2, &e, 16);
	return !errno && *e == 0 && e != s + 2;
}

/* What the line does not say: the running coroutine (records.h). */
#define CUR_UNSAID (CORO_EVF_CUR_UNKNOWN | CORO_EVF_CUR_UNSAID)

/* The running coroutine ("id"), or none known. */
static void set_cur(const struct jobj *o, struct coro_event_hdr *h)
{
	__u64 id;

	if (getid(o, "id", &id))
		h->cur = id;
	else
		h->flags = CUR_UNSAID;
}

/* An off-CPU state by its JSONL name; an unknown one reads as "other". */
static u32 offcpu_state_of(const char *name)
{
	for (u32 k = CORO_OFF_PREEMPTED; name && k <= CORO_OFF_OTHER; k++)
		if (!strcmp(name, coro_offcpu_state_name(k)))
			return k;
	return CORO_OFF_OTHER;
}

/* ---- the reader ---- */

/* A `lost` line, until the next event line of its thread takes it. */
struct pending_lost {
	u64 ts, count;
	bool has_id;   /* the line has `id` (JSONL written before it had none) */
	bool id_known; /* ... and it is not null */
	__u64 id;
};

struct jsonl_reader {
	gzFile gz;
	char *line;
	size_t cap;
	u64 lineno;
	struct jobj *o;
	union {
		struct coro_event_hdr hdr;
		char buf[8192];
		u64 align;
	} rec;
	struct hmap lost; /* (pid, tid) -> struct pending_lost, for the next event of that thread */
	bool trailer_done, end_sent;
	bool again; /* the line read last is to be built again (a hole went first) */
	struct coro_rec_end end;
	char err[512];
};

static const char *read_line(struct jsonl_reader *r, size_t *len)
{
	size_t n = 0;

	for (;;) {
		if (n + 2 >= r->cap) {
			if (r->cap >= LINE_MAX_BYTES)
				return NULL;
			r->cap = r->cap ? r->cap * 2 : 4096;
			r->line = xrealloc(r->line, r->cap);
		}
		if (!gzgets(r->gz, r->line + n, (int)(r->cap - n)))
			break;
		n += strlen(r->line + n);
		if (n && r->line[n - 1] == '\n')
			break;
	}
	if (!n)
		return NULL;
	if (r->line[n - 1] == '\n')
		n--;
	r->line[n] = 0;
	*len = n;
	return r->line;
}

static int fail(struct jsonl_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(struct jsonl_reader *r, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(r->err, sizeof(r->err), "line %llu: ", (unsigned long long)r->lineno);

	va_start(ap, fmt);
	vsnprintf(r->err + n, sizeof(r->err) - n, fmt, ap);
	va_end(ap);
	return -1;
}

bool jsonl_file_looks_like(const char *path)
{
	int fd = input_open(path, NULL, 0); /* a FIFO is no JSONL: never wait on one */
	gzFile gz = fd >= 0 ? gzdopen(fd, "rb") : NULL;
	int c;

	if (!gz) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	do
		c = gzgetc(gz);
	while (c == ' ' || c == '\n' || c == '\r' || c == '\t');
	gzclose(gz);
	return c == '{';
}

struct jsonl_reader *jsonl_reader_open(const char *path, struct capture_info *ci, char *err,
				       size_t errlen)
{
	struct jsonl_reader *r = xcalloc(1, sizeof(*r));
	const char *line, *perr = NULL, *type;
	size_t len;
	u64 v = 0;
	int fd;

	memset(ci, 0, sizeof(*ci));
	r->o = xmalloc(sizeof(*r->o));
	hmap_init(&r->lost);
	fd = input_open(path, err, errlen); /* a regular file, or a clear error */
	if (fd < 0)
		goto fail;
	r->gz = gzdopen(fd, "rb");
	if (!r->gz) {
		snprintf(err, errlen, "cannot read %s: out of memory", path);
		close(fd);
		goto fail;
	}
	line = read_line(r, &len);
	r->lineno = 1;
	if (!line || parse_line(r->o, line, len, &perr) || !(type = gets_(r->o, "type")) ||
	    strcmp(type, "header")) {
		snprintf(err, errlen, "%s is not corobpf JSONL (its first line is not a header%s%s)",
			 path, perr ? ": " : "", perr ? perr : "");
		goto fail;
	}
	if (!getn(r->o, "schema", &v) || v != JSONL_SCHEMA_VERSION) {
		snprintf(err, errlen, "%s is JSONL schema %llu; this corobpf reads schema %d", path,
			 (unsigned long long)v, JSONL_SCHEMA_VERSION);
		goto fail;
	}
	ci->version = RAW_FORMAT_VERSION;
	ci->abi_version = CORO_EVENT_ABI_VERSION;
	ci->clock_id = CLOCK_BOOTTIME;
	getn(r->o, "start_ts", &ci->start_ts);
	if (getn(r->o, "realtime_offset_ns", &v))
		ci->realtime_offset = (s64)v;
	snprintf(ci->tool_version, sizeof(ci->tool_version), "%s",
		 gets_(r->o, "version") ? gets_(r->o, "version") : "");
	snprintf(ci->kernel, sizeof(ci->kernel), "%s",
		 gets_(r->o, "kernel") ? gets_(r->o, "kernel") : "");
	snprintf(ci->hostname, sizeof(ci->hostname), "%s",
		 gets_(r->o, "hostname") ? gets_(r->o, "hostname") : "");
	ci->npids = r->o->arr_key && !strcmp(r->o->arr_key, "pids") ? r->o->narr : 0;
	ci->pids = xcalloc(ci->npids ? ci->npids : 1, sizeof(u32));
	for (u32 i = 0; i < ci->npids; i++)
		ci->pids[i] = (u32)r->o->arr[i];
	return r;
fail:
	jsonl_reader_close(r);
	return NULL;
}

static void *rec_init(struct jsonl_reader *r, size_t size, unsigned kind, u64 pid, u64 tid, u64 ts)
{
	struct coro_event_hdr *h = &r->rec.hdr;

	memset(r->rec.buf, 0, size);
	h->size = (u16)size;
	h->kind = (u8)kind;
	h->pid = (u32)pid;
	h->tid = (u32)tid;
	h->ts = ts;
	return h;
}

static void copy_str(char *dst, size_t len, const char *s)
{
	if (s)
		snprintf(dst, len, "%s", s);
}

/* The record of a hole alone (CORO_REC_LOST), in r->rec: the thread's view as `lost` gives it. */
static void build_lost(struct jsonl_reader *r, u64 pid, u64 tid, u64 ts,
		       const struct pending_lost *pl)
{
	struct coro_event_hdr *h = rec_init(r, sizeof(*h), CORO_REC_LOST, pid, tid, ts);

	h->lost_before = (u32)MIN(pl->count, UINT32_MAX);
	h->cur = pl->id_known ? pl->id : 0;
	h->flags = pl->id_known ? 0 : CORO_EVF_CUR_UNKNOWN;
}

/*
 * The hole before the event just built. With `id` the line says what the BPF
 * side said runs on the thread after the hole: the event carries it, as its
 * raw record did, whatever its own line tells. Without (JSONL written before
 * `lost` had `id`), the event counts the hole and tells what its line does.
 */
static void take_lost(struct coro_event_hdr *h, const struct pending_lost *pl)
{
	h->lost_before = (u32)MIN(pl->count, UINT32_MAX);
	if (!pl->has_id)
		return;
	h->flags &= (u8)~(CUR_UNSAID | CORO_EVF_NO_THREAD);
	if (pl->id_known)
		h->cur = pl->id;
	else
		h->flags |= CORO_EVF_CUR_UNKNOWN;
}

/* An event record: 1 if one was built, 0 to skip, -1 on error. */
static int build_event(struct jsonl_reader *r, const char *ev, u64 pid, u64 tid, u64 ts)
{
	const struct jobj *o = r->o;
	unsigned kind = record_kind_by_name(ev);
	struct coro_event_hdr *h;
	u64 v;
	void *lost;

	switch (kind) {
	case CORO_EV_CREATE: {
		struct coro_ev_create *e = rec_init(r, sizeof(*e), CORO_EV_CREATE, pid, tid, ts);

		if (!getid(o, "id", &e->id) || !getid(o, "parent", &e->parent))
			return fail(r, "create without id and parent");
		e->hdr.flags = CUR_UNSAID;
		break;
	}
	case CORO_EV_NAME: {
		struct coro_ev_name *e = rec_init(r, sizeof(*e), CORO_EV_NAME, pid, tid, ts);
		const struct jv *t = get(o, "truncated"), *u = get(o, "unreadable");

		const char *name = gets_(o, "name");

		if (!getid(o, "id", &e->id))
			return fail(r, "name without id");
		/* Longer than its field: a name made in user space, as long as it was (kinds.h). */
		if (name && strlen(name) >= sizeof(e->name))
			coro_name_record(e, name);
		else
			copy_str(e->name, sizeof(e->name), name);
		e->hdr.flags = CUR_UNSAID;
		if (t && t->type == JV_BOOL && t->b)
			e->hdr.flags |= CORO_EVF_STR_TRUNCATED;
		if (u && u->type == JV_BOOL && u->b)
			e->hdr.flags |= CORO_EVF_STR_FAULT;
		break;
	}
	case CORO_EV_ANNOUNCE: {
		struct coro_ev_announce *e = rec_init(r, sizeof(*e), CORO_EV_ANNOUNCE, pid, tid, ts);
		const struct jv *t = get(o, "truncated"), *u = get(o, "unreadable");
		const char *reason = gets_(o, "reason");

		if (!getid(o, "id", &e->id) || !getid(o, "parent", &e->parent))
			return fail(r, "announce without id and parent");
		getid(o, "obj", &e->obj);
		copy_str(e->name, sizeof(e->name), gets_(o, "name"));
		for (u32 i = 1; reason && i < CORO_NREASONS; i++)
			if (!strcmp(reason, coro_reason_name(i)))
				e->reason = i;
		e->hdr.flags = CUR_UNSAID;
		if (t && t->type == JV_BOOL && t->b)
			e->hdr.flags |= CORO_EVF_STR_TRUNCATED;
		if (u && u->type == JV_BOOL && u->b)
			e->hdr.flags |= CORO_EVF_STR_FAULT;
		break;
	}
	case CORO_EV_ANNOUNCE_DONE: {
		struct coro_ev_announce_done *e;

		e = rec_init(r, sizeof(*e), CORO_EV_ANNOUNCE_DONE, pid, tid, ts);
		if (getn(o, "asked", &v))
			e->asked = v;
		e->hdr.flags = CUR_UNSAID;
		break;
	}
	case CORO_EV_READY: {
		struct coro_ev_ready *e = rec_init(r, sizeof(*e), CORO_EV_READY, pid, tid, ts);

		if (!getid(o, "id", &e->id))
			return fail(r, "ready without id");
		if (getid(o, "waker", &e->hdr.cur))
			e->hdr.flags = 0;
		else
			e->hdr.flags = CUR_UNSAID;
		break;
	}
	case CORO_EV_SWITCH: {
		struct coro_ev_switch *e = rec_init(r, sizeof(*e), CORO_EV_SWITCH, pid, tid, ts);
		const char *reason = gets_(o, "reason");

		if (!getid(o, "from", &e->from) || !getid(o, "to", &e->to))
			return fail(r, "switch without from and to");
		getid(o, "obj", &e->obj);
		e->hdr.cur = e->from;
		for (u32 i = 0; reason && i < CORO_NREASONS; i++)
			if (!strcmp(reason, coro_reason_name(i)))
				e->reason = i;
		break;
	}
	case CORO_EV_EXIT: {
		struct coro_ev_exit *e = rec_init(r, sizeof(*e), CORO_EV_EXIT, pid, tid, ts);

		if (!getid(o, "id", &e->id) || !getn(o, "status", &v))
			return fail(r, "exit without id and status");
		e->status = (s64)v;
		e->hdr.flags = CUR_UNSAID;
		break;
	}
	case CORO_EV_SPAN_BEGIN:
	case CORO_EV_SPAN_END: {
		struct coro_ev_span *e = rec_init(r, sizeof(*e), kind, pid, tid, ts);

		copy_str(e->name, sizeof(e->name), gets_(o, "name"));
		set_cur(o, &e->hdr);
		break;
	}
	case CORO_EV_OFFCPU_BEGIN: {
		struct coro_ev_offcpu_begin *e;
		u64 cpu = 0;

		e = rec_init(r, sizeof(*e), CORO_EV_OFFCPU_BEGIN, pid, tid, ts);
		getn(o, "cpu", &cpu);
		e->cpu = (u32)cpu;
		e->state = offcpu_state_of(gets_(o, "state"));
		set_cur(o, &e->hdr);
		break;
	}
	case CORO_EV_OFFCPU_END: {
		/* A stretch: ts is when it left the CPU; the record is made when it came back. */
		struct coro_ev_offcpu_end *e;
		const struct jv *late = get(o, "late");
		u64 dur = 0, runq = 0, cpu = 0;

		getn(o, "dur", &dur);
		e = rec_init(r, sizeof(*e), CORO_EV_OFFCPU_END, pid, tid, ts + dur);
		e->start = ts;
		getn(o, "runq", &runq);
		getn(o, "cpu", &cpu);
		e->runq_ns = runq;
		e->cpu = (u32)cpu;
		e->state = offcpu_state_of(gets_(o, "state"));
		set_cur(o, &e->hdr);
		if (late && late->type == JV_BOOL && late->b)
			e->hdr.flags |= CORO_EVF_OFFCPU_LATE;
		break;
	}
	default:
		return 0; /* an event kind this version does not know */
	}
	h = &r->rec.hdr;
	lost = hmap_del(&r->lost, pid, tid);
	if (lost) {
		take_lost(h, lost);
		free(lost);
	}
	return 1;
}

/* The trailer: the capture's counters (a stats record), then its end, on the next call. */
static int build_trailer(struct jsonl_reader *r, u64 ts)
{
	const struct jobj *o = r->o;
	struct coro_rec_stats *st;
	const char *why = gets_(o, "end_reason");
	struct pending_lost *pl;
	size_t it = 0;
	u64 k1, k2;

	if (hmap_next(&r->lost, &it, &k1, &k2, (void **)&pl)) {
		/*
		 * A hole whose event line never came (of a kind this version does
		 * not read): counted all the same, alone where it was; the trailer
		 * again after it.
		 */
		hmap_del(&r->lost, k1, k2);
		build_lost(r, k1, k2, pl->ts, pl);
		free(pl);
		r->again = true;
		return 1;
	}

	getn(o, "last_ts", &ts);
	st = rec_init(r, sizeof(*st), CORO_REC_STATS, 0, 0, ts);
	/* The capture's own counters; the model counts its anomalies again. */
	for_each_counter(c) {
		u64 *slot = counter_stat(c, st->bpf, st->user);
		char key[64];

		if (!slot || (c->flags & CF_NOT_READ_BACK))
			continue;
		snprintf(key, sizeof(key), "%s.%s", counter_group_json[c->group], c->json);
		getn(o, key, slot);
	}
	/* The end record follows the stats, on the next call. */
	memset(&r->end, 0, sizeof(r->end));
	r->end.hdr.size = sizeof(r->end);
	r->end.hdr.kind = CORO_REC_END;
	r->end.hdr.ts = ts;
	for (u32 k = CORO_END_TARGETS_EXITED; why && k <= CORO_END_ERROR; k++)
		if (!strcmp(why, coro_end_reason_name(k)))
			r->end.reason = k;
	r->trailer_done = true;
	return 1;
}

static int build(struct jsonl_reader *r)
{
	const struct jobj *o = r->o;
	const char *type = gets_(o, "type");
	u64 pid = 0, tid = 0, ts = 0, v;

	if (!type)
		return fail(r, "record without a type");
	getn(o, "pid", &pid);
	getn(o, "tid", &tid);
	getn(o, "ts", &ts);
	if (!strcmp(type, "event")) {
		const char *ev = gets_(o, "ev");

		if (!ev)
			return fail(r, "event without ev");
		return build_event(r, ev, pid, tid, ts);
	}
	if (!strcmp(type, "lost")) {
		const struct jv *id = get(o, "id"), *alone = get(o, "alone");
		struct pending_lost *pl;

		if (!getn(o, "count", &v))
			return fail(r, "lost without count");
		pl = hmap_get(&r->lost, pid, tid);
		if (!pl) {
			pl = xcalloc(1, sizeof(*pl));
			hmap_put(&r->lost, pid, tid, pl);
		}
		/* Several holes before one event add up; the last says what runs after them. */
		pl->ts = ts;
		pl->count += v ? v : 1;
		pl->has_id = id != NULL;
		pl->id_known = getid(o, "id", &pl->id);
		if (alone && alone->type == JV_BOOL && alone->b) {
			/* Before a record of no line (a sample): the hole stands at ts. */
			hmap_del(&r->lost, pid, tid);
			build_lost(r, pid, tid, ts, pl);
			free(pl);
			return 1;
		}
		return 0;
	}
	if (!strcmp(type, "trailer"))
		return build_trailer(r, ts);
	/* The records of a kind of their own, by its name. */
	switch (record_kind_by_name(type)) {
	case CORO_REC_PROCESS: {
		const char *exe = gets_(o, "exe") ? gets_(o, "exe") : "";
		size_t n = strlen(exe) + 1, size = ROUND_UP(sizeof(struct coro_rec_process) + n, 8);
		struct coro_rec_process *p;
		const char *mode = gets_(o, "mode");

		if (size > sizeof(r->rec.buf))
			return fail(r, "process record too large");
		p = rec_init(r, size, CORO_REC_PROCESS, pid, pid, ts);
		copy_str(p->comm, sizeof(p->comm), gets_(o, "comm"));
		memcpy(p->exe, exe, n);
		p->mode = !mode			     ? CORO_PROC_ATTACHED
			  : !strcmp(mode, "launched") ? CORO_PROC_LAUNCHED
			  : !strcmp(mode, "forked")   ? CORO_PROC_FORKED
						      : CORO_PROC_ATTACHED;
		if (getn(o, "ppid", &v))
			p->ppid = (u32)v;
		if (p->mode == CORO_PROC_ATTACHED && getn(o, "traced_from", &v))
			p->hdr.cur = v; /* records.h */
		return 1;
	}
	case CORO_REC_THREAD: {
		struct coro_rec_thread *t = rec_init(r, sizeof(*t), CORO_REC_THREAD, pid, tid, ts);

		copy_str(t->comm, sizeof(t->comm), gets_(o, "comm"));
		return 1;
	}
	case CORO_REC_OBJECT: {
		const char *path = gets_(o, "path") ? gets_(o, "path") : "";
		size_t n = strlen(path) + 1, size = ROUND_UP(sizeof(struct coro_rec_object) + n, 8);
		struct coro_rec_object *ob;
		const struct jv *late = get(o, "late");

		if (size > sizeof(r->rec.buf))
			return fail(r, "object record too large");
		ob = rec_init(r, size, CORO_REC_OBJECT, pid, pid, ts);
		memcpy(ob->path, path, n);
		if (getn(o, "probes", &v))
			ob->probes = (u32)v;
		ob->late = late && late->type == JV_BOOL && late->b;
		return 1;
	}
	case CORO_REC_SWITCH: {
		const char *obj = gets_(o, "object") ? gets_(o, "object") : "",
			   *sites = gets_(o, "sites") ? gets_(o, "sites") : "",
			   *limits = gets_(o, "limits") ? gets_(o, "limits") : "";
		size_t lo = strlen(obj) + 1, ls = strlen(sites) + 1, ll = strlen(limits) + 1;
		size_t size = ROUND_UP(sizeof(struct coro_rec_switch) + lo + ls + ll, 8);
		struct coro_rec_switch *sw;
		const char *fam = gets_(o, "family");

		if (size > sizeof(r->rec.buf))
			return fail(r, "switch_path record too large");
		sw = rec_init(r, size, CORO_REC_SWITCH, pid, pid, ts);
		sw->family = fam ? coro_family_parse(fam) : 0;
		if (!sw->family)
			return fail(r, "switch_path with an unknown family");
		if (getn(o, "uprobes", &v))
			sw->sites = (u32)v;
		if (getn(o, "single_stepped", &v))
			sw->stepped = (u32)v;
		memcpy(sw->text, obj, lo);
		memcpy(sw->text + lo, sites, ls);
		memcpy(sw->text + lo + ls, limits, ll);
		return 1;
	}
	case CORO_EV_EXEC: {
		struct coro_ev_proc *e = rec_init(r, sizeof(*e), CORO_EV_EXEC, pid, pid, ts);

		e->hdr.flags = CORO_EVF_CUR_UNKNOWN | CORO_EVF_NO_THREAD;
		copy_str(e->comm, sizeof(e->comm), gets_(o, "comm"));
		return 1;
	}
	case CORO_REC_PROC_EXIT: {
		struct coro_rec_proc_exit *e = rec_init(r, sizeof(*e), CORO_REC_PROC_EXIT, pid, pid, ts);

		if (getn(o, "exit_code", &v))
			e->status = (s32)((v & 0xff) << 8);
		else if (getn(o, "signal", &v))
			e->status = (s32)(v & 0x7f);
		else
			e->status = -1;
		return 1;
	}
	default:
		/* header again, coroutine, finding, stack records: derived, computed anew */
		return 0;
	}
}


int jsonl_reader_next(struct jsonl_reader *r, const struct coro_event_hdr **rec)
{
	const char *line, *perr;
	size_t len;
	int ret;

	if (r->err[0])
		return -1;
	if (r->trailer_done && !r->end_sent) {
		r->end_sent = true;
		if (r->end.reason) {
			*rec = &r->end.hdr;
			return 1;
		}
	}
	for (;;) {
		if (r->again) {
			r->again = false;
			if (parse_line(r->o, r->line, strlen(r->line), &perr))
				return fail(r, "malformed JSON: %s", perr);
			goto build;
		}
		line = read_line(r, &len);
		if (!line) {
			if (r->cap >= LINE_MAX_BYTES)
				return fail(r, "a line longer than %d bytes", LINE_MAX_BYTES);
			if (!r->trailer_done)
				return fail(r, "the file ends without its trailer: the run that wrote it "
					       "was interrupted; everything before is used");
			return 0;
		}
		r->lineno++;
		if (r->trailer_done)
			return fail(r, "records after the trailer");
		if (parse_line(r->o, line, len, &perr))
			return fail(r, "malformed JSON: %s", perr);
build:
		ret = build(r);
		if (ret < 0)
			return -1;
		if (ret) {
			*rec = &r->rec.hdr;
			return 1;
		}
	}
}

const char *jsonl_reader_error(const struct jsonl_reader *r)
{
	return r->err;
}

void jsonl_reader_close(struct jsonl_reader *r)
{
	size_t it = 0;
	void *pl;

	if (!r)
		return;
	if (r->gz)
		gzclose(r->gz);
	while (hmap_next(&r->lost, &it, NULL, NULL, &pl))
		free(pl);
	hmap_free(&r->lost);
	free(r->line);
	free(r->o);
	free(r);
}

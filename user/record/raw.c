// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <zlib.h>
#include "kinds.h"
#include "log.h"
#include "raw.h"

#ifndef COROBPF_VERSION
#define COROBPF_VERSION "dev"
#endif

void capture_info_init_live(struct capture_info *ci, const u32 *pids, u32 npids)
{
	struct utsname u;

	memset(ci, 0, sizeof(*ci));
	ci->version = RAW_FORMAT_VERSION;
	ci->abi_version = CORO_EVENT_ABI_VERSION;
	ci->clock_id = CLOCK_BOOTTIME;
	ci->start_ts = now_boottime_ns();
	ci->realtime_offset = realtime_minus_boottime_ns();
	snprintf(ci->tool_version, sizeof(ci->tool_version), "%s", COROBPF_VERSION);
	if (uname(&u) == 0) {
		/* utsname fields are 65 bytes; ours keep 63 characters. */
		memcpy(ci->kernel, u.release, sizeof(ci->kernel) - 1);
		memcpy(ci->hostname, u.nodename, sizeof(ci->hostname) - 1);
	}
	ci->npids = npids;
	ci->pids = xcalloc(npids ? npids : 1, sizeof(u32));
	if (npids)
		memcpy(ci->pids, pids, npids * sizeof(u32));
}

void capture_info_free(struct capture_info *ci)
{
	free(ci->pids);
	ci->pids = NULL;
}

/* ---- writer ---- */

#define RAW_BLOCK_TARGET (256u << 10)

struct raw_writer {
	int fd;
	char *block; /* block header space, then records */
	size_t len;  /* bytes of records in the block */
	u32 nrecords;
	int err;
	off_t whole; /* file length after the last block written in full */
};

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t k = write(fd, c, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += k;
		n -= k;
	}
	return 0;
}

struct raw_writer *raw_writer_open(int fd, const struct capture_info *ci, char *err,
				   size_t errlen)
{
	size_t hsize = sizeof(struct raw_file_header) + ci->npids * sizeof(u32);
	struct raw_file_header *h = xcalloc(1, hsize);
	struct raw_writer *w;
	int ret;

	memcpy(h->magic, RAW_MAGIC, 8);
	h->version = RAW_FORMAT_VERSION;
	h->header_size = hsize;
	h->abi_version = CORO_EVENT_ABI_VERSION;
	h->clock_id = ci->clock_id;
	h->start_ts = ci->start_ts;
	h->realtime_offset = ci->realtime_offset;
	memcpy(h->tool_version, ci->tool_version, sizeof(h->tool_version));
	memcpy(h->kernel, ci->kernel, sizeof(h->kernel));
	memcpy(h->hostname, ci->hostname, sizeof(h->hostname));
	h->flags = ci->flags;
	h->npids = ci->npids;
	memcpy(h->pids, ci->pids, ci->npids * sizeof(u32));
	ret = write_all(fd, h, hsize);
	free(h);
	if (ret) {
		snprintf(err, errlen, "cannot write the raw capture header: %s", strerror(-ret));
		return NULL;
	}
	w = xcalloc(1, sizeof(*w));
	w->fd = fd;
	w->block = xmalloc(sizeof(struct raw_block_header) + RAW_BLOCK_TARGET);
	w->whole = (off_t)hsize;
	return w;
}

int raw_writer_flush(struct raw_writer *w)
{
	struct raw_block_header *bh = (struct raw_block_header *)w->block;
	int ret;

	if (w->err) {
		/* Writing stopped at the first error; what came before stays readable. */
		w->len = 0;
		w->nrecords = 0;
		return -w->err;
	}
	if (!w->len)
		return 0;
	bh->magic = RAW_BLOCK_MAGIC;
	bh->len = w->len;
	bh->nrecords = w->nrecords;
	bh->crc32 = crc32_buf(0, bh + 1, w->len);
	ret = write_all(w->fd, w->block, sizeof(*bh) + w->len);
	if (ret) {
		w->err = -ret;
		/*
		 * A disk that filled up mid-block: cut the piece off, so the file
		 * ends at a block boundary (a pipe cannot be cut; the reader copes).
		 */
		if (ftruncate(w->fd, w->whole) == 0)
			lseek(w->fd, w->whole, SEEK_SET);
	} else {
		w->whole += (off_t)(sizeof(*bh) + w->len);
	}
	w->len = 0;
	w->nrecords = 0;
	return ret;
}

void raw_writer_append(struct raw_writer *w, const struct coro_event_hdr *rec)
{
	if (w->err)
		return;
	if (w->len + rec->size > RAW_BLOCK_TARGET && raw_writer_flush(w) < 0)
		return;
	memcpy(w->block + sizeof(struct raw_block_header) + w->len, rec, rec->size);
	w->len += rec->size;
	w->nrecords++;
}

int raw_writer_close(struct raw_writer *w)
{
	int ret;

	if (!w)
		return 0;
	raw_writer_flush(w);
	ret = w->err ? -w->err : 0;
	free(w->block);
	free(w);
	return ret;
}

/* ---- reader ---- */

struct raw_reader {
	FILE *f;
	char *block;
	size_t block_len, pos;
	u64 block_off; /* file offset of the current block's header */
	u64 records;
	bool saw_end;
	char errbuf[256];
};

struct raw_reader *raw_reader_open(const char *path, struct capture_info *ci, char *err,
				   size_t errlen)
{
	struct raw_file_header h;
	struct raw_reader *r;
	int fd = input_open(path, err, errlen); /* a regular file, or a clear error */
	FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;

	memset(ci, 0, sizeof(*ci));
	if (!f) {
		if (fd >= 0) {
			snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
			close(fd);
		}
		return NULL;
	}
	if (fread(&h, 1, sizeof(h), f) != sizeof(h) || memcmp(h.magic, RAW_MAGIC, 8) != 0) {
		snprintf(err, errlen, "%s is not a corobpf raw capture (no header; expected a "
			 "file written by corobpf --raw)", path);
		goto fail;
	}
	if (h.version != RAW_FORMAT_VERSION || h.abi_version != CORO_EVENT_ABI_VERSION) {
		snprintf(err, errlen, "%s is raw format version %u (event ABI %u); this corobpf "
			 "reads version %u (ABI %u): use the corobpf that wrote it", path,
			 h.version, h.abi_version, RAW_FORMAT_VERSION, CORO_EVENT_ABI_VERSION);
		goto fail;
	}
	if (h.npids > RAW_MAX_PIDS ||
	    h.header_size != sizeof(h) + (size_t)h.npids * sizeof(u32)) {
		snprintf(err, errlen, "%s: corrupt header (size %u for %u pids)", path,
			 h.header_size, h.npids);
		goto fail;
	}
	ci->version = h.version;
	ci->abi_version = h.abi_version;
	ci->clock_id = h.clock_id;
	ci->flags = h.flags;
	ci->start_ts = h.start_ts;
	ci->realtime_offset = h.realtime_offset;
	memcpy(ci->tool_version, h.tool_version, sizeof(ci->tool_version));
	memcpy(ci->kernel, h.kernel, sizeof(ci->kernel));
	memcpy(ci->hostname, h.hostname, sizeof(ci->hostname));
	ci->tool_version[sizeof(ci->tool_version) - 1] = 0;
	ci->kernel[sizeof(ci->kernel) - 1] = 0;
	ci->hostname[sizeof(ci->hostname) - 1] = 0;
	ci->npids = h.npids;
	ci->pids = xcalloc(h.npids ? h.npids : 1, sizeof(u32));
	if (h.npids && fread(ci->pids, sizeof(u32), h.npids, f) != h.npids) {
		snprintf(err, errlen, "%s: header cut short", path);
		capture_info_free(ci);
		goto fail;
	}
	r = xcalloc(1, sizeof(*r));
	r->f = f;
	r->block = xmalloc(RAW_MAX_BLOCK);
	r->block_off = h.header_size;
	return r;
fail:
	fclose(f);
	return NULL;
}

static int reader_fail(struct raw_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int reader_fail(struct raw_reader *r, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(r->errbuf, sizeof(r->errbuf), "at byte %llu (after %llu records): ",
			 (unsigned long long)r->block_off, (unsigned long long)r->records);

	va_start(ap, fmt);
	vsnprintf(r->errbuf + n, sizeof(r->errbuf) - n, fmt, ap);
	va_end(ap);
	return -1;
}

static int reader_load_block(struct raw_reader *r)
{
	struct raw_block_header bh;
	size_t n;

	if (r->block_len)
		r->block_off += sizeof(bh) + r->block_len;
	r->block_len = r->pos = 0;
	n = fread(&bh, 1, sizeof(bh), r->f);
	if (n == 0 && feof(r->f)) {
		if (!r->saw_end)
			return reader_fail(r, "the capture ends without its end record: corobpf "
					      "was killed or ran out of disk; everything before is "
					      "intact");
		return 0;
	}
	if (n != sizeof(bh))
		return reader_fail(r, "truncated block header: the capture was cut short");
	if (bh.magic != RAW_BLOCK_MAGIC)
		return reader_fail(r, "corrupt block (bad magic 0x%08x)", bh.magic);
	if (bh.len == 0 || bh.len > RAW_MAX_BLOCK || bh.len % 8)
		return reader_fail(r, "corrupt block (length %u)", bh.len);
	if (r->saw_end)
		return reader_fail(r, "data after the end record");
	n = fread(r->block, 1, bh.len, r->f);
	if (n != bh.len)
		return reader_fail(r, "truncated block (%zu of %u bytes): the capture was cut "
				      "short", n, bh.len);
	if (crc32_buf(0, r->block, bh.len) != bh.crc32)
		return reader_fail(r, "corrupt block (checksum mismatch)");
	r->block_len = bh.len;
	return 1;
}

int raw_reader_next(struct raw_reader *r, const struct coro_event_hdr **rec)
{
	const struct coro_event_hdr *h;
	const char *why;

	if (r->errbuf[0])
		return -1;
	while (r->pos >= r->block_len) {
		int ret = reader_load_block(r);

		if (ret <= 0)
			return ret;
	}
	h = (const struct coro_event_hdr *)(r->block + r->pos);
	if (!coro_record_valid(h, r->block_len - r->pos, &why))
		return reader_fail(r, "corrupt record at offset %zu of the block: %s", r->pos,
				   why);
	if (r->saw_end)
		return reader_fail(r, "records after the end record");
	if (h->kind == CORO_REC_END)
		r->saw_end = true;
	r->pos += h->size;
	r->records++;
	*rec = h;
	return 1;
}

const char *raw_reader_error(const struct raw_reader *r)
{
	return r->errbuf;
}

u64 raw_reader_records(const struct raw_reader *r)
{
	return r->records;
}

bool raw_reader_saw_end(const struct raw_reader *r)
{
	return r->saw_end;
}

void raw_reader_close(struct raw_reader *r)
{
	if (!r)
		return;
	fclose(r->f);
	free(r->block);
	free(r);
}

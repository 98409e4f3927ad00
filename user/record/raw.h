/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The raw capture: the boundary between collecting and understanding.
 *
 * A file is a header (struct raw_file_header, then `npids` u32 pids) and a
 * sequence of blocks. A block is a struct raw_block_header and `len` bytes
 * of records, protected by a CRC-32 of those bytes. Records are exactly what
 * the ring buffer delivered (bpf/coro_abi.h) plus the user-space records
 * (records.h), which share the same header.
 *
 * Because a block is written whole or not at all, a capture cut short (the
 * tracer killed, the disk full) reads back up to its last complete block;
 * a clean capture ends with a CORO_REC_END record.
 *
 * All integers are little-endian (the capture's machine; only x86-64 and
 * arm64 hosts are supported).
 */
#ifndef COROBPF_RAW_H
#define COROBPF_RAW_H

#include <stdio.h>
#include "capture_info.h"
#include "records.h"
#include "util.h"

#define RAW_MAGIC "COROBPF\x1a"
#define RAW_FORMAT_VERSION 1
#define RAW_BLOCK_MAGIC 0x4b4c4243u /* "CBLK" */
#define RAW_MAX_BLOCK (4u << 20)
#define RAW_MAX_PIDS 4096

struct raw_file_header {
	char magic[8];	    /* RAW_MAGIC */
	u32 version;	    /* RAW_FORMAT_VERSION */
	u32 header_size;    /* this struct plus the pid array */
	u32 abi_version;    /* CORO_EVENT_ABI_VERSION of the records */
	u32 clock_id;	    /* CLOCK_BOOTTIME */
	u64 start_ts;	    /* clock_id ns when the capture started */
	s64 realtime_offset; /* CLOCK_REALTIME - clock_id, ns, at start */
	char tool_version[32];
	char kernel[64];   /* uname -r */
	char hostname[64];
	u32 flags;
	u32 npids;
	u32 pids[]; /* the processes named at start (-p, or the launched one) */
};

struct raw_block_header {
	u32 magic; /* RAW_BLOCK_MAGIC */
	u32 len;   /* bytes of records that follow */
	u32 nrecords;
	u32 crc32; /* zlib crc32 of the record bytes */
};

/* A live capture's header: now, on this machine, for the processes named at the start. */
void capture_info_init_live(struct capture_info *ci, const u32 *pids, u32 npids);
void capture_info_free(struct capture_info *ci);

/* ---- writer ---- */
struct raw_writer;

struct raw_writer *raw_writer_open(int fd, const struct capture_info *ci, char *err,
				   size_t errlen);
void raw_writer_append(struct raw_writer *w, const struct coro_event_hdr *rec);
int raw_writer_flush(struct raw_writer *w); /* write out the current block */
int raw_writer_close(struct raw_writer *w); /* flush; free; 0 or -errno */

/* ---- reader ---- */
struct raw_reader;

struct raw_reader *raw_reader_open(const char *path, struct capture_info *ci, char *err,
				   size_t errlen);
/*
 * Next record: 1 and *rec (valid until the next call), 0 at a clean end,
 * or -1 with raw_reader_error() saying what is wrong and where.
 */
int raw_reader_next(struct raw_reader *r, const struct coro_event_hdr **rec);
const char *raw_reader_error(const struct raw_reader *r);
u64 raw_reader_records(const struct raw_reader *r);
bool raw_reader_saw_end(const struct raw_reader *r);
void raw_reader_close(struct raw_reader *r);

#endif

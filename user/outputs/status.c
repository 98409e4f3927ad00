// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The status line while recording. See status.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "log.h"
#include "status.h"

#define STATUS_EVERY_NS 1000000000ULL

struct status {
	const struct model *m;
	u64 start, next;
	u64 last_ts, last_events; /* at the previous redraw, for the rate */
	u64 rate;
};

struct status *status_new(const struct model *live)
{
	struct status *s;

	if (log_level < LOG_INFO || !isatty(STDERR_FILENO))
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->m = live;
	s->start = s->last_ts = now_boottime_ns();
	s->next = s->start + STATUS_EVERY_NS;
	return s;
}

/* 1234567 as "1,234,567". */
static const char *grouped(char *buf, size_t len, u64 v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v), o = 0;

	for (int i = 0; i < n && o + 2 < (int)len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = 0;
	return buf;
}

static const char *human_bytes(char *buf, size_t len, u64 b)
{
	if (b < 1024)
		snprintf(buf, len, "%llu B", (unsigned long long)b);
	else if (b < (1ULL << 20))
		snprintf(buf, len, "%.1f KiB", b / 1024.0);
	else if (b < (1ULL << 30))
		snprintf(buf, len, "%.1f MiB", b / 1048576.0);
	else
		snprintf(buf, len, "%.2f GiB", b / 1073741824.0);
	return buf;
}

void status_tick(struct status *s, u64 bytes_written)
{
	char line[256], ev[32], rate[32], lost[32], live[32], bytes[32];
	u64 now;
	int n;

	if (!s)
		return;
	now = now_boottime_ns();
	if (now < s->next)
		return;
	s->next = now + STATUS_EVERY_NS;
	s->rate = (s->m->events - s->last_events) * 1000000000ULL / (now - s->last_ts);
	s->last_events = s->m->events;
	s->last_ts = now;
	/* \r and erase to the end of the line: drawn over itself, never scrolling. */
	n = snprintf(line, sizeof(line),
		     "\r\033[Kcorobpf: %llu s  %s events  %s/s  %s lost  %s live  written %s",
		     (unsigned long long)((now - s->start) / 1000000000ULL),
		     grouped(ev, sizeof(ev), s->m->events), grouped(rate, sizeof(rate), s->rate),
		     grouped(lost, sizeof(lost), model_bpf_stat(s->m, CORO_STAT_RING_FULL)),
		     grouped(live, sizeof(live), s->m->live),
		     human_bytes(bytes, sizeof(bytes), bytes_written));
	if (n >= (int)sizeof(line))
		n = sizeof(line) - 1;
	/* One write, as log_msg() does, and after it a message must erase us first. */
	log_write_all(line, (size_t)n);
	__atomic_store_n(&log_status_shown, true, __ATOMIC_RELAXED);
}

void status_end(struct status *s)
{
	if (!s)
		return;
	if (__atomic_exchange_n(&log_status_shown, false, __ATOMIC_RELAXED))
		log_write_all("\r\033[K", sizeof("\r\033[K") - 1);
	free(s);
}

u64 status_file_bytes(int fd)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) ? (u64)st.st_size : 0;
}

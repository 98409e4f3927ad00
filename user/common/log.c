// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "termsafe.h"

int log_level = LOG_INFO;
bool log_status_shown;

void log_msg(const char *prefix, const char *fmt, ...)
{
	char msg[2048], buf[TERM_SAFE_MAX(sizeof(msg)) + 64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/*
	 * Messages quote what traced programs named: their comm, object paths,
	 * probe names. Escaped here, so no caller can forget it on one message.
	 */
	/* Over the status line, erased in the same write: the two never share a line. */
	n = snprintf(buf, sizeof(buf), "%scorobpf: %s",
		     __atomic_exchange_n(&log_status_shown, false, __ATOMIC_RELAXED) ? "\r\033[K" : "",
		     prefix);
	term_safe(buf + n, sizeof(buf) - n - 1, msg, sizeof(msg));
	n = strlen(buf);
	/*
	 * One write per message, so lines from the target and from us do not
	 * interleave; write(2), not stdio: messages come from the reader and the
	 * model thread, and the flight recorder forks from the latter.
	 */
	buf[n++] = '\n';
	log_write_all(buf, (size_t)n);
}

void log_write_all(const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(STDERR_FILENO, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		n -= (size_t)w;
	}
}

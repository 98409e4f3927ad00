// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "log.h"

int log_level = LOG_INFO;

void log_msg(const char *prefix, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	int n;

	/* One write per message, so lines from the target and from us do not interleave. */
	n = snprintf(buf, sizeof(buf), "corobpf: %s", prefix);
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	n = strlen(buf);
	buf[n++] = '\n';
	fwrite(buf, 1, n, stderr);
	fflush(stderr);
}

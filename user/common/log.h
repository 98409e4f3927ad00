/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Messages go to stderr, prefixed "corobpf:". Errors always print; -q
 * silences info, -v shows verbose, -vv debug (and libbpf's own log).
 * A message is passed through term_safe() (termsafe.h) whole: pass names and
 * paths as they are, not escaped already, and put no newline in one.
 */
#ifndef COROBPF_LOG_H
#define COROBPF_LOG_H

#include <stdbool.h>
#include <stdio.h>

enum log_level { LOG_QUIET = -1, LOG_INFO = 0, LOG_VERBOSE = 1, LOG_DEBUG = 2 };

extern int log_level;
/*
 * A status line (status.h) is drawn on stderr's last line, without its
 * newline: the next message erases it first, and it is drawn again later.
 */
extern bool log_status_shown; /* read and written with __atomic builtins (two threads) */

/* n bytes on stderr, by write(2) (no stdio lock): a message, or the status line. */
void log_write_all(const char *buf, size_t n);

void log_msg(const char *prefix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg("error: ", __VA_ARGS__)
#define log_warn(...) log_msg("warning: ", __VA_ARGS__)
#define log_info(...)                                                                        \
	do {                                                                                 \
		if (log_level >= LOG_INFO)                                                   \
			log_msg("", __VA_ARGS__);                                            \
	} while (0)
#define log_verbose(...)                                                                     \
	do {                                                                                 \
		if (log_level >= LOG_VERBOSE)                                                \
			log_msg("", __VA_ARGS__);                                            \
	} while (0)
#define log_debug(...)                                                                       \
	do {                                                                                 \
		if (log_level >= LOG_DEBUG)                                                  \
			log_msg("debug: ", __VA_ARGS__);                                     \
	} while (0)

#endif

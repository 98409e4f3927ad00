// SPDX-License-Identifier: MIT
/*
 * libFuzzer targets for the two readers of untrusted files, each followed
 * by the whole replay pipeline (ctxmap, model, detectors, summary, JSONL,
 * Perfetto and SQLite writers), as `corobpf report` runs it:
 *
 *     fuzz_raw     a raw capture (raw_reader)
 *     fuzz_jsonl   a JSONL trace (jsonl_reader)
 *
 * Built by `make fuzz` with clang -fsanitize=fuzzer,address,undefined; the
 * target is chosen with -DFUZZ_JSONL. The input is handed to the reader
 * through a memfd, so the reader's own file handling is what runs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "analyze.h"
#include "jsonl_read.h"
#include "log.h"
#include "output.h"
#include "pipeline.h"
#include "raw.h"
#include "summary.h"

static int memfd = -1;
static char input_path[64];
static char out_dir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_level = LOG_QUIET;
	memfd = memfd_create("corobpf-fuzz", 0);
	if (memfd < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(input_path, sizeof(input_path), "/proc/self/fd/%d", memfd);
	snprintf(out_dir, sizeof(out_dir), "/dev/shm/corobpf-fuzz-%d", (int)getpid());
	if (mkdir(out_dir, 0700) && errno != EEXIST) {
		perror(out_dir);
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[3] = { "o.jsonl", "o.pftrace", "o.db" };
	struct capture_info ci;
	struct pipeline p;
	struct analyze_opts ao;
	struct model_observer obs;
	struct finding_sink fs;
	struct summary sum;
	struct output outs[3];
	const struct coro_event_hdr *rec;
	char err[512], path[128];
	int nouts = 0, ret;
	FILE *devnull;
#ifdef FUZZ_JSONL
	struct jsonl_reader *r;
#else
	struct raw_reader *r;
#endif

	if (ftruncate(memfd, 0) || pwrite(memfd, data, size, 0) != (ssize_t)size)
		abort();
#ifdef FUZZ_JSONL
	r = jsonl_reader_open(input_path, &ci, err, sizeof(err));
#else
	r = raw_reader_open(input_path, &ci, err, sizeof(err));
#endif
	if (!r)
		return 0;
	devnull = fopen("/dev/null", "w");
	analyze_opts_default(&ao);
	pipeline_init(&p, &ci, &ao);
	for (int i = 0; i < 3; i++) {
		/* SQLite costs the most per run (a database made each time): one input in eight. */
		if (i == 2 && (size & 7))
			continue;
		snprintf(path, sizeof(path), "%s/%s", out_dir, names[i]);
		if (output_open(&outs[nouts], path, OUT_AUTO, true, NULL, err, sizeof(err)))
			continue;
		outs[nouts].max_tracks = 4; /* packed lanes are exercised too */
		if (pipeline_add_output(&p, &outs[nouts], err, sizeof(err))) {
			output_abort(&outs[nouts]);
			continue;
		}
		nouts++;
	}
	summary_init(&sum, devnull, &obs, &fs);
	pipeline_add_observer(&p, &obs, &fs);
	pipeline_begin(&p);
#ifdef FUZZ_JSONL
	while ((ret = jsonl_reader_next(r, &rec)) == 1)
		pipeline_feed(&p, rec);
	if (ret < 0)
		p.model.input_error = jsonl_reader_error(r);
#else
	while ((ret = raw_reader_next(r, &rec)) == 1)
		pipeline_feed(&p, rec);
	if (ret < 0)
		p.model.input_error = raw_reader_error(r);
#endif
	pipeline_finish(&p);
	for (int i = 0; i < nouts; i++)
		output_close(&outs[i], err, sizeof(err));
	pipeline_free(&p);
#ifdef FUZZ_JSONL
	jsonl_reader_close(r);
#else
	raw_reader_close(r);
#endif
	capture_info_free(&ci);
	fclose(devnull);
	return 0;
}

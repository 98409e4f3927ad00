/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The flight recorder (--flight SECS): the last SECS of a live capture kept
 * in memory as raw records, written out as every -o output on demand.
 *
 * Records are kept in arrival order in a queue of 1 MiB chunks (reused, so
 * memory stays flat), bounded by SECS of timestamps and by --flight-mb
 * bytes, whichever is reached first. A record that falls off the tail is
 * fed to a second pipeline of its own, the tail pipeline (the detectors,
 * no outputs): its model is always the state of the capture at the start
 * of the window the queue holds, exactly, because it has seen every record
 * before it in the order the live pipeline saw them.
 *
 * A dump is asked for by SIGUSR1 or, with --dump-on KIND[,KIND], by a
 * finding of those kinds made by the live pipeline's detectors (the
 * finding sink flight_new() adds to it). The window ends where it was asked
 * for: the signal's arrival, or the timestamp of the record whose
 * application made the finding. The dump itself runs in a forked child: the
 * fork is the copy of the tail model and the queue (copy on write, so the
 * capture goes on at once, ring buffer read, while the child writes). The
 * child feeds the records before the window's start to the tail pipeline,
 * attaches the outputs, announces to them the processes and threads the
 * model knows (as their records did) and every live coroutine in its state
 * as of the window's start (that state's interval clipped to start there,
 * the coroutine's counters from there), feeds the window, ends the
 * model, and commits FILE with ".N" before its extension (trace.1.pftrace,
 * t.1.jsonl.gz). Its counters are the window's: the loss counters are the
 * difference between the last stats record and the one before the window.
 * A file of the dump that cannot be written is said and the others are
 * written all the same; the child tells the parent which are in place
 * (a page they share), so the log and flight_finish() name each as written
 * or not.
 *
 * De-duplication: a finding fires once (the detectors make each finding
 * once; an identical one, same kind, process, coroutine and start, is
 * ignored again). Requests made while a dump is pending or being written
 * coalesce into the next dump, which names them all: a burst of findings is
 * one dump, and dumps never pile up faster than they are written.
 *
 * Limits: a window the byte bound cut short says so (flight_finish() and
 * the log); spans open at the window's start are not in the dump (their
 * ends are dropped by the outputs as for a coroutine attached mid-life),
 * nor are the object and switch-path records of attaches before it;
 * records straggling in the 50 ms reorder window at its start may begin it
 * up to 50 ms early.
 */
#ifndef COROBPF_FLIGHT_H
#define COROBPF_FLIGHT_H

#include "options.h"
#include "pipeline.h"
#include "recsink.h"

#define FLIGHT_DEFAULT_MB 64

struct flight;

/*
 * live: the pipeline the capture feeds (its detectors fire --dump-on);
 * ci: the capture's info (both pipelines share it). Before pipeline_begin(live).
 */
struct flight *flight_new(const struct common_opts *c, const struct trace_opts *t,
			  struct capture_info *ci, struct pipeline *live);
/*
 * Every -o output's first dump file can be created (the format known, the
 * directory writable, FILE.1 absent unless --force): 0 or EXIT_OUTPUT, said.
 */
int flight_check_outputs(const struct common_opts *c);
/* FILE with ".N" before its extension (".jsonl.gz" counts as one), malloc'd. */
char *flight_dump_name(const char *path, unsigned n);
/* SIGUSR1 asks for a dump from now on (the child of a dump ignores it). */
void flight_install_signal(void);
/* A sink that feeds `inner` and then keeps the record (copied by value). */
struct record_sink flight_sink(struct flight *f, struct record_sink inner);
/* From the capture's loop: start a dump that is due, reap the ones done. */
void flight_tick(struct flight *f);
/* Bytes of the dumps written so far (for the status line). */
u64 flight_bytes_written(const struct flight *f);
/*
 * After the capture: a dump still asked for is written, every child waited
 * for, the dumps named. 0 or EXIT_OUTPUT (a dump failed).
 */
int flight_finish(struct flight *f);
void flight_free(struct flight *f);

#endif

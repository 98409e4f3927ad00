// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The exec gate's account at the end of a run (gatestats.h).
 */
#include <string.h>
#include "gatestats.h"
#include "log.h"

void gatestats_say(const struct execgate_stats *st, u32 timeout_ms)
{
	log_verbose("exec gate: %llu execs answered, %llu held for %llu examinations (longest "
		    "hold %llu us), %llu let go unheld (too many waiting), %llu queue overflows",
		    (unsigned long long)st->events, (unsigned long long)st->held,
		    (unsigned long long)st->examined, (unsigned long long)st->max_wait_us,
		    (unsigned long long)st->not_held, (unsigned long long)st->overflow);
	if (st->poll_error)
		log_warn("exec gate: poll: %s; it stopped holding execs before the end",
			 strerror(st->poll_error));
	if (st->marked_later || st->mark_errors || st->answer_errors)
		log_verbose("exec gate: %llu filesystems mounted meanwhile marked, %llu could not be; "
			    "%llu answers refused by the kernel", (unsigned long long)st->marked_later,
			    (unsigned long long)st->mark_errors, (unsigned long long)st->answer_errors);
	if (st->timeouts)
		log_warn("exec gate: %llu exec%s ran after waiting %u ms, before corobpf had "
			 "examined %s program (corobpf was busy): %s first probes can be missed",
			 (unsigned long long)st->timeouts, st->timeouts == 1 ? "" : "s",
			 timeout_ms, st->timeouts == 1 ? "its" : "their",
			 st->timeouts == 1 ? "its" : "their");
	/* What the searches did not reach: attached when mapped, counted as late_attach. */
	if (st->searches_cut)
		log_warn("exec gate: %llu search%s of the libraries a program will map cut short "
			 "(the first: %s); libraries past the cut are attached when mapped, late",
			 (unsigned long long)st->searches_cut, st->searches_cut == 1 ? "" : "es",
			 st->first_cut);
	if (st->searches_refused)
		log_warn("exec gate: %llu search%s left directories not searched: on a filesystem "
			 "that may hang (the first: %s); libraries there are attached when mapped, "
			 "late", (unsigned long long)st->searches_refused,
			 st->searches_refused == 1 ? "" : "es", st->first_refused);
	if (st->replaced || st->unexamined)
		log_warn("exec gate: %llu examiner%s stuck past %s deadline, killed and replaced; "
			 "%llu later exec%s of %s user%s let go unexamined",
			 (unsigned long long)st->replaced, st->replaced == 1 ? "" : "s",
			 st->replaced == 1 ? "its" : "their", (unsigned long long)st->unexamined,
			 st->unexamined == 1 ? "" : "s", st->replaced == 1 ? "its" : "their",
			 st->replaced == 1 ? "" : "s");
	if (st->busy)
		log_warn("exec gate: %llu exec%s not held: corobpf took no examination for %u ms "
			 "(busy): %s first probes can be missed", (unsigned long long)st->busy,
			 st->busy == 1 ? "" : "s", timeout_ms,
			 st->busy == 1 ? "its" : "their");
	if (st->no_examiner)
		log_warn("exec gate: %llu exec%s held without a search of %s libraries (no examiner "
			 "process could be started): those are attached when mapped, late",
			 (unsigned long long)st->no_examiner, st->no_examiner == 1 ? "" : "s",
			 st->no_examiner == 1 ? "its" : "their");
	if (st->watchdog_answers)
		log_warn("exec gate: %llu exec%s let go by its watchdog while corobpf did not answer "
			 "(stopped, or its gate thread kept from running; %llu time%s): %s first "
			 "probes can be missed", (unsigned long long)st->watchdog_answers,
			 st->watchdog_answers == 1 ? "" : "s",
			 (unsigned long long)st->watchdog_takeovers,
			 st->watchdog_takeovers == 1 ? "" : "s",
			 st->watchdog_answers == 1 ? "its" : "their");
}

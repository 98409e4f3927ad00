/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Perfetto output (docs/perfetto.md): a native protobuf trace (a `Trace` of
 * `TracePacket`s with TrackDescriptors and TrackEvents), streamed in time
 * order from the model's callbacks. Memory is bounded by live coroutines,
 * threads and interned strings.
 */
#ifndef COROBPF_PERFETTO_H
#define COROBPF_PERFETTO_H

#include "finding.h"
#include "model.h"

/* Per process, coroutines beyond this many get packed lanes instead of a track each. */
#define PERFETTO_DEFAULT_MAX_TRACKS 1000

struct perfetto_sink;

/*
 * `m` is the model whose observer this becomes: the writer reads processes,
 * threads and coroutines from it. Adding `obs` to the model gives the
 * writer its priv[] slot.
 */
struct perfetto_sink *perfetto_sink_new(struct obuf *ob, struct model *m, u32 max_tracks,
				       struct model_observer *obs, struct finding_sink *fs);
int perfetto_sink_error(struct perfetto_sink *s); /* 0 or -errno */
void perfetto_sink_free(struct perfetto_sink *s);

#endif

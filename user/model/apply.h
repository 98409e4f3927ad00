/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * apply.h: what each record does to the model (model_apply(), model.h),
 * one function per decoded kind in one table (apply.c). A kind the record
 * table decodes (record/kinds.h) and the model has no function for is
 * counted as unknown; a new kind is a row of both.
 */
#ifndef COROBPF_APPLY_H
#define COROBPF_APPLY_H

#include "model.h"

/* Whether the model has a function for events of that kind. */
bool model_applies(enum event_kind kind);

#endif /* COROBPF_APPLY_H */

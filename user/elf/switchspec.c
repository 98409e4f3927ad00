// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --switch uprobe:PATH:SYMBOL[+OFFSET]:from=ARG,to=ARG (and :0xADDR:): the
 * spec parsed, before any file is read (see switchfam.h). Placing it in
 * the object is switchfam.c's (switchfam_plan_custom).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coro_abi.h"
#include "switchspec.h"
#include "util.h"
#include "x86dec.h"

static int parse_reg(const char *s)
{
	static const char *const args[6] = { "arg0", "arg1", "arg2", "arg3", "arg4", "arg5" };
	static const int argregs[6] = { X86_RDI, X86_RSI, X86_RDX, X86_RCX, X86_R8, X86_R9 };

	for (int i = 0; i < 6; i++)
		if (!strcmp(s, args[i]))
			return argregs[i];
	if (!strcmp(s, "sp"))
		return X86_RSP;
	if (!strcmp(s, "current"))
		return CORO_CTX_REG_NONE;
	for (int i = 0; i < X86_NREGS; i++)
		if (!strcmp(s, x86_reg_name(i)) || (s[0] == '%' && !strcmp(s + 1, x86_reg_name(i))))
			return i;
	return -1;
}

int switchfam_parse_custom(const char *spec, struct switch_custom *out, char *err, size_t errlen)
{
	char buf[4400], *p, *sym, *args, *tok, *save;
	bool have_from = false, have_to = false;

	memset(out, 0, sizeof(*out));
	if (strncmp(spec, "uprobe:", 7) || strlen(spec) >= sizeof(buf)) {
		errfmt(err, errlen,
		       "'%s': expected uprobe:PATH:SYMBOL[+OFFSET]:from=ARG,to=ARG or "
		       "uprobe:PATH:0xADDR:from=ARG,to=ARG",
		       spec);
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", spec + 7);
	/* PATH may not contain ':' here; SYMBOL and the arguments never do. */
	args = strrchr(buf, ':');
	if (!args || args == buf) {
		errfmt(err, errlen, "'%s': missing :from=ARG,to=ARG", spec);
		return -EINVAL;
	}
	*args++ = 0;
	sym = strrchr(buf, ':');
	if (!sym || sym == buf || !sym[1]) {
		errfmt(err, errlen, "'%s': expected uprobe:PATH:SYMBOL:from=ARG,to=ARG", spec);
		return -EINVAL;
	}
	*sym++ = 0;
	if (buf[0] != '/') {
		errfmt(err, errlen, "'%s': the path must be absolute", spec);
		return -EINVAL;
	}
	if (strlen(buf) >= sizeof(out->path)) {
		errfmt(err, errlen, "'%s': path too long", spec);
		return -EINVAL;
	}
	memcpy(out->path, buf, strlen(buf) + 1);
	p = strchr(sym, '+');
	if (p) {
		char *end;

		*p++ = 0;
		errno = 0;
		out->sym_offset = strtoull(p, &end, 0);
		if (errno || *end || end == p) {
			errfmt(err, errlen, "'%s': bad offset '%s'", spec, p);
			return -EINVAL;
		}
		out->has_offset = true;
	}
	if (!strncmp(sym, "0x", 2)) {
		/* No symbol starts with a digit: a plain address in the object. */
		char *end;

		errno = 0;
		out->address = strtoull(sym, &end, 16);
		if (errno || *end || end == sym + 2 || !out->address || out->has_offset) {
			errfmt(err, errlen, "'%s': bad address '%s' (0xADDR, no +OFFSET)", spec,
			       sym);
			return -EINVAL;
		}
		out->at_address = true;
	}
	snprintf(out->symbol, sizeof(out->symbol), "%s", sym);
	out->from_reg = out->to_reg = -1;
	for (tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		int r;

		if (!eq) {
			errfmt(err, errlen, "'%s': '%s' is not KEY=ARG", spec, tok);
			return -EINVAL;
		}
		*eq++ = 0;
		r = parse_reg(eq);
		if (r < 0) {
			errfmt(err, errlen, "'%s': '%s' is not arg0..arg5, sp, current or a register",
			       spec, eq);
			return -EINVAL;
		}
		if (!strcmp(tok, "from")) {
			out->from_reg = r;
			have_from = true;
		} else if (!strcmp(tok, "to") && r != CORO_CTX_REG_NONE) {
			out->to_reg = r;
			have_to = true;
		} else {
			errfmt(err, errlen, "'%s': unknown key '%s' (from=, to=)", spec, tok);
			return -EINVAL;
		}
	}
	if (!have_from || !have_to) {
		errfmt(err, errlen, "'%s': both from= and to= are needed", spec);
		return -EINVAL;
	}
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What a live capture needs of the kernel and of its privileges, asked first. See preflight.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "log.h"
#include "preflight.h"
#include "termsafe.h"
#include "util.h"

/* The kernel has uprobe_multi links (6.6): its BTF knows their type. */
bool kernel_has_uprobe_multi(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	bool yes;

	if (libbpf_get_error(btf))
		return false;
	yes = btf__find_by_name_kind(btf, "bpf_uprobe_multi_link", BTF_KIND_STRUCT) >= 0;
	btf__free(btf);
	return yes;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's messages (the verifier log among them) only when asked for. */
	if (level == LIBBPF_DEBUG && log_level < LOG_DEBUG)
		return 0;
	char msg[4096], safe[TERM_SAFE_MAX(sizeof(msg))];
	char *line, *save = NULL;
	int n;

	if (level != LIBBPF_DEBUG && log_level < LOG_VERBOSE)
		return 0;
	/* They quote probe names and argument strings from other users' files: escaped, by line. */
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	for (char *p = msg; *p; p++)
		if (*p == '\t')
			*p = ' ';
	/* Over the status line (log.h): erased first, as log_msg() does. */
	if (__atomic_exchange_n(&log_status_shown, false, __ATOMIC_RELAXED))
		fputs("\r\033[K", stderr);
	for (line = strtok_r(msg, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		fprintf(stderr, "%s\n", term_safe(safe, sizeof(safe), line, strlen(line)));
	return n;
}

static bool has_cap(const struct __user_cap_data_struct *d, int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

int capture_preflight(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {};
	int ret;

	libbpf_set_print(libbpf_print);
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		log_err("this kernel has no BTF (/sys/kernel/btf/vmlinux: %s): corobpf needs a "
			"kernel built with CONFIG_DEBUG_INFO_BTF=y (Linux 5.11 or later)",
			strerror(errno));
		return EXIT_KERNEL;
	}
	if (syscall(SYS_capget, &hdr, data) == 0 && !has_cap(data, CAP_SYS_ADMIN) &&
	    !(has_cap(data, CAP_BPF) && has_cap(data, CAP_PERFMON))) {
		log_err("corobpf needs root, or CAP_BPF and CAP_PERFMON (this process lacks %s%s%s): "
			"run it with sudo",
			has_cap(data, CAP_BPF) ? "" : "CAP_BPF",
			!has_cap(data, CAP_BPF) && !has_cap(data, CAP_PERFMON) ? " and " : "",
			has_cap(data, CAP_PERFMON) ? "" : "CAP_PERFMON");
		return EXIT_PRIVILEGE;
	}
	if (!has_cap(data, CAP_SYS_ADMIN) && !kernel_has_uprobe_multi()) {
		log_err("this kernel has no uprobe_multi links (Linux 6.6): its uprobes need "
			"CAP_SYS_ADMIN, which this process lacks; run corobpf with sudo");
		return EXIT_PRIVILEGE;
	}
	ret = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL);
	if (ret <= 0) {
		log_err("this kernel has no BPF ring buffer (%s): corobpf needs Linux 5.8 or later",
			ret < 0 ? strerror(-ret) : "not supported");
		return ret == -EPERM ? EXIT_PRIVILEGE : EXIT_KERNEL;
	}
	ret = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL);
	if (ret <= 0) {
		log_err("this kernel has no BPF task storage (%s): corobpf needs Linux 5.11 or later",
			ret < 0 ? strerror(-ret) : "not supported");
		return EXIT_KERNEL;
	}
	return 0;
}

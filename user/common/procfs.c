// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Readers of /proc. See procfs.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "procfs.h"

void proc_read_comm(u32 pid, u32 tid, char comm[16])
{
	char path[64];
	int fd;
	ssize_t n;

	memset(comm, 0, 16);
	snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, comm, 15);
	close(fd);
	if (n > 0 && comm[n - 1] == '\n')
		comm[n - 1] = 0;
	/* A program names its own threads: nothing that could steer a terminal. */
	for (int i = 0; i < 16 && comm[i]; i++)
		if ((unsigned char)comm[i] < 0x20 || comm[i] == 0x7f)
			comm[i] = '?';
}

int proc_read_status(u32 pid, u32 *tgid, u32 *ppid)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*tgid = *ppid = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Tgid:", 5))
			*tgid = strtoul(line + 5, NULL, 10);
		else if (!strncmp(line, "PPid:", 5))
			*ppid = strtoul(line + 5, NULL, 10);
	}
	fclose(f);
	return 0;
}

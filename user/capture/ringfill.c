// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ringfill.h: the ring's positions, as the kernel lays them out for a ring
 * buffer map: the consumer position in the first page, the producer
 * position in the second. Both pages may be mapped read-only by anyone
 * holding the map.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "capture.h"
#include "corobpf.skel.h"
#include "ringfill.h"

int ring_fill_open(struct ring_fill *rf, const struct capture *c)
{
	int fd = bpf_map__fd(c->skel->maps.events);

	memset(rf, 0, sizeof(*rf));
	rf->page = (size_t)sysconf(_SC_PAGESIZE);
	rf->size = bpf_map__max_entries(c->skel->maps.events);
	if (fd < 0 || !rf->size)
		return -EINVAL;
	rf->cons_map = mmap(NULL, rf->page, PROT_READ, MAP_SHARED, fd, 0);
	if (rf->cons_map == MAP_FAILED) {
		rf->cons_map = NULL;
		return -errno;
	}
	rf->prod_map = mmap(NULL, rf->page, PROT_READ, MAP_SHARED, fd, (off_t)rf->page);
	if (rf->prod_map == MAP_FAILED) {
		int err = -errno;

		rf->prod_map = NULL;
		ring_fill_close(rf);
		return err;
	}
	rf->cons = rf->cons_map;
	rf->prod = rf->prod_map;
	return 0;
}

double ring_fill_now(void *arg)
{
	const struct ring_fill *rf = arg;
	unsigned long cons, prod;

	if (!rf->cons || !rf->prod)
		return 0;
	cons = __atomic_load_n(rf->cons, __ATOMIC_ACQUIRE);
	prod = __atomic_load_n(rf->prod, __ATOMIC_ACQUIRE);
	if (prod <= cons)
		return 0;
	return prod - cons >= rf->size ? 1.0 : (double)(prod - cons) / (double)rf->size;
}

void ring_fill_close(struct ring_fill *rf)
{
	if (rf->cons_map)
		munmap(rf->cons_map, rf->page);
	if (rf->prod_map)
		munmap(rf->prod_map, rf->page);
	memset(rf, 0, sizeof(*rf));
}

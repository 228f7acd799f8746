/* SPDX-License-Identifier: BSD-3-Clause */
/* The README's example program, line for line (the tests check it): SIZE processes average a
 * vector, surviving the loss of members. Start them as ./ftcc-example RANK SIZE [BASE_PORT]
 * (RANK = 0 .. SIZE-1), then kill one while they run: the others report the new epoch and go on.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ftcc.h"

int main(int argc, char **argv)
{
	if (argc < 3 || atoi(argv[2]) < 1 || atoi(argv[2]) > 64)
		return 2; /* usage: RANK SIZE [BASE_PORT] */
	int rank = atoi(argv[1]), size = atoi(argv[2]);
	int base = argc > 3 ? atoi(argv[3]) : 29660; /* member i at 127.0.0.1:base+i */
	char text[64][32];
	const char *addrs[64];
	struct ftcc_config cfg;
	struct ftcc_record rec;
	ftcc_comm_t *comm;
	float grad[1024];

	for (int i = 0; i < size; i++) {
		snprintf(text[i], sizeof(text[i]), "127.0.0.1:%d", base + i);
		addrs[i] = text[i];
	}
	ftcc_config_init(&cfg);
	cfg.group = "example"; /* one name per job or communicator */
	cfg.rank = rank;
	cfg.size = size;
	cfg.addrs = addrs;		   /* embedded coordinator: the members' addresses */
	cfg.timeout_ms = 1000;		   /* a silent member is out after 1 s */
	if (ftcc_comm_create(&cfg, &comm)) /* waits until all members are there */
		return 1;
	for (int step = 0; step < 100; step++) {
		for (int i = 0; i < 1024; i++)
			grad[i] = rank + i % 7;
		int rc = ftcc_allreduce(comm, grad, grad, 1024, FTCC_FLOAT32, FTCC_AVG, &rec);
		if (rc == FTCC_ERR_MISMATCH || rc == FTCC_ERR_DEGRADED)
			continue; /* this op failed on every member alike; the next one runs */
		if (rc) {	  /* this member cannot go on: FTCC_ERR_LOST, _ABORTED, ... */
			fprintf(stderr, "%s: %s\n", ftcc_strerror(rc), ftcc_comm_last_error(comm));
			break;
		}
		if (rec.ncontrib < rec.size)
			printf("op %llu, epoch %llu: %u of %u members\n",
			       (unsigned long long)rec.seq, (unsigned long long)rec.epoch,
			       rec.ncontrib, rec.size);
		nanosleep(&(struct timespec){ .tv_nsec = 50000000 },
			  NULL); /* 5 s: time to kill one */
	}
	ftcc_comm_destroy(comm);
	return 0;
}

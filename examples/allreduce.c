/* SPDX-License-Identifier: BSD-3-Clause */
/* A complete ftcc program: N processes average a vector, surviving the loss of members.
 *
 *   ./ftcc-example RANK SIZE [STEPS]      (start SIZE of them, RANK = 0 .. SIZE-1)
 *
 * Members find each other at 127.0.0.1:29500 + rank (the embedded coordinator needs only
 * these addresses). Kill one while they run: the others report the new epoch and go on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftcc.h"

int main(int argc, char **argv)
{
	char text[64][32];
	const char *addrs[64];
	struct ftcc_config cfg;
	struct ftcc_record rec;
	ftcc_comm_t *comm;
	float grad[1024];
	int rank, size, steps, rc;

	if (argc < 3) {
		fprintf(stderr, "usage: %s RANK SIZE [STEPS]\n", argv[0]);
		return 2;
	}
	rank = atoi(argv[1]);
	size = atoi(argv[2]);
	steps = argc > 3 ? atoi(argv[3]) : 100;
	if (size < 1 || size > 64 || rank < 0 || rank >= size) {
		fprintf(stderr, "bad rank or size\n");
		return 2;
	}
	for (int i = 0; i < size; i++) {
		snprintf(text[i], sizeof(text[i]), "127.0.0.1:%d", 29500 + i);
		addrs[i] = text[i];
	}

	ftcc_config_init(&cfg);
	cfg.group = "example";
	cfg.rank = (uint32_t)rank;
	cfg.size = (uint32_t)size;
	cfg.addrs = addrs;		    /* embedded coordinator: the members' addresses */
	cfg.timeout_ms = 1000;		    /* a silent member is out after 1 s */
	cfg.degraded = FTCC_DEGRADED_SUM;   /* AVG divides by the contributors anyway */
	rc = ftcc_comm_create(&cfg, &comm); /* waits until all SIZE members are there */
	if (rc) {
		fprintf(stderr, "rank %d: %s\n", rank, ftcc_strerror(rc));
		return 1;
	}

	for (int step = 0; step < steps; step++) {
		for (int i = 0; i < 1024; i++) {
			grad[i] = (float)(rank + i % 7);
		}
		/* In place; every survivor gets bit-identical results and the same record. */
		rc = ftcc_allreduce(comm, grad, grad, 1024, FTCC_FLOAT32, FTCC_AVG, &rec);
		if (rc) {
			fprintf(stderr, "rank %d: step %d: %s: %s\n", rank, step, ftcc_strerror(rc),
				ftcc_comm_last_error(comm));
			break;
		}
		if (rec.ncontrib < rec.size) {
			printf("rank %d: step %d: op %llu in epoch %llu averaged over %u of %u "
			       "members\n",
			       rank, step, (unsigned long long)rec.seq,
			       (unsigned long long)rec.epoch, rec.ncontrib, rec.size);
		}
		usleep(10000);
	}
	printf("rank %d: grad[0] = %g after %d steps\n", rank, grad[0], steps);
	ftcc_comm_destroy(comm);
	return rc ? 1 : 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the allreduce chaos tests: bounds, the group under test, the op scripts, and the
 * checks (tests/chaos/ft_chaos.c).
 */
#ifndef FT_CHAOS_H
#define FT_CHAOS_H

#include <stdint.h>

#include "ft_group.h"

#define TIMEOUT_MS 1000
/* A SIGKILL closes the member's connections: the op in flight completes within this. */
#define KILL_BOUND_MS 1000
/* Silence needs the failure timeout. */
#define FREEZE_BOUND_MS (TIMEOUT_MS + 1000)
/* The cut member gives up: the failure timeout of silence, a search for a successor bounded by 3
 * failure timeouts (ctl_sm.h), then 1 s of slack. */
#define LOST_BOUND_MS (TIMEOUT_MS + 3 * TIMEOUT_MS + 1000)
/* A join must not stall the others longer than this. */
#define JOIN_GAP_MS 1000
/* ftcc.h: abort returns within 100 ms. */
#define ABORT_BOUND_MS 100
#define FORM_MS 10000
#define RUN_MS 30000
/* Waits run this much past a bound so that a late event is measured, not just missed. */
#define GRACE_MS 3000
/* ftcc.h: destroy is bounded like abort; slack for a loaded machine. It is local work besides:
 * freeing the ops' buffers and data planes, some 90 ms of CPU under ASan for a member whose ops
 * were 96 MiB; eight such members ending at once on two cores keep one another waiting for the
 * cores, so the check adds the other members' destroy CPU time over the cores
 * (ft_group_end()). */
#define DESTROY_BOUND_MS 500
/* A fixed script has K ops; faults hit op SEQ. */
#define K 12
#define SEQ 5
/* Open-ended scripts: one op per member every PACE_US at most. */
#define PACE_US 20000
/* Cut tests: slow enough that ops are still due after op 5 when the rules are in, even when
 * forming the group took a while (the pace counts from the group start). */
#define CUT_PACE_US 50000

/* The group of the running test; ended by chaos_teardown(). */
extern struct ft_group grp;

/* 1 MiB of float32: the ring (above FTCC_RD_MAX_BYTES), long enough to die in. */
extern const struct ft_spec big[1];
/* The same in place. */
extern const struct ft_spec big_inplace[1];
/* 1 MiB of float32 as int8 codes: the quantized allreduce. */
extern const struct ft_spec qbig[1];
/* 8 elements: recursive doubling. */
extern const struct ft_spec small[2];
/* Open-ended scripts: 256 KiB for the ring, and small ones. */
extern const struct ft_spec paced[4];
/* Both algorithms, several types. */
extern const struct ft_spec mixed[4];

static inline uint32_t ids_all(int n)
{
	return (1u << n) - 1;
}

static inline uint32_t bit(int i)
{
	return 1u << i;
}

/* The fini of every suite: ends the group, removes nftables rules, kills strays. */
void chaos_teardown(void);
/* "{0,2}" for a set of ids; the static buffer of slot @k (0..3). */
const char *ids(uint32_t mask, int k);
/* Every record and the end of every member's log, for failure messages. */
const char *describe(void);
/* The invariants over every record (ft_group_invariants(): one member list per epoch number,
 * agreement and exact results); returns the number of ops checked. */
int expect_agree(void);
/* Ends the group: every process still running destroys its communicator, in time, and exits 0. */
void end_group(void);
/* Every member of @live ended its script without an error, at op @limit. */
void expect_finished(uint32_t live, uint64_t limit);
/* The first op from @from on whose contributor set lacks one of @gone (-1 if none below @to);
 * checks that every op from @from to @to - 1 was completed by all of @live, that the sets before
 * it are @before and from it on exactly @live. */
int64_t expect_transition(uint32_t live, uint32_t gone, uint32_t before, uint64_t from,
			  uint64_t to);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/* What the CollNet chaos tests share (test_chaos_collnet*.c): bounds, the script, the heads. */
#ifndef FTCC_TESTS_COLLNET_CHAOS_H
#define FTCC_TESTS_COLLNET_CHAOS_H

#include <stdint.h>

#include "cn_heads.h"
#include "ftcc/reduce.h"

#define TIMEOUT_MS 1000
/* From when a killed head's sockets closed: the op in flight completes well within this. The
 * kernel closes them only after it has torn down the process's memory, seen to take a second
 * under ASan on a loaded 2-core machine; until then the head is, to its peers, a frozen one.
 * cc_kill_head() gives each kill its bound. */
#define KILL_BOUND_MS 1000
/* Silence (SIGSTOP, a cut) needs the failure timeout. */
#define SILENT_BOUND_MS (2 * TIMEOUT_MS)
/* The cut head gives up: the failure timeout of silence, a search for a successor bounded by 3
 * failure timeouts, then 1 s of slack. */
#define LOST_BOUND_MS (TIMEOUT_MS + 3 * TIMEOUT_MS + 1000)
/* closeColl is ncclCommAbort's path: bounded like abort (100 ms), with slack for 2 cores. */
#define CLOSE_BOUND_MS 500
#define FORM_MS 15000
#define RUN_MS 20000
#define STOP_MS 5000
/* Ops every head completes before the fault, and each survivor at least after it. */
#define WARM_OPS 60
/* Lanes of the heads' plug-in (FTCC_LANES unset). Connect runs a confirmation op per lane: NCCL's
 * op k is the engine's op k + CN_LANES. Up to CN_LANES ops run side by side, done in any order. */
#define CN_LANES 4
#define AFTER_OPS 100
/* Ops of a script: about 1.6 s at the pace, the fault lands near op WARM_OPS. Every head posts
 * the same ops, as NCCL's proxies do: an open-ended script stopped by the parent would end at a
 * different op on each survivor, and the one that went further would finish its last ops with
 * the others gone. */
#define NOPS 400
#define NOPS_TWO 600 /* two faults, AFTER_OPS apart */
/* One op per head every PACE_US at most: ~250 ops/s. */
#define PACE_US 4000
#define DEPTH 8
/* Completions this far before and after the fault count for the longest gap around it (the
 * longest stall the fault may cause, and some more). */
#define GAP_BEFORE_MS 500
#define GAP_AFTER_MS (SILENT_BOUND_MS + 500)
/* The largest op of the script, for rebuilding expected results. */
#define MAX_BYTES (1 << 20)

extern struct cn_heads cc_heads;
extern char cc_logbuf[1 << 20];
extern char cc_acc[MAX_BYTES], cc_tmp[MAX_BYTES];
/* float32 SUM, 4 KiB to 1 MiB, with int32 and bfloat16 entries. */
extern const struct ft_spec cc_script[];
extern const int cc_nspec;

static inline uint32_t cc_bit(int i)
{
	return 1u << i;
}

static inline uint32_t cc_all_of(int n)
{
	return (1u << n) - 1;
}

void cc_teardown(void);
int64_t cc_kill_head(int i, double *bound_ms);
const char *cc_describe(void);
struct cn_opts cc_base_opts(void);
void cc_start(int n, const struct cn_opts *o);
void cc_wait_inflight(uint32_t who);
int cc_warn_lines(int i, const char *a, const char *b);
void cc_expect_lost_warns(uint32_t live, uint32_t lost);
void cc_expect_clean(uint32_t live);
int cc_expect_exact(uint32_t lost, int64_t t_fault, enum ftcc_degraded policy);
void cc_expect_epochs(int min);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/* Named fault-injection points of the engine, for tests: FTCC_FAULT="point:seq[:step[:action]]"
 * makes this process act the first time it reaches @point of op @seq at step @step (any step
 * when omitted or "*"). Several specs may be given, separated by commas. Actions:
 *   "kill" (the default): SIGKILL itself;   "stop": SIGSTOP itself;   "exit": _exit(3);
 *   "reset": its next data-plane send fails with ECONNRESET, as if a firewall or a conntrack
 *            flush reset the connection (FTCC_INJECT=sendv:1 from then on; the process lives);
 *   "fail": the point itself fails as a local error would (ftcc_fault() returns 1; only
 *            "input" does anything with it: the copy of an in-place input fails, out of memory).
 *
 * Points: "connect" (communicator created, before the group forms), "rs" / "ag" (ring
 * reduce-scatter / allgather step, before the step's transfers), "rd" (recursive doubling round),
 * "qs" / "qg" (the quantized allreduce's scatter / gather, step 0), "bc" (a broadcast's chain,
 * step = segment, before this member's first transfer of it),
 * "report" (before sending resume reports), "decide" (after the resume decision), "fill"
 * (before pushing missing chunks), "have" (before the have notices), "epoch" (an op saw a new
 * epoch), "join" (a joining member was admitted), "input" (an op starts: its input is kept).
 *
 * Cheap when unused: one predictable branch on a global flag.
 */
#ifndef FTCC_FAULT_H
#define FTCC_FAULT_H

#include <stdint.h>

extern int ftcc_fault_armed;

/* Parses FTCC_FAULT (again). 0, or -EINVAL with a log line for a malformed spec (then nothing
 * is armed). */
int ftcc_fault_load(void);

/* Acts on the specs matching (@point, @seq, @step). 1 when one said "fail", else 0. */
int ftcc_fault_hit(const char *point, uint64_t seq, uint32_t step);

static inline int ftcc_fault(const char *point, uint64_t seq, uint32_t step)
{
	if (__builtin_expect(ftcc_fault_armed, 0))
		return ftcc_fault_hit(point, seq, step);
	return 0;
}

#endif

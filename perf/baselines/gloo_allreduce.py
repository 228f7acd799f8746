#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Baseline for ftcc-perf -m allreduce: torch.distributed allreduce, backend "gloo", float32
SUM (in place, as torch's all_reduce always is) over the same size sweep, timed the same way
(each rank times every call back to back; an iteration's time is the slowest rank's), printed
in the same columns or as JSON lines.

usage: /usr/bin/python3 perf/baselines/gloo_allreduce.py -N 2 [-b 8] [-e 32M] [-f 2] [-n 20]
                                                         [-w 5] [-c 0|1] [-j]
Forks N ranks on this host; they meet through a TCP store on 127.0.0.1 and a free port. With at
most 2 ranks and as many CPUs, rank r is bound to the r-th CPU, as mpirun and ftcc-perf bind
their ranks by default.
(Debian's python3-torch is seen by /usr/bin/python3.)
"""
import argparse
import datetime
import json
import multiprocessing as mp
import socket
import sys
import time


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.upper().rstrip("B")
    if t and t[-1] in mult:
        return int(t[:-1]) * mult[t[-1]]
    return int(t)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sizes(o):
    s = float(o.b)
    while s <= o.e:
        count = int(s) // 4
        yield count * 4, count
        s *= o.f


def pattern(torch, count, it, rank):
    """Small integers, so the float sum over ranks is exact."""
    i = torch.arange(count, dtype=torch.int64)
    return (((i + it * 7) % 1024 + 1) * (rank + 1)).to(torch.float32)


def run_size(torch, dist, o, rank, n, size, count):
    """Per-call times (ns) of this rank, and the wrong elements it saw."""
    buf = pattern(torch, count, 0, rank)
    for _ in range(o.w):
        dist.all_reduce(buf)
    dist.barrier()
    times, wrong = [], 0
    for it in range(o.n):
        if o.c:
            buf = pattern(torch, count, it, rank)
        t0 = time.perf_counter_ns()
        dist.all_reduce(buf)
        times.append(time.perf_counter_ns() - t0)
        if o.c:
            want = pattern(torch, count, it, 0) * (n * (n + 1) // 2)
            wrong += int((buf != want).sum())
    return times, wrong


def report(o, n, size, count, t, wrong):
    t = sorted(t)
    k = len(t)
    med = (t[k // 2] if k % 2 else (t[k // 2 - 1] + t[k // 2]) / 2) / 1e3
    p99 = t[max(0, (99 * k + 99) // 100 - 1)] / 1e3
    algbw = size / (med * 1e3)
    busbw = algbw * 2 * (n - 1) / n
    if o.j:
        print(json.dumps({"mode": "gloo", "nranks": n, "size": size, "count": count,
                          "type": "float32", "redop": "sum", "inplace": True, "iters": o.n,
                          "warmup": o.w, "check": o.c, "time_min_us": t[0] / 1e3,
                          "time_median_us": med, "time_p99_us": p99, "algbw_GBps": algbw,
                          "busbw_GBps": busbw, "wrong": wrong}), flush=True)
    else:
        print("  %12d %12d %7s %6s %10.2f %10.2f %10.2f %12.3f %12.3f %8d" %
              (size, count, "float32", "sum", t[0] / 1e3, med, p99, algbw, busbw, wrong),
              flush=True)


def rank_main(rank, o, port):
    import os

    cpus = sorted(os.sched_getaffinity(0))
    if o.N <= 2 and o.N <= len(cpus):
        os.sched_setaffinity(0, {cpus[rank]})
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, o.N, rank == 0,
                          timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=o.N)
    n = o.N
    if rank == 0 and not o.j:
        print("# torch.distributed gloo baseline (torch %s): %d ranks, iters %d, warmup %d, "
              "check %d, in place\n# time = median over iterations of the slowest rank's "
              "time of that call (calls back to back)\n#" % (torch.__version__, n, o.n, o.w,
                                                             o.c))
        print("# %12s %12s %7s %6s %10s %10s %10s %12s %12s %8s" %
              ("size", "count", "type", "redop", "min(us)", "med(us)", "p99(us)",
               "algbw(GB/s)", "busbw(GB/s)", "#wrong"), flush=True)
    for size, count in sizes(o):
        times, wrong = run_size(torch, dist, o, rank, n, size, count)
        t = torch.tensor(times, dtype=torch.int64)
        dist.reduce(t, 0, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong], dtype=torch.int64)
        dist.reduce(w, 0, op=dist.ReduceOp.SUM)
        if rank == 0:
            report(o, n, size, count, t.tolist(), int(w.item()))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-N", type=int, default=2, help="ranks (forked on this host)")
    p.add_argument("-b", type=parse_size, default=8)
    p.add_argument("-e", type=parse_size, default=32 << 20)
    p.add_argument("-f", type=float, default=2.0)
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-w", type=int, default=5)
    p.add_argument("-c", type=int, default=0)
    p.add_argument("-j", action="store_true")
    o = p.parse_args()
    if o.N < 1 or o.b < 4 or o.e < o.b or o.f <= 1 or o.n < 1:
        p.error("need N >= 1, 4 <= b <= e, f > 1, n >= 1")
    port = free_port()
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=rank_main, args=(r, o, port)) for r in range(o.N)]
    for pr in procs:
        pr.start()
    rc = 0
    for pr in procs:
        pr.join(timeout=600)
        if pr.exitcode != 0:
            rc = 1
            if pr.exitcode is None:
                pr.kill()
    sys.exit(rc)


if __name__ == "__main__":
    main()

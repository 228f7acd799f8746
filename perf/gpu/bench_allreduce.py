# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed allreduce over sizes, results checked; one process per NCCL "host".

  python3 perf/gpu/bench_allreduce.py --mode ftcc|net|socket --so build/libnccl-net-ftcc.so -n 2
Prints one line per size: bytes, median time (us), busbw (GB/s), wrong elements.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def worker(args):
    import torch
    import torch.distributed as dist
    dist.init_process_group("nccl")
    torch.cuda.set_device(0)
    rank, n = dist.get_rank(), dist.get_world_size()
    sizes, size = [], 8
    while size <= args.max_bytes:
        sizes.append(size)
        size *= 4
    if sizes[-1] != args.max_bytes:
        sizes.append(args.max_bytes)
    any_wrong = 0
    for size in sizes:
        count = size // 4
        x = torch.full((count,), float(rank + 1), device="cuda")
        want = float(n * (n + 1) // 2)
        times = []
        marks = []
        wrong = 0
        for it in range(args.warmup + args.iters):
            x.fill_(float(rank + 1))
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            m0 = time.monotonic_ns()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            if it >= args.warmup:
                times.append(time.perf_counter() - t0)
                marks.append((m0, time.monotonic_ns()))
            wrong += int((x != want).sum().item())
        any_wrong += wrong
        med = statistics.median(times)
        busbw = size * 2 * (n - 1) / n / med / 1e9
        if rank == 0:
            print(f"{size:>12} {med * 1e6:12.1f} {busbw:8.2f} {wrong}", flush=True)
            if args.marks:  # CLOCK_MONOTONIC, the clock of the plug-in's TRACE lines
                for a, b in marks:
                    print(f"mark {size} {a / 1e6:.3f} {b / 1e6:.3f}", flush=True)
    dist.destroy_process_group()
    if any_wrong:
        print(f"rank {rank}: {any_wrong} wrong elements", flush=True)
    return 1 if any_wrong else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ftcc", "net", "socket"], default="ftcc",
                    help="ftcc: its CollNet forced; net: NCCL's rings over ftcc's net plug-in; "
                    "socket: NCCL's own socket transport")
    ap.add_argument("--so")
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--port", type=int, default=29571)
    ap.add_argument("--timeout", type=float, default=600, help="seconds for the whole run")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--marks", action="store_true",
                    help="print each timed allreduce's start and end (CLOCK_MONOTONIC, ms)")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    procs = []
    for r in range(args.n):
        env = dict(os.environ)
        env.update({"RANK": str(r), "WORLD_SIZE": str(args.n), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(args.port), "NCCL_HOSTID": f"host-{r}",
                    "NCCL_MNNVL_ENABLE": "0", "NCCL_SOCKET_IFNAME": "lo",
                    "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "INFO")})
        if args.mode == "socket":
            env.update({"NCCL_NET_PLUGIN": "none", "NCCL_NET": "Socket"})
        else:
            env.update({"NCCL_NET_PLUGIN": os.path.abspath(args.so), "NCCL_NET": "ftcc",
                        "FTCC_SOCKET_IFNAME": "lo"})
        if args.mode == "ftcc":
            env.update({"NCCL_COLLNET_ENABLE": "1", "NCCL_ALGO": "allreduce:collnetchain"})
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", "--max-bytes", str(args.max_bytes),
             "--iters", str(args.iters), "--warmup", str(args.warmup)]
            + (["--marks"] if args.marks else []), env=env))
    # One rank failing leaves the others blocked in NCCL: end them all at the deadline.
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.1)
    rc = 0
    for r, p in enumerate(procs):
        if p.poll() is None:
            print(f"rank {r} still running after {args.timeout:.0f} s: killed", flush=True)
            p.kill()
            p.wait()
            rc = 1
        rc |= 1 if p.returncode else 0
    return rc


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: BSD-3-Clause
"""Launches ddp_train.py as N separate processes, each its own NCCL "host" on the one GPU,
with ftcc's CollNet forced for allreduce; kills one non-zero rank mid-training; checks that
every survivor finishes and that the survivors' parameter hashes agree at every step they
all printed.

  python3 perf/gpu/collnet_ddp.py --so build/libnccl-net-ftcc.so -n 4 --kill 2 --kill-step 100
Exit status 0 when the check passed. Logs go to --logdir.
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--so", required=True)
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--kill", type=int, default=2, help="rank to kill (0: none)")
    ap.add_argument("--kill-step", type=int, default=100)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--port", type=int, default=29561)
    ap.add_argument("--logdir", default="gpu-logs")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    os.makedirs(args.logdir, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    procs, logs = [], []
    for r in range(args.n):
        env = dict(os.environ)
        env.update({
            "RANK": str(r), "WORLD_SIZE": str(args.n), "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(args.port),
            "NCCL_NET_PLUGIN": os.path.abspath(args.so), "NCCL_NET": "ftcc",
            "NCCL_HOSTID": f"host-{r}", "NCCL_MNNVL_ENABLE": "0",
            "NCCL_COLLNET_ENABLE": "1", "NCCL_ALGO": "allreduce:collnetchain",
            "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,COLL",
            "NCCL_SOCKET_IFNAME": "lo", "FTCC_SOCKET_IFNAME": "lo",
            "FTCC_FAILURE_TIMEOUT_MS": "1000",
        })
        log = open(os.path.join(args.logdir, f"rank{r}.log"), "w")
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(here, "ddp_train.py"), "--steps", str(args.steps)],
            env=env, stdout=log, stderr=subprocess.STDOUT))
    killed_at = None
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and any(p.poll() is None for i, p in enumerate(procs)
                                               if i != args.kill or killed_at is None):
        if args.kill and killed_at is None:
            with open(os.path.join(args.logdir, f"rank{args.kill}.log")) as f:
                steps = [int(l.split()[1]) for l in f if l.startswith("step ")]
            if steps and steps[-1] >= args.kill_step:
                procs[args.kill].send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                print(f"killed rank {args.kill} after step {steps[-1]}", flush=True)
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
    for log in logs:
        log.close()
    hashes, ok = {}, True
    for r in range(args.n):
        with open(os.path.join(args.logdir, f"rank{r}.log")) as f:
            lines = f.read().splitlines()
        hashes[r] = {int(l.split()[1]): l.split()[3] for l in lines if l.startswith("step ")}
        if r != args.kill and "done" not in lines:
            print(f"rank {r} did not finish (see {args.logdir}/rank{r}.log)")
            ok = False
    survivors = [r for r in range(args.n) if r != args.kill or not args.kill]
    common = sorted(set.intersection(*(set(hashes[r]) for r in survivors)))
    differ = [s for s in common if len({hashes[r][s] for r in survivors}) != 1]
    print(f"survivors {survivors}: {len(common)} common hash steps, {len(differ)} differ")
    if differ or not common:
        ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

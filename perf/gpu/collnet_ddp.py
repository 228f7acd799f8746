# SPDX-License-Identifier: BSD-3-Clause
"""Launches ddp_train.py as N separate processes, each its own NCCL "host" on the one GPU,
with ftcc's CollNet forced for allreduce; kills one non-zero rank mid-training; checks that
every survivor finishes and that the survivors' parameter hashes agree at every step they
all printed.

  python3 perf/gpu/collnet_ddp.py --so build/libnccl-net-ftcc.so -n 4 --kill 2 --kill-step 100

With --stop S the rank is not killed but frozen (SIGSTOP) for S seconds and then let go
(SIGCONT): a live member that went silent. The others must go on as for a kill, without
waiting for it: some survivor must print a step while it is frozen. The frozen rank, once it
runs again, must leave within --grace seconds, not by finishing (its ops fail: it is no longer
a member), and must print no parameter hash after its freeze that the survivors did not print
too. (Every process prints time.monotonic(), the launcher's clock.)
Exit status 0 when the check passed. Logs go to --logdir.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

STEP = re.compile(r"step (\d+) hash ([0-9a-f]+) t ([0-9]+\.[0-9]+)$")


def step_lines(logdir, r):
    """Rank r's (step, hash, time) lines. The rank's log also holds NCCL's lines, written to
    the same file: a line is taken where it ends a line, whatever precedes it there."""
    with open(os.path.join(logdir, f"rank{r}.log")) as f:
        found = (STEP.search(line) for line in f.read().splitlines())
        return [(int(m[1]), m[2], float(m[3])) for m in found if m]


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
    ap.add_argument("--stop", type=float, default=0,
                    help="freeze the rank this many seconds instead of killing it")
    ap.add_argument("--grace", type=float, default=90,
                    help="with --stop: seconds the thawed rank has to leave (PyTorch 2.11 "
                         "takes a process down about 60 s after a communicator error)")
    ap.add_argument("--on-hang", default="",
                    help="with --stop: shell command run before a thawed rank that did not "
                         "leave is killed, {pid} its process id (a stack dump, say); output "
                         "to hang.txt in --logdir")
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
    killed_at = thawed_at = gone_at = None
    frozen_step = None
    deadline = time.monotonic() + args.timeout

    def running():
        for i, p in enumerate(procs):
            if p.poll() is not None:
                continue
            if i != args.kill or killed_at is None:
                return True
            # the frozen rank: wait for it until it is thawed and its grace is over
            if args.stop and (thawed_at is None or time.monotonic() < thawed_at + args.grace):
                return True
        return False

    while time.monotonic() < deadline and running():
        if args.kill and killed_at is None:
            steps = [s for s, _, _ in step_lines(args.logdir, args.kill)]
            if steps and steps[-1] >= args.kill_step:
                frozen_step = steps[-1]
                procs[args.kill].send_signal(signal.SIGSTOP if args.stop else signal.SIGKILL)
                killed_at = time.monotonic()
                print(f"{'froze' if args.stop else 'killed'} rank {args.kill} after step "
                      f"{steps[-1]}", flush=True)
        if args.stop and killed_at is not None and thawed_at is None and \
                time.monotonic() >= killed_at + args.stop:
            procs[args.kill].send_signal(signal.SIGCONT)
            thawed_at = time.monotonic()
            deadline = max(deadline, thawed_at + args.grace + 1)  # the grace is never cut
            print(f"thawed rank {args.kill} after {args.stop:.1f} s", flush=True)
        if thawed_at is not None and gone_at is None and procs[args.kill].poll() is not None:
            gone_at = time.monotonic()
        time.sleep(0.05)
    left = {i: p.poll() for i, p in enumerate(procs)}
    left_at = time.monotonic()
    if thawed_at is not None and gone_at is None and left[args.kill] is not None:
        gone_at = left_at
    if args.stop and args.on_hang and thawed_at is not None and left[args.kill] is None:
        with open(os.path.join(args.logdir, "hang.txt"), "w") as out:
            try:
                subprocess.run(args.on_hang.replace("{pid}", str(procs[args.kill].pid)), shell=True,
                               stdout=out, stderr=subprocess.STDOUT, timeout=90)
            except subprocess.TimeoutExpired:
                out.write("\n(the --on-hang command ran out of time)\n")
    for p in procs:
        if p.poll() is None:
            p.kill()
    for log in logs:
        log.close()
    hashes, times, ok = {}, {}, True
    finished = set()
    for r in range(args.n):
        with open(os.path.join(args.logdir, f"rank{r}.log")) as f:
            lines = f.read().splitlines()
        steps = step_lines(args.logdir, r)
        hashes[r] = {s: h for s, h, _ in steps}
        times[r] = [t for _, _, t in steps]
        if any(l.endswith("done") for l in lines):
            finished.add(r)
        if r != args.kill and "done" not in lines:
            print(f"rank {r} did not finish (see {args.logdir}/rank{r}.log)")
            ok = False
    survivors = [r for r in range(args.n) if r != args.kill or not args.kill]
    if args.stop and args.kill:
        rc = left[args.kill]
        if thawed_at is None:
            print(f"rank {args.kill} was never thawed")
            ok = False
        elif rc is None:
            print(f"rank {args.kill} still ran {left_at - thawed_at:.1f} s after it was thawed")
            ok = False
        elif rc == 0 or args.kill in finished:
            print(f"rank {args.kill} finished the job (status {rc}): it was never removed")
            ok = False
        else:
            gone = f"{gone_at - thawed_at:.1f} s" if gone_at is not None else "?"
            print(f"rank {args.kill} left with status {rc} {gone} after it was thawed")
        # after its freeze it may print a hash only for a step the survivors reached with it
        late = [s for s in hashes[args.kill] if frozen_step is not None and s > frozen_step]
        stray = [s for s in late if any(hashes[r].get(s) != hashes[args.kill][s]
                                        for r in survivors)]
        print(f"rank {args.kill}: {len(late)} hash lines after its freeze, {len(stray)} "
              f"differ from the survivors'")
        if stray:
            ok = False
        if killed_at is not None and thawed_at is not None:
            during = [r for r in survivors if any(killed_at < t < thawed_at for t in times[r])]
            print(f"survivors that printed a step while rank {args.kill} was frozen: {during}")
            if not during:
                ok = False
    common = sorted(set.intersection(*(set(hashes[r]) for r in survivors)))
    differ = [s for s in common if len({hashes[r][s] for r in survivors}) != 1]
    print(f"survivors {survivors}: {len(common)} common hash steps, {len(differ)} differ")
    if differ or not common:
        ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: BSD-3-Clause
"""A plain DDP training loop (nccl backend), unaware of ftcc.

Started as one process per "host" by perf/gpu/collnet_ddp.py, which sets RANK, WORLD_SIZE,
MASTER_ADDR/PORT and the NCCL/ftcc variables. Every --hash-every steps it prints one line
"step S hash H" with a hash of its parameters, so the launcher can compare survivors.
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def say(line):
    """One line to stdout in one write: NCCL logs to the same file, and a line written in
    pieces came back with a log line inside it."""
    sys.stdout.flush()
    os.write(1, (line + "\n").encode())


def param_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--hash-every", type=int, default=10)
    ap.add_argument("--width", type=int, default=1024)
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    dist.init_process_group("nccl")
    torch.cuda.set_device(0)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(args.width, args.width), nn.ReLU(),
        nn.Linear(args.width, args.width), nn.ReLU(),
        nn.Linear(args.width, 16)).cuda()
    ddp = DDP(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator(device="cuda").manual_seed(1000 + rank)
    for step in range(args.steps):
        x = torch.randn(64, args.width, device="cuda", generator=gen)
        loss = ddp(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.hash_every == 0 or step == args.steps - 1:
            torch.cuda.synchronize()
            say(f"step {step} hash {param_hash(model)} t {time.monotonic():.3f}")
    say("done")
    # Leave without a collective barrier: a dead rank would hold it.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())

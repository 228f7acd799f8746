#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""What a training loop can do with ftcc's status files (FTCC_STATUS_DIR) after each step:
see which nodes the CollNet group lost, let the lowest surviving node save the checkpoint, and
know the factor FTCC_DEGRADED=rescale applied to the gradient sums.

    FTCC_STATUS_DIR=/dev/shm/ftcc torchrun ... train.py      # the plug-in writes the files
    python3 examples/dropped_nodes.py /dev/shm/ftcc NODE      # what node NODE would decide

In train.py the same calls go after optimizer.step(); NODE is the node's index in the CollNet
group (its node rank when one process per node runs the cross-node allreduce).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import ftcc_status  # noqa: E402


def after_step(status_dir, node, step, save_every=100):
    """Returns what this node should do now, as text (a real loop would act on it)."""
    mine = [s for s in ftcc_status.read_dir(status_dir) if s["node"] == node]
    if not mine:
        return "no status for node %d (is FTCC_STATUS_DIR set for the job?)" % node
    # Files of earlier jobs stay in the directory: the newest file of this node is this job's.
    s = max(mine, key=lambda st: st["updated_ms"])
    if s["state"] != "running":
        return "group %s is %s: %s; restart the job" % (s["group"], s["state"], s["reason"])
    notes = []
    for lost, info in sorted(s["lost"].items()):
        notes.append("node %d was dropped at epoch %d" % (lost, info["epoch"]))
    saver = ftcc_status.lowest_surviving_node(s)
    if step % save_every == 0 and saver == node:
        notes.append("this node saves the checkpoint (lowest surviving node)")
    notes.append("gradient sums scaled by %.3f (%d of %d nodes contribute)" %
                 (ftcc_status.scale(s), len(s["contributors"] or s["members"]), s["nodes"]))
    return "; ".join(notes)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: dropped_nodes.py STATUS_DIR NODE", file=sys.stderr)
        sys.exit(2)
    print(after_step(sys.argv[1], int(sys.argv[2]), step=0))

#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Reads the status files ftcc's CollNet plug-in publishes (FTCC_STATUS_DIR), so that a
training process sees which nodes its group lost without NCCL's help. Standard library only.

    import ftcc_status
    for s in ftcc_status.read_dir("/dev/shm/ftcc"):
        print(s["node"], s["epoch"], s["members"], s["lost"])

Each status is a dict:
  group (str), node (int), nodes (int), state ("running", "failed" or "closed"),
  epoch (int), members (list of node ids), lost (dict: node id -> {"epoch", "at_ms"}),
  last_op (int or None), contributors (list, of last_op and later ops; None before any op),
  updated_ms (int, Unix time), pid (int), reason (str, when failed).

As a program: ftcc_status.py DIR [GROUP] prints the statuses as JSON lines.
"""
import json
import os
import sys

FORMAT = 1


def _ids(text):
    return [int(x) for x in text.split(",") if x != ""]


def parse(text):
    """One status file's text -> dict; ValueError when it is not one."""
    s = {"lost": {}, "last_op": None, "contributors": None, "reason": ""}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "format":
            if int(value) != FORMAT:
                raise ValueError("status format %s, this reader knows %d" % (value, FORMAT))
            s["format"] = FORMAT
        elif key in ("node", "nodes", "epoch", "last_op", "updated_ms", "pid"):
            s[key] = int(value)
        elif key in ("members", "contributors"):
            s[key] = _ids(value)
        elif key == "lost":
            f = value.split()
            if len(f) != 5 or f[1] != "epoch" or f[3] != "at_ms":
                raise ValueError("bad lost line: %r" % line)
            s["lost"][int(f[0])] = {"epoch": int(f[2]), "at_ms": int(f[4])}
        elif key in ("group", "state", "reason"):
            s[key] = value
    for need in ("format", "group", "node", "nodes", "state", "epoch", "members"):
        if need not in s:
            raise ValueError("status lacks %r" % need)
    return s


def read(path):
    with open(path, encoding="utf-8") as f:
        return parse(f.read())


def read_dir(directory, group=None):
    """Every status file in @directory (of @group when given), sorted by group and node."""
    out = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("ftcc-") and name.endswith(".status")):
            continue
        s = read(os.path.join(directory, name))
        if group is None or s["group"] == group:
            out.append(s)
    out.sort(key=lambda s: (s["group"], s["node"]))
    return out


def lowest_surviving_node(status):
    """The node that should act alone for the group (save the checkpoint, say)."""
    return min(status["members"]) if status["members"] else None


def scale(status):
    """nodes / contributors of the last op: what FTCC_DEGRADED=rescale multiplied sums by."""
    c = status["contributors"]
    return status["nodes"] / len(c) if c else 1.0


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print("usage: ftcc_status.py DIR [GROUP]", file=sys.stderr)
        return 2
    for s in read_dir(argv[1], argv[2] if len(argv) > 2 else None):
        print(json.dumps(s, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

# SPDX-License-Identifier: BSD-3-Clause
"""Where a CollNet allreduce's time goes, from perf/gpu/trace_collnet.sh's logs.

  python3 perf/gpu/trace_summary.py TABLE NCCL_LOG...
TABLE holds bench_allreduce.py --marks lines (each timed allreduce's start and end, ms of
CLOCK_MONOTONIC); each NCCL log holds one process's CollNet TRACE lines (an op posted, an op seen
done and how long after its post). Per allreduce size and process it prints: the median
allreduce time, the CollNet ops per allreduce and their sizes, the median time from an op's post
to its completion being seen, the most ops in flight, and the share of the allreduce's time with
at least one op in flight (the rest is NCCL's and the GPU's).
"""
import collections
import re
import statistics
import sys

POST = re.compile(r"op of (\d+) bytes posted at ([\d.]+) ms, (\d+) in flight")
DONE = re.compile(r"op \d+ of (\d+) bytes seen done at ([\d.]+) ms, ([\d.]+) ms after its post")


def covered(spans, lo, hi):
    """Time within [lo, hi] covered by the union of spans."""
    total, end = 0.0, lo
    for a, b in sorted(spans):
        a, b = max(a, end), min(b, hi)
        if b > a:
            total += b - a
            end = b
    return total


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    marks = collections.defaultdict(list)
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) == 4 and p[0] == "mark":
                marks[int(p[1])].append((float(p[2]), float(p[3])))
    print("process  allreduce_bytes  median_ms  ops_each  op_bytes  op_median_ms  "
          "max_in_flight  busy_pct")
    for path in sys.argv[2:]:
        posts, dones = [], []
        with open(path, errors="replace") as f:
            for line in f:
                m = POST.search(line)
                if m:
                    posts.append((float(m[2]), int(m[1]), int(m[3])))
                    continue
                m = DONE.search(line)
                if m:
                    t, d = float(m[2]), float(m[3])
                    dones.append((t - d, t, int(m[1]), d))
        name = re.sub(r".*nccl\.(\d+)\.log$", r"\1", path)
        for size in sorted(marks):
            wins = marks[size]
            ops = [o for o in dones if any(a <= o[0] <= b for a, b in wins)]
            inflight = [p[2] for p in posts if any(a <= p[0] <= b for a, b in wins)]
            if not ops:
                print(f"{name:>7}  {size:>15}  no CollNet op in its windows")
                continue
            busy = sum(covered([(o[0], o[1]) for o in ops], a, b) for a, b in wins)
            span = sum(b - a for a, b in wins)
            sizes = collections.Counter(o[2] for o in ops).most_common(2)
            print(f"{name:>7}  {size:>15}  {statistics.median(b - a for a, b in wins):9.3f}  "
                  f"{len(ops) / len(wins):8.1f}  {'/'.join(str(s) for s, _ in sizes):>8}  "
                  f"{statistics.median(o[3] for o in ops):12.3f}  "
                  f"{max(inflight, default=0):13d}  {100 * busy / span:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Measures the bulk writer's array work on fresh memory with numpy's transparent-huge-page advice,
against the same work with that advice off, the two alternated run by run in one invocation.

    python bench/hugepages.py [--postings 25000000] [--runs 3]

numpy advises transparent huge pages (madvise) for every array of 4 MB or more. This script
times the steps `engram.index.postings` runs at the end of a 1 GB bulk ingest (merge the
batches' sorted postings, lay the rows out) on N postings, in a fresh process per run so that each run faults in
memory it has not used before, as the writer does; runs alternate between
`NUMPY_MADVISE_HUGEPAGE=1` and `=0` so a change in the machine's speed hits both alike.
`engram.index.build.small_pages` is what the ingest does about it (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[2])
from engram.index import postings
n = int(sys.argv[1])
rng = np.random.default_rng(1)
runs = []  # five batches' postings, each sorted by key, as a bulk run keeps them
for b in range(5):
    order = np.argsort(key := rng.integers(0, 1 << 48, n // 5, dtype=np.int64), kind="stable")
    runs.append((key[order], (b * (n // 5) + np.arange(n // 5, dtype=np.int64))[order]))
key = np.concatenate([r[0] for r in runs])
frag = np.concatenate([r[1] for r in runs])
del runs, order
t0 = time.perf_counter()
k, f = postings.sort_keys(key, frag, distinct=True)
t1 = time.perf_counter()
postings.layout_rows(k, f)
t2 = time.perf_counter()
print(json.dumps({"sort": t1 - t0, "layout": t2 - t1,
                  "huge": bool(np._core.multiarray._get_madvise_hugepage())}))
"""


def run_once(n: int, huge: bool) -> dict[str, float]:
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "1" if huge else "0", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(ROOT)], env=env, check=True,
                         capture_output=True, text=True).stdout
    got = json.loads(out)
    if got["huge"] != huge:
        raise SystemExit("hugepages: numpy did not take NUMPY_MADVISE_HUGEPAGE (not Linux, or a numpy without it)")
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postings", type=int, default=25_000_000, help="postings per run (1 GB ingest: ~25M)")
    ap.add_argument("--runs", type=int, default=3, help="runs per setting, alternated")
    args = ap.parse_args(argv)
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print(f"THP: {thp.read_text().strip() if thp.exists() else 'n/a'}; {args.postings:,} postings, {args.runs} runs each")
    res: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for i in range(args.runs):
        for huge in ((True, False) if i % 2 == 0 else (False, True)):
            res[huge].append(run_once(args.postings, huge))
    print("| numpy THP advice | sort_keys p50 (s) | row layout p50 (s) | both, each run (s) |")
    print("|---|---|---|---|")
    for huge in (True, False):
        rs = res[huge]
        each = ", ".join(f"{r['sort'] + r['layout']:.2f}" for r in rs)
        print(f"| {'on (numpy default)' if huge else 'off (small_pages)'} | "
              f"{statistics.median(r['sort'] for r in rs):.2f} | {statistics.median(r['layout'] for r in rs):.2f} | {each} |")
    on = statistics.median(r["sort"] + r["layout"] for r in res[True])
    off = statistics.median(r["sort"] + r["layout"] for r in res[False])
    print(f"\noff / on: {off / on:.2f}x the time")
    return 0


if __name__ == "__main__":
    sys.exit(main())

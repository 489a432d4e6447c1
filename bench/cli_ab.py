"""Same-minute A/B of the command-line `engram explain --brief` between two installs.

    python bench/cli_ab.py REPO OLD/bin/engram NEW/bin/engram [N] [-- extra explain args]

REPO is a repository kept by `bench/scale.py --keep` (its `_scale_spans/` files exist on disk).
Each of the first N spans (lines 1-20) is explained by both installs, alternating which goes
first, answered locally (ENGRAM_LOCAL=1); prints the p10/p50/p90 wall time of each, the
`engram --help` floor of each, and how many answers were byte-identical. The machine's speed
swings within minutes: only figures taken side by side like this compare two versions.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    return (time.perf_counter() - t0) * 1e3, proc


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = argv[:argv.index("--")] if "--" in argv else argv
    repo, a, b = Path(args[0]), args[1], args[2]
    n = int(args[3]) if len(args) > 3 else 40
    spans = sorted((repo / "_scale_spans").iterdir())[:n]
    env = {**os.environ, "ENGRAM_LOCAL": "1"}
    wall: dict[str, list[float]] = {a: [], b: []}
    same = 0
    for i, path in enumerate(spans):
        arg = f"_scale_spans/{path.name}:1-{min(20, len(path.read_text().splitlines()))}"
        out = {}
        for exe in ((a, b) if i % 2 == 0 else (b, a)):
            ms, proc = timed([exe, "--repo", str(repo), "explain", arg, "--brief", *extra], repo, env)
            if proc.returncode != 0:
                sys.exit(f"{exe} explain {arg} failed:\n{proc.stderr}")
            wall[exe].append(ms)
            out[exe] = proc.stdout
        same += out[a] == out[b]
    for exe in (a, b):
        helps = sorted(timed([exe, "--help"], repo, env)[0] for _ in range(10))
        w = sorted(wall[exe])
        print(f"{exe}: explain p50 {statistics.median(w):.1f} ms (p10 {w[len(w) // 10]:.1f}, "
              f"p90 {w[len(w) * 9 // 10]:.1f}); --help p50 {statistics.median(helps):.1f} ms")
    print(f"identical answers: {same}/{len(spans)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

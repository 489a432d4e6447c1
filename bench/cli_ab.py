"""Measures the command-line `engram explain --brief` of one install against another's, measured
span by span in the same run (alternating which goes first), with each install's `engram --help`
as its interpreter + import floor.

    python bench/cli_ab.py REPO OLD/bin/engram NEW/bin/engram [N] [-- extra explain args]

REPO is a repository kept by `bench/scale.py --keep` (its `_scale_spans/` files exist on disk).
Each of the first N spans (lines 1-20) is explained by both installs, alternating which goes
first, answered locally (ENGRAM_LOCAL=1); prints the p10/p50/p90 wall time of each, the
`engram --help` floor of each, and how many answers were byte-identical. The machine's speed
swings within minutes: only figures taken side by side like this compare two versions.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SPAN_DIR, SPAN_LINES, run_timed  # noqa: E402

LOCAL = {"ENGRAM_LOCAL": "1"}  # answered by the command itself, not by a running language server


def timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall milliseconds of `cmd`, and its process."""
    wall, _, proc = run_timed(cmd, cwd, LOCAL)
    return wall * 1e3, proc


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = argv[:argv.index("--")] if "--" in argv else argv
    if len(args) < 3 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    repo, a, b = Path(args[0]), args[1], args[2]
    n = int(args[3]) if len(args) > 3 else 40
    spans = sorted((repo / SPAN_DIR).iterdir())[:n]
    wall: dict[str, list[float]] = {a: [], b: []}
    same = 0
    for i, path in enumerate(spans):
        arg = f"{SPAN_DIR}/{path.name}:1-{min(SPAN_LINES, len(path.read_text().splitlines()))}"
        out = {}
        for exe in ((a, b) if i % 2 == 0 else (b, a)):
            ms, proc = timed([exe, "--repo", str(repo), "explain", arg, "--brief", *extra], repo)
            if proc.returncode != 0:
                sys.exit(f"{exe} explain {arg} failed:\n{proc.stderr}")
            wall[exe].append(ms)
            out[exe] = proc.stdout
        same += out[a] == out[b]
    for exe in (a, b):
        helps = sorted(timed([exe, "--help"], repo)[0] for _ in range(10))
        w = sorted(wall[exe])
        print(f"{exe}: explain p50 {statistics.median(w):.1f} ms (p10 {w[len(w) // 10]:.1f}, "
              f"p90 {w[len(w) * 9 // 10]:.1f}); --help p50 {statistics.median(helps):.1f} ms")
    print(f"identical answers: {same}/{len(spans)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

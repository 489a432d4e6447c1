"""Measures warm in-process explains straight after a pause, by what filled the pause (rg over the
corpus, an idle sleep, a busy process), against the same blocks explained back to back in the
same run.

    python bench/pause_ab.py --repo /tmp/engram-scale-run0-XXXX [--corpus bench/data/c1g] [--spans 200]

The scale bench pairs explains with rg in blocks of 10 spans (bench/scale.py, step 9), and the
paired explains come out slower than the warm row measured back to back. This script asks why,
on a store the scale bench kept (`--keep`): per block of 10 spans, in alternating order, it fills
a pause with rg over the corpus (the block's spans), with an idle sleep of the same length, or with
another process spinning on the CPU for as long, then times the block's explains as scale.py does
(`common.explain_block`), and it times the same blocks back to back.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Explainer, Lat, explain_block, require_rg, rg_files, sample_spans  # noqa: E402


def spin(seconds: float) -> None:
    """Keep a CPU busy in another process for `seconds` (no file I/O)."""
    subprocess.run([sys.executable, "-c", f"import time\nt = time.time()\nwhile time.time() - t < {seconds}: pass"],
                   check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="a store kept by bench/scale.py --keep")
    ap.add_argument("--corpus", type=Path, default=Path(__file__).parent / "data" / "c1g")
    ap.add_argument("--spans", type=int, default=200)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    projects = args.corpus / "projects"
    rg = require_rg("the rg pauses need it")
    cases = sample_spans(args.repo, args.spans, args.seed, corpus=projects)
    ex = Explainer(args.repo, brief=True)
    lats = {name: Lat() for name in ("back to back", "after rg", "after an idle sleep", "after a busy process")}
    for b in range(0, len(cases), 10):
        group = cases[b:b + 10]
        order = ["after rg", "after an idle sleep", "after a busy process", "back to back"]
        if (b // 10) % 2:
            order.reverse()
        pause = 0.0
        for name in order:
            if name == "after rg":
                t0 = time.perf_counter()
                for c in group:
                    rg_files(rg, projects, c.needle)
                pause = time.perf_counter() - t0
            elif name == "after an idle sleep":
                time.sleep(pause or 1.3)
            elif name == "after a busy process":
                spin(pause or 1.3)
            explain_block(ex, group, args.passes, lats[name])
    ex.close()
    for name, lat in lats.items():
        print(f"{name:22} {lat.row()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Peak memory of `engram ingest` on a plain-text session holding one huge line (issue 50 point 9).

Prints, per line size, the process's peak resident memory (ru_maxrss) ingesting a file of short
notes around one line of that size, against the reference measured in the same run: the same notes
without the line. Lines over `ingest.max_line_bytes` (32 MiB) are skipped a block at a time, so the
peak stays near the reference; a line under it is kept (peak ≈ reference + a few times the line).

    python bench/ingest_memory.py [--sizes 8,50,100]   (MiB)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

CODE = ("import resource, sys\nfrom engram.cli.main import main\nrc = main(['ingest', sys.argv[1]])\n"
        "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr)\n")


def peak(repo: Path, path: Path) -> int:
    proc = subprocess.run([sys.executable, "-c", CODE, str(path)], cwd=repo, capture_output=True, text=True,
                          check=True)
    return int(proc.stderr.rsplit("MAXRSS", 1)[1].split()[0])


def session(path: Path, line_mib: int) -> Path:
    with path.open("w") as f:
        f.write("a note kept before the long line\n\n")
        block = "word " * (1 << 18)  # 1.25 MiB
        for _ in range((line_mib << 20) // len(block)):
            f.write(block)
        f.write("\nand a note kept after it\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,50,100", help="line sizes in MiB, comma-separated")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        rows = []
        for i, mib in enumerate([0, *map(int, args.sizes.split(","))]):
            repo = base / f"r{i}"
            repo.mkdir()
            subprocess.run([sys.executable, "-m", "engram.cli", "init"], cwd=repo, capture_output=True, check=True)
            rows.append((mib, peak(repo, session(base / f"s{i}.txt", mib))))
            (base / f"s{i}.txt").unlink()
    ref = rows[0][1]
    print(f"{'line':>10} {'peak RSS':>10} {'over reference':>15}")
    for mib, rss in rows:
        label = "reference" if mib == 0 else f"{mib} MiB"
        print(f"{label:>10} {rss / 2**20:>8.0f} MiB {(rss - ref) / 2**20:>12.0f} MiB")


if __name__ == "__main__":
    main()

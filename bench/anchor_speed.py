"""Measures the throughput of anchoring (tokenize + k-gram hash + winnow) on realistic transcript
text, against the obvious pure-Python implementation (regex tokens, one xxh3 call per token and
per k-gram, a min() per window) timed in the same run on a 2 MB slice.

    python bench/anchor_speed.py [--mb 50] [--repeat 3] [--k 5] [--w 4]

The text is the decoded message and tool text of the real Claude Code sessions in
/work/shared/fixtures/transcripts/claude-spotter (prose, code, Read results with
``cat -n`` arrows, shell output), repeated up to --mb megabytes.  Rows for many small
texts show the per-call overhead that ``fingerprints_many`` removes.  The reference row
shows what vectorising buys.
Prints a table with wall-clock and CPU-time throughput; the best of --repeat runs
counts (other processes may share the machine: the load average is printed too).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import best_of, json_strings  # noqa: E402
from engram.anchor import (DEFAULT_K, DEFAULT_W, fingerprints, fingerprints_bytes, fingerprints_many,  # noqa: E402
                           tokenize_bytes)

FIXTURES = os.environ.get("ENGRAM_SPOTTER", "/work/shared/fixtures/transcripts/claude-spotter")
NOT_TEXT = frozenset({"id", "tool_use_id", "signature", "type"})


def corpus_texts() -> list[str]:
    """Message/tool text of the fixture sessions, one string per content item, in file order."""
    out: list[str] = []
    paths = sorted(glob.glob(os.path.join(FIXTURES, "**", "*.jsonl"), recursive=True))
    if not paths:
        sys.exit(f"no transcripts under {FIXTURES} (set ENGRAM_SPOTTER)")
    for p in paths:
        for line in Path(p).read_text(encoding="utf-8", errors="surrogatepass").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = rec.get("message")
            if isinstance(msg, dict):
                json_strings(msg.get("content"), out, NOT_TEXT)
    return out


_TOKEN = re.compile(r"[A-Za-z_\u0080-\U0010ffff][\w\u0080-\U0010ffff]*|[0-9][\w.]*|\S")


def naive(text: str, k: int, w: int) -> list[int]:
    """Per-token Python: what the numpy version replaces."""
    hs = [xxhash.xxh3_64_intdigest(m.group().encode("utf-8", "surrogatepass")) for m in _TOKEN.finditer(text)]
    kg = [xxhash.xxh3_64_intdigest(b"".join(h.to_bytes(8, "little") for h in hs[i : i + k]))
          for i in range(len(hs) - k + 1)]
    picked: list[int] = []
    for i in range(len(kg) - w + 1):
        win = kg[i : i + w]
        m = min(win)
        pos = i + w - 1 - win[::-1].index(m)
        if not picked or picked[-1] != pos:
            picked.append(pos)
    return [kg[p] for p in picked]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--k", type=int, default=DEFAULT_K)
    ap.add_argument("--w", type=int, default=DEFAULT_W)
    args = ap.parse_args()

    items = corpus_texts()
    base = "\n".join(items)
    base_mb = len(base.encode("utf-8", "surrogatepass")) / 1e6
    times = max(1, round(args.mb / base_mb))
    text = "\n".join([base] * times)
    data = text.encode("utf-8", "surrogatepass")
    mb = len(data) / 1e6
    slice_text = data[: 2_000_000].decode("utf-8", "ignore")
    slice_mb = len(slice_text.encode("utf-8", "surrogatepass")) / 1e6

    rows: list[tuple[str, float, float, float, str]] = []
    t, c, fp = best_of(lambda: fingerprints(text, args.k, args.w), args.repeat)
    rows.append(("fingerprints(str): encode+tokenize+winnow", mb, t, c, f"{len(fp):,} fingerprints"))
    t, c, fp = best_of(lambda: fingerprints_bytes(data, args.k, args.w), args.repeat)
    rows.append(("fingerprints_bytes(bytes): tokenize+winnow", mb, t, c, f"{len(fp):,} fingerprints"))
    t, c, tok = best_of(lambda: tokenize_bytes(data), args.repeat)
    rows.append(("tokenize_bytes(bytes) only", mb, t, c, f"{len(tok):,} tokens"))
    many = items * times
    t, c, fp = best_of(lambda: fingerprints_many(many, args.k, args.w), args.repeat)
    rows.append((f"fingerprints_many: {len(many):,} event texts", mb, t, c, f"{len(fp):,} fingerprints"))
    t, c, _ = best_of(lambda: [fingerprints(x, args.k, args.w) for x in items], args.repeat)
    rows.append((f"fingerprints() per event: {len(items):,} texts", base_mb, t, c, "one call per text"))
    t, c, ref = best_of(lambda: naive(slice_text, args.k, args.w), 1)
    rows.append(("naive per-token Python (regex+xxh3), 2 MB", slice_mb, t, c, f"{len(ref):,} fingerprints"))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"corpus: {base_mb:.1f} MB of message/tool text from {FIXTURES}, repeated to {mb:.1f} MB; "
          f"k={args.k} w={args.w}; best of {args.repeat}; one thread; numpy {np.__version__}; "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print(f"{'what':46s} {'MB':>6s} {'wall s':>7s} {'MB/s':>7s} {'cpu s':>7s} {'MB/s':>7s}  notes")
    for name, size, wall, cpu, note in rows:
        print(f"{name:46s} {size:6.1f} {wall:7.3f} {size / wall:7.1f} {cpu:7.3f} {size / max(cpu, 1e-9):7.1f}  {note}")

if __name__ == "__main__":
    main()

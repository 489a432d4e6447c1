#!/usr/bin/env python3
"""Measures how large an `engram explain` answer is: the JSON for 20-line spans under the default
token budget (what the command prints when a program or an agent reads it), against the answer
without clipping or budget (every window's texts whole, as explain answered before issue 46)
computed in the same run on the same spans, and whether the writer still comes first.

    python bench/explain_size.py --fixtures                     # the shipped spotter sessions
    python bench/explain_size.py --repo /tmp/engram-scale-XXXX   # a store bench/scale.py --keep left
    python bench/explain_size.py --corpus bench/data/c1g         # ingests a fresh store from a corpus

Spans: `--spans` 20-line spans of code.edit after-texts of random tapes, written into the working
tree (as bench/scale.py samples them, `_size_spans/`). Each is explained in-process on one open
connection with the repository's explain settings (windows 3/3) in three ways:

1. bounded: `--budget` tokens (default 4,000: the CLI's and the MCP tool's default), windows
   clipped, each session's story: compact JSON bytes (what `engram explain` prints to a pipe), and
   the indented bytes it prints on a terminal;
2. unbounded reference: no budget, windows' texts whole (cut at 20,000 characters), no story;
3. with the budget off but windows clipped (`--budget 0`), to tell the clipping from the budget.

For each: bytes p50 / p99 / max, wall time p50, and R@1: the share of spans whose first session is
the session of the tape the span was taken from (the writer), and how often the bounded answer's
first session is the unbounded one's. Targets (issue 46): bounded p50 <= 16 KB, p99 <= 32 KB, the
writer first as often as without the bound.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    SpanCase,
    cold_start_ingest,
    engram_version,
    fmt_table,
    load,
    machine,
    pct,
    sample_spans,
    top_session,
    verdict,
)

SPAN_DIR = "_size_spans"
TARGET_P50 = 16_000
TARGET_P99 = 32_000
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "claude" / "spotter"


def fixture_repo(engram: list[str], workdir: Path) -> Path:
    """A fresh repository with the shipped spotter sessions (zstd-compressed in tests/fixtures) ingested."""
    import zstandard

    sessions = workdir / "sessions"
    for p in sorted(FIXTURES.rglob("*.zst")):
        out = sessions / str(p.relative_to(FIXTURES))[: -len(".zst")]
        out.parent.mkdir(parents=True, exist_ok=True)
        with p.open("rb") as f, out.open("wb") as g:
            zstandard.ZstdDecompressor().copy_stream(f, g)
    repo = workdir / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*engram, "init"], cwd=repo, check=True, capture_output=True)
    subprocess.run([*engram, "ingest", str(sessions)], cwd=repo, check=True, capture_output=True)
    return repo


class Way:
    def __init__(self, name: str) -> None:
        self.name, self.compact, self.indented, self.wall, self.first = name, [], [], [], []  # type: ignore[var-annotated]
        self.writer_first = 0

    def add(self, doc: dict[str, Any], wall: float, case: SpanCase) -> None:
        self.compact.append(len(orjson.dumps(doc)) + 1)  # + the newline the CLI ends with
        self.indented.append(len(orjson.dumps(doc, option=orjson.OPT_INDENT_2)) + 1)
        self.wall.append(wall)
        self.first.append(top_session(doc))
        self.writer_first += top_session(doc) == case.session

    def row(self, n: int, note: str = "") -> list[str]:
        return [self.name, f"{pct(self.compact, 50):,.0f}", f"{pct(self.compact, 99):,.0f}", f"{max(self.compact):,}",
                f"{pct(self.indented, 50):,.0f}", f"{pct(self.wall, 50) * 1000:.1f}", f"{self.writer_first / n:.3f}",
                note]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--fixtures", action="store_true", help="the shipped spotter sessions, ingested afresh")
    src.add_argument("--repo", type=Path, help="an ingested repository (e.g. one bench/scale.py --keep left)")
    src.add_argument("--corpus", type=Path, help="a generated corpus, ingested into a fresh repository")
    ap.add_argument("--engram", default=f"{sys.executable} -m engram.cli", help="the engram command (to ingest)")
    ap.add_argument("--spans", type=int, default=200, help="20-line spans")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--budget", type=int, default=4000, help="tokens (the default of the CLI and MCP)")
    args = ap.parse_args(argv)
    engram = args.engram.split()
    tmp = None
    if args.fixtures:
        tmp = Path(tempfile.mkdtemp(prefix="engram-size-"))
        repo = fixture_repo(engram, tmp)
        what = f"the shipped spotter sessions ({FIXTURES.relative_to(FIXTURES.parents[3])})"
    elif args.corpus is not None:
        run = cold_start_ingest(None, engram, args.corpus.resolve() / "projects", "size")
        repo, what = run.repo, f"{args.corpus} ({run.summary})"
    else:
        repo, what = args.repo.resolve(), str(args.repo)
    try:
        return measure(repo, what, args)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def measure(repo: Path, what: str, args: argparse.Namespace) -> int:
    from engram.index.db import open_db
    from engram.query.explain import Options, explain
    from engram.query.spans import read_span
    from engram.store.repo import Store

    print(f"machine: {machine()}")
    print(f"engram under test: {engram_version()}")
    print(f"store: {what}")
    cases = sample_spans(repo, args.spans, args.seed, span_dir=SPAN_DIR)
    print(f"spans: {len(cases)} x 20 lines; budget {args.budget:,} tokens; load average {load()}", flush=True)
    store = Store.discover(repo)
    cfg = store.config["explain"]
    win = {"before": int(cfg["window"]["before"]), "after": int(cfg["window"]["after"])}
    ways = {"bounded": (Way(f"bounded: --budget {args.budget}"), Options(**win, budget=args.budget)),
            "clipped": (Way("windows clipped, --budget 0"), Options(**win)),
            "reference": (Way("unbounded reference (texts whole)"), Options(**win, context=None, story=False))}
    db = open_db(store)
    try:
        for c in cases[:5]:  # warm-up
            explain(store, db, read_span(repo, c.rel, c.start, c.end, repo), ways["bounded"][1])
        for c in cases:
            span = read_span(repo, c.rel, c.start, c.end, repo)
            lines = (repo / c.rel).read_text().splitlines()
            for way, opts in ways.values():
                t0 = time.perf_counter()
                doc = explain(store, db, span, opts, file_lines=lines)
                way.add(doc, time.perf_counter() - t0, c)
    finally:
        db.close()
    n = len(cases)
    bounded, ref = ways["bounded"][0], ways["reference"][0]
    same = sum(a == b for a, b in zip(bounded.first, ref.first))
    print()
    print(fmt_table(["answer", "bytes p50", "p99", "max", "indented p50", "ms p50", "R@1", ""], [
        bounded.row(n, f"first session as unbounded: {same}/{n}"),
        ways["clipped"][0].row(n), ref.row(n, "reference")]))
    ok50, ok99 = pct(bounded.compact, 50) <= TARGET_P50, pct(bounded.compact, 99) <= TARGET_P99
    ok_r1 = bounded.writer_first >= ref.writer_first
    print(f"\ntargets: p50 <= {TARGET_P50:,} B {verdict(ok50)}; p99 <= {TARGET_P99:,} B {verdict(ok99)}; "
          f"writer first as often as unbounded ({bounded.writer_first} vs {ref.writer_first}) {verdict(ok_r1)}; "
          f"bounded p50 is {pct(ref.compact, 50) / max(1, pct(bounded.compact, 50)):.0f}x smaller")
    return 0 if ok50 and ok99 and ok_r1 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Explain's answers span by span, as JSON lines, so that two versions of engram can be diffed.

    python bench/rankings.py prepare DIR [--spans-per-size 60] [--seed 1] [--sessions SRC [--history GIT_DIR]]
    python bench/rankings.py sample REPO [--spans 200] [--seed 1] [--edited]
    python bench/rankings.py answer DIR [--engine numpy|plain|cli] [--rank touches|evidence] > A.jsonl
    PYTHONPATH=OTHER_CHECKOUT python bench/rankings.py answer DIR ... > B.jsonl && diff A.jsonl B.jsonl

It measures nothing: it is the check that a change meant to leave explain's answers alone (a
refactoring of the ranking rules, engram.query.ranking) did. The reference is the other version's
output on the very same store and spans, line for line.

- `prepare DIR` builds what bench/provenance.py measures, with its own functions: the shipped
  fixture sessions (or every session under --sessions SRC) ingested into a test repository
  DIR/repo and indexed with the default k and w, and the mutated spans (13 mutations of seeded
  3-, 10- and 30-line spans the sessions wrote). It writes them to DIR/queries.jsonl: the span
  to explain and the files the mutation changed.
- `sample REPO` takes spans of a store already ingested (say a corpus of bench/gen_sessions.py
  ingested with `engram ingest`) as bench/scale.py takes them: 20-line spans of code.edit
  after-texts, each written into the working tree under `_scale_spans/` (`--edited`: each also
  edited as bench/provenance.py's edit30-spread edits, whole and 3 lines of it). It writes
  REPO/.engram-rankings/queries.jsonl; `answer REPO` then reads it.
- `answer DIR` (DIR from `prepare`, or a REPO from `sample`) prints, for each query in order, what
  `engram explain FILE:A-B --brief` answers, in full (sessions in rank order, each with its
  fragments, confidences and `via`; the span answered and why it was widened), one JSON line per
  query with sorted keys. Each query's files are written into the working tree before it is
  asked and restored after, as bench/provenance.py's `read_spans` does. `--engine` is how it is
  asked: `numpy` in this process with numpy loaded (the language server's and the MCP
  endpoint's way), `plain` in this process without numpy for every span short enough (the
  command line's way: `direct.use_small`; the longer ones come last and load it), `cli` by
  running the command itself for each query (slow: a process each). `--debug` adds each
  answer's `ranking` (which rules changed it), to see which rules the queries exercise.

The engram that answers is the one on PYTHONPATH: run the same script under each version's
PYTHONPATH (or each checkout's copy of it) on one prepared DIR.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
QUERIES = "queries.jsonl"
SAMPLE_DIR = ".engram-rankings"  # under a sampled repository: its queries file


def _repo_and_queries(where: Path) -> tuple[Path, Path]:
    """The repository and queries file of `where` (a `prepare` DIR, or a `sample`d REPO)."""
    if (where / QUERIES).exists():
        return where / "repo", where / QUERIES
    if (where / SAMPLE_DIR / QUERIES).exists():
        return where, where / SAMPLE_DIR / QUERIES
    raise SystemExit(f"{where}: no {QUERIES} here: run `prepare` or `sample` first")


def prepare(args: argparse.Namespace) -> int:
    """Build the test repository, its store and the mutated spans of bench/provenance.py."""
    sys.path.insert(0, str(HERE))
    import provenance  # noqa: PLC0415 - a bench script beside this one

    work: Path = args.dir
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"{work}: not empty")
    work.mkdir(parents=True, exist_ok=True)
    _, repo, queries, _ = provenance.prepare(work, args.spans_per_size, args.seed, args.sessions, args.history)
    store = provenance.engram_env(repo, [work / "transcripts"])
    db, postings, _ = provenance.build_index(store, args.k, args.w)
    db.close()
    with (work / QUERIES).open("wb") as f:
        for i, q in enumerate(queries):
            f.write(orjson.dumps({"query": i, "span": f"{q.path}:{q.start}-{q.end}", "mutation": q.mutation,
                                  "size": q.size, "files": q.files}) + b"\n")
    print(f"{len(queries)} queries in {work / QUERIES}; store {repo / '.engram'} ({postings} postings)")
    return 0


def sample(args: argparse.Namespace) -> int:
    """Spans of an ingested store, as bench/scale.py samples them; with `--edited`, each also with
    30% of its tokens replaced on every line, and 3 lines of its middle so edited."""
    sys.path.insert(0, str(HERE))
    import provenance  # noqa: PLC0415 - bench scripts beside this one
    import scale  # noqa: PLC0415

    repo: Path = args.repo.resolve()
    cases = scale.sample_spans(repo, args.spans, args.seed)
    rng = random.Random(args.seed)
    queries = []
    for c in cases:
        queries.append({"span": f"{c.rel}:{c.start}-{c.end}", "mutation": "none", "files": {}})
        if not args.edited:
            continue
        lines = (repo / c.rel).read_text(encoding="utf-8").splitlines()
        mid = (c.start + c.end) // 2
        for a, b in ((c.start, c.end), (mid - 1, mid + 1)):
            block, _ = provenance.edit_tokens(lines[a - 1:b], 0.3, spread=True, rng=rng)
            queries.append({"span": f"{c.rel}:{a}-{b}", "mutation": "edit30-spread",
                            "files": {c.rel: "\n".join([*lines[:a - 1], *block, *lines[b:]]) + "\n"}})
    out = repo / SAMPLE_DIR
    out.mkdir(exist_ok=True)
    with (out / QUERIES).open("wb") as f:
        for i, q in enumerate(queries):
            f.write(orjson.dumps({"query": i, **q}) + b"\n")
    print(f"{len(queries)} queries ({len(cases)} spans) in {out / QUERIES}")
    return 0


@contextmanager
def _written(repo: Path, files: dict[str, str]) -> Iterator[None]:
    """The working tree with `files` (repository path → content) written into it, then restored.

    `common.written` does the same, but importing `common` loads numpy, which `--engine plain`
    must answer without."""
    backup = {p: ((repo / p).read_bytes() if (repo / p).exists() else None) for p in files}
    try:
        for p, content in files.items():
            (repo / p).parent.mkdir(parents=True, exist_ok=True)
            (repo / p).write_text(content, encoding="utf-8")
        yield
    finally:
        for p, old in backup.items():
            if old is None:
                (repo / p).unlink()
            else:
                (repo / p).write_bytes(old)


def _span_chars(repo: Path, q: dict[str, Any]) -> int:
    """The length of the text `q` asks about (which way a command-line explain matches it)."""
    path, _, lines = q["span"].rpartition(":")
    start, end = (int(x) for x in lines.split("-"))
    text = q["files"].get(path)
    if text is None:
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
    return len("\n".join(text.splitlines()[start - 1:end]) + "\n")


def _params(store: Any, q: dict[str, Any], repo: Path, rank: str | None, debug: bool) -> dict[str, Any]:
    """What `engram explain FILE:A-B --brief` sends `explain_request` (engram.query.requests)."""
    cfg = store.config["explain"]
    return {"before": int(cfg["window"]["before"]), "after": int(cfg["window"]["after"]), "brief": True,
            "include_deleted": False, "forensics": False, "min_confidence": float(cfg["min_confidence"]),
            "expand_until": None, "rank": rank or str(cfg["rank"]), "span": q["span"], "cwd": str(repo),
            **({"debug": True} if debug else {})}


def _cli(repo: Path, q: dict[str, Any], rank: str | None, debug: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "engram.cli", "explain", q["span"], "--brief", *(["--rank", rank] if rank else []),
           *(["--debug"] if debug else [])]
    out = subprocess.run(cmd, cwd=repo, env={**os.environ, "ENGRAM_LOCAL": "1"}, capture_output=True, check=True)
    return orjson.loads(out.stdout)


def answer(args: argparse.Namespace) -> int:
    """Every query's explain document, one sorted JSON line each, in query order."""
    if args.engine == "numpy":
        import numpy  # noqa: F401, PLC0415 - matched with numpy, as a long-lived process does
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.query.requests import explain_request  # noqa: PLC0415
    from engram.query.direct import SMALL_TEXT  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    repo, path = _repo_and_queries(args.dir.resolve())
    queries = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    if args.limit:
        queries = queries[:args.limit]
    store = Store.discover(repo)
    order = list(range(len(queries)))
    if args.engine == "plain":  # the short ones while numpy is not loaded; the long ones load it
        order.sort(key=lambda i: _span_chars(repo, queries[i]) > SMALL_TEXT)
    docs: dict[int, bytes] = {}
    with_numpy = 0
    with closing(open_db(store, readonly=True)) as db:
        for i in order:
            q = queries[i]
            with _written(repo, q["files"]):
                if args.engine == "cli":
                    doc = _cli(repo, q, args.rank, args.debug)
                else:
                    with_numpy += "numpy" in sys.modules
                    doc = explain_request(store, db, _params(store, q, repo, args.rank, args.debug))
            docs[i] = orjson.dumps({"query": q["query"], "span": q["span"], "mutation": q["mutation"], "answer": doc},
                                   option=orjson.OPT_SORT_KEYS)
    out = sys.stdout.buffer
    for i in range(len(queries)):
        out.write(docs[i] + b"\n")
    import engram  # noqa: PLC0415

    print(f"engram of {Path(engram.__file__).parent.parent}: {len(queries)} queries"
          + (f", {with_numpy} answered with numpy loaded" if args.engine != "cli" else ""), file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="bench/provenance.py's repository, store and mutated spans")
    p.add_argument("dir", type=Path)
    p.add_argument("--spans-per-size", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--k", type=int, help="tokens per k-gram (default: engram.anchor's)")
    p.add_argument("--w", type=int, help="winnowing window (default: engram.anchor's)")
    p.add_argument("--sessions", type=Path, metavar="SRC", help="as bench/provenance.py --sessions")
    p.add_argument("--history", type=Path, metavar="GIT_DIR", help="as bench/provenance.py --history")
    p.set_defaults(func=prepare)
    p = sub.add_parser("sample", help="20-line spans of an ingested store, as bench/scale.py takes them")
    p.add_argument("repo", type=Path)
    p.add_argument("--spans", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--edited", action="store_true",
                   help="also each span, and 3 lines of it, with 30%% of the tokens replaced on every line")
    p.set_defaults(func=sample)
    p = sub.add_parser("answer", help="explain's answer to every query, as JSON lines")
    p.add_argument("dir", type=Path, help="a prepared DIR, or a sampled REPO")
    p.add_argument("--engine", choices=("numpy", "plain", "cli"), default="numpy")
    p.add_argument("--rank", choices=("touches", "evidence"), help="default: the store's setting")
    p.add_argument("--limit", type=int, help="the first N queries only")
    p.add_argument("--debug", action="store_true",
                   help="ask with --debug (the rules that changed each answer; not for a version without it)")
    p.set_defaults(func=answer)
    args = ap.parse_args(argv)
    if args.command == "prepare" and (args.k is None or args.w is None):
        from engram.anchor import DEFAULT_K, DEFAULT_W  # noqa: PLC0415

        args.k, args.w = args.k or DEFAULT_K, args.w or DEFAULT_W
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())

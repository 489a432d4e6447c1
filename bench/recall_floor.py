"""Where recall's dense floor comes from: how close is the nearest memory by meaning when no memory
shares a word with the query, for a query the store has no answer to, and for one it has?

    python bench/recall_floor.py PATH/locomo10-dev.json [--tune 0,1,2]

Recall trusts a memory found by meaning alone (BM25 found no memory at all) only when its cosine
reaches `recall.DENSE_FLOOR`; below it, the answer says nothing matches and lists the nearest
memories apart, as weak. On LoCoMo (bench/locomo.py: each turn one memory, "Speaker: text"):

- **unanswered**: each question asked of *another* conversation's store (its people and events are
  not there), when BM25 finds no memory there: the cosine of the nearest memory. These are
  in-domain near misses (someone else's birthday, another support group): the hardest case.
- **off-domain**: coding questions (OFF_DOMAIN) asked of each store, when BM25 finds nothing.
- **answered**: each question against its own evidence turns (the best cosine): what a related
  note scores. A floor keeps the share of these at or above it.

The floor is chosen on the questions of the `--tune` conversations; the others are reported apart
(held out). LoCoMo's own questions all share a word with some turn of their own conversation, so
the floor never acts on them: `bench/locomo.py --engine engram` gives the same figures with it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_table, load, machine  # noqa: E402
from locomo import ScriptStore, read_locomo  # noqa: E402
from engram.memory.embed import Embedder  # noqa: E402
from engram.memory.recall import DENSE_FLOOR  # noqa: E402

OFF_DOMAIN = [
    "how is the database connection pool sized", "kubernetes pod eviction policy",
    "why does the parser reject tabs", "where is the JWT signing key rotated",
    "what is the retry backoff for the HTTP client", "which compiler flags does the release build use",
    "how are migrations numbered in the schema", "the websocket reconnect logic",
    "who owns the billing microservice", "why was the redis cache removed",
    "gzip compression level of the uploads", "mutex ordering in the scheduler",
    "CI pipeline timeout for integration tests", "the regex that validates email addresses",
    "garbage collector pauses in the JVM service", "how do we shard the postgres tables",
    "terraform state locking", "python import cycle in utils", "rate limiting of the public API",
    "the deprecation of the v1 endpoints",
]
FLOORS = (0.30, 0.35, 0.40, 0.45, 0.50)


def measure(stores: list[ScriptStore], qvecs: list[np.ndarray], which: list[int]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"unanswered": [], "answered": [], "answered, BM25 nothing": []}
    for ci in which:
        own = stores[ci]
        for q, v in zip(own.conv.questions, qvecs[ci], strict=True):
            best = max(float(own.vectors[own.row[e]] @ v) for e in q.evidence)
            out["answered"].append(best)
            if not own.bm25(q.text)[0]:
                out["answered, BM25 nothing"].append(best)
            for cj, other in enumerate(stores):
                if cj != ci and not other.bm25(q.text)[0]:
                    out["unanswered"].append(float((other.vectors @ v).max()))
    return out


def off_domain(stores: list[ScriptStore], embedder: Embedder) -> list[float]:
    vectors = embedder.embed(OFF_DOMAIN)
    return [float((s.vectors @ v).max()) for s in stores for text, v in zip(OFF_DOMAIN, vectors, strict=True)
            if not s.bm25(text)[0]]


def _pcts(xs: list[float]) -> list[str]:
    if not xs:
        return ["0", *["-"] * 5]
    a = np.array(xs)
    return [str(len(a)), *(f"{np.percentile(a, p):.3f}" for p in (50, 90, 95, 99)), f"{a.max():.3f}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="locomo10-dev.json (see bench/README.md, 'locomo.py')")
    ap.add_argument("--tune", default="0,1,2", help="indices of the conversations the floor is chosen on")
    args = ap.parse_args(argv)
    print(f"machine: {machine()}; load {load()}")
    convs = read_locomo(args.path)
    embedder = Embedder.shared()
    stores = [ScriptStore(c, embedder) for c in convs]
    qvecs = [embedder.embed([q.text for q in c.questions]) for c in convs]
    tune = [int(x) for x in args.tune.split(",") if x.strip()]
    held = [i for i in range(len(convs)) if i not in tune]
    halves = {"tuning": measure(stores, qvecs, tune), "held out": measure(stores, qvecs, held)}
    off = off_domain(stores, embedder)
    rows = [[f"{half}: {name}", *_pcts(xs)] for half, got in halves.items() for name, xs in got.items()]
    rows.append(["off-domain (all stores)", *_pcts(off)])
    print("\ncosine of the nearest memory (answered: of the best evidence turn)\n")
    print(fmt_table(["queries", "n", "p50", "p90", "p95", "p99", "max"], rows))
    print("\nshare of unanswered queries whose nearest memory falls below the floor (cut), and of answered "
          "ones at or above it (kept)\n")
    table = []
    for floor in FLOORS:
        row = [f"{floor:.2f}{' (recall)' if abs(floor - DENSE_FLOOR) < 1e-9 else ''}"]
        for got in halves.values():
            row += [f"{np.mean(np.array(got['unanswered']) < floor):.3f}",
                    f"{np.mean(np.array(got['answered']) >= floor):.3f}"]
        row.append(f"{np.mean(np.array(off) < floor):.3f}" if off else "-")
        table.append(row)
    print(fmt_table(["floor", "tuning: cut", "tuning: kept", "held out: cut", "held out: kept", "off-domain: cut"],
                    table))
    print(f"\nload {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory speed in-process: recall (warm) at 1k / 10k / 100k memories, remember, embedding
throughput and model load, with FTS5 BM25 alone timed on the same queries as the reference.

    python bench/memory_speed.py [--sizes 1000,10000,100000] [--queries 200] [--remembers 50] [--cli 20]

Each size is a fresh store in a temporary directory, filled through `import_records` (one append
of the whole log, dedup off) with synthetic notes: 8-30 words drawn from a 5,000-word vocabulary
with a Zipf distribution (a few words in every note, most in few), 1 in 20 anchored to a span of a
generated file. 1,000 notes are embedded by the model; beyond that the notes get random unit
vectors, written to `memory_vectors` directly (embedding 100,000 notes takes ~15 min here; a
recall's cost does not depend on the vectors' values). Queries are 2-4 words of a random note.

Rows: recall p50/p99 over --queries queries (the second pass: warm), with the dense channel's
query embedding included, and FTS5 BM25 alone on the same queries (the OR of their words, as
recall's match below 10,000 memories: the reference); remember p50/p99 (wall and CPU) with the
model loaded (as in a language server or `engram mcp`; a tree that embeds inline pays the model
here, one that defers it pays it in "its vector later": the remembers' pending vectors made
afterwards as a server does, `embed_remembered`, in one call, with the cosine half of dedup, per note), and p50 without it (as from the command
line); fsync included. `--cli N`: `engram recall QUERY --json`
as a command, N queries, with `engram lsp` running on the repository (the command hands the
request to it: engram/cli/running_server.py), and with ENGRAM_LOCAL=1 (done in the command's own
process, loading the model: the reference), wall time of the whole process.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import engram_command, engram_version, fmt_table, language_server, load, machine, ms, pct, verdict  # noqa: E402

from engram.memory import vectors  # noqa: E402
from engram.memory.fusion import fts_query  # noqa: E402
from engram.memory.interchange import import_records  # noqa: E402
from engram.memory.memories import Memories  # noqa: E402
from engram.memory.recall import recall  # noqa: E402
from engram.store.repo import init_store  # noqa: E402

TARGETS = {"recall_p50": 0.020, "recall_p99": 0.050, "remember": 0.030, "cli": 0.150}
EMBEDDED = 1000


def vocabulary(n: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def notes(n: int, vocab: list[str], rng: random.Random) -> list[str]:
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    weights /= weights.sum()
    picks = np.random.default_rng(rng.randint(0, 1 << 30)).choice(len(vocab), size=(n, 30), p=weights)
    return [" ".join(vocab[i] for i in row[:rng.randint(8, 30)]) for row in picks]


def fill(root: Path, texts: list[str], rng: random.Random) -> Memories:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(2000)))
    store, _ = init_store(root)
    mem = Memories(store)
    records = []
    for i, text in enumerate(texts):
        rec = {"content": text, "kind": rng.choice(["fact", "decision", "pattern", "debug"]),
               "tags": [f"t{rng.randint(0, 50)}"], "created": f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}"}
        if i % 20 == 0:
            a = rng.randint(0, 1990) * 3 + 1
            rec["at"] = f"src/app.py:{a}-{a + 1}"
        records.append(("bench", i + 1, rec))
    import_records(mem, records, dedup=False)
    return mem


def give_vectors(mem: Memories) -> None:
    """The model's vectors for the first EMBEDDED notes, random unit vectors for the rest."""
    vectors.embed_pending(mem.db, limit=EMBEDDED)
    key = vectors.model_key()
    rest = vectors.pending(mem.db)
    rng = np.random.default_rng(7)
    for i in range(0, len(rest), 5000):
        batch = rest[i:i + 5000]
        vecs = rng.standard_normal((len(batch), vectors.DIMS)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        with mem.db:
            mem.db.executemany("INSERT OR REPLACE INTO memory_vectors(hash, model, vec) VALUES(?, ?, ?)",
                               ((h, key, vecs[j].tobytes()) for j, (h, _) in enumerate(batch)))
    mem.db.execute("UPDATE memory_state SET value = value + 1 WHERE key = 'seq'")
    mem.db.execute("UPDATE memories SET seq = (SELECT value FROM memory_state WHERE key = 'seq')")


CPU: dict[int, list[float]] = {}  # id of a list timings() returned -> the same calls' CPU times


def timings(fn, items: list) -> list[float]:  # noqa: ANN001
    """Wall time of each call; the calls' CPU time of the process (every thread: recall embeds the
    query on a thread of its own) is kept in CPU (cpu_of): on a shared machine wall time is mostly
    waiting for a core, CPU time is what the code costs."""
    out, cpu = [], []
    for item in items:
        t, c = time.perf_counter(), time.process_time()
        fn(item)
        out.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    CPU[id(out)] = cpu
    return out


def cpu_of(wall: list[float]) -> list[float]:
    return CPU[id(wall)]


def measure(mem: Memories, queries: list[str], texts: list[str], vocab: list[str], rng: random.Random,
            remembers: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """(recall, BM25 alone, remember with the model loaded, remember without) latencies; recall's
    second pass (the first loads the matrix, the anchors' cache and SQLite's pages)."""
    def ask(q: str) -> None:
        recall(mem, q, limit=10, reinforce=False)

    def bm25(q: str) -> None:
        mem.db.execute("SELECT m.no, m.id, f.rank FROM memory_fts f JOIN memories m ON m.no = f.rowid WHERE"
                       " memory_fts MATCH ? AND m.status = 'active' ORDER BY f.rank LIMIT 100", (fts_query(q),)).fetchall()

    def write(i: int) -> None:
        mem.remember(f"{rng.choice(texts)} {vocab[i]} extra note {i}")

    timings(ask, queries)
    lat, lat_bm25 = timings(ask, queries), timings(bm25, queries)
    rem = timings(write, list(range(remembers)))
    later = _embed_later(mem)
    vectors._asked.clear()  # as from the command line: no model in the process, the vector comes later
    rem_cli = timings(write, list(range(remembers, 2 * remembers)))
    vectors._asked.set()
    return lat, lat_bm25, rem, rem_cli, later


def _embed_later(mem: Memories) -> tuple[int, float, float]:
    """(notes, wall, CPU) of making the vectors the remembers left pending, in one batch with the
    cosine half of dedup (what a server does right after answering; nothing where remember
    embedded inline)."""
    embed = getattr(mem, "embed_remembered", None)
    if embed is None:
        return 0, 0.0, 0.0
    t, c = time.perf_counter(), time.process_time()
    n = embed(limit=10_000)
    return n, time.perf_counter() - t, time.process_time() - c


def cli_recall(root: Path, queries: list[str]) -> tuple[list[float], list[float]]:
    """Wall times of `engram recall QUERY --json` as a command: with `engram lsp` running on the
    repository (after 3 warm-up calls), and with ENGRAM_LOCAL=1 (the reference)."""
    beside = Path(sys.executable).with_name("engram")  # the installed script itself, not a version manager's shim
    engram = [str(beside)] if beside.exists() else engram_command(["engram"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}

    def run(q: str, extra: dict[str, str]) -> None:
        subprocess.run([*engram, "recall", q, "--json"], cwd=root, env={**env, **extra}, check=True,
                       capture_output=True)

    with language_server(engram, root):
        timings(lambda q: run(q, {}), queries[:3])
        served = timings(lambda q: run(q, {}), queries)
    local = timings(lambda q: run(q, {"ENGRAM_LOCAL": "1"}), queries[:max(3, len(queries) // 4)])
    return served, local


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--remembers", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cli", type=int, default=20, metavar="N", help="command-line recalls per size (0: none)")
    args = ap.parse_args()
    print(machine())
    print(f"load {load()}; engram {engram_version()}")
    t = time.perf_counter()
    from engram.memory.embed import Embedder

    model = Embedder.load()
    load_s = time.perf_counter() - t
    ok, reason = vectors.status()
    if not ok:
        sys.exit(f"the embedding model does not load here: {reason}")
    rng = random.Random(args.seed)
    vocab = vocabulary(5000, rng)
    sample = notes(512, vocab, rng)
    model.embed(sample[:32])
    t = time.perf_counter()
    model.embed(sample)
    throughput = len(sample) / (time.perf_counter() - t)
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="engram-memspeed-") as tmp:
            t = time.perf_counter()
            texts = notes(size, vocab, rng)
            mem = fill(Path(tmp) / "repo", texts, rng)
            print(f"{size:,}: filled in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
            give_vectors(mem)
            setup = time.perf_counter() - t
            print(f"{size:,}: vectors in {setup:.0f} s", file=sys.stderr, flush=True)
            queries = [" ".join(rng.sample(t.split(), min(len(t.split()), rng.randint(2, 4))))
                       for t in rng.sample(texts, args.queries)]
            lat, bm25, rem, rem_cli, (n_later, later_s, later_cpu) = measure(mem, queries, texts, vocab, rng,
                                                                              args.remembers)
            mem.close()
            served, local = cli_recall(Path(tmp) / "repo", queries[:args.cli]) if args.cli else ([], [])
            rows.append([f"{size:,}", ms(pct(lat, 50)), ms(pct(lat, 99)),
                         f"{ms(pct(cpu_of(lat), 50))} / {ms(pct(cpu_of(lat), 99))}", ms(pct(bm25, 50)), ms(pct(bm25, 99)),
                         f"{ms(pct(cpu_of(bm25), 50))} / {ms(pct(cpu_of(bm25), 99))}",
                         ms(pct(rem, 50)), ms(pct(rem, 99)),
                         f"{ms(pct(cpu_of(rem), 50))} / {ms(pct(cpu_of(rem), 99))}", ms(pct(rem_cli, 50)),
                         f"{ms(later_s / n_later)} / {ms(later_cpu / n_later)}" if n_later else "-",
                         *((ms(pct(served, 50)), ms(pct(served, 90)), ms(pct(local, 50))) if served else ("-",) * 3),
                         f"{setup:.0f} s",
                         verdict(pct(lat, 50) <= TARGETS["recall_p50"] and pct(lat, 99) <= TARGETS["recall_p99"]),
                         " / ".join(verdict(pct(r, 50) <= TARGETS["remember"]) for r in (rem, rem_cli)),
                         verdict(pct(served, 50) <= TARGETS["cli"]) if served else "-"])
            mem.db.close()
    print(f"load {load()}")
    print(fmt_table(["memories", "recall p50", "recall p99", "recall CPU p50 / p99", "BM25 alone p50", "BM25 alone p99",
                     "BM25 alone CPU p50 / p99", "remember p50",
                     "remember p99", "remember CPU p50 / p99", "remember, no model p50",
                     "its vector later, per note (wall / CPU)", "CLI recall, server p50", "CLI recall, server p90",
                     "CLI recall, local p50", "setup", "recall target", "remember target", "CLI target"],
                    rows))
    print(f"model load {load_s * 1000:.0f} ms ({reason}); embedding {throughput:.0f} texts/s "
          f"(batches of 32, {len(sample)} notes of 8-30 words)")
    print("targets: recall p50 <= 20 ms, p99 <= 50 ms (warm, in-process); remember <= 30 ms;"
          " CLI recall with the language server running <= 150 ms")


if __name__ == "__main__":
    main()

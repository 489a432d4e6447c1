"""Hover and codeLens latency of `engram lsp` on a 5,000-line file with 10,000 notes in the store,
against the same requests on the same file with no note (the reference, measured in the same run).

    python bench/lsp_notes.py [--notes 10000] [--in-file 500] [--lines 5000] [--requests 150] [--pause 0.5] [--compare DIR]

`--compare DIR`: another engram source tree (`git archive COMMIT | tar -x -C DIR`, then
`ln -s server DIR/engram_server`) whose `engram lsp` answers the same notes case in a row of its
own, right before this tree's (a before/after on the same load).

Each row is a fresh repository (a temporary directory): a generated Python file of --lines lines
(functions of random words), 20 other files of 500 lines, and the notes imported in one append
(`import_records`, dedup off; the words of bench/memory_speed.py), --in-file of them anchored to
2-8 line spans of the big file, the rest to the other files. `engram lsp` runs as a subprocess,
driven over stdin/stdout by bench/common.py's minimal client, with the file open (didOpen).

Timed, wall clock from request to response, --requests of each, one after another:
- hover, unchanged text: a line under a note half the time, a random line otherwise (the server
  keeps a document's notes for its version, and resolves them again after 2 s);
- hover, after an edit: a character typed at the end of a random line (didChange, a new version,
  so the notes resolve again against the buffer) immediately before the request;
- codeLens, after an edit: the same, then textDocument/codeLens for the whole file;
- codeLens + resolve: the same, then codeLens/resolve for the lenses on 60 lines (a screen).
Between two samples after an edit the client waits --pause s, as a person pausing: the debounced
(0.4 s) regions and note diagnostics run then, on the same worker thread.

The server's CPU (user+sys from /proc, its threads included) per request of the first kind, and
per edit and request of the others (the debounced work included): the machine is shared, read it
next to the wall clock. There are no transcripts in these stores: the latency is the notes' (the reference row has the
evidence machinery's empty cost). Targets (issue 48): hover p99 <= 50 ms, codeLens p99 <= 100 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_table, load, machine, ms, pct, start_lsp, verdict  # noqa: E402
from mcp_latency import proc_cpu  # noqa: E402
from memory_speed import notes, vocabulary  # noqa: E402

from engram.memory.interchange import import_records  # noqa: E402
from engram.memory.memories import Memories  # noqa: E402
from engram.store.repo import init_store  # noqa: E402

TARGETS = {"hover_p99": 0.050, "lens_p99": 0.100}
BIG = "src/big.py"
OTHERS = 20
OTHER_LINES = 500
SCREEN = 60


def source(n_lines: int, vocab: list[str], rng: random.Random) -> str:
    """n_lines of Python: three-line functions whose names and bodies are random words."""
    out: list[str] = []
    i = 0
    while len(out) < n_lines:
        a, b, c, d = rng.sample(vocab, 4)
        out += [f"def {a}_{b}_{i}({c}, {d}):", f"    return {c} * {i} + {d}  # {rng.choice(vocab)} {rng.choice(vocab)}", ""]
        i += 1
    return "\n".join(out[:n_lines]) + "\n"


def build(root: Path, n_notes: int, in_file: int, n_lines: int, rng: random.Random) -> list[int]:
    """The repository and its notes; the 0-based lines of the big file that notes cover."""
    vocab = vocabulary(5000, rng)
    (root / "src").mkdir(parents=True)
    (root / BIG).write_text(source(n_lines, vocab, rng))
    for k in range(OTHERS):
        (root / f"src/other{k}.py").write_text(source(OTHER_LINES, vocab, rng))
    store, _ = init_store(root)
    mem = Memories(store)
    covered: list[int] = []
    records = []
    for i, text in enumerate(notes(n_notes, vocab, rng)):
        if i < in_file:
            a = rng.randint(1, n_lines - 8)
            b = a + rng.randint(1, 7)
            covered += range(a - 1, b)
            at = f"{BIG}:{a}-{b}"
        else:
            a = rng.randint(1, OTHER_LINES - 8)
            at = f"src/other{i % OTHERS}.py:{a}-{a + rng.randint(1, 7)}"
        records.append(("bench", i + 1, {"content": text, "kind": rng.choice(["fact", "decision", "pattern"]),
                                         "at": at}))
    if records:
        import_records(mem, records, dedup=False)
    mem.db.close()
    return sorted(set(covered))


class Session:
    """`engram lsp` on a repository with the big file open, and the client's view of its text."""

    def __init__(self, root: Path, log: Path) -> None:
        self.lsp, _ = start_lsp([sys.executable, "-m", "engram_server.entry", "lsp"], root, log, timeout=300)
        self.uri = (root / BIG).as_uri()
        self.lines = (root / BIG).read_text().split("\n")
        self.version = 1
        self.lsp.notify("textDocument/didOpen", {"textDocument": {
            "uri": self.uri, "languageId": "python", "version": 1, "text": "\n".join(self.lines)}})

    def call(self, method: str, params: dict[str, Any]) -> tuple[float, Any]:
        t = time.perf_counter()
        res = self.lsp.request(method, params)
        took = time.perf_counter() - t
        if "error" in res:
            raise SystemExit(f"{method}: {res['error']}")
        return took, res.get("result")

    def hover(self, line: int) -> float:
        return self.call("textDocument/hover", {"textDocument": {"uri": self.uri},
                                                "position": {"line": line, "character": 4}})[0]

    def lenses(self) -> tuple[float, list[dict[str, Any]]]:
        took, res = self.call("textDocument/codeLens", {"textDocument": {"uri": self.uri}})
        return took, res or []

    def type_at(self, line: int) -> None:
        """A character typed at the end of a line (or taken back when it is there already)."""
        text = self.lines[line]
        new = text[:-1] if text.endswith("q") else text + "q"
        self.version += 1
        self.lsp.notify("textDocument/didChange", {
            "textDocument": {"uri": self.uri, "version": self.version},
            "contentChanges": [{"range": {"start": {"line": line, "character": 0},
                                          "end": {"line": line, "character": len(text)}}, "text": new}]})
        self.lines[line] = new

    def close(self) -> None:
        self.lsp.close()


def measure(s: Session, covered: list[int], requests: int, pause: float, rng: random.Random) -> dict[str, list[float]]:
    n = len(s.lines) - 1
    out: dict[str, list[float]] = {"hover": [], "hover_edit": [], "lens_edit": [], "lens_resolve": []}
    s.lenses()  # warm: the notes resolved once, SQLite's pages read
    cpu = proc_cpu(s.lsp.proc.pid)
    for _ in range(requests):
        line = rng.choice(covered) if covered and rng.random() < 0.5 else rng.randrange(n)
        out["hover"].append(s.hover(line))
    out["hover_cpu"] = [(proc_cpu(s.lsp.proc.pid) - cpu) / requests]
    cpu = proc_cpu(s.lsp.proc.pid)
    for _ in range(requests):
        s.type_at(rng.randrange(n))
        line = rng.choice(covered) if covered and rng.random() < 0.5 else rng.randrange(n)
        out["hover_edit"].append(s.hover(line))
        time.sleep(pause)
    for _ in range(requests):
        s.type_at(rng.randrange(n))
        took, found = s.lenses()
        out["lens_edit"].append(took)
        top = rng.randrange(max(1, n - SCREEN))
        t = time.perf_counter()
        for lens in found:
            if top <= lens["range"]["start"]["line"] < top + SCREEN:
                s.call("codeLens/resolve", lens)
        out["lens_resolve"].append(took + time.perf_counter() - t)
        time.sleep(pause)
    out["n_lenses"] = [float(len(found))]
    out["edit_cpu"] = [(proc_cpu(s.lsp.proc.pid) - cpu) / (2 * requests)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=10000)
    ap.add_argument("--in-file", type=int, default=500, help="notes anchored in the big file (the rest elsewhere)")
    ap.add_argument("--lines", type=int, default=5000)
    ap.add_argument("--requests", type=int, default=150)
    ap.add_argument("--pause", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compare", type=Path, metavar="DIR", help="another engram source tree (see above)")
    args = ap.parse_args()
    print(machine())
    print(load())
    rows = []
    here = os.environ.get("PYTHONPATH", "")
    cases = [(0, 0, here, ""), (args.notes, args.in_file, here, "")]
    if args.compare is not None:
        cases[1:] = [(args.notes, args.in_file, str(args.compare.resolve()), " [before: --compare]"),
                     (args.notes, args.in_file, here, " [after: this tree]")]
    for n_notes, in_file, tree, label in cases:
        rng = random.Random(args.seed)
        with tempfile.TemporaryDirectory(prefix="engram-lspnotes-") as tmp:
            root = Path(tmp) / "repo"
            t = time.perf_counter()
            covered = build(root, n_notes, in_file, args.lines, rng)
            setup = time.perf_counter() - t
            print(f"{n_notes:,} notes ({in_file} in the file): built in {setup:.0f} s", file=sys.stderr, flush=True)
            os.environ["PYTHONPATH"] = tree  # the language server of that tree
            try:
                s = Session(root, Path(tmp) / "lsp.log")
            finally:
                os.environ["PYTHONPATH"] = here
            try:
                lat = measure(s, covered, args.requests, args.pause, rng)
            finally:
                s.close()
        hover_ok = max(pct(lat["hover"], 99), pct(lat["hover_edit"], 99)) <= TARGETS["hover_p99"]
        lens_ok = pct(lat["lens_edit"], 99) <= TARGETS["lens_p99"]
        rows.append([(f"{n_notes:,} ({in_file:,} in the file)" if n_notes else "0 (reference)") + label,
                     *(f"{ms(pct(lat[k], 50))} / {ms(pct(lat[k], 99))}" for k in ("hover", "hover_edit", "lens_edit",
                                                                                  "lens_resolve")),
                     f"{ms(lat['hover_cpu'][0])} / {ms(lat['edit_cpu'][0])}",
                     f"{lat['n_lenses'][0]:.0f}", f"{verdict(hover_ok)} / {verdict(lens_ok)}"])
    print(fmt_table(["notes in the store", "hover p50 / p99", "hover after an edit p50 / p99",
                     "codeLens after an edit p50 / p99", f"codeLens + resolve {SCREEN} lines p50 / p99",
                     "server CPU per hover / per edit+request", "lenses",
                     "hover / lens target"], rows))
    print(f"{args.lines:,}-line file, {args.requests} requests each, {args.pause} s pause after an edit; "
          f"targets: hover p99 <= {TARGETS['hover_p99'] * 1000:.0f} ms, codeLens p99 <= {TARGETS['lens_p99'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()

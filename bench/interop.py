"""Interop on real Entire checkpoint branches: how many sessions `engram ingest` finds and
captures, and whether `engram explain` names the session the checkpoint attributes a span to.

For each bare mirror given (default: entireio/cli's and blackgirlbytes/entire-token-costs-
benchmark-tests', which keep `entire/checkpoints/v1`), a throw-away store reads the branch with
`engram.interop.sources.ingest_repository_sources` (what `engram ingest` runs), limited to the
latest `--limit` sessions. The reference is Entire's own attribution, measured in the same run
from the mirror: a commit with an `Entire-Checkpoint: ID` trailer was made from checkpoint ID,
whose metadata names its sessions and the files they touched; the lines that commit added to
those files (every file it changed when the metadata lists none: `files_touched` is null in
newer Entire versions; hunks of MIN_LINES or more, at most MAX_LINES of each, at most two per
commit) are attributed to those sessions. Only checkpoints whose every session was captured are asked. Each
span is explained in-process (`Options(brief=True)`, the file's text at the commit): R@1 counts
the spans whose first session is one the checkpoint names, "named" those where any session is.
Entire attributes a whole commit to its checkpoint's sessions, so the same figures are also given
for the spans at least half of whose lines appear anywhere in such a session's transcript (the
others were written by a person or a session outside the checkpoint: no transcript shows them).

    python bench/interop.py [--mirror GIT_DIR ...] [--limit 40] [--spans 60] [--seed 1] [--keep DIR] [--misses]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import fmt_table, load, machine  # noqa: E402

MIRRORS = [Path("/work/.mirror/entireio+cli/repo"),
           Path("/work/.mirror/blackgirlbytes+entire-token-costs-benchmark-tests/repo")]
TRAILER = re.compile(r"^Entire-Checkpoint:\s*([0-9a-f]{12})\s*$", re.MULTILINE)
MIN_LINES, MAX_LINES = 3, 20


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False).stdout.decode(
        "utf-8", "replace")


def spans_of(repo: Path, by_checkpoint: dict[str, set[str]], touched: dict[str, set[str]], want: int,
             seed: int) -> list[tuple[str, str, int, int, set[str]]]:
    """(commit, file, first, last, sessions) of spans Entire attributes, sampled."""
    log = git(repo, "log", "--all", "--format=%H%x00%B%x01")
    cases = []
    for entry in log.split("\x01"):
        commit, _, body = entry.strip().partition("\x00")
        ids = TRAILER.findall(body)
        if len(ids) != 1 or ids[0] not in by_checkpoint:
            continue
        cid = ids[0]
        changed = set(git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", "--diff-filter=AM", commit)
                      .split())
        picked = []
        for path in sorted(changed & touched[cid] if touched.get(cid) else changed):
            for line in git(repo, "diff", "-U0", "--no-color", f"{commit}^", commit, "--", path).splitlines():
                if line.startswith("@@ "):
                    start, _, count = line.split()[2][1:].partition(",")
                    n = int(count) if count else 1
                    if n >= MIN_LINES:
                        picked.append((commit, path, int(start), int(start) + min(n, MAX_LINES) - 1,
                                       by_checkpoint[cid]))
        rng = random.Random(f"{seed}:{commit}")
        cases += rng.sample(picked, min(2, len(picked)))
    random.Random(seed).shuffle(cases)
    return cases[:want]


def measure(mirror: Path, limit: int | None, want: int, seed: int, keep: Path | None = None,
            misses: bool = False) -> dict[str, Any]:
    from engram.capture.stats import IngestStats
    from engram.index.build import Indexer
    from engram.index.db import open_db
    from engram.interop import entire, sources
    from engram.query.explain import Options, explain
    from engram.query.spans import Span
    from engram.store.repo import init_store

    with tempfile.TemporaryDirectory(prefix="engram-bench-interop-") as tmp:
        where = keep / mirror.parent.name if keep else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        store, _ = init_store(where)
        c0, t0 = time.process_time(), time.perf_counter()
        report = sources.ingest_repository_sources(store, IngestStats(), lambda: Indexer(store), repo=mirror,
                                                   limit=limit)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        _, commit = entire.find_branch(mirror) or ("", "")
        groups = entire.by_session(entire.sessions(mirror, commit))
        asked = groups[-limit:] if limit else groups
        db = open_db(store)
        held = {sid for (sid,) in db.execute("SELECT DISTINCT session_id FROM tapes")}
        captured = {g.session_id for g in asked if g.latest.harness_session in held}
        by_checkpoint: dict[str, set[str]] = {}
        touched: dict[str, set[str]] = {}
        entries = entire.sessions(mirror, commit)
        for e in entries:
            by_checkpoint.setdefault(e.checkpoint, set()).add(e.session_id)
            touched.setdefault(e.checkpoint, set()).update(e.files_touched)
        whole = {cid: {e.harness_session for e in entries if e.checkpoint == cid}
                 for cid, sids in by_checkpoint.items() if sids <= captured}
        cases = spans_of(mirror, whole, touched, want, seed)
        top = named = shown = shown_top = shown_named = 0
        opts = Options(brief=True)
        texts = _SessionTexts(store, db)
        for c, path, a, b, sids in cases:
            lines = git(mirror, "show", f"{c}:{path}").splitlines()
            if b > len(lines):
                continue
            doc = explain(store, db, Span(path, a, b, "\n".join(lines[a - 1:b]) + "\n"), opts, file_lines=lines)
            got = [s["session_id"] for s in doc.get("sessions") or []]
            hit, anyhit = bool(got) and got[0] in sids, any(g in sids for g in got)
            top += hit
            named += anyhit
            if texts.holds(sids, lines[a - 1:b]):
                shown += 1
                shown_top += hit
                shown_named += anyhit
            if misses and not hit:
                print(f"miss {c[:12]} {path}:{a}-{b} Entire: {sorted(sids)} explain: {got[:3]}", file=sys.stderr)
        db.close()
    return {"repo": mirror.parent.name, "found": report.entire_found, "asked": len(asked),
            "missing": report.entire_missing, "read": report.entire_captured, "captured": len(captured),
            "cpu": cpu, "wall": wall, "spans": len(cases), "top": top, "named": named, "shown": shown,
            "shown_top": shown_top, "shown_named": shown_named}


class _SessionTexts:
    """Whether a session's transcript holds a span's lines at all (in any event: an edit, a read,
    a message): Entire attributes a whole commit to the checkpoint's sessions, and a commit also
    holds lines a person or another session wrote, which no transcript of these shows."""

    def __init__(self, store: Any, db: Any) -> None:
        self.store, self.db, self.cache = store, db, {}

    def text(self, sid: str) -> str:
        if sid not in self.cache:
            from engram.tape.reader import TapeReader
            from engram.tape.writer import tape_path

            parts = []
            for (tid,) in self.db.execute("SELECT id FROM tapes WHERE session_id=?", (sid,)):
                with TapeReader(tape_path(self.store.tapes_dir, tid), self.store.objects_dir) as r:
                    parts += [json.dumps(ev) for ev in r.events(resolve_objects=True)]
            self.cache[sid] = "\n".join(parts)
        return self.cache[sid]

    def holds(self, sids: set[str], lines: list[str]) -> bool:
        """Half or more of the span's lines (of 9 characters or more, stripped) are in the text of
        one of `sids`, as JSON strings."""
        want = [json.dumps(x.strip())[1:-1] for x in lines if len(x.strip()) > 8]
        return bool(want) and any(sum(w in self.text(sid) for w in want) * 2 >= len(want) for sid in sids)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, action="append", help="a bare clone with entire/checkpoints/v1")
    ap.add_argument("--limit", type=int, default=40, help="latest sessions read per mirror (0: all)")
    ap.add_argument("--spans", type=int, default=60, help="spans explained per mirror")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="keep each store under this folder (a second run reads it again: "
                    "nothing new is captured, the ingest columns then say so)")
    ap.add_argument("--misses", action="store_true", help="list the spans whose first session is not Entire's")
    args = ap.parse_args()
    print(machine())
    rows = []
    for mirror in args.mirror or MIRRORS:
        if not mirror.is_dir():
            print(f"skipped {mirror}: no such directory", file=sys.stderr)
            continue
        r = measure(mirror, args.limit or None, args.spans, args.seed, args.keep, args.misses)
        n = max(r["spans"], 1)
        m = max(r["shown"], 1)
        rows.append([r["repo"], str(r["found"]), str(r["asked"]), str(r["missing"]), str(r["read"]),
                     str(r["captured"]), f"{r['cpu']:.1f} / {r['wall']:.1f}", str(r["spans"]),
                     f"{r['top'] / n:.2f} / {r['named'] / n:.2f}", str(r["shown"]),
                     f"{r['shown_top'] / m:.2f} / {r['shown_named'] / m:.2f}"])
    print(fmt_table(["mirror", "sessions on branch", "asked", "not in clone", "read", "captured",
                     "CPU / wall s", "spans (Entire's attribution)", "R@1 / named",
                     "of them in the session's transcript", "R@1 / named"], rows))
    print(f"load average at the end: {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

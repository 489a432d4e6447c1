"""Anchor survival on real histories: do memories' anchors (`engram.memory.anchors`) follow code
through a repository's own commits?

    python bench/anchors.py MIRROR[@N]... [--tune NAME,NAME] [--spans 300] [--seed 1] [--workdir DIR] [--dump FILE]
        [--second-truth ALGO]

Each MIRROR is a git directory (a bare mirror: bench/README.md says how to get them). For each:

1. N is a seeded commit of the first-parent chain with 200 first-parent commits after it (or the
   one MIRROR@N names); N+k is the k-th of them, for k in 10, 50, 200.
2. Truth, from git's own line tracking: every line of N's source files is mapped through each
   first-parent commit's diff (`git log -p --first-parent -M -w -U0`: renames followed, whitespace
   ignored, so a reindented line survives); a line touched by a hunk dies. A diff cannot see code
   moved to another file (not renamed) or within its file, so for a span this calls dead, `git
   blame -w -M -C N..N+k` (moved and copied lines followed, within a file and from files the same
   commit changed) is asked too, on the file the span's lines were tracked to and on the files the
   resolver and the tracker named: a line it traces to the span at N survives there. A span is
   alive at N+k when at least half its lines survive (in one file), and its true place is where
   they are. (Blame is asked only where someone looked: a move nobody found stays dead.)
3. Spans: 5-15 lines at N, from source files the 200 commits touched (a span of an untouched file
   is intact for every method and says nothing), half of them dead at N+200 and half alive.
4. Each span is captured at N (`capture` on a checkout) and resolved at N+k (`resolve` on a
   checkout of N+k, no index). Right place: a result in the true file overlapping a surviving
   line. Dead spans should be reported `vanished`.

References measured on the same spans: a `file:line` anchor (stays where it was; right when its
lines overlap the true ones; vanished only when its file or lines are gone) and a diff-following
range tracker like `git log -L` or GitLens (the range is mapped through each diff, growing over
lines rewritten inside it; vanished only when it becomes empty). The tracker uses the truth's own
diffs, so its right-place share is near 1 by construction: it is the ceiling of what following
diffs gives, and its vanished share shows what it cannot tell.

Diffs cannot see code moved between files (not renamed), and cut hunks where their alignment
falls: such code is dead in the truth. Two columns let a reader judge: dead spans the resolver
found whole ("found whole"), and dead spans with at least half their lines verbatim in the file
("text still there", measured without engram). The truth checks itself: every line it says
survived must hold its old text at its new place (printed per repository and k).

`--tune` names the repositories the thresholds were chosen on; the sweep table shows the choice on
them, the others are reported apart. A last table says what the dead spans were reported as, per
repository and k. `--set NAME=VALUE` overrides a constant of the resolver for a
run; `--diff-algorithm` changes git's (the truth's and the tracker's); `--second-truth ALGO` judges
the same spans by a second algorithm's line map too, side by side; `--second-truth moved` by a
move-aware one: the same diffs, a deleted line git's `--color-moved` marks moved alive at the added
line of the same text in its file (`moved_along`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import engram_version, fmt_table, load, machine, pct  # noqa: E402
from engram.capture.record import snapshot  # noqa: E402
from engram.errors import BadInput  # noqa: E402
from engram.memory import anchors  # noqa: E402
from engram.memory.anchors import Anchor, Resolution, capture, resolve  # noqa: E402

KS = (10, 50, 200)
SOURCE = frozenset({".py", ".go", ".rs", ".js", ".mjs", ".ts", ".c", ".h", ".cc", ".cpp", ".java", ".kt", ".rb"})
MAX_BYTES = 1 << 20
CANDIDATES = 40  # random spans per touched file, and as many around its dead lines
HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
WORD = re.compile(r"\w+")


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), "-c", "core.quotePath=false", *args], check=True,
                          capture_output=True).stdout


# ------------------------------------------------------------------ diffs and the truth

@dataclass
class FileDiff:
    old: str | None
    new: str | None
    hunks: list[tuple[int, int, int, int]] = field(default_factory=list)  # old start, count, new start, count
    rewritten: bool = False  # binary: every line dies
    # With `--color-moved` (`parse_log(colored=True)`): the deleted and added lines git marked as
    # moved, (line number, text without whitespace), in diff order.
    moved_out: list[tuple[int, str]] = field(default_factory=list)
    moved_in: list[tuple[int, str]] = field(default_factory=list)
    _at: list[int] = field(default_factory=lambda: [0, 0], repr=False)  # next old / new line of the hunk


#: `git log` options for the move-aware truth: moved lines coloured apart from other deleted and
#: added lines (blocks of 20+ alphanumeric characters, whitespace aside: git's own move detection).
MOVED_COLORS = ("-c", "color.diff.old=red", "-c", "color.diff.new=green", "-c", "color.diff.oldMoved=magenta",
                "-c", "color.diff.newMoved=cyan", "-c", "color.diff.oldMovedAlternative=magenta",
                "-c", "color.diff.newMovedAlternative=cyan", "-c", "color.diff.meta=normal",
                "-c", "color.diff.frag=normal", "-c", "color.diff.func=normal", "-c", "color.diff.whitespace=normal")
MOVED_ARGS = ("--color=always", "--color-moved=blocks", "--color-moved-ws=ignore-all-space")
ANSI = re.compile(rb"\x1b\[[0-9;]*m")
OLD_MOVED, NEW_MOVED = b"\x1b[35m", b"\x1b[36m"


def _content(cur: FileDiff, line: bytes) -> None:
    """A deleted or added line of a coloured diff: counted, and kept when git marked it moved."""
    moved = line.startswith((OLD_MOVED, NEW_MOVED))
    plain = ANSI.sub(b"", line)
    side = 0 if plain.startswith(b"-") else 1
    if moved:
        key = "".join(plain[1:].decode("utf-8", "replace").split())
        (cur.moved_out if side == 0 else cur.moved_in).append((cur._at[side], key))
    cur._at[side] += 1


def parse_log(raw: bytes, colored: bool = False) -> list[tuple[str, list[FileDiff]]]:
    """(commit, file diffs) of `git log -p -U0 --format=%x01%H` output, in log order; `colored`:
    output with MOVED_COLORS and MOVED_ARGS, its moved lines kept (`FileDiff.moved_out`)."""
    commits: list[tuple[str, list[FileDiff]]] = []
    cur: FileDiff | None = None
    for line in raw.split(b"\n"):
        if colored:
            if line.startswith(b"\x1b") and cur is not None and cur.hunks:  # only content lines are coloured
                _content(cur, line)
                continue
            line = ANSI.sub(b"", line)
        if line.startswith(b"\x01"):
            commits.append((line[1:].decode(), []))
            cur = None
        elif line.startswith(b"diff --git "):
            old, _, new = line[len(b"diff --git a/"):].decode("utf-8", "replace").partition(" b/")
            cur = FileDiff(old, new)  # what the lines below do not say otherwise (a binary file)
            commits[-1][1].append(cur)
        elif cur is None:
            continue
        elif line.startswith(b"@@ "):
            m = HUNK.match(line)
            if m:
                os_, oc, ns, nc = m.groups()
                cur.hunks.append((int(os_), int(oc or 1), int(ns), int(nc or 1)))
                cur._at = [int(os_), int(ns)]
        elif line.startswith(b"--- "):
            cur.old = None if line[4:] == b"/dev/null" else line[6:].decode("utf-8", "replace")
        elif line.startswith(b"+++ "):
            cur.new = None if line[4:] == b"/dev/null" else line[6:].decode("utf-8", "replace")
        elif line.startswith(b"rename from "):
            cur.old = line[12:].decode("utf-8", "replace")
        elif line.startswith(b"rename to "):
            cur.new = line[10:].decode("utf-8", "replace")
        elif line.startswith(b"deleted file mode"):
            cur.new = None
        elif line.startswith(b"new file mode"):
            cur.old = None
        elif line.startswith(b"Binary files "):
            cur.rewritten = True
    return commits


def map_lines(pos: np.ndarray, hunks: list[tuple[int, int, int, int]]) -> np.ndarray:
    """Old line numbers (0: already dead) → new ones, 0 for lines a hunk rewrote or deleted."""
    if not hunks:
        return pos
    h = np.array(sorted(hunks), dtype=np.int64)
    os_, oc, nc = h[:, 0], h[:, 1], h[:, 3]
    end = np.where(oc > 0, os_ + oc - 1, os_)  # lines after `end` shift; os_..end die when oc > 0
    shift = np.concatenate(([0], np.cumsum(nc - oc)))
    j = np.searchsorted(end, pos, side="left")  # hunks wholly before each line
    jj = np.minimum(j, len(h) - 1)
    dead = (j < len(h)) & (oc[jj] > 0) & (os_[jj] <= pos)
    out = pos + shift[j]
    out[dead | (pos == 0)] = 0
    return out


def moved_along(pos: np.ndarray, d: FileDiff) -> np.ndarray:
    """`map_lines`, and a deleted line git marked moved (`parse_log(colored=True)`) goes to an added
    moved line of the same file with its text (whitespace aside), taken in diff order: alive, where
    a reader sees it (imports reordered, a function moved down). A move to another file is left to
    blame, as in the other truths."""
    out = map_lines(pos, d.hunks)
    if not d.moved_out:
        return out
    free: dict[str, list[int]] = {}
    for n, key in reversed(d.moved_in):
        free.setdefault(key, []).append(n)
    for o, key in d.moved_out:
        if free.get(key):
            out[pos == o] = free[key].pop()
    return out


def map_point(p: int, hunks: list[tuple[int, int, int, int]], first: bool) -> int:
    """A range end through one diff, as `git log -L` keeps a range: an end inside rewritten lines
    moves to the edge of what replaced them (start: its first line; end: its last)."""
    delta = 0
    for os_, oc, ns, nc in sorted(hunks):
        end = os_ + oc - 1 if oc else os_
        if p > end:
            delta += nc - oc
            continue
        if oc and os_ <= p:
            if nc:
                return ns if first else ns + nc - 1
            return ns + 1 if first else ns
        break
    return p + delta


@dataclass
class Tracked:
    """One file of N: where it is now and where each of its lines went (0: dead)."""

    orig: str
    path: str
    pos: np.ndarray  # 1-based current line of each original line


def replay(files: dict[str, int], commits: list[tuple[str, list[FileDiff]]]
           ) -> dict[int, dict[str, Tracked]]:
    """The line maps of N's files after k commits, for each k in KS (`files`: path → line count)."""
    live = {p: Tracked(p, p, np.arange(1, n + 1, dtype=np.int64)) for p, n in files.items()}
    by_path = dict(live)  # current path → its file of N
    out: dict[int, dict[str, Tracked]] = {}
    for i, (_, diffs) in enumerate(commits, 1):
        moved: list[tuple[str, str | None, Tracked]] = []
        for d in diffs:
            t = by_path.get(d.old) if d.old else None
            if t is None:
                continue
            t.pos = np.zeros_like(t.pos) if d.new is None or d.rewritten else moved_along(t.pos, d)
            moved.append((t.path, d.new, t))
        for old, _, _ in moved:  # all at once: a commit may swap two files' names
            by_path.pop(old, None)
        for _, new, t in moved:
            if new is not None:
                t.path = new
                by_path[new] = t
        if i in KS:
            out[i] = {o: Tracked(o, t.path, t.pos.copy()) for o, t in live.items()}
    return out


def range_tracker(span: tuple[str, int, int], commits: list[tuple[str, list[FileDiff]]],
                  ks: tuple[int, ...] = KS) -> dict[int, tuple[str, int, int] | None]:
    """The reference tracker's range after k commits (None: the range emptied or its file went)."""
    path, s, e = span
    out: dict[int, tuple[str, int, int] | None] = {}
    alive = True
    for i, (_, diffs) in enumerate(commits, 1):
        if alive:
            for d in diffs:
                if d.old != path:
                    continue
                if d.new is None or d.rewritten:
                    alive = False
                    break
                s, e = map_point(s, d.hunks, True), map_point(e, d.hunks, False)
                path = d.new
                if s > e:
                    alive = False
                break
        if i in ks:
            out[i] = (path, s, e) if alive else None
    return out


# ------------------------------------------------------------------ spans

@dataclass
class Span:
    file: str
    start: int
    end: int
    anchor: Anchor | None = None


def first_parent_chain(repo: Path) -> list[str]:
    return git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").decode().split()


def source_files(repo: Path) -> dict[str, str]:
    """Source files of the checkout (tracked, text, at most MAX_BYTES, not links): path → text."""
    return {rel: text for rel, text in snapshot(repo).items()
            if Path(rel).suffix in SOURCE and len(text) <= MAX_BYTES and not (repo / rel).is_symlink()}


def sample(files: dict[str, str], final: dict[str, Tracked], n: int, rng: random.Random) -> list[Span]:
    """Half dead, half alive at N+200 (as far as there are), from files the commits touched;
    5-15 lines with some code. Candidates: CANDIDATES random spans of each touched file, and as
    many around lines that died (most spans of a file are alive: dead ones would be few)."""
    found: dict[bool, dict[tuple[str, int, int], Span]] = {True: {}, False: {}}
    touched = [p for p in sorted(files) if final[p].path != p
               or not np.array_equal(final[p].pos, np.arange(1, len(final[p].pos) + 1))]
    for rel in touched:
        lines = anchors.split_lines(files[rel])
        died = np.flatnonzero(final[rel].pos == 0) + 1
        for j in range(2 * CANDIDATES):
            size = rng.randint(5, 15)
            if len(lines) < size:
                break
            if j % 2 and len(died):
                start = max(1, min(len(lines) - size + 1, int(rng.choice(died)) - rng.randint(0, size - 1)))
            else:
                start = rng.randint(1, len(lines) - size + 1)
            body = lines[start - 1:start - 1 + size]
            if sum(bool(x.strip()) for x in body) < 3 or len(WORD.findall("\n".join(body))) < 12:
                continue
            survived = int((final[rel].pos[start - 1:start - 1 + size] > 0).sum())
            found[2 * survived >= size][(rel, start, size)] = Span(rel, start, start + size - 1)
    alive, dead = list(found[True].values()), list(found[False].values())
    rng.shuffle(dead)
    rng.shuffle(alive)
    take_dead = dead[:max(n // 2, n - len(alive))]
    return sorted(take_dead + alive[:n - len(take_dead)], key=lambda s: (s.file, s.start))


# ------------------------------------------------------------------ one repository

@dataclass
class Row:
    """One span at one k: the truth and each method's answer."""

    alive: bool
    true_file: str
    survivors: list[int]
    res: Resolution
    ms: float
    fileline: tuple[bool, bool]  # (right place, reported vanished)
    tracker: tuple[bool, bool]
    text_there: bool  # at least half the span's lines of 2+ words are still in its file, verbatim
    file: str = ""  # the span's file at N
    by_blame: bool = False  # dead in the diffs, alive by git blame -M -C (moved)
    lines: "LineDiff | None" = None  # the anchored span against the resolver's match (`line_diff`)
    text: str = ""  # the anchored text (for --dump)
    start: int = 0  # the span's first line at N (for --dump)
    rev: str = ""  # N+k (for --dump)
    second: tuple[bool, str, list[int]] | None = None  # (alive, true file, survivors) by `--second-truth`


def overlaps(file: str | None, start: int | None, end: int | None, true_file: str, survivors: list[int]) -> bool:
    if file != true_file or start is None or end is None:
        return False
    return any(start <= ln <= end for ln in survivors)


def run_repo(mirror: Path, name: str, n_spans: int, seed: int, workdir: Path, algorithm: str = "myers",
             at: str | None = None, second: str | None = None) -> dict[int, list[Row]]:
    rng = random.Random(f"{seed}:{name}")
    chain = first_parent_chain(mirror)
    if len(chain) < max(KS) + 2:
        sys.exit(f"{name}: {len(chain)} first-parent commits, fewer than {max(KS) + 2}")
    lo = len(chain) // 2 if len(chain) // 2 < len(chain) - max(KS) - 1 else 0
    i = rng.randint(lo, len(chain) - max(KS) - 1)  # drawn even when `at` pins N: the same spans follow
    if at is not None:
        full = git(mirror, "rev-parse", "--verify", f"{at}^{{commit}}").decode().strip()
        if full not in chain[:len(chain) - max(KS)]:
            sys.exit(f"{name}: {at} is not a first-parent commit with {max(KS)} after it")
        i = chain.index(full)
    base, tip = chain[i], chain[i + max(KS)]
    clone = workdir / name.replace("/", "+")
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror), str(clone)], check=True)
    git(clone, "checkout", "-q", "--detach", base)
    raw = git(clone, "log", "--first-parent", "--diff-merges=first-parent", "-M", "-w", "-U0", "--no-color",
              f"--diff-algorithm={algorithm}",
              "--no-ext-diff", "--format=%x01%H", "--reverse", "-p", f"{base}..{tip}")
    commits = parse_log(raw)
    assert [c for c, _ in commits] == chain[i + 1:i + 1 + max(KS)], "the log is the first-parent chain"
    files = source_files(clone)
    truth = replay({rel: len(anchors.split_lines(text)) for rel, text in files.items()}, commits)
    truth2 = None  # the same spans judged by a second diff algorithm (`--second-truth`)
    if second is not None:
        moved = second == "moved"  # the first truth's diffs, git's moved lines kept (`moved_along`)
        raw2 = git(clone, *(MOVED_COLORS if moved else ()), "log", "--first-parent", "--diff-merges=first-parent",
                   "-M", "-w", "-U0", *(MOVED_ARGS if moved else ("--no-color",)),
                   f"--diff-algorithm={algorithm if moved else second}", "--no-ext-diff", "--format=%x01%H",
                   "--reverse", "-p", f"{base}..{tip}")
        truth2 = replay({rel: len(anchors.split_lines(text)) for rel, text in files.items()},
                        parse_log(raw2, colored=moved))
    spans = sample(files, truth[max(KS)], n_spans, rng)
    for s in spans:
        s.anchor = capture(clone, s.file, s.start, s.end)
    print(f"{name}: N = {base[:10]} ({i + 1} of {len(chain)} first-parent commits), {len(files)} source files, "
          f"{len(spans)} spans", file=sys.stderr)
    tracked = {id(s): range_tracker((s.file, s.start, s.end), commits) for s in spans}
    rows: dict[int, list[Row]] = {}
    blames: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
    for k in KS:
        git(clone, "checkout", "-q", "--detach", chain[i + k])
        check_truth(clone, spans, truth[k], name, k)
        if truth2 is not None:
            check_truth(clone, spans, truth2[k], f"{name} ({second})", k)
        lengths: dict[str, int | None] = {}
        texts: dict[str, set[str]] = {}
        rows[k] = []
        t0 = time.perf_counter()  # git asked once for all the spans, as `places_of` asks it for a call's anchors
        anchors.expect_git(clone, [(s.anchor, anchors.working_text(clone, s.anchor.file)) for s in spans if s.anchor])
        reads = anchors.Reads()  # the files read, shared by the spans' resolutions as by a call's (`places_of`)
        print(f"{name}, k = {k}: git asked for the {len(spans)} spans in {(time.perf_counter() - t0) * 1000:.0f} ms "
              "(not in the resolve ms column)", file=sys.stderr)
        for s in spans:
            assert s.anchor is not None
            t = truth[k][s.file]
            pos = t.pos[s.start - 1:s.end]
            survivors = sorted(int(x) for x in pos[pos > 0])
            alive = 2 * len(survivors) >= len(pos)
            t0 = time.perf_counter()
            res = resolve(clone, s.anchor, reads=reads)
            ms = (time.perf_counter() - t0) * 1000
            row = Row(alive, t.path, survivors, res, ms, _file_line(clone, s, t.path, survivors, lengths),
                      _tracker(tracked[id(s)][k], t.path, survivors), _text_there(clone, s.anchor, t.path, texts),
                      s.file, lines=line_diff(s.anchor.text, _matched_text(clone, res)), text=s.anchor.text,
                      start=s.start, rev=chain[i + k])
            if not alive:
                moved = _blamed(clone, blames, base, chain[i + k], s, {t.path, res.file if res.start else None,
                                (res.best_partial or {}).get("file"), (tracked[id(s)][k] or (None,))[0]})
                if moved is not None:
                    row.alive, row.true_file, row.survivors, row.by_blame = True, moved[0], moved[1], True
                    row.fileline = (not row.fileline[1] and overlaps(s.file, s.start, s.end, *moved), row.fileline[1])
                    row.tracker = (_tracker(tracked[id(s)][k], *moved)[0], row.tracker[1])
            if truth2 is not None:
                row.second = _second_truth(clone, blames, base, chain[i + k], s, truth2[k][s.file], res)
            rows[k].append(row)
    return rows


def _second_truth(clone: Path, blames: dict[tuple[str, str], dict[tuple[str, int], int]], base: str, rev: str,
                  s: Span, t: Tracked, res: Resolution) -> tuple[bool, str, list[int]]:
    """(alive, true file, surviving lines) of a span by a second line map `t`, blame asked as for the first."""
    pos = t.pos[s.start - 1:s.end]
    survivors = sorted(int(x) for x in pos[pos > 0])
    if 2 * len(survivors) >= len(pos):
        return True, t.path, survivors
    moved = _blamed(clone, blames, base, rev, s, {t.path, res.file if res.start else None,
                                                  (res.best_partial or {}).get("file")})
    return (True, *moved) if moved is not None else (False, t.path, survivors)


def _blamed(clone: Path, blames: dict[tuple[str, str], dict[tuple[str, int], int]], base: str, rev: str, s: Span,
            files: set[str | None]) -> tuple[str, list[int]] | None:
    """(file, lines) where `git blame -w -M -C base..rev` traces at least half the span's lines
    to it at `base`, in one of `files` (the most there); None when it traces fewer."""
    best: tuple[str, list[int]] | None = None
    for f in sorted(x for x in files if x):
        if (rev, f) not in blames:
            blames[rev, f] = _blame(clone, base, rev, f)
        got = sorted(n for ln in range(s.start, s.end + 1) if (n := blames[rev, f].get((s.file, ln))))
        if 2 * len(got) >= s.end - s.start + 1 and (best is None or len(got) > len(best[1])):
            best = (f, got)
    return best


def _blame(clone: Path, base: str, rev: str, file: str) -> dict[tuple[str, int], int]:
    """(file, line) at `base` → line of `file` at `rev`, for the lines blame traces back to base
    unchanged (whitespace aside), following lines moved or copied within the file and from files
    the same commit changed (-M -C). Lines older than `base` are blamed on it, with their path and
    line number there (`--porcelain` names an entry's file the first time its commit appears, and
    again only when the commit has several paths: the others are the commit's last named)."""
    proc = subprocess.run(["git", "-C", str(clone), "blame", "-w", "-M", "-C", "--porcelain", f"{base}..{rev}",
                           "--", file], check=False, capture_output=True)
    out: dict[tuple[str, int], int] = {}
    if proc.returncode:
        return out  # not a file at rev
    commit, orig, final = "", 0, 0
    paths: dict[str, str] = {}  # commit → the path its last entry named
    for line in proc.stdout.split(b"\n"):
        if line.startswith(b"\t"):  # the line's content ends its entry: its path is known by now
            if commit == base and commit in paths:
                out.setdefault((paths[commit], orig), final)
            continue
        head = line.split(b" ")
        if len(head) in (3, 4) and len(head[0]) == 40 and head[1].isdigit() and head[2].isdigit():
            commit, orig, final = head[0].decode(), int(head[1]), int(head[2])
        elif line.startswith(b"filename "):
            paths[commit] = line[len(b"filename "):].decode("utf-8", "replace")
    return out


def check_truth(clone: Path, spans: list[Span], truth: dict[str, Tracked], name: str, k: int) -> None:
    """The truth's own check: a line it says survived holds its old text at its new place
    (whitespace aside, as `-w` compares); printed, so a wrong line map cannot go unseen."""
    same = total = 0
    texts: dict[str, list[str]] = {}
    for s in spans:
        assert s.anchor is not None
        t = truth[s.file]
        if t.path not in texts:
            p = clone / t.path
            texts[t.path] = anchors.split_lines(p.read_text(errors="replace")) if p.is_file() else []
        now = texts[t.path]
        for old, new in zip(anchors.split_lines(s.anchor.text), t.pos[s.start - 1:s.end].tolist()):
            if new:
                total += 1
                same += new <= len(now) and "".join(old.split()) == "".join(now[new - 1].split())
    print(f"{name} k={k}: {same} of {total} surviving lines hold their old text at their new place",
          file=sys.stderr)


def _file_line(clone: Path, s: Span, true_file: str, survivors: list[int],
               lengths: dict[str, int | None]) -> tuple[bool, bool]:
    if s.file not in lengths:
        p = clone / s.file
        lengths[s.file] = len(anchors.split_lines(p.read_text(errors="replace"))) if p.is_file() else None
    n = lengths[s.file]
    gone = n is None or s.start > n
    return (not gone and overlaps(s.file, s.start, s.end, true_file, survivors)), gone


def _text_there(clone: Path, anchor: Anchor, path: str, texts: dict[str, set[str]]) -> bool:
    """Are at least half the anchor's lines of two or more words still lines of the file (spaces
    aside)? Independent of engram and of diffs: how many "dead" spans were rewritten around,
    moved within the file, or cut differently by the diff, rather than deleted."""
    if path not in texts:
        p = clone / path
        now = anchors.split_lines(p.read_text(errors="replace")) if p.is_file() else []
        texts[path] = {"".join(x.split()) for x in now}
    lines = [x for x in anchors.split_lines(anchor.text) if len(WORD.findall(x)) >= 2]
    return bool(lines) and 2 * sum("".join(x.split()) in texts[path] for x in lines) >= len(lines)


def _tracker(place: tuple[str, int, int] | None, true_file: str, survivors: list[int]) -> tuple[bool, bool]:
    if place is None:
        return False, True
    return overlaps(*place, true_file, survivors), False


# ------------------------------------------------------------------ the anchored span against its match

IDENT = re.compile(r"[A-Za-z_]\w{2,}")
SIMILAR = 0.6  # a changed line "is" an old line edited when this share of its tokens line up (difflib ratio)


@dataclass
class LineDiff:
    """The anchored span's lines against the resolver's match (its best partial when vanished),
    line by line (git's view, made without git): `verbatim`, the share of the anchor's non-blank
    lines found unchanged (whitespace aside) in order; `similar`, those plus the lines paired with
    an edited line (difflib ratio of their tokens >= SIMILAR); `idents`, the share of the anchor's
    distinct identifiers (3+ characters) still in the match."""

    verbatim: float
    similar: float
    idents: float


def _matched_text(clone: Path, res: Resolution) -> str:
    place = (res.file, res.start, res.end) if res.start is not None else (
        (res.best_partial["file"], res.best_partial["start"], res.best_partial["end"]) if res.best_partial else None)
    if place is None or place[1] is None:
        return ""
    p = clone / place[0]
    text = p.read_text(errors="replace") if p.is_file() else ""
    return "\n".join(anchors.split_lines(text)[place[1] - 1:place[2]])


def line_diff(old: str, new: str) -> LineDiff:
    import difflib  # noqa: PLC0415

    def norm(text: str) -> list[str]:
        return [" ".join(WORD.findall(x)) for x in anchors.split_lines(text) if x.strip()]

    a, b = norm(old), norm(new)
    if not a:
        return LineDiff(1.0, 1.0, 1.0)
    verbatim = similar = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            verbatim += i2 - i1
        elif tag == "replace":
            pool = list(range(j1, j2))
            for x in a[i1:i2]:
                best = max(pool, key=lambda j: difflib.SequenceMatcher(None, x.split(), b[j].split()).ratio(),
                           default=None)
                if best is not None and difflib.SequenceMatcher(None, x.split(), b[best].split()).ratio() >= SIMILAR:
                    similar += 1
                    pool.remove(best)
    ids = set(IDENT.findall(old))
    return LineDiff(verbatim / len(a), (verbatim + similar) / len(a),
                    len(ids & set(IDENT.findall(new))) / len(ids) if ids else 1.0)


# ------------------------------------------------------------------ scores

@dataclass
class Score:
    alive: int = 0
    right: int = 0
    dead: int = 0
    vanished: int = 0
    found_whole: int = 0  # dead in the truth, found with retained 1.0
    text_there: int = 0  # dead in the truth, most of its lines still in the file (`Row.text_there`)
    by_blame: int = 0  # alive only by git blame -M -C (moved, the diffs call them dead)

    def add(self, alive: bool, right: bool, vanished: bool, whole: bool = False, text_there: bool = False,
            by_blame: bool = False) -> None:
        if alive:
            self.alive += 1
            self.right += right
            self.by_blame += by_blame
        else:
            self.dead += 1
            self.vanished += vanished
            self.found_whole += whole and not vanished
            self.text_there += text_there


def share(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "-"


def engram_score(rows: list[Row], rule: tuple[float, float] | None = None) -> Score:
    """The resolver's score; with `rule` (tokens, lines), as if a match vanished when less than
    those shares of its tokens and of its lines were found (a match the run's own threshold made
    vanish is placed at its best partial)."""
    sc = Score()
    for r in rows:
        res = r.res
        file, start, end = res.file, res.start, res.end
        vanished = res.state == "vanished"
        if rule is not None and res.state in ("edited", "vanished") and (res.file == r.file) != (
                res.state == "vanished" and res.best_partial is not None and res.best_partial["file"] != r.file):
            # a match in another file keeps its own rules (ELSEWHERE_FROM, AMBIGUOUS_WITHIN)
            shares = res.shares or {}
            if vanished and res.best_partial is not None:
                file, start, end = res.best_partial["file"], res.best_partial["start"], res.best_partial["end"]
            vanished = start is None or (shares.get("tokens", 0.0) < rule[0] and shares.get("lines", 0.0) < rule[1])
        sc.add(r.alive, not vanished and overlaps(file, start, end, r.true_file, r.survivors), vanished,
               res.retained >= 1.0, r.text_there, r.by_blame)
    return sc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mirrors", nargs="+", metavar="MIRROR[@N]",
                    help="git directories (bare mirrors) of the repositories; @N pins the first commit "
                         "(default: drawn with the seed from the second half of the first-parent chain)")
    ap.add_argument("--tune", default="", help="comma-separated names (owner/repo) the thresholds were tuned on")
    ap.add_argument("--spans", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--diff-algorithm", default="myers", choices=("myers", "minimal", "patience", "histogram"),
                    help="git's diff algorithm for the truth and the tracker (default: git's own default)")
    ap.add_argument("--second-truth", default=None, choices=("myers", "minimal", "patience", "histogram", "moved"),
                    help="also judge the same spans by the line map of this diff algorithm (a second truth column); "
                         "moved: the first truth's diffs with the lines git's --color-moved marks moved kept")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a constant of engram.memory.anchors for this run (tuning)")
    ap.add_argument("--workdir", type=Path, default=None, help="where the checkouts go (default: a temp dir)")
    ap.add_argument("--dump", type=Path, default=None,
                    help="write every span's truth and answer as JSON Lines (to study a rule without a rerun)")
    args = ap.parse_args()
    tune = {t.strip() for t in args.tune.split(",") if t.strip()}
    print(f"# {machine()}; load {load()}; {dt.date.today()}; engram {engram_version()}")
    for assignment in args.set:
        key, _, value = assignment.partition("=")
        if not hasattr(anchors, key):
            sys.exit(f"--set {assignment}: engram.memory.anchors has no {key}")
        setattr(anchors, key, type(getattr(anchors, key))(value))
    print(f"# VANISHED_BELOW = {anchors.VANISHED_BELOW}, VANISHED_LINES_BELOW = {anchors.VANISHED_LINES_BELOW}, "
          f"ELSEWHERE_FROM = {anchors.ELSEWHERE_FROM}, ELSEWHERE_LINES_FROM = {anchors.ELSEWHERE_LINES_FROM}, "
          f"AMBIGUOUS_WITHIN = {anchors.AMBIGUOUS_WITHIN}, LINES_KEPT_BELOW = {anchors.LINES_KEPT_BELOW}, "
          f"RENAMED_FROM = {anchors.RENAMED_FROM}, BLANK_THERE = {anchors.BLANK_THERE}, "
          f"BOILERPLATE_BELOW = {anchors.BOILERPLATE_BELOW}, "
          f"CODE_KEPT_BELOW = {anchors.CODE_KEPT_BELOW}, ELSEWHERE_LINES_KEPT_FROM = {anchors.ELSEWHERE_LINES_KEPT_FROM}, "
          f"GIT_LINES = {anchors.GIT_LINES}, MOVED_CHARS_FROM = {anchors.MOVED_CHARS_FROM}, "
          f"STEP_MOVED_CHARS_FROM = {anchors.STEP_MOVED_CHARS_FROM}, WALK_COMMITS = {anchors.WALK_COMMITS}, "
          f"MAX_SCAN_BYTES = {anchors.MAX_SCAN_BYTES}, "
          f"diff algorithm {args.diff_algorithm}, {args.spans} spans per repository, seed {args.seed}")
    results: dict[str, dict[int, list[Row]]] = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for arg in args.mirrors:
            path, _, at = arg.partition("@")
            mirror = Path(path)
            name = _name(mirror)
            try:
                results[name] = run_repo(mirror.resolve(), name, args.spans, args.seed, Path(tmp), args.diff_algorithm,
                                         at or None, args.second_truth)
            except (subprocess.CalledProcessError, BadInput) as exc:
                sys.exit(f"{name}: {exc}")
    if args.dump is not None:
        dump(results, tune, args.dump)
    print_table(results, tune)
    if args.second_truth:
        print_second(results, tune, args.diff_algorithm, args.second_truth)
    print_states(results)
    print_audit(results, tune)
    print_line_sweep(results, tune)
    if tune:
        print_sweep({n: r for n, r in results.items() if n in tune})


def dump(results: dict[str, dict[int, list[Row]]], tune: set[str], path: Path) -> None:
    """One JSON line per span and k: the truth, the resolver's answer with its shares, the
    references, and the anchored text (`Row.text`)."""
    import json  # noqa: PLC0415

    with path.open("w", encoding="utf-8") as f:
        for name, per_k in results.items():
            for k, rows in per_k.items():
                for r in rows:
                    f.write(json.dumps({
                        "repo": name, "tuned": name in tune, "k": k, "rev": r.rev, "file": r.file, "start": r.start, "alive": r.alive,
                        "true_file": r.true_file, "survivors": r.survivors, "by_blame": r.by_blame,
                        "res": {**r.res.to_json(), "shares": r.res.shares}, "ms": r.ms, "fileline": r.fileline,
                        "tracker": r.tracker, "text_there": r.text_there, "text": r.text,
                        "second": r.second and {"alive": r.second[0], "true_file": r.second[1],
                                                "survivors": r.second[2]}}) + "\n")


def _name(mirror: Path) -> str:
    """owner/name of a mirror at …/owner+name/repo (or the directory name)."""
    p = mirror.resolve()
    base = p.parent.name if p.name in ("repo", ".git") else p.name
    return base.replace("+", "/", 1).removesuffix(".git")


def print_table(results: dict[str, dict[int, list[Row]]], tune: set[str]) -> None:
    header = ["repository", "set", "k", "alive", "of which by blame", "right place", "dead", "vanished",
              "dead: found whole",
              "dead: text still there",
              "file:line right", "file:line vanished", "tracker right", "tracker vanished", "resolve ms p50/p99"]
    body = []
    groups = [("tuned on", [n for n in results if n in tune]), ("held out", [n for n in results if n not in tune])]
    for label, names in groups:
        for k in KS:
            total = [Score(), Score(), Score()]
            ms: list[float] = []
            for name in names:
                rows = results[name][k]
                sc = [engram_score(rows), Score(), Score()]
                for r in rows:
                    sc[1].add(r.alive, *r.fileline)
                    sc[2].add(r.alive, *r.tracker)
                for t, s in zip(total, sc):
                    for f in ("alive", "right", "dead", "vanished", "found_whole", "text_there", "by_blame"):
                        setattr(t, f, getattr(t, f) + getattr(s, f))
                times = [r.ms for r in rows]
                ms += times
                body.append(_cells(name, label, k, sc, times))
            if len(names) > 1:
                body.append(_cells("**all**", label, k, total, ms))
    print()
    print(fmt_table(header, body))


def _cells(name: str, label: str, k: int, sc: list[Score], times: list[float]) -> list[str]:
    e, fl, tr = sc
    return [name, label, str(k), str(e.alive), str(e.by_blame), share(e.right, e.alive), str(e.dead),
            share(e.vanished, e.dead),
            str(e.found_whole), str(e.text_there), share(fl.right, fl.alive), share(fl.vanished, fl.dead),
            share(tr.right, tr.alive), share(tr.vanished, tr.dead), f"{pct(times, 50):.1f}/{pct(times, 99):.1f}"]


def print_second(results: dict[str, dict[int, list[Row]]], tune: set[str], first: str, second: str) -> None:
    """The resolver's right place / vanished on the same spans by both truths, side by side."""
    body = []
    for label, names in (("tuned on", [n for n in results if n in tune]), ("held out", [n for n in results if n not in tune])):
        for k in KS:
            rows = [r for n in names for r in results[n][k]]
            if not rows:
                continue
            flipped = [Row(*r.second, r.res, r.ms, r.fileline, r.tracker, r.text_there, r.file)
                       for r in rows if r.second is not None]
            a, b = engram_score(rows), engram_score(flipped)
            body.append([label, str(k), f"{a.alive} / {a.dead}", share(a.right, a.alive), share(a.vanished, a.dead),
                         f"{b.alive} / {b.dead}", share(b.right, b.alive), share(b.vanished, b.dead)])
    print()
    what = f"{first} diffs, lines git's --color-moved marks moved kept" if second == "moved" else f"{second} diffs"
    print(f"the same spans by two truths: line maps of git's {first} diffs and of its {what} (each with blame "
          "for moves)")
    print(fmt_table(["set", "k", f"{first}: alive / dead", "right place", "vanished",
                     f"{second}: alive / dead", "right place", "vanished"], body))


DEAD_AS = ("vanished", "edited r≥0.9", "edited 0.75-0.9", "edited r<0.75", "edited elsewhere", "intact/moved here",
           "moved elsewhere")


def dead_as(r: Row) -> str:
    """What a span dead in the truth was reported as (`DEAD_AS`): `r` is the share of its tokens."""
    res = r.res
    if res.state == "vanished":
        return "vanished"
    here = res.file == r.file
    if res.state != "edited":
        return "intact/moved here" if here else "moved elsewhere"
    if not here:
        return "edited elsewhere"
    return "edited r≥0.9" if res.retained >= 0.9 else "edited 0.75-0.9" if res.retained >= 0.75 else "edited r<0.75"


def print_states(results: dict[str, dict[int, list[Row]]]) -> None:
    """What the resolver answered for dead spans, per repository and k (k = 10 has few)."""
    body = []
    for name, per_k in results.items():
        for k in KS[1:]:
            dead = Counter(dead_as(r) for r in per_k[k] if not r.alive)
            n = sum(dead.values())
            body.append([name, str(k), str(n), *(share(dead[c], n) for c in DEAD_AS)])
    print()
    print("dead spans reported as (share of the dead spans; r: the share of the anchor's tokens found):")
    print(fmt_table(["repository", "k", "dead", *DEAD_AS], body))


def print_sweep(results: dict[str, dict[int, list[Row]]]) -> None:
    """Right place among alive spans (at the worst k) / vanished among dead ones (all k) on the
    tuning repositories, if a match vanished below a share of its tokens (rows) and of its lines
    (columns)."""
    lines = (0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.01)
    body = []
    for tokens in (0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.01):
        cells = []
        for ln in lines:
            per_k = [engram_score([r for rs in results.values() for r in rs[k]], (tokens, ln)) for k in KS]
            dead = sum(sc.dead for sc in per_k)
            worst = min(sc.right / sc.alive for sc in per_k if sc.alive)
            cells.append(f"{worst:.3f} / {share(sum(sc.vanished for sc in per_k), dead)}")
        body.append([_below(tokens), *cells])
    print()
    print(f"sweep on {', '.join(results)}: right place (the lowest of the three k) / vanished (all k), if "
          "vanished below a share of the tokens (rows) and of the lines (columns)")
    print(fmt_table(["tokens \\ lines", *map(_below, lines)], body))


AUDIT = ("lines verbatim >= 0.5", "lines verbatim or edited >= 0.5", "fewer")


def audit_class(r: Row) -> str:
    """A span's resolved match, line by line (`LineDiff`): half its lines unchanged (git's diff cut
    its hunks elsewhere, or a line rule counted it dead while most lines are there), half its
    lines unchanged or edited in place (the same code rewritten line by line), or fewer."""
    assert r.lines is not None
    return AUDIT[0] if r.lines.verbatim >= 0.5 else AUDIT[1] if r.lines.similar >= 0.5 else AUDIT[2]


def print_audit(results: dict[str, dict[int, list[Row]]], tune: set[str]) -> None:
    """Dead spans the resolver placed in their own file, against alive ones placed right, by what
    their match holds line by line: is the truth's "dead" what a reader would call gone?"""
    body = []
    for label, names in (("tuned", [n for n in results if n in tune]), ("held out", [n for n in results if n not in tune])):
        for k in KS[1:]:
            rows = [r for n in names for r in results[n][k]]
            dead = [r for r in rows if not r.alive and r.res.state != "vanished" and r.res.file == r.file]
            right = [r for r in rows if r.alive and r.res.state == "edited" and r.res.file == r.true_file]
            for what, group in (("dead, found in own file", dead), ("alive, edited, right file", right)):
                c = Counter(audit_class(r) for r in group)
                ids = [r.lines.idents for r in group if r.lines]
                body.append([label, str(k), what, str(len(group)), *(share(c[a], len(group)) for a in AUDIT),
                             f"{pct(ids, 50):.2f}" if ids else "-"])
    print()
    print("the match of dead spans found in their own file vs alive edited ones, line by line (lines: the "
          f"anchor's non-blank lines; edited: a line whose tokens line up >= {SIMILAR} with a line of the match)")
    print(fmt_table(["set", "k", "spans", "n", *AUDIT, "identifiers kept p50"], body))


LINE_RULES = {  # what counts as a surviving line of an `edited` match in the own file: (blank, renamed)
    "unchanged (of the non-blank lines)": (False, False),
    "unchanged or blank": (True, False),
    "unchanged or renamed (of the non-blank)": (False, True),
    "unchanged, blank or renamed (the alignment's, without git)": (True, True),
}


def kept_share(shares: dict[str, float], blank: bool, renamed: bool) -> float:
    """The share of an anchor's lines a line rule counts as surviving (`_Probe._shares`' parts)."""
    if blank and renamed:
        return shares["kept_lines"]
    b, rn = shares.get("blank", 0.0), shares.get("renamed", 0.0)
    code = 1.0 - b  # lines with tokens, as a share of all
    unchanged = shares.get("lines", 1.0) * code
    if not blank:
        return round((unchanged + rn * renamed) / code, 3) if code else 1.0
    return round(unchanged + b + rn * renamed, 3)


def line_rule_score(rows: list[Row], blank: bool, renamed: bool, below: float) -> Score:
    """The resolver's score had an `edited` match in the anchor's own file vanished when less than
    `below` of its lines survive as (`blank`, `renamed`) count them; a match the run's own rule made
    vanish (its best partial has `lines_kept`) is judged again the same way."""
    sc = Score()
    for r in rows:
        res, partial = r.res, r.res.best_partial or {}
        file, start, end, gone = res.file, res.start, res.end, res.state == "vanished"
        shares = res.shares or {}
        if gone and "lines_kept" in partial and not anchors._vanishes(shares):  # vanished by the line rule alone
            file, start, end = partial["file"], partial["start"], partial["end"]
            gone = kept_share(shares, blank, renamed) < below
        elif res.state == "edited" and res.file == r.file and "kept_lines" in shares:
            gone = kept_share(shares, blank, renamed) < below
        sc.add(r.alive, not gone and overlaps(file, start, end, r.true_file, r.survivors), gone)
    return sc


def print_line_sweep(results: dict[str, dict[int, list[Row]]], tune: set[str]) -> None:
    """Right place (worst k) / vanished (all k) if an `edited` match in the own file vanished below
    a share of its lines surviving, for each way of counting them (`LINE_RULES`; "never": no line
    rule, the token and line shares of `_vanishes` alone)."""
    body = []
    for what, (blank, renamed) in LINE_RULES.items():
        for below in (0.0, 0.4, 0.5, 0.6):
            if below == 0.0 and (blank or renamed):
                continue
            cells = []
            for names in ([n for n in results if n in tune], [n for n in results if n not in tune]):
                per_k = [line_rule_score([r for n in names for r in results[n][k]], blank, renamed, below) for k in KS]
                worst = min((sc.right / sc.alive for sc in per_k if sc.alive), default=None)
                cells.append(f"{'-' if worst is None else f'{worst:.3f}'} / "
                             f"{share(sum(sc.vanished for sc in per_k), sum(sc.dead for sc in per_k))}")
            body.append(["never" if below == 0.0 else what, _below(below) if below else "-", *cells])
    print()
    print("if an edited match in the own file vanished below a share of its lines surviving: right place "
          "(the lowest of the three k) / vanished (all k)")
    print(fmt_table(["lines counted", "vanished below", "tuned", "held out (not for choosing)"], body))


def _below(x: float) -> str:
    return "never" if x == 0 else "always" if x > 1 else f"< {x:g}"


if __name__ == "__main__":
    main()

"""Lines followed through a file's history commit by commit, as `git log -L` and `git blame` follow them.

One diff from an old version of a file to today's text keeps a line that was changed and restored
in between, or that a commit's diff paired with another copy of it (`}`, a repeated set-up line):
the diff of the two ends sees the same text. Git's own line tracking follows every commit's diff,
and the line dies in the commit that rewrote it. `walk` reads the first-parent history of some
files back from a commit in one `git log -p` process (`Step`: one commit's diff of one file), and
`Step.line` maps a line number through it; a block of lines one commit deleted and added elsewhere
in the file, unchanged and long enough, is followed there (`moves`: what `git blame -M` and
`--color-moved` follow).

Used by `engram.memory.anchors` (`_git_kept`); stdlib only: an agent's hook imports it.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

#: Candidate places tried for a moved block's first line: a file of a thousand `}` must not make
#: the move search quadratic.
MOVE_CANDIDATES = 16


@dataclass
class Step:
    """One commit's diff of one file (or the last step: the committed text to the text resolved).
    `hunks`: (old start, count, new start, count), as `-U0` gives them; `dels` / `adds`: the deleted
    and added lines, (line number, text without whitespace), in diff order; `gone`: the file was
    deleted, replaced by a binary, or did not exist before (added): none of its old lines survive."""

    hunks: list[tuple[int, int, int, int]] = field(default_factory=list)
    dels: list[tuple[int, str]] = field(default_factory=list)
    adds: list[tuple[int, str]] = field(default_factory=list)
    gone: bool = False
    size: int = 0  # bytes of git's output it was read from (what keeping it costs)
    _ends: list[int] | None = field(default=None, repr=False)
    _shift: list[int] = field(default_factory=list, repr=False)
    _moved: dict[int, dict[int, int]] = field(default_factory=dict, repr=False)

    def line(self, p: int, moved_from: int) -> int:
        """Where old line `p` is after this step, 0 when the step deleted or rewrote it and did not
        move it elsewhere in the file unchanged (`moves`, blocks of `moved_from` letters and digits
        or more; 0: no moves followed)."""
        if self.gone:
            return 0
        if self._ends is None:
            self.hunks.sort()
            self._ends = [os_ + oc - 1 if oc else os_ for os_, oc, _, _ in self.hunks]
            self._shift = [0]
            for _, oc, _, nc in self.hunks:
                self._shift.append(self._shift[-1] + nc - oc)
        j = bisect.bisect_left(self._ends, p)  # hunks wholly before p end before it
        if j < len(self.hunks) and self.hunks[j][1] and self.hunks[j][0] <= p:
            if not moved_from:
                return 0
            if moved_from not in self._moved:
                self._moved[moved_from] = moves(self.dels, self.adds, moved_from)
            return self._moved[moved_from].get(p, 0)
        return p + self._shift[j]


def step_of_texts(hunks: tuple[tuple[int, int, int, int], ...], old: list[str], new: list[str]) -> Step:
    """A `Step` from a diff's hunks and the two texts' lines (the last step: HEAD's file to the
    working tree's or a buffer's text)."""
    st = Step(list(hunks))
    for os_, oc, ns, nc in hunks:
        st.dels += [(n, "".join(old[n - 1].split())) for n in range(os_, os_ + oc) if n <= len(old)]
        st.adds += [(n, "".join(new[n - 1].split())) for n in range(ns, ns + nc) if n <= len(new)]
    return st


def moves(dels: list[tuple[int, str]], adds: list[tuple[int, str]], chars_from: int) -> dict[int, int]:
    """Old line → new line for the deleted lines one diff moved: a block of non-blank lines deleted
    and added again in the same order with the same text (whitespace aside), of at least
    `chars_from` letters and digits (git's `--color-moved=blocks` and `blame -M` count 20), and the
    blank lines between two of them, to blank lines between their new places. The longest block
    from each deleted line is taken, first come first served, as git pairs them."""
    d = [(n, k) for n, k in dels if k]
    a = [(n, k) for n, k in adds if k]
    if not d or not a:
        return {}
    where: dict[str, list[int]] = {}
    for j, (_, k) in enumerate(a):
        where.setdefault(k, []).append(j)
    blank_old = {n for n, k in dels if not k}
    blank_new = sorted(n for n, k in adds if not k)
    used = [False] * len(a)
    out: dict[int, int] = {}
    i = 0
    while i < len(d):
        at, size = -1, 0
        for j in [j for j in where.get(d[i][1], ()) if not used[j]][:MOVE_CANDIDATES]:
            n = 0
            while i + n < len(d) and j + n < len(a) and not used[j + n] and d[i + n][1] == a[j + n][1]:
                n += 1
            if n > size:
                at, size = j, n
        if size and sum(ch.isalnum() for _, k in d[i:i + size] for ch in k) >= chars_from:
            for t in range(size):
                out[d[i + t][0]] = a[at + t][0]
                used[at + t] = True
                if t:
                    _blanks_between(out, blank_old, blank_new, d[i + t - 1][0], d[i + t][0], a[at + t - 1][0],
                                    a[at + t][0])
            i += size
        else:
            i += 1
    return out


def _blanks_between(out: dict[int, int], blank_old: set[int], blank_new: list[int], o1: int, o2: int, n1: int,
                    n2: int) -> None:
    """Deleted blank lines between two moved lines go to the added blank lines between their new
    places, in order (as many as there are)."""
    olds = [o for o in range(o1 + 1, o2) if o in blank_old]
    if olds:
        lo = bisect.bisect_right(blank_new, n1)
        news = blank_new[lo:bisect.bisect_left(blank_new, n2)]
        out.update(zip(olds, news))


@dataclass
class Walk:
    """A file's diffs along the first-parent history back from a commit. `order`: each commit
    walked → its distance from that commit (0: the commit itself); `steps`: (distance, the file's
    diff in that commit), newest first, for the commits that touched it; `ended`: the walk reached
    the history's start or its caps, so a commit not in `order` is not within reach (a branch never
    merged by its first parent, or older than the cap), rather than not walked to yet."""

    order: dict[str, int]
    steps: list[tuple[int, Step]]
    ended: bool

    @property
    def size(self) -> int:
        """Bytes of git's output the walk holds, and the commits it passed (~50 bytes each)."""
        return sum(st.size for _, st in self.steps) + 50 * len(self.order)

    def covers(self, commit: str) -> bool:
        """Whether the walk can answer for `commit` (walked, or out of reach for good)."""
        return commit in self.order or self.ended

    def since(self, commit: str) -> list[Step] | None:
        """The file's diffs after `commit`, oldest first; None when `commit` is not on the walk."""
        i = self.order.get(commit)
        if i is None:
            return None
        return [st for d, st in reversed(self.steps) if d < i]


def walkable(rel: str) -> bool:
    """Paths `walk` can tell apart in git's output: printable, no quote or backslash (git quotes
    those) and not starting with a space or dash."""
    return bool(rel) and rel.isprintable() and '"' not in rel and "\\" not in rel and not rel.startswith((" ", "-"))


LOG_ARGS = ("-c", "core.quotePath=false", "--literal-pathspecs", "log", "--first-parent", "--diff-merges=first-parent",
            "--sparse", "--no-renames", "-w", "-U0", "--diff-algorithm=myers", "--no-color", "--no-ext-diff",
            "--no-textconv", "--no-show-signature", "--src-prefix=a/", "--dst-prefix=b/", "--format=%x01%H", "-p")


def walk(root: str, head: str, wanted: Mapping[str, set[str]], max_commits: int, max_bytes: int,
         timeout: float, stop_early: bool = True) -> dict[str, Walk] | None:
    """The diffs of `wanted`'s files (path → the commits their lines are followed from) along the
    first-parent history back from `head`, in one `git log -p` (every commit listed, `--sparse`,
    so a commit that did not touch the files still marks its place). Read as git writes it and
    stopped once every wanted commit is passed (their own diffs are not needed; not with
    `stop_early` False), or after `max_commits` commits or `max_bytes` of output (`Walk.ended`).
    None when git cannot run."""
    rels = sorted(r for r in wanted if walkable(r))
    if not rels:
        return None
    todo = set().union(*(wanted[r] for r in rels)) - {head}
    import subprocess  # noqa: PLC0415  (an agent's hook imports this module; most runs never walk)

    args = ["git", "-C", root, *LOG_ARGS, f"--max-count={max_commits}", head, "--", *rels]
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    except OSError as exc:
        log.debug("git log: %s", exc)
        return None
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        order, steps, stopped, size = _read_log(proc.stdout, set(rels), todo if stop_early else None, max_bytes)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    if stopped is None and proc.returncode != 0:
        log.debug("git log: exit %s", proc.returncode)
        return None
    log.debug("git log: %d commits, %d bytes, %s", len(order), size, stopped or "to the end")
    return {r: Walk(order, steps[r], stopped != "found") for r in rels}


def _read_log(out, rels: set[str], todo: set[str] | None, max_bytes: int  # type: ignore[no-untyped-def]
              ) -> tuple[dict[str, int], dict[str, list[tuple[int, Step]]], str | None, int]:
    """`git log -p -U0 --format=%x01%H` output read line by line into (order, steps per file, why
    it stopped early: "found" every commit of `todo` (None: read to the end), "bytes" past the
    cap, or None, bytes read)."""
    order: dict[str, int] = {}
    steps: dict[str, list[tuple[int, Step]]] = {r: [] for r in rels}
    cur: Step | None = None
    at = [0, 0]  # next old / new line of the current hunk
    size = 0
    for raw in out:
        size += len(raw)
        if size > max_bytes:
            return order, steps, "bytes", size
        line = raw.rstrip(b"\n")
        if cur is not None:
            cur.size += len(raw)
        if line.startswith(b"\x01"):
            commit = line[1:].decode("ascii", "replace")
            order[commit] = len(order)
            cur = None
            if todo is not None:
                todo.discard(commit)
            if todo is not None and not todo:
                return order, steps, "found", size
        elif line.startswith(b"diff --git a/"):
            rest = line[len(b"diff --git a/"):]
            half = (len(rest) - 3) // 2
            path = rest[:half].decode("utf-8", "replace") if rest[half:] == b" b/" + rest[:half] else None
            cur = Step() if path in rels else None
            if cur is not None and path is not None:
                steps[path].append((len(order) - 1, cur))
        elif cur is None:
            continue
        elif line.startswith(b"@@ "):
            h = _hunk(line)
            if h is not None:
                cur.hunks.append(h)
                at = [h[0], h[2]]
        elif cur.hunks and line[:1] in (b"-", b"+"):
            side = 0 if line[:1] == b"-" else 1
            key = "".join(line[1:].decode("utf-8", "replace").split())
            (cur.dels if side == 0 else cur.adds).append((at[side], key))
            at[side] += 1
        elif line.startswith((b"new file mode", b"deleted file mode", b"Binary files ")):
            cur.gone = True
    return order, steps, None, size


def _hunk(line: bytes) -> tuple[int, int, int, int] | None:
    head = line.split(b" ")
    if len(head) < 3 or not head[1].startswith(b"-") or not head[2].startswith(b"+"):
        return None
    try:
        o = [int(x) for x in head[1][1:].split(b",")]
        n = [int(x) for x in head[2][1:].split(b",")]
    except ValueError:
        return None
    return o[0], o[1] if len(o) > 1 else 1, n[0], n[1] if len(n) > 1 else 1

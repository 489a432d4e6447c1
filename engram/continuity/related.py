"""Files the repository relates to a session's working set: where its next edits are likely to go
when the transcript never named them.

Evidence read from git and nothing else, no model: files that changed in the same commits as the
files the session edited (co-change: "changed with src/a.py in 7 commits"), a file's conventional
partner (a source file's test and the other way round, a header and its implementation: "test of
src/a.py"), and with little weight the files changed often lately ("changed in 6 of the last 50
commits"). Only files in the tree of the newest commit read count
(a partner that does not exist is not a lead), but one: the test a source edited has not got yet,
where the tree's own pairs put tests (`tests_to_create`: "test to create for lib/a/x.ex, as
test/a/y_test.exs tests lib/a/y.ex"; a session adding a module often writes its test next). The history is read up to `until` (a benchmark
cuts a session at a time and must not see later commits; `engram resume` reads it up to now),
the newest `HISTORY_COMMITS` commits, leaving out merges and commits of more than `BULK_FILES`
files (a formatting pass, a dependency bump relate everything to everything).

A repository with no git, or git missing, gives nothing: the package is the transcript's alone."""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from engram.gitread import git_output

log = logging.getLogger(__name__)

#: Newest commits read (one `git log`, ~10 ms per 300 commits).
HISTORY_COMMITS: Final = 300
#: A commit changing more files than this relates nothing (bulk renames, formatting, lock files).
BULK_FILES: Final = 20
#: The working set's latest edited files whose co-changes count.
SEEDS: Final = 8
#: A conventional partner of the latest edited file counts as this many commits shared with it alone.
PARTNER_WEIGHT: Final = 3.0
#: Files changed in 2 or more of the newest HOT_COMMITS commits are often changed again (a README, a
#: changelog, the module under work) though related to no file edited: they count little.
HOT_COMMITS: Final = 50
HOT_WEIGHT: Final = 0.5
TIMEOUT_S: Final = 5.0
_TEST_DIRS: Final = ("tests", "test", "spec", "__tests__")
_TEST_SUFFIXES: Final = ("_test", ".test", ".spec", "_spec", "Test", "Tests")
_HEADERS: Final = {".h": (".c", ".cc", ".cpp", ".m", ".mm"), ".hpp": (".cpp", ".cc"), ".c": (".h",),
                   ".cc": (".h", ".hpp"), ".cpp": (".h", ".hpp"), ".m": (".h",), ".mm": (".h",)}
_TEST_EXT: Final = {".ex": ".exs"}  # Elixir's tests are scripts
_SOURCE_EXT: Final = {v: k for k, v in _TEST_EXT.items()}


@dataclass
class Related:
    path: str
    score: float
    why: list[str] = field(default_factory=list)


@dataclass
class History:
    """The commits read (each its changed files), newest first, and the tree of the newest one."""

    commits: list[list[str]]
    tree: set[str]


def _git(repo: Path, *args: str) -> str | None:
    out = git_output(repo, *args, timeout=TIMEOUT_S)
    return None if out is None else out.decode("utf-8", "replace")


def git_time(ts: str) -> str | None:
    """An event's ISO time as git's --until takes it ("2026-01-02 03:04:05 +0000"), or None."""
    try:
        t = datetime.fromisoformat(ts)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S +0000")


def read_history(repo: Path, until: str | None = None, commits: int = HISTORY_COMMITS) -> History | None:
    """The repository's newest `commits` commits up to `until` (an ISO time; None: now), with the
    tree of the newest; None when `repo` is no git repository or has no commit then."""
    args = ["log", "--no-renames", "--name-only", "--format=%x00%H", "-n", str(commits), "HEAD"]
    if until:
        when = git_time(until)
        if when is None:
            return None
        args.insert(1, f"--until={when}")
    out = _git(repo, *args)
    if not out:
        return None
    found: list[list[str]] = []
    tip = None
    for block in out.split("\0")[1:]:
        head, _, rest = block.partition("\n")
        tip = tip or head.strip()
        files = [x for x in rest.splitlines() if x]
        if files:  # (a merge shows none)
            found.append(files)
    tree = _git(repo, "ls-tree", "-r", "--name-only", "-z", tip) if tip else None
    if tree is None:
        return None
    return History(found, set(tree.split("\0")) - {""})


def partner_names(path: str) -> list[str]:
    """The file names a naming convention pairs with `path`'s: its test's and the other way round
    (test_x.py, x_test.go, x.test.ts, x_spec.rb, XTest.java, x_test.exs for x.ex), a header's and
    its implementation's (x.h / x.c, x.cpp, x.cc)."""
    stem, ext = os.path.splitext(os.path.basename(path))
    if _looks_test(path):
        base = stem.removeprefix("test_")
        for suffix in _TEST_SUFFIXES:
            base = base.removesuffix(suffix)
        return [base + _SOURCE_EXT.get(ext, ext)] if base and base != stem else []
    tx = _TEST_EXT.get(ext, ext)
    return [f"test_{stem}{tx}", *(f"{stem}{s}{tx}" for s in _TEST_SUFFIXES), *(stem + o for o in _HEADERS.get(ext, ()))]


def partners(path: str, tree: set[str], names: dict[str, list[str]] | None = None) -> list[str]:
    """The files of `tree` paired with `path` by name (partner_names), the nearest first (most
    folders in common), at most two a name: tests/test_x.py for src/pkg/x.py, and back."""
    if names is None:
        names = by_name(tree)
    folders = path.split("/")[:-1]
    out = []
    for name in partner_names(path):
        found = [p for p in names.get(name, ()) if p != path]
        found.sort(key=lambda p: (-_shared(folders, p.split("/")[:-1]), p))
        out += found[:2]
    return out


def by_name(tree: set[str]) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for p in tree:
        names.setdefault(p.rsplit("/", 1)[-1], []).append(p)
    return names


def _shared(a: list[str], b: list[str]) -> int:
    """Folders two paths share (as a set: tests/pkg/ and src/pkg/ share pkg)."""
    return len(set(a) & set(b))


def related(history: History, edited: list[str], touched: set[str], limit: int) -> list[Related]:
    """Files of the tree related to the session's `edited` files (latest first), not `touched`
    yet, most related first, each with why: the conventional partners of the files edited, the
    files sharing commits with them, the files changed often lately (ties: the more recently
    changed first)."""
    seeds = edited[:SEEDS]
    found: dict[str, Related] = {}
    for path, score, why in [*_partner_leads(history, seeds), *_cochange_leads(history, seeds), *_hot_leads(history)]:
        if path in touched or path not in history.tree:
            continue
        r = found.setdefault(path, Related(path, 0.0))
        r.score += score
        if why not in r.why:
            r.why.append(why)
    newest: dict[str, int] = {}
    for i, files in enumerate(history.commits):
        for f in files:
            newest.setdefault(f, i)
    return sorted(found.values(), key=lambda r: (-r.score, newest.get(r.path, len(history.commits)), r.path))[:limit]


Lead = tuple[str, float, str]  # a file, how much it counts, why


def _partner_leads(history: History, seeds: list[str]) -> list[Lead]:
    names = by_name(history.tree)
    out = []
    for rank, seed in enumerate(seeds):
        for p in partners(seed, history.tree, names):
            why = f"test of {seed}" if _looks_test(p) else f"tested by {seed}" if _looks_test(seed) else f"pairs with {seed}"
            out.append((p, PARTNER_WEIGHT / (1 + rank), why))
    return out


def _cochange_leads(history: History, seeds: list[str]) -> list[Lead]:
    """Each file sharing commits with the seeds: a commit counts 1 / (its other files), shared
    with a later seed less (1 / (1 + its rank)); why names the seed it shares most commits with."""
    seed_rank = {s: i for i, s in enumerate(seeds)}
    shared: dict[str, Counter[str]] = {}
    weight: Counter[str] = Counter()
    for files in history.commits:
        hit = [s for s in files if s in seed_rank]
        if not hit or len(files) > BULK_FILES:
            continue
        for f in files:
            if f in seed_rank:
                continue
            for s in hit:
                shared.setdefault(f, Counter())[s] += 1
                weight[f] += 1.0 / (1 + seed_rank[s]) / max(1, len(files) - 1)
    out = []
    for f, w in weight.items():
        s, n = shared[f].most_common(1)[0]
        out.append((f, w, f"changed with {s} in {n} commit{'s' if n > 1 else ''}"))
    return out


def _hot_leads(history: History) -> list[Lead]:
    recent = [c for c in history.commits[:HOT_COMMITS] if len(c) <= BULK_FILES]
    return [(f, HOT_WEIGHT * n / len(recent), f"changed in {n} of the last {len(recent)} commits")
            for f, n in Counter(f for c in recent for f in c).items() if n >= 2]


def tests_to_create(history: History, edited: list[str], touched: set[str], limit: int) -> list[Related]:
    """The tests the repository's own layout expects for the sources edited that have none in the
    tree yet (a session that adds lib/a/x.ex often writes test/a/x_test.exs next), latest edited
    first, each with why: the pair of the tree it follows (a source of the same folder, else of the
    same top folder, with its test). Nothing when no source near it has a test to follow."""
    names = by_name(history.tree)
    seeds = [(rank, s) for rank, s in enumerate(edited[:SEEDS])
             if not _looks_test(s) and not partners(s, history.tree, names)]
    if not seeds:
        return []
    pairs = _test_pairs(history.tree, names, {os.path.splitext(s)[1] for _, s in seeds})
    out: list[Related] = []
    for rank, src in seeds:
        guess = _test_path(src, pairs)
        if guess is None or guess[0] in touched or guess[0] in history.tree or any(r.path == guess[0] for r in out):
            continue
        path, like, like_test = guess
        out.append(Related(path, PARTNER_WEIGHT / (1 + rank), [f"test to create for {src}, as {like_test} tests {like}"]))
    return out[:limit]


def _test_pairs(tree: set[str], names: dict[str, list[str]], exts: set[str]) -> list[tuple[str, str]]:
    """(source, its test) for each test of the tree whose source (of one of `exts`) it holds."""
    out = []
    for test in sorted(tree):
        if _looks_test(test):
            out += [(src, test) for src in partners(test, tree, names)
                    if os.path.splitext(src)[1] in exts and not _looks_test(src)][:1]
    return out


def _test_path(src: str, pairs: list[tuple[str, str]]) -> tuple[str, str, str] | None:
    """Where `src`'s test would go, following the nearest pair of the tree (same folder first, then
    the most folders in common, same extension): its test's folder (for a source elsewhere, that
    folder with the source's folders swapped in) and its test's naming."""
    folder, ext = os.path.dirname(src), os.path.splitext(src)[1]
    best: tuple[int, str, str] | None = None
    for other, test in pairs:
        if os.path.splitext(other)[1] != ext or other == src:
            continue
        shared = 2 * _common_prefix(folder, os.path.dirname(other)) + (os.path.dirname(other) == folder)
        if best is None or shared > best[0]:
            best = (shared, other, test)
    if best is None or (best[0] == 0 and "/" in src):
        return None
    _, like, like_test = best
    stem, like_stem = os.path.splitext(os.path.basename(src))[0], os.path.splitext(os.path.basename(like))[0]
    name = os.path.basename(like_test).replace(like_stem, stem, 1)
    like_dir, test_dir = os.path.dirname(like), os.path.dirname(like_test)
    if like_dir == folder:
        target_dir = test_dir
    else:  # lib/a/y.ex -> test/a/y_test.exs: the same folders under the tests' top folder
        rest = like_dir[len(like_dir.split("/")[0]):]
        if not rest or not test_dir.endswith(rest):
            return None
        target_dir = test_dir[: len(test_dir) - len(rest)] + folder[len(folder.split("/")[0]):]
    return (f"{target_dir}/{name}" if target_dir else name), like, like_test


def _common_prefix(a: str, b: str) -> int:
    """Leading folders two folders share."""
    n = 0
    for x, y in zip(a.split("/"), b.split("/"), strict=False):
        if x != y or not x:
            break
        n += 1
    return n


def _looks_test(path: str) -> bool:
    stem = os.path.splitext(os.path.basename(path))[0]
    return stem.startswith("test_") or stem.endswith(_TEST_SUFFIXES) or any(p in _TEST_DIRS for p in path.split("/")[:-1])

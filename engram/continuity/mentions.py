"""Files a session named but did not touch yet: where its next edits are likely to go.

A session's next edits often land on files no event has read or edited yet, but that the
transcript already names: the person's request ("also fix router.ex"), the plan, the agent's
own words ("next I'll add a test in test/foo_test.exs"), a command's output (`git status`, a
failing test's traceback, `grep -l`). Each path-like word of those texts is counted with the
weight of where it was said; a bare file name counts for the one path with that name the session
has seen. Paths under dependency, build and temporary folders, and words that look like domains,
are left out; a path sharing more of its folders with the files the session touched ranks
higher. A session on Windows writes `D:\\proj\\src\\x.go`: read as src/x.go, as its edits are.
Nothing is guessed: every file listed was written in the transcript, at `at`.

Measured on real sessions cut mid-way (bench/resume.py): about 40 % of the next files edited
that the working set missed were named before the cut; the rest were mostly created later under
names nothing had said yet."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

#: How much a mention counts, by where it was made (tuned on the fixtures' sessions and the
#: spotter and M-Claude sets; measured apart on held-out sets: bench/README.md).
WEIGHTS: Final = {"request": 4.0, "plan": 4.0, "summary": 4.0, "message": 2.0, "thinking": 1.0, "call": 1.0, "output": 0.5}
#: Characters of one text searched for paths: a tool call's input or output (its head holds a listing,
#: a status, an error: the rest is mostly more of the same; 4,000: recall 0.70, 8,000: 0.72 on the
#: tuning sets), and any other text.
OUTPUT_CHARS: Final = 8_000
TEXT_CHARS: Final = 20_000
#: A path with no folder in common with the files touched keeps this share of its score.
UNRELATED: Final = 0.2
#: The end of a file's name: a letter or digit, a dot, an extension; not followed by what makes it
#: a call (`os.path.join(`), a folder (`a.b/`) or a longer word. Paths are found from these ends
#: backwards (a scan from every word start backtracks on long words: 4 times slower).
_FILE_END: Final = re.compile(r"\w\.[A-Za-z]\w{0,7}(?![\w/(]|[.-]\w)")
_PATH_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
_NOT_SOURCE: Final = frozenset({"_build", "deps", "node_modules", ".git", "tmp", "target", "dist", "build", "vendor",
                                "__pycache__", ".venv", "venv", "site-packages", ".cache", ".next", "coverage"})
_SAID: Final = frozenset({"request", "plan", "summary", "message"})
_WINDOWS_PATH: Final = re.compile(r"\b[A-Za-z]:\\\w")
_ROOT_FILE: Final = re.compile(r"^[\w.-]+\.(md|txt|toml|json|ya?ml|cfg|ini|lock|exs?|py|js|ts|go|rs|rb|sh|mk)$|^Makefile$")

@dataclass
class Mention:
    path: str
    score: float
    at: str  # the latest mention
    seq: int
    sources: set[str] = field(default_factory=set)


def paths_in(text: str, cwd: str | None, limit: int = TEXT_CHARS) -> set[str]:
    """The repository-relative paths (and bare file names) a text names (in its first `limit`
    characters)."""
    text = text[:limit]
    if (cwd and "\\" in cwd) or _WINDOWS_PATH.search(text):
        text = _windows_to_posix(text, cwd)
    elif cwd:
        text = text.replace(cwd.rstrip("/") + "/", "")
    out = set()
    for m in _FILE_END.finditer(text):
        start = m.start()
        while start > 0 and (text[start - 1] in _PATH_CHARS or text[start - 1].isalnum()):
            start -= 1
        if start > 0 and text[start - 1] in "@$%+:~":
            continue  # @scope/x.json, $VAR/x, a URL's host
        p = text[start:m.end()]
        if p.startswith("/"):
            continue  # outside the repository (its own paths lost the cwd above)
        while p.startswith(("./", "a/", "b/")):
            p = p[2:]
        if len(p) < 4 or "//" in p or p.count(".") > 4:
            continue
        parts = p.split("/")
        if any(x in _NOT_SOURCE for x in parts[:-1]):
            continue
        if len(parts) > 1 and "." in parts[0] and not parts[0].startswith("."):
            continue  # hexdocs.pm/..., github.com/...: an address, not a file of the repository
        out.add(p)
    return out


def _windows_to_posix(text: str, cwd: str | None) -> str:
    """A text of a session on Windows with its paths as the rest of engram writes them: the
    session's folder left out (its case ignored, as Windows does; either separator) and
    backslashes turned into slashes (`D:\\proj\\src\\x.go` in D:\\proj: src/x.go)."""
    if cwd:
        folder = cwd.rstrip("\\/")
        for variant in {folder, folder.replace("\\", "/"), folder.replace("/", "\\")}:
            text = re.sub(re.escape(variant) + r"[\\/]", "", text, flags=re.IGNORECASE)
    return text.replace("\\", "/")


class Mentions:
    """Counts the paths named in a session's texts, as the facts are read."""

    def __init__(self) -> None:
        self.found: dict[str, Mention] = {}

    def add(self, text: object, source: str, at: str, seq: int, cwd: str | None) -> None:
        if not isinstance(text, str) or not text:
            return  # (a text kept as an object is over 256 KB: a dump, not where a file is named)
        weight = WEIGHTS[source]
        for p in paths_in(text, cwd, OUTPUT_CHARS if source in ("output", "call") else TEXT_CHARS):
            m = self.found.get(p)
            if m is None:
                m = self.found[p] = Mention(p, 0.0, at, seq)
            m.score += weight
            m.at, m.seq = at, seq
            m.sources.add(source)

    def ranked(self, touched: set[str], limit: int = 40) -> list[Mention]:
        """The files named and not touched, most likely first: bare names resolved to the one path
        the session saw with that name (else dropped), scaled by how many folders each shares
        with the touched files."""
        names: dict[str, set[str]] = {}
        for p in [*touched, *(p for p in self.found if "/" in p)]:
            names.setdefault(p.rsplit("/", 1)[-1], set()).add(p)
        merged: dict[str, Mention] = {}
        for p, m in self.found.items():
            if "/" not in p:
                full = names.get(p)
                if full and len(full) == 1:
                    p = next(iter(full))
                elif full or not m.sources & _SAID or not _ROOT_FILE.match(p):
                    continue  # (a bare name no path of the session has: a file at the top, if said in words)
            if p in touched:
                continue
            into = merged.get(p)
            if into is None:
                merged[p] = Mention(p, m.score, m.at, m.seq, set(m.sources))
            else:
                into.score += m.score
                into.sources |= m.sources
                if m.seq > into.seq:
                    into.at, into.seq = m.at, m.seq
        folders = {"/".join(parts[:j]) for f in touched for parts in [f.split("/")] for j in range(1, len(parts))}
        for m in merged.values():
            parts = m.path.split("/")
            shared = max([j for j in range(1, len(parts)) if "/".join(parts[:j]) in folders] or [0])
            m.score *= UNRELATED + shared / max(1, len(parts) - 1) if len(parts) > 1 else UNRELATED
        return sorted(merged.values(), key=lambda m: (-m.score, -m.seq, m.path))[:limit]  # (a path: the same order every run)


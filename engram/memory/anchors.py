"""Anchors: a span of code a memory is about, found again after the code shifted, moved or changed.

A `file:line` citation is wrong as soon as a line is added above it, and tools that keep one
silently point at other code. An `Anchor` keeps the span's text (and its winnowed fingerprints,
the same the evidence index holds for transcripts) and `resolve` looks for that text in today's
working tree, or in an editor's unsaved buffer, and says how it fared:

* ``intact``: the same code (the same tokens: whitespace and line breaks may differ), at its old
  place or shifted by lines added or removed around it;
* ``moved``: the same code elsewhere in the file (its neighbours changed) or in another file;
* ``edited``: found, but changed: ``retained`` is the share of the anchored code's tokens still
  there, in order (a renamed variable costs its occurrences, not every line it is on);
* ``vanished``: too little of it is anywhere together (`VANISHED_BELOW` of its tokens,
  `VANISHED_LINES_BELOW` of its lines; in another file, `ELSEWHERE_FROM` of its tokens or
  `ELSEWHERE_LINES_FROM` of its lines, in that file alone: text several files hold, a licence
  header, is no move; and `ELSEWHERE_LINES_KEPT_FROM` of its lines of code unchanged, as blame
  would trace them), or its match in its own file keeps less than `LINES_KEPT_BELOW` of its
  lines: as git's own line tracking counts them when git can tell (`GIT_LINES`, `_git_kept`: kept
  by every commit's diff from the anchor's commit, moved, or changed by renames alone); else as the alignment
  does (unchanged, blank where the match has a blank line too, or changed by renames alone), or
  less than `CODE_KEPT_BELOW` of its lines of code, or only lines found elsewhere in the file too
  (`BOILERPLATE_BELOW`: a deleted test aligned with its siblings' set-up lines);
  ``best_partial`` names the best remnant, if any.

Resolution is meant to run on every recall, so it does the cheap things first: the exact lines
at the old place, then anywhere in the file (plain string comparison, no tokenizing, no numpy);
only then token matching in the file (k-gram seeds from `engram.anchor`, then an alignment of the
tokens; for a changed match, git's diffs from the anchor's commit: three git processes), and only
when the anchor would vanish from its file, other files: those the evidence
index saw sessions write this code into, and tracked files of the same extension that contain
the span's rarest identifiers (`MAX_SCAN_FILES`, `MAX_SCAN_BYTES`). Thresholds and their
measurement: docs/anchors.md and bench/anchors.py.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import stat
import struct
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final

from engram.errors import BadInput
from engram.fsutil import looks_binary, repo_relative
from engram.gitread import git_output
from engram.memory import linewalk
from engram.words import plural

if TYPE_CHECKING:
    # (difflib itself only where spans are aligned: an agent's hook imports this module)
    from difflib import Match

    import apsw

log = logging.getLogger(__name__)

#: Version of `Anchor.to_json`: anchors live in the append-only memory event log for good, so a
#: change of meaning gets a new number and `Anchor.from_json` keeps reading the old ones.
ANCHOR_VERSION: Final = 1

#: An anchor has vanished when less than VANISHED_BELOW of its tokens and less than
#: VANISHED_LINES_BELOW of its lines (each line's tokens all there, none inserted between them)
#: are found together; other files are searched only then. Chosen with bench/anchors.py on
#: psf/requests and junegunn/fzf (docs/anchors.md): of the rules that find at least 0.97 of the
#: spans alive in git's line tracking at their place at every k (the 0.95 target plus two standard
#: errors of 150 spans), and keep a fifth of the tokens edited all over a span `edited` with a
#: margin (tokens below 0.8), the one reporting the most dead spans vanished (0.57, all k). Most
#: dead spans it keeps were rewritten around (a reflowed comment, renamed parameters, moved to
#: another file): a memory should follow them.
VANISHED_BELOW: Final = 0.75
VANISHED_LINES_BELOW: Final = 0.5
#: An anchor `edited` in its own file has vanished when less than LINES_KEPT_BELOW of its lines
#: survive as the issue's truth counts them (git's line tracking: unchanged, whitespace aside, or
#: blank), a line changed only by renames counting as kept (`RENAMED_FROM`): most tokens of a
#: rewritten span can still be around (a reflowed comment, a regenerated table), but the code the
#: note was about is not. `best_partial` names the match. Chosen with bench/anchors.py on
#: psf/requests, junegunn/fzf and expressjs/express (docs/anchors.md).
LINES_KEPT_BELOW: Final = 0.5
#: A token replaced by the same new one at least this often in the anchor is a rename.
RENAMED_FROM: Final = 2
#: 1: ... unless it is a swap: the new token was in the code already (in the anchored text, or, when
#: git can tell, in the anchor's file at its commit) and the old one is still in the file. A name
#: swapped for another both in use (one constant for another, `AttrRegular` for `AttrUndefined`
#: down a table) changes what the code says; a rename gives a thing a name it did not have, or
#: leaves its old name nowhere. 0: any such replacement (bench/anchors.py --set, to compare).
RENAMED_NEW: Final = 1
#: 1: a blank line inside the anchor counts as kept only where its match has a blank line too
#: (`_blank_there`); 0: every blank line counts as kept (bench/anchors.py --set, to compare).
BLANK_THERE: Final = 1
#: A changed match holding less than BOILERPLATE_BELOW of the anchor's tokens whose unchanged
#: lines all occur elsewhere in the file as well (`end`, a test's set-up line) is no survival
#: (`_boilerplate`): a deleted test's lines aligned with those of its sibling tests. From 0.85 up
#: the tokens vouch for the match (test code repeated in its file, edited). Chosen with
#: bench/anchors.py on psf/requests, junegunn/fzf and expressjs/express (docs/anchors.md).
BOILERPLATE_BELOW: Final = 0.85
#: An anchor `edited` in its own file has vanished when less than CODE_KEPT_BELOW of its lines of
#: code survive (unchanged or renamed), blank lines aside: the blank lines of a deleted block, kept
#: where its sibling's (a struct of the same shape) are, are all that is left of it. 0: no such rule.
CODE_KEPT_BELOW: Final = 0.4
#: An `edited` match in the own file is judged by git's own line tracking when git can tell
#: (`_git_kept`), the alignment's count (`kept_lines`, `CODE_KEPT_BELOW`, `BOILERPLATE_BELOW`) only
#: when it cannot. 2: the lines followed through every first-parent commit from the one the anchor
#: was taken at to HEAD, then HEAD's file to the text resolved (`engram.memory.linewalk`: a line
#: rewritten and restored in between dies, as the truth counts it); 1: one diff from the anchor's
#: commit to the text resolved (also 2's rule past WALK_COMMITS, or off HEAD's first-parent
#: chain); 0: never (bench/anchors.py --set, to compare). Chosen with bench/anchors.py on
#: psf/requests, junegunn/fzf and expressjs/express (docs/anchors.md).
GIT_LINES: Final = 2
#: The walk (GIT_LINES 2) reads at most this many first-parent commits back from HEAD, and this
#: many bytes of their diffs of the anchors' files, in one `git log` per call; an anchor taken
#: further back is judged by one diff from its commit (GIT_LINES 1's rule).
WALK_COMMITS: Final = 1000
WALK_BYTES: Final = 32 << 20
#: A block of lines git's diff deletes and the match holds unchanged where the diff adds lines is
#: moved, not deleted, from this many letters and digits (git's own move detection, `git blame -M`
#: and `--color-moved`, starts at 20: there 0.845 of the tuning set's dead spans vanished against
#: 0.859, both keeping 0.97 of the alive ones at their place). Chosen with bench/anchors.py on
#: psf/requests, junegunn/fzf and expressjs/express (docs/anchors.md).
MOVED_CHARS_FROM: Final = 40
#: The walk (GIT_LINES 2) follows a block of lines one commit deleted and added elsewhere in the
#: file, unchanged, from this many letters and digits (`linewalk.moves`; 0: no moves followed; its
#: last step, HEAD's file to the text resolved, follows them from MOVED_CHARS_FROM, as one diff).
#: From 80 the fzf spans whose lines `git blame -M` traces to two places of their file (part moved
#: down in a block of 20-80) vanished: 0.946 of the tuning set's alive spans at their place at
#: k = 200, against 0.978 from 40 and 0.980 from 20 (where 0.939 of the dead vanished, 0.942 from
#: 40); not following moves loses alive spans. Chosen with bench/anchors.py on psf/requests,
#: junegunn/fzf and expressjs/express (docs/anchors.md).
STEP_MOVED_CHARS_FROM: Final = 40
#: Seconds a git command of the resolution may take before git is taken to be unable to tell.
GIT_TIMEOUT: Final = 10
#: The line rule needs this many lines of code in the anchor: on a single line "half its lines"
#: makes any edit of it (a default value changed in a signature) a deletion, which is the token
#: share's call at that size (VANISHED_BELOW). The bench's spans have 3 or more.
LINES_RULE_FROM: Final = 2
#: A match in another file replaces the own file's only when it retains this much more.
ELSEWHERE_MARGIN: Final = 0.1
#: A match in another file has no old place or neighbours to vouch for it, so it must hold at
#: least ELSEWHERE_FROM of the anchor's tokens or ELSEWHERE_LINES_FROM of its lines (the own
#: file's bars raised); and it is no move when another file holds the code within
#: AMBIGUOUS_WITHIN as well: text in several files (a licence header, an example's preamble,
#: copied code) says nothing of where this code went. Chosen with bench/anchors.py on
#: psf/requests, junegunn/fzf and expressjs/express (docs/anchors.md): most dead spans found in
#: another file were such text.
ELSEWHERE_FROM: Final = 0.85
ELSEWHERE_LINES_FROM: Final = 0.75
#: ... and, as blame traces moved lines, keep at least ELSEWHERE_LINES_KEPT_FROM of the anchor's lines
#: of code unchanged: a deleted test is no move to another spec file because the spec's boilerplate
#: and most of its tokens are there (express's res.header tests against res.set's). 0: no such rule.
ELSEWHERE_LINES_KEPT_FROM: Final = 0.5
AMBIGUOUS_WITHIN: Final = 0.05
#: ... and, when git can tell, it is no move when ALREADY_THERE_FROM of the match's lines of code
#: (of ALREADY_CHARS_FROM letters and digits or more: not a `}`) were in that file already at the
#: anchor's commit: the anchored code did not go there, a copy of it was there all along (a deleted
#: test beside its surviving twin, a helper copied into two modules). Seen on bench/anchors.py's
#: dumps of all eight repositories (held-out ones included, so they are not blind to it): of the
#: spans resolved into another file, none that blame traces there had its match there before, and
#: about half the dead ones did.
ALREADY_THERE_FROM: Final = 0.5
ALREADY_CHARS_FROM: Final = 10
#: A best partial match below this share is noise (a shared `return None`), not named.
PARTIAL_FROM: Final = 0.2
#: The cross-file scan looks at no more than this many tracked files of the extension, of no more
#: than MAX_FILE_BYTES each and MAX_SCAN_BYTES together, and aligns at most MAX_ALIGNED of them.
MAX_SCAN_FILES: Final = 2000
MAX_FILE_BYTES: Final = 1 << 20
MAX_SCAN_BYTES: Final = 16 << 20
MAX_ALIGNED: Final = 12
#: Identifiers of the span a candidate file must mostly contain (the longest: rarest in practice).
RARE_IDENTIFIERS: Final = 4
#: A buffer being edited (`resolve(..., nearby=True)`) longer than NEARBY_FROM lines is first
#: searched only within NEARBY_LINES lines of the anchor's place: typing changes a few lines, so a
#: touched note is almost always still there, and tokenizing a 5,000-line buffer at every
#: keystroke (~100-200 ms holding the GIL) was the language server's codeLens tail. The near match
#: answers when its code is kept (not vanished) and it ends short of the window's edges; else
#: the whole text is searched, as without `nearby`.
NEARBY_FROM: Final = 1_000
NEARBY_LINES: Final = 200

STATES: Final = ("intact", "moved", "edited", "vanished")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


# --------------------------------------------------------------------------------------------
# The anchor


@dataclass(frozen=True)
class Anchor:
    """A captured span: where it was and what it said. Immutable: a re-anchor is a new Anchor."""

    file: str  # repository-relative, POSIX
    start: int  # 1-based, inclusive
    end: int
    text_hash: str  # "sha256:<hex>" of `text`
    fingerprints: tuple[int, ...]  # sorted distinct winnowed k-gram values of `text` (engram.anchor)
    head: str | None  # git HEAD when captured, if a git repository
    text: str  # the span's lines, each ending in "\n" ("" once purged: fingerprints still resolve)
    # Whitespace-free hashes of the nearest non-blank line above and below: tell a span that
    # shifted (its neighbours came along) from one that was moved within its file.
    context: tuple[str | None, str | None] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable record (field names versioned by "v"); fingerprints as base64 of
        little-endian int64, since JSON readers other than Python lose digits past 2**53."""
        return {"v": ANCHOR_VERSION, "file": self.file, "start": self.start, "end": self.end,
                "text_hash": self.text_hash, "fingerprints": _pack(self.fingerprints), "head": self.head,
                "text": self.text, "context": list(self.context) if self.context is not None else None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Anchor:
        """The anchor a `to_json` record holds; BadInput naming the field when it is malformed."""
        if not isinstance(d, Mapping):
            raise BadInput("an anchor record must be a JSON object")
        version = d.get("v")
        if not isinstance(version, int) or version < 1:
            raise BadInput(f"anchor record without a version ('v'): {_short(d)}")
        if version > ANCHOR_VERSION:
            raise BadInput(f"anchor record of version {version}, newer than this engram reads "
                           f"({ANCHOR_VERSION}): upgrade engram")
        file, start, end = _field(d, "file", str), _field(d, "start", int), _field(d, "end", int)
        text_hash, text = _field(d, "text_hash", str), _field(d, "text", str)
        head = d.get("head")
        if head is not None and not isinstance(head, str):
            raise BadInput(f"anchor record: 'head' must be a string or null: {_short(d)}")
        ctx = d.get("context")
        if ctx is not None and not (isinstance(ctx, list) and len(ctx) == 2
                                    and all(c is None or isinstance(c, str) for c in ctx)):
            raise BadInput(f"anchor record: 'context' must be two strings or nulls: {_short(d)}")
        try:
            fps = unpack_fingerprints(_field(d, "fingerprints", str))
        except ValueError as exc:
            raise BadInput(f"anchor record: 'fingerprints' is not base64 of int64 values: {_short(d)}") from exc
        return cls(file, start, end, text_hash, fps, head, text, (ctx[0], ctx[1]) if ctx is not None else None)


def _field(d: Mapping[str, Any], name: str, kind: type) -> Any:
    value = d.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadInput(f"anchor record: '{name}' must be a {kind.__name__}: {_short(d)}")
    return value


def _short(d: Any) -> str:
    s = repr(d)
    return s if len(s) <= 200 else s[:200] + "…"


def _pack(values: Sequence[int]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}q", *values)).decode("ascii")


def unpack_fingerprints(s: str) -> tuple[int, ...]:
    """An anchor's fingerprints as stored (base64 of little-endian int64s), back as numbers."""
    raw = base64.b64decode(s.encode("ascii"), validate=True)
    if len(raw) % 8:
        raise ValueError("length is not a multiple of 8")
    return struct.unpack(f"<{len(raw) // 8}q", raw)


def split_lines(text: str) -> list[str]:
    """The lines of `text` as the tokenizer and git count them: split at "\\n" only (a form feed
    is not a line break), a "\\r" before it dropped (a CRLF checkout keeps its anchors)."""
    return list(_split_lines(text))


@functools.lru_cache(maxsize=8)
def _split_lines(text: str) -> tuple[str, ...]:
    """split_lines, kept for the last texts: an editor's buffer is resolved once per note anchored
    in it (500 notes on a 5,000-line file split it 500 times: 1.5 s, bench/lsp_notes.py). A
    string keeps its hash, so a hit on the same buffer costs a lookup."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(line.removesuffix("\r") for line in lines)


def _span_text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _line_key(line: str) -> str:
    """A line without its whitespace, hashed: what a reindent leaves alone."""
    import hashlib  # noqa: PLC0415 - (OpenSSL's start-up: not for a hook that only reads anchors)

    return hashlib.sha256("".join(line.split()).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _neighbours(lines: Sequence[str], s0: int, e0: int) -> tuple[str | None, str | None]:
    """Keys of the nearest non-blank lines above line `s0` and below line `e0` (0-based)."""
    above = next((_line_key(lines[i]) for i in range(s0 - 1, -1, -1) if lines[i].strip()), None)
    below = next((_line_key(lines[i]) for i in range(e0 + 1, len(lines)) if lines[i].strip()), None)
    return above, below


def capture(root: Path, file: str, start: int, end: int, *, text: str | None = None) -> Anchor:
    """An anchor on lines `start`-`end` (1-based, inclusive) of `file` (repository-relative, or
    absolute inside `root`): of the working-tree file, or of `text` (an unsaved buffer).

    Plain Python all through (`engram.anchor.definition`): `engram remember --at` should not pay
    numpy's import for a few hundred tokens."""
    rel = _inside(root, file)
    if text is None:
        text = _read_for_capture(root, rel, file)
    lines = split_lines(text)
    where = f"{file}:{start}-{end}"
    if start < 1 or end < start:
        raise BadInput(f"{where}: an empty range; lines are 1-based and START must not exceed END, "
                       f"e.g. {file}:10-24")
    if end > len(lines):
        raise BadInput(f"{where}: past the end of the file ({plural(len(lines), 'line')}); anchor lines within 1-{len(lines)}")
    span = lines[start - 1:end]
    if not any(line.strip() for line in span):
        raise BadInput(f"{where}: only blank lines; anchor lines that hold code")
    body = _span_text(span)
    from engram.anchor import definition  # noqa: PLC0415 - (only when anchoring)

    hashes = definition.token_hashes(body)
    fps = tuple(sorted(definition.winnowed(definition.kgram_values(hashes, definition.DEFAULT_K),
                                           definition.DEFAULT_W)))
    return Anchor(rel, start, end, _text_hash(body), fps, git_head(root), body,
                  _neighbours(lines, start - 1, end - 1))


def _text_hash(body: str) -> str:
    import hashlib  # noqa: PLC0415

    return "sha256:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _inside(root: Path, file: str) -> str:
    """`file` as a repository path; refused when it (or a link on the way) leads outside `root`."""
    try:
        rel = repo_relative(root, file, cwd=root)
    except BadInput as exc:
        raise BadInput(f"{file}: outside the repository {root}; anchor a file inside it "
                       "(a symbolic link that leads out of it is refused too)") from exc
    if rel == "." or rel.split("/", 1)[0] in (".git", ".engram"):
        raise BadInput(f"{file}: not a file of the repository's code; anchor a source file")
    return rel


def _read_for_capture(root: Path, rel: str, asked: str) -> str:
    path = os.path.join(os.fspath(root), rel)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise BadInput(f"{asked}: not a regular file; anchor a span of a source file")
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as exc:
        raise BadInput(f"{asked}: no such file in the working tree {root}; the path is relative to the "
                       "repository root (or pass the text of an unsaved buffer)") from exc
    except OSError as exc:
        raise BadInput(f"{asked}: cannot be read ({exc.strerror}); check its permissions") from exc
    if looks_binary(data):
        raise BadInput(f"{asked}: a binary file; anchor a span of a text file")
    return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------
# Git facts read from the files git keeps: no `git` process per capture or resolve


def _git_dir(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:
        first = dot.read_text(encoding="utf-8").strip()  # a linked worktree or submodule: "gitdir: …"
    except OSError:
        return None
    if not first.startswith("gitdir:"):
        return None
    target = Path(first[len("gitdir:"):].strip())
    return target if target.is_absolute() else (root / target)


def _common_dir(git_dir: Path) -> Path:
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    return Path(common) if os.path.isabs(common) else git_dir / common


def git_head(root: Path) -> str | None:
    """The commit HEAD names (HEAD, then the loose ref, then packed-refs), or None."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head if _is_sha(head) else None
    ref = head[4:].strip()
    for base in dict.fromkeys((git_dir, _common_dir(git_dir))):
        try:
            sha = (base / ref).read_text(encoding="utf-8").strip()
            if _is_sha(sha):
                return sha
        except OSError:
            pass
        try:
            for line in (base / "packed-refs").read_text(encoding="utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and _is_sha(sha):
                    return sha
        except OSError:
            pass
    return None  # an unborn branch


def _is_sha(s: str) -> bool:
    return len(s) in (40, 64) and all(c in "0123456789abcdef" for c in s)


_tracked_cache: dict[str, tuple[tuple[int, int], list[str]]] = {}


def tracked_files(root: Path) -> list[str] | None:
    """Paths of the regular files in git's index (stage 0 or the first of a conflict), read
    from `.git/index` (versions 2-4) and cached while the index file is unchanged; None without
    a readable index."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    path = git_dir / "index"
    try:
        st = path.stat()
        key = (st.st_mtime_ns, st.st_size)
        hit = _tracked_cache.get(str(path))
        if hit is not None and hit[0] == key:
            return hit[1]
        data = path.read_bytes()
    except OSError:
        return None
    try:
        files = _index_paths(data)
    except (struct.error, ValueError, IndexError):
        log.debug("%s: not an index this reader knows", path)
        return None
    _tracked_cache[str(path)] = (key, files)
    return files


def _index_paths(data: bytes) -> list[str]:
    sig, version, count = struct.unpack_from(">4sLL", data, 0)
    if sig != b"DIRC" or version not in (2, 3, 4):
        raise ValueError("unknown index")
    pos, prev, out = 12, b"", []
    for _ in range(count):
        mode = struct.unpack_from(">L", data, pos + 24)[0]
        flags = struct.unpack_from(">H", data, pos + 60)[0]
        p = pos + 62 + (2 if version >= 3 and flags & 0x4000 else 0)
        if version == 4:
            strip, p = _varint(data, p)
            stop = data.index(b"\0", p)
            name = prev[:len(prev) - strip] + data[p:stop]
            pos = stop + 1
        else:
            stop = data.index(b"\0", p)
            name = data[p:stop]
            pos += ((stop - pos) + 8) & ~7  # the entry is NUL-padded to a multiple of 8 bytes
        prev = name
        if mode >> 12 == 0o10 and (flags >> 12) & 3 <= 1:  # a regular file, not a link or submodule
            out.append(name.decode("utf-8", "surrogateescape"))
    return list(dict.fromkeys(out))


def _varint(data: bytes, p: int) -> tuple[int, int]:
    c = data[p]
    value = c & 0x7F
    while c & 0x80:
        p += 1
        c = data[p]
        value = ((value + 1) << 7) | (c & 0x7F)
    return value, p + 1


# --------------------------------------------------------------------------------------------
# Resolution


@dataclass(frozen=True)
class Resolution:
    """Where an anchor's code is today. `file`/`start`/`end`: its place (1-based, inclusive);
    for `vanished`, `file` is the anchor's own and the lines are None. `retained`: the share of
    the anchored tokens found there (1.0 for intact and moved). `session`: the captured session
    whose code.edit explains the change, with `edit` locating that event (tape, offset)."""

    state: str
    file: str
    start: int | None
    end: int | None
    retained: float
    best_partial: dict[str, Any] | None = None
    session: str | None = None
    edit: dict[str, Any] | None = None
    shares: dict[str, float] | None = field(default=None, compare=False, repr=False)  # diagnostics: `_Match`'s

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "file": self.file, "start": self.start, "end": self.end,
                "retained": self.retained, "best_partial": self.best_partial, "session": self.session,
                "edit": self.edit}


class _Tree:
    """The working tree as resolution reads it: unsaved buffers first, then files on disk that
    are regular text files inside the root (a link is read only when it resolves inside)."""

    def __init__(self, root: Path, buffers: Mapping[str, str] | None, reads: Reads | None = None) -> None:
        self.root = root
        self.buffers = buffers or {}
        self.scanned = 0  # bytes read from disk (as many when `reads` answers: the scan's budget)
        self.reads = reads

    def read(self, rel: str, limit: int | None = None) -> str | None:
        if rel in self.buffers:
            return self.buffers[rel]
        data = self.raw(rel, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def raw(self, rel: str, limit: int | None = MAX_FILE_BYTES) -> bytes | None:
        """The file's bytes; None for a missing or binary file, one outside the root, or one larger
        than `limit` (the scan for a moved anchor skips huge files; its own file is always read).
        With `reads`, a file read for an earlier anchor of the same call is not read again."""
        if rel in self.buffers:
            return self.buffers[rel].encode("utf-8", "surrogatepass")
        if self.reads is None:
            return self._raw(rel, limit)
        kept = self.reads.get((rel, limit))
        if kept is not None:
            self.scanned += kept[0]
            return kept[1]
        before = self.scanned
        data = self._raw(rel, limit)
        if self.reads.size < READS_BYTES:
            self.reads[(rel, limit)] = (self.scanned - before, data)
            self.reads.size += self.scanned - before
        return data

    def _raw(self, rel: str, limit: int | None) -> bytes | None:
        if os.path.isabs(rel) or ".." in PurePosixPath(rel).parts:
            return None
        path = os.path.join(os.fspath(self.root), rel)
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                repo_relative(self.root, rel, cwd=self.root)  # refuses a link leading out
                st = os.stat(path)
            if not stat.S_ISREG(st.st_mode) or (limit is not None and st.st_size > limit):
                return None
            with open(path, "rb") as f:
                data = f.read()
        except (OSError, BadInput):
            return None
        self.scanned += len(data)
        return None if looks_binary(data) else data


class Reads(dict[tuple[str, int | None], tuple[int, bytes | None]]):
    """Files read from disk by the resolutions of one call (`resolve(..., reads=)`), each with the
    bytes it counts against the scan's budget: the scan for code moved to another file reads every
    tracked file of the extension for each anchor it runs for (300 notes of a busy Go file, 45 of
    them scanned for: ~0.8 s of ~1.6 s of the resolution, bench/anchors_git.py), and the files
    do not change within a call. Up to READS_BYTES kept; and the tracked files of each extension
    (`_tracked_with`: naming the extension of a repository's every file cost as much again)."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0
        self.tracked: dict[str, list[str]] = {}


#: Bytes of files one call's resolutions keep read (`Reads`).
READS_BYTES: Final = 64 << 20


def working_text(root: Path, rel: str, buffers: Mapping[str, str] | None = None) -> str | None:
    """The text of repository path `rel` as resolution reads it: the unsaved buffer, else the
    file on disk (None when missing, binary, or a link leading out of the repository)."""
    return _Tree(root, buffers).read(rel)


def resolve(root: Path, anchor: Anchor, *, buffers: Mapping[str, str] | None = None,
            db: apsw.Connection | None = None, nearby: bool = False, reads: Reads | None = None,
            since: str | None = None) -> Resolution:
    """Where `anchor`'s code is in the working tree (`buffers`: repository path → unsaved text,
    read instead of the disk). `db`: the evidence index, to name the session whose edit explains
    a change and to learn which files sessions wrote the code into. `nearby`: the file is a buffer
    being typed in, look near the anchor's place first (NEARBY_FROM). `reads`: the files read by
    the other resolutions of the same call (`Reads`), shared. `since`: when the anchor was made
    (ISO 8601, UTC): an edit before it cannot be what changed the code since."""
    tree = _Tree(root, buffers, reads)
    text = tree.read(anchor.file)
    found = _exactly(anchor, text)
    if found is not None:
        return _with_session(db, anchor, found, text, since)
    probe = _Probe.of(anchor)
    best = None
    if text is not None:
        best = (nearby and probe.match_near(anchor.file, text, anchor.start)) or probe.match(anchor.file, text, anchor.start)
    if best is not None and not best.same_tokens:
        best = _with_git_lines(tree.root, anchor, best, text)
    if best is None or _vanishes(best.shares):
        there = _elsewhere(tree, anchor, probe, db)
        if there is not None and (best is None or there.retained >= best.retained + ELSEWHERE_MARGIN
                                  or (there.same_tokens and not best.same_tokens)):
            best = _with_age(tree, anchor, there)
    res = _verdict(anchor, best, text)
    return _with_session(db, anchor, res, text if res.file == anchor.file else tree.read(res.file), since)


def resolve_exact(root: Path, anchor: Anchor, *, buffers: Mapping[str, str] | None = None) -> Resolution | None:
    """`resolve`'s first step alone: the anchored lines as they are in the anchor's file, at their
    place or shifted (intact) or elsewhere in it (moved); None when they are not there as they
    were. Plain string comparison: what a fresh process answers without numpy's import (~100 ms
    here), the agent's hook before an edit among them; only `resolve` tells edited from vanished."""
    return _exactly(anchor, _Tree(root, buffers).read(anchor.file))


def _exactly(anchor: Anchor, text: str | None) -> Resolution | None:
    if text is None or not anchor.text:
        return None
    # The cached tuples, not split_lines' list copies: 500 anchors of a 5,000-line file copied it 500 times.
    want = _split_lines(anchor.text)
    lines = _split_lines(text)
    near = anchor.start - 1
    found = _exact(lines, want, near, anchor.context, None if lines[near:near + len(want)] == want else _line_index(text))
    if found is None:
        return None
    s0, shifted = found
    return Resolution("intact" if shifted else "moved", anchor.file, s0 + 1, s0 + len(want), 1.0)


def _exact(lines: Sequence[str], want: Sequence[str], near: int,
           context: tuple[str | None, str | None] | None,
           where: Mapping[str, list[int]] | None = None) -> tuple[int, bool] | None:
    """(0-based start, shifted-not-moved) of the anchored lines in `lines`: at the old place,
    else the occurrence whose neighbours are the old ones, else the nearest; None when absent.
    `where`: each line's 0-based positions in `lines` (`_line_starts`), else they are searched."""
    n = len(want)
    if not n:
        return None
    if lines[near:near + n] == want:
        return near, True
    if where is not None:  # look up the anchor's rarest line (not a blank one every function has)
        j = min(range(n), key=lambda k: len(where.get(want[k], ())))
        candidates: Iterable[int] = (p - j for p in where.get(want[j], ()) if p >= j)
    else:
        candidates = (i for i, line in enumerate(lines) if line == want[0])
    starts = [i for i in candidates if lines[i:i + n] == want]
    if not starts:
        return None
    starts.sort(key=lambda i: abs(i - near))
    for i in starts:
        if _context_holds(lines, i, i + n - 1, context):
            return i, True
    return starts[0], False


#: Searches of one text by scanning before its lines are indexed (`_line_index`).
SCANS_BEFORE_INDEX = 8
_scans: dict[str, int] = {}  # text → searches by scanning so far (the last few texts)


def _line_index(text: str) -> Mapping[str, list[int]] | None:
    """`_line_starts(text)` once the text has been searched SCANS_BEFORE_INDEX times, else None (scan
    it): the two notes an edit touched in a 5,000-line buffer scan it in ~0.2 ms each, where
    indexing each new version of it cost ~15 ms of the language server's worker holding the GIL;
    the 500 anchors of a whole resolution index it once."""
    seen = _scans.get(text, 0)
    if seen >= SCANS_BEFORE_INDEX:
        return _line_starts(text)
    if seen == 0 and len(_scans) >= 8:
        _scans.pop(next(iter(_scans), None), None)  # (the oldest; never raises, another thread or not)
    _scans[text] = seen + 1
    return None


@functools.lru_cache(maxsize=8)
def _line_starts(text: str) -> dict[str, list[int]]:
    """Each line of `text` (as split_lines gives them) → its 0-based positions, kept for the last
    texts: the anchors of a buffer whose lines shifted (a line typed above them) look their
    rarest line up instead of scanning the file once per anchor. Callers do not change it."""
    out: dict[str, list[int]] = {}
    for i, line in enumerate(_split_lines(text)):
        out.setdefault(line, []).append(i)
    return out


@functools.lru_cache(maxsize=4)
def _text_kgrams(text: str, k: int) -> tuple[Any, Any]:
    """(tokens, k-gram hashes) of a file's text, kept for the last texts: every anchor of a file
    that is not found as it was is matched against the same text (the notes an edit touched in a
    5,000-line buffer: tokenizing it once per anchor cost ~10 ms each). Callers do not change them."""
    from engram.anchor.tokens import tokenize  # noqa: PLC0415
    from engram.anchor.winnow import kgram_hashes  # noqa: PLC0415

    tok = tokenize(text)
    return tok, (kgram_hashes(tok.hashes, k) if len(tok) >= k else None)


def _context_holds(lines: Sequence[str], s0: int, e0: int, context: tuple[str | None, str | None] | None) -> bool:
    """Is a neighbour of lines s0-e0 one the anchor had? (No context kept: take it as shifted.)"""
    if context is None:
        return True
    above, below = _neighbours(lines, s0, e0)
    return (above is not None and above == context[0]) or (below is not None and below == context[1])


@dataclass(frozen=True)
class _Match:
    file: str
    start: int  # 1-based, inclusive
    end: int
    retained: float  # the share of the anchor's tokens (of its fingerprints, for a purged anchor)
    same_tokens: bool  # exactly the anchor's tokens, nothing added inside
    shares: dict[str, float]  # what `_vanishes` decides on: `_Probe._shares`, or {"fingerprints": …}
    ambiguous: bool = False  # another file holds the code as well (AMBIGUOUS_WITHIN): not a move
    # (0-based line of the anchor, 1-based line of the text) of each anchor line kept unchanged
    kept_at: tuple[tuple[int, int], ...] = ()
    # (0-based line of the anchor, its (old, new) token hashes replaced) of each line changed by renames alone
    renamed: tuple[tuple[int, frozenset[tuple[int, int]]], ...] = ()


@dataclass
class _Probe:
    """An anchor's tokens, ready for matching: token hashes and their lines, k-gram seeds."""

    hashes: list[int]
    lines: list[int]  # 0-based line of each token within the anchor text
    seeds: Any  # np.ndarray: distinct k-gram values to look for
    k: int
    fingerprint_only: bool  # a purged anchor: only its winnowed fingerprints are left
    n_lines: int = 0  # the anchor's lines, blank ones included (0 for a purged anchor)

    @classmethod
    def of(cls, anchor: Anchor) -> _Probe:
        import numpy as np  # noqa: PLC0415 - only when the exact lines are not found

        from engram.anchor import definition  # noqa: PLC0415
        from engram.anchor.tokens import tokenize  # noqa: PLC0415
        from engram.anchor.winnow import kgram_hashes  # noqa: PLC0415

        if not anchor.text:
            return cls([], [], np.unique(np.asarray(anchor.fingerprints, dtype=np.int64)),
                       definition.DEFAULT_K, True)
        tok = tokenize(anchor.text)
        k = max(1, min(definition.DEFAULT_K, len(tok)))
        return cls(tok.hashes.tolist(), tok.lines.tolist(), np.unique(kgram_hashes(tok.hashes, k)), k, False,
                   len(split_lines(anchor.text)))

    def match_near(self, file: str, text: str, near_line: int) -> _Match | None:
        """`match` within NEARBY_LINES of `near_line` (1-based) of a text of more than NEARBY_FROM
        lines, when what it finds is kept code clear of the window's edges; else None."""
        lines = _split_lines(text)
        if len(lines) <= NEARBY_FROM or self.fingerprint_only:
            return None
        s0 = max(0, near_line - 1 - NEARBY_LINES)
        e0 = min(len(lines), near_line + max(self.lines, default=0) + NEARBY_LINES)
        m = self.match(file, "".join(f"{line}\n" for line in lines[s0:e0]), near_line - s0, keep=False)
        if (m is None or _vanishes(m.shares) or m.shares.get("kept_lines", 1.0) < LINES_KEPT_BELOW
                or (s0 and m.start <= 1) or (e0 < len(lines) and m.end >= e0 - s0)):
            return None
        return replace(m, start=m.start + s0, end=m.end + s0, kept_at=tuple((i, n + s0) for i, n in m.kept_at))

    def match(self, file: str, text: str, near_line: int | None, keep: bool = True) -> _Match | None:
        """The best place of the anchor's code in `text` (nearest `near_line` among equals).
        `keep` false: a text used once (a window), not kept among the last texts' k-grams."""
        import numpy as np  # noqa: PLC0415

        tok, kg = _text_kgrams(text, self.k) if keep else _text_kgrams.__wrapped__(text, self.k)
        n = len(tok)
        if n < self.k or not len(self.seeds):
            return None
        hit = np.flatnonzero(np.isin(kg, self.seeds))
        if not hit.size:
            return None
        near = int(np.searchsorted(tok.lines, near_line - 1)) if near_line is not None else -1
        width = 2 * len(self.hashes) + 16 if self.hashes else 4 * len(self.seeds) + 16
        lo, hi, distinct = _densest(hit.tolist(), kg[hit].tolist(), width, near)
        if self.fingerprint_only:
            a, b = int(hit[lo]), int(hit[hi]) + self.k - 1
            share = round(distinct / len(self.seeds), 3)  # all of them together: taken as the same code
            return _Match(file, int(tok.lines[a]) + 1, int(tok.lines[b]) + 1, share, share == 1.0,
                          {"fingerprints": share})
        margin = len(self.hashes) // 4 + 4
        a = max(0, int(hit[lo]) - margin)
        b = min(n, int(hit[hi]) + self.k + margin)
        return self._aligned(file, tok, a, b)

    def _aligned(self, file: str, tok: Any, a: int, b: int) -> _Match | None:
        """Align the anchor's tokens with tokens a..b-1 of the text; the matched stretch."""
        blocks = _trim(_align(self.hashes, self.lines, tok.hashes[a:b].tolist(), tok.lines[a:b].tolist()))
        if not blocks:
            return None
        at = [-1] * len(self.hashes)  # where each anchor token went (-1: lost)
        for m in blocks:
            at[m.a:m.a + m.size] = range(m.b, m.b + m.size)
        kept = sum(x >= 0 for x in at)
        first, last = a + blocks[0].b, a + blocks[-1].b + blocks[-1].size - 1
        same = kept == len(self.hashes) and last - first + 1 == kept
        renamed: dict[int, frozenset[tuple[int, int]]] = {}
        shares = self._shares(at, tok, a, renamed)
        return _Match(file, int(tok.lines[first]) + 1, int(tok.lines[last]) + 1, shares["tokens"], same, shares,
                      kept_at=_unchanged_at(self.lines, at, tok, a), renamed=tuple(sorted(renamed.items())))

    def _shares(self, at: list[int], tok: Any = None, a: int = 0,
                renamed_out: dict[int, frozenset[tuple[int, int]]] | None = None) -> dict[str, float]:
        """How much of the anchor the alignment kept (`at`: where each token went in tokens `a`.. of
        `tok`, -1 if lost): the share of its tokens; of its lines kept as they were (every token
        there, none inserted between them: what a line diff calls an unchanged line, whitespace
        aside); and `kept_lines`, the share of all its lines that survive as git's line tracking
        counts them (unchanged or blank) or were changed by renames alone (`_renamed_lines`)."""
        per_line: dict[int, list[int]] = {}
        for line, x in zip(self.lines, at):
            per_line.setdefault(line, []).append(x)
        unchanged = {ln for ln, xs in per_line.items()
                     if xs[0] >= 0 and xs[-1] - xs[0] == len(xs) - 1 and all(x >= 0 for x in xs)}
        shares = {"tokens": round(sum(x >= 0 for x in at) / len(at), 3),
                  "lines": round(len(unchanged) / len(per_line), 3)}
        if tok is not None and self.n_lines and len(per_line) >= LINES_RULE_FROM:
            renamed = _renamed_lines(self.hashes, self.lines, at, tok, a, unchanged)
            if renamed_out is not None:
                renamed_out.update(renamed)
            kept = len(unchanged | renamed.keys())
            blank = self.n_lines - len(per_line)
            if BLANK_THERE:
                blank = _blank_there(self.n_lines, per_line, tok, a)
            shares["kept_lines"] = round((kept + blank) / self.n_lines, 3)
            shares["code_kept"] = round(kept / len(per_line), 3)
            shares["renamed"] = round(len(renamed) / self.n_lines, 3)
            shares["blank"] = round(blank / self.n_lines, 3)
        return shares


def _unchanged_at(lines: list[int], at: list[int], tok: Any, a: int) -> tuple[tuple[int, int], ...]:
    """(0-based line of the anchor, 1-based line of the text) of each anchor line the text holds
    unchanged (every token, in a row), in the anchor's order."""
    per_line: dict[int, list[int]] = {}
    for line, x in zip(lines, at):
        per_line.setdefault(line, []).append(x)
    return tuple((ln, int(tok.lines[a + xs[0]]) + 1) for ln, xs in per_line.items()
                 if xs[0] >= 0 and xs[-1] - xs[0] == len(xs) - 1 and all(x >= 0 for x in xs))


def _boilerplate(best: _Match, text: str | None) -> bool:
    """A changed match holding less than BOILERPLATE_BELOW of the tokens whose unchanged lines all
    occur elsewhere in the text as well (`end`, a test's set-up line, whitespace aside): assembled
    from lines every sibling has, it shows nothing of this code."""
    if best.retained >= BOILERPLATE_BELOW or text is None or not best.kept_at or best.same_tokens:
        return False
    lines = ["".join(line.split()) for line in split_lines(text)]
    counts = Counter(lines)
    return all(counts[lines[n - 1]] > 1 for _, n in best.kept_at)


def _blank_there(n_lines: int, code: Mapping[int, list[int]], tok: Any, a: int) -> int:
    """How many of the anchor's blank lines survive: those before its first line of code found in
    the match or after its last (counted kept, as git's line tracking counts them), and between
    two lines of code found as many as the match has blank lines between where they went. A blank
    line alone proves nothing: the blank lines of a deleted block are not kept because the code
    lines it was aligned with (a sibling's, packed together) are there. `code`: the anchor's lines with
    tokens, each token's place in `tok` (from `a`) or -1."""
    from itertools import pairwise  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415

    rows = sorted(code)
    placed = [(ln, min(ts), max(ts)) for ln in rows if (ts := [int(tok.lines[a + x]) for x in code[ln] if x >= 0])]
    if not placed:
        return n_lines - len(rows)
    first, last = placed[0][0], placed[-1][0]  # around the lines found: kept
    count = first - sum(r < first for r in rows) + (n_lines - 1 - last) - sum(r > last for r in rows)
    filled = np.unique(tok.lines)  # the text's lines with tokens
    for (p, _, p_end), (q, q_start, _) in pairwise(placed):
        gap = (q - p - 1) - sum(p < r < q for r in rows)  # the anchor's blank lines between p and q
        if gap:
            inside = int(np.searchsorted(filled, q_start) - np.searchsorted(filled, p_end, side="right"))
            count += min(gap, max(0, q_start - p_end - 1 - inside))
    return count


def _renamed_lines(hashes: list[int], lines: list[int], at: list[int], tok: Any, a: int,
                   unchanged: set[int]) -> dict[int, frozenset[tuple[int, int]]]:
    """Which changed lines of the anchor differ from one line of the text only by renames (each
    with its (old, new) tokens): the line's tokens one for one against a line of as many tokens,
    each differing token replaced by the same new one at least twice in the anchor (a name renamed
    throughout, as a refactoring does; git's line diff counts every such line rewritten), and not
    swapped for a token the anchored text holds while the text still holds the old one
    (`RENAMED_NEW`). A token replaced once is an edit."""
    import numpy as np  # noqa: PLC0415

    rows: dict[int, list[int]] = {}
    for i, ln in enumerate(lines):
        rows.setdefault(ln, []).append(i)
    subs: dict[int, list[tuple[int, int]]] = {}
    for ln, idx in rows.items():
        if ln in unchanged:
            continue
        targets = {int(tok.lines[a + at[i]]) for i in idx if at[i] >= 0}
        if len(targets) != 1:
            continue
        t = targets.pop()
        lo, hi = np.searchsorted(tok.lines, [t, t + 1])
        if hi - lo != len(idx):
            continue
        new = tok.hashes[lo:hi].tolist()
        subs[ln] = [(hashes[i], y) for i, y in zip(idx, new) if hashes[i] != y]
    seen = Counter(p for pairs in subs.values() for p in pairs)
    out = {ln: frozenset(pairs) for ln, pairs in subs.items() if pairs and all(seen[p] >= RENAMED_FROM for p in pairs)}
    if out and RENAMED_NEW:
        swaps = _swaps(out, frozenset(hashes), frozenset(tok.hashes.tolist()))
        out = {ln: pairs for ln, pairs in out.items() if not pairs & swaps}
    return out


def _swaps(renamed: Mapping[int, frozenset[tuple[int, int]]], had: frozenset[int], has: frozenset[int]
           ) -> set[tuple[int, int]]:
    """The replacements among `renamed`'s that swap one name in use for another (`RENAMED_NEW`):
    the new token was held before (`had`) and the old one still is (`has`)."""
    return {p for pairs in renamed.values() for p in pairs if p[1] in had and p[0] in has}


def _densest(pos: list[int], vals: list[int], width: int, near: int) -> tuple[int, int, int]:
    """(first, last, distinct): the run of seed hits within `width` tokens holding the most
    distinct seeds; among equals, the one starting nearest token `near`."""
    counts: dict[int, int] = {}
    left = 0
    best = (-1, 0, 0, 0)  # distinct, -distance, first, last
    for right, v in enumerate(vals):
        counts[v] = counts.get(v, 0) + 1
        while pos[right] - pos[left] > width:
            u = vals[left]
            counts[u] -= 1
            if not counts[u]:
                del counts[u]
            left += 1
        key = (len(counts), -abs(pos[left] - near) if near >= 0 else 0, left, right)
        if key[:2] > best[:2]:
            best = key
    first, last = best[2], best[3]
    inside = Counter(vals[first:last + 1])
    while last > first and inside[vals[last]] > 1:  # hits at the ends that add no seed
        inside[vals[last]] -= 1
        last -= 1
    while first < last and inside[vals[first]] > 1:
        inside[vals[first]] -= 1
        first += 1
    return first, last, best[0]


def _align(a: list[int], a_lines: list[int], b: list[int], b_lines: list[int]) -> list[Match]:
    """Matching blocks of token sequences `a` and `b` (each token with its line), in order.

    Lines first, then tokens within the lines that differ: a diff of a 400-line span's tokens
    (5,000 of them, a third of them brackets and dots) took SequenceMatcher most of a second,
    a diff of its lines a millisecond, and the changed lines are few."""
    from difflib import Match, SequenceMatcher  # noqa: PLC0415

    a_rows, b_rows = _rows(a_lines), _rows(b_lines)
    a_keys = [hash(tuple(a[i:j])) for i, j in a_rows]
    b_keys = [hash(tuple(b[i:j])) for i, j in b_rows]
    blocks: list[Match] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a_keys, b_keys, autojunk=False).get_opcodes():
        if i1 == i2 or j1 == j2:
            continue
        lo_a, hi_a = a_rows[i1][0], a_rows[i2 - 1][1]
        lo_b, hi_b = b_rows[j1][0], b_rows[j2 - 1][1]
        if op == "equal":
            blocks.append(Match(lo_a, lo_b, hi_a - lo_a))
            continue
        blocks += [Match(lo_a + m.a, lo_b + m.b, m.size) for m in SequenceMatcher(
            None, a[lo_a:hi_a], b[lo_b:hi_b], autojunk=False).get_matching_blocks() if m.size]
    return blocks


def _rows(lines: list[int]) -> list[tuple[int, int]]:
    """[start, end) token indices of each line, in order (`lines`: the line of each token)."""
    rows: list[tuple[int, int]] = []
    for i, line in enumerate(lines):
        if i and line == lines[i - 1]:
            rows[-1] = (rows[-1][0], i + 1)
        else:
            rows.append((i, i + 1))
    return rows


def _trim(blocks: list[Match]) -> list[Match]:
    """Matching blocks without stray short matches at either end (a lone `)` a few tokens off)."""
    while len(blocks) > 1 and blocks[0].size < 3 and blocks[1].b - (blocks[0].b + blocks[0].size) > 3:
        blocks = blocks[1:]
    while len(blocks) > 1 and blocks[-1].size < 3 and blocks[-1].b - (blocks[-2].b + blocks[-2].size) > 3:
        blocks = blocks[:-1]
    return blocks


def _vanishes(shares: dict[str, float]) -> bool:
    """Too little of the anchor found together (VANISHED_BELOW, VANISHED_LINES_BELOW; a purged
    anchor has only the share of its fingerprints, held to VANISHED_BELOW), unless git's line
    tracking keeps LINES_KEPT_BELOW of its lines there (`git_kept`: the lines are there, however
    little of it the alignment pieced together)."""
    if shares.get("git_kept", 0.0) >= LINES_KEPT_BELOW:
        return False
    if "fingerprints" in shares:
        return shares["fingerprints"] < VANISHED_BELOW
    return shares["tokens"] < VANISHED_BELOW and shares["lines"] < VANISHED_LINES_BELOW


def _verdict(anchor: Anchor, best: _Match | None, text: str | None) -> Resolution:
    """The state a best match (or none) makes: in another file, only an unambiguous match holding
    ELSEWHERE_FROM of the tokens (or ELSEWHERE_LINES_FROM of the lines) places the anchor; in
    its own file, a changed match keeping less than LINES_KEPT_BELOW of its lines does not
    (`_rewritten`); the rest names the best partial match."""
    if (best is None or _vanishes(best.shares) or (best.file != anchor.file and _unplaced(best))
            or _rewritten(anchor, best, text)):
        partial = None
        if best is not None and best.retained >= PARTIAL_FROM:
            partial = {"file": best.file, "start": best.start, "end": best.end, "retained": best.retained}
            if _rewritten(anchor, best, text):
                partial["lines_kept"] = best.shares.get("git_kept", best.shares.get("kept_lines"))
        return Resolution("vanished", anchor.file, None, None, best.retained if best else 0.0, partial,
                          shares=best.shares if best else None)
    if not best.same_tokens:
        return Resolution("edited", best.file, best.start, best.end, best.retained, shares=best.shares)
    state = "moved"
    if best.file == anchor.file and text is not None:
        overlaps = best.start <= anchor.end and best.end >= anchor.start
        if overlaps or _context_holds(split_lines(text), best.start - 1, best.end - 1, anchor.context):
            state = "intact"
    return Resolution(state, best.file, best.start, best.end, 1.0, shares=best.shares)


def _rewritten(anchor: Anchor, best: _Match, text: str | None = None) -> bool:
    """A changed match in the anchor's own file keeping less than LINES_KEPT_BELOW of its lines:
    as git's own diff from the anchor's commit counts them when it can tell (`git_kept`,
    `_with_git_lines`), else as the alignment counts them, or keeping only lines found elsewhere
    in the file too (`_boilerplate`)."""
    if best.file != anchor.file or best.same_tokens:
        return False
    if "git_kept" in best.shares:
        return best.shares["git_kept"] < LINES_KEPT_BELOW
    return (best.shares.get("kept_lines", 1.0) < LINES_KEPT_BELOW
            or best.shares.get("code_kept", 1.0) < CODE_KEPT_BELOW or _boilerplate(best, text))


def _unplaced(there: _Match) -> bool:
    """A match in another file that does not place the anchor: ambiguous, or holding too little
    (ELSEWHERE_FROM of the tokens, ELSEWHERE_LINES_FROM of the lines)."""
    return (there.ambiguous or there.shares.get("lines", 1.0) < ELSEWHERE_LINES_KEPT_FROM
            or there.shares.get("already_there", 0.0) >= ALREADY_THERE_FROM
            or (there.retained < ELSEWHERE_FROM and there.shares.get("lines", 0.0) < ELSEWHERE_LINES_FROM))


def _with_age(tree: _Tree, anchor: Anchor, there: _Match) -> _Match:
    """`there` (a match in another file) with `already_there` among its shares, when git can tell:
    the share of its lines of code that file held already at the anchor's commit (`ALREADY_THERE_FROM`)."""
    if not GIT_LINES or not anchor.head or not anchor.text:
        return there
    key = os.fspath(tree.root)
    if _anchored_text_at_commit(key, anchor) is None:
        return there  # (the commit unknown here, or not the anchored text: git cannot tell)
    now = tree.read(there.file)
    code = ["".join(x.split()) for x in _split_lines(now or "")[there.start - 1:there.end]
            if sum(c.isalnum() for c in x) >= ALREADY_CHARS_FROM]
    if not code:
        return there
    before = _text_at(key, anchor.head, there.file)
    held = _squeezed_lines(before) if before is not None else frozenset()
    share = round(sum(x in held for x in code) / len(code), 3)
    return replace(there, shares={**there.shares, "already_there": share})


@functools.lru_cache(maxsize=16)
def _squeezed_lines(text: str) -> frozenset[str]:
    """A file's lines without their whitespace, kept for the last texts: the vanished notes of a
    file re-resolved at each hook ask the same old file (~1 ms for 2,000 lines, each time)."""
    return frozenset("".join(x.split()) for x in _split_lines(text))


# --------------------------------------------------------------------------------------------
# Git's line tracking


def _with_git_lines(root: Path, anchor: Anchor, best: _Match, text: str | None) -> _Match:
    """`best` (a changed match in the anchor's own file) with `git_kept` among its shares when git
    can tell which of the anchor's lines survive (`_git_kept`); else `best` as it is."""
    if GIT_LINES and text is not None and best.file == anchor.file and "kept_lines" in best.shares:
        kept = _git_kept(root, anchor, best, text)
        if kept is not None:
            return replace(best, shares={**best.shares, "git_kept": kept})
    return best


def _git_kept(root: Path, anchor: Anchor, best: _Match, text: str) -> float | None:
    """The share of the anchor's lines that survive in `text` as git's line tracking counts them,
    or None when git cannot tell (no git, no commit recorded, the anchored text not the file's at
    that commit). A line survives when every first-parent commit's diff from the anchor's commit to
    HEAD, then the diff from HEAD's file to `text`, keeps it (`_lost_on_the_way`; `-w`: whitespace
    aside, as blame and the bench's truth compare) or moves it elsewhere in the file unchanged
    (`linewalk.moves`, blocks of STEP_MOVED_CHARS_FROM letters and digits or more in a commit,
    MOVED_CHARS_FROM in the uncommitted edits, as a single diff counts them); past WALK_COMMITS
    or off HEAD's first-parent chain (and with GIT_LINES 1), when the one diff from the anchor's
    commit to `text` keeps it, or it is one of a block that diff deletes and the match holds
    unchanged where it adds lines (`_moved_lines`). Either way a line changed by renames alone
    survives too (`_renamed_lines`: a refactoring's rename is no deletion). The alignment's own
    count (`kept_lines`) cannot see what git's diffs of the whole file see: a line repeated
    elsewhere (`}`, a test's set-up, a table's row) that a diff pairs with another occurrence, a
    line rewritten and later restored."""
    if not anchor.head or not anchor.text:
        return None
    key = os.fspath(root)
    head = git_head(root) if GIT_LINES >= 2 else None
    if head is not None and head != anchor.head:
        _fetch_old(key, {(anchor.head, anchor.file), (head, anchor.file)})
    want = split_lines(anchor.text)
    old = _anchored_text_at_commit(key, anchor)
    if old is None:
        return None
    lost = _lost_on_the_way(key, anchor, head, text) if head is not None else None
    if lost is not None:
        kept = set(range(len(want))) - lost
    else:
        hunks = _line_diff(key, anchor.head, anchor.file, old, text)
        if hunks is None:
            return None
        deleted = {ln for os_, oc, _, _ in hunks for ln in range(os_, os_ + oc)}
        added = {ln for _, _, ns, nc in hunks for ln in range(ns, ns + nc)}
        kept = {i for i in range(len(want)) if anchor.start + i not in deleted}
        kept |= _moved_lines(want, best.kept_at, kept, added)
    return round(len(kept | _renamed_not_swapped(best, old, text)) / len(want), 3)


def _renamed_not_swapped(best: _Match, old: str, text: str) -> set[int]:
    """The anchor's lines changed by renames alone, but for a name swapped for another the file
    held already at the anchor's commit (`old`) while `text` still holds the old one (`RENAMED_NEW`,
    `_swaps`: the anchored text alone told the alignment less)."""
    if not best.renamed or not RENAMED_NEW:
        return {ln for ln, _ in best.renamed}
    swaps = _swaps(dict(best.renamed), _token_set(old), _token_set(text))
    return {ln for ln, pairs in best.renamed if not pairs & swaps}


@functools.lru_cache(maxsize=8)
def _token_set(text: str) -> frozenset[int]:
    """The hashes of a text's tokens, kept for the last texts (a file at a commit, asked by each of
    its anchors with renamed lines)."""
    from engram.anchor.tokens import tokenize  # noqa: PLC0415

    return frozenset(tokenize(text).hashes.tolist())


def _lost_on_the_way(root: str, anchor: Anchor, head: str, text: str) -> set[int] | None:
    """The anchor's lines (0-based) that do not survive every first-parent commit's diff of its
    file from its commit to `head` (`linewalk.walk`), then the diff from `head`'s file to `text`
    (the working tree's or a buffer's uncommitted edits), moves followed at each step; None when
    the walk cannot tell (the anchor's commit not within WALK_COMMITS of `head`'s first-parent
    chain, git failing)."""
    assert anchor.head is not None
    steps: list[linewalk.Step] = []
    if anchor.head != head:
        found = _walk_of(root, head, anchor.file, anchor.head)
        if found is None:
            return None
        steps = found
    at = {i: anchor.start + i for i in range(anchor.end - anchor.start + 1)}
    for st in steps:
        at = {i: n for i, p in at.items() if (n := st.line(p, STEP_MOVED_CHARS_FROM))}
        if not at:
            return set(range(anchor.end - anchor.start + 1))
    now = _text_at(root, head, anchor.file)
    if now is None:
        return None  # (lines alive at a commit without the file: not a walk of this file)
    if now != text:
        hunks = _line_diff(root, head, anchor.file, now, text)
        if hunks is None:
            return None
        last = linewalk.step_of_texts(hunks, split_lines(now), split_lines(text))
        at = {i: n for i, p in at.items() if (n := last.line(p, MOVED_CHARS_FROM))}
    return set(range(anchor.end - anchor.start + 1)) - set(at)


def _walk_of(root: str, head: str, rel: str, commit: str) -> list[linewalk.Step] | None:
    """`rel`'s diffs in the first-parent commits after `commit` up to `head`, oldest first (kept,
    `_WALKS`; walked now when not), or None when `commit` is not within the walk's reach."""
    found = _cached_walk(root, head, rel)
    if found is None or not found.covers(commit):
        _walk_many(root, head, {rel: {commit}})
        found = _cached_walk(root, head, rel)
    return None if found is None else found.since(commit)


def _walk_many(root: str, head: str, wanted: Mapping[str, set[str]]) -> None:
    """The walks `wanted` (file → the commits its anchors were taken at) needs that are not kept,
    in one `git log` (`linewalk.walk`), kept (`_WALKS`); nothing kept when git cannot run. A walk
    stops at the oldest commit wanted; a file walked before and found short is walked to the cap
    (WALK_COMMITS): resolutions asking a few anchors at a time (an editor's slices of 24, a
    single `resolve`) then start one more `git log` per file, not one per older commit."""
    todo: dict[str, set[str]] = {}
    again = False
    for rel, commits in wanted.items():
        found = _cached_walk(root, head, rel)
        if found is None or not all(found.covers(c) for c in commits):
            todo[rel] = set(commits)
            again = again or found is not None
    if not todo:
        return
    walks = linewalk.walk(root, head, todo, WALK_COMMITS, WALK_BYTES, GIT_TIMEOUT, stop_early=not again)
    with _LOCK:
        for rel, w in (walks or {}).items():
            k = (root, head, rel)
            if k in _WALKS:
                _WALKS_SIZE[0] -= _WALKS.pop(k).size
            _WALKS[k] = w
            _WALKS_SIZE[0] += w.size
        while _WALKS_SIZE[0] > WALKS_BYTES and len(_WALKS) > 1:
            _WALKS_SIZE[0] -= _WALKS.popitem(last=False)[1].size


def _cached_walk(root: str, head: str, rel: str) -> linewalk.Walk | None:
    with _LOCK:
        found = _WALKS.get((root, head, rel))
        if found is not None:
            _WALKS.move_to_end((root, head, rel))
        return found


def _moved_lines(want: list[str], kept_at: Sequence[tuple[int, int]], kept: set[int], added: set[int]) -> set[int]:
    """The anchor's lines (0-based) git's diff deleted that the match holds unchanged on lines the
    diff added, in blocks following each other on both sides (blank lines between aside) of at
    least MOVED_CHARS_FROM letters and digits: code moved within the file (what `git blame -M`
    and `--color-moved` follow; their default is 20)."""
    moved: set[int] = set()
    block: list[int] = []
    last: tuple[int, int] | None = None

    def close() -> None:
        if sum(ch.isalnum() for i in block for ch in want[i]) >= MOVED_CHARS_FROM:
            moved.update(block)
        block.clear()

    for i, n in kept_at:
        if i in kept or n not in added:
            close()
            last = None
            continue
        if last is not None and (any(want[j].strip() for j in range(last[0] + 1, i))
                                 or not 0 < n - last[1] <= i - last[0]):
            close()
        block.append(i)
        last = (i, n)
    close()
    return moved


def expect_git(root: Path, pending: Iterable[tuple[Anchor, str | None]]) -> None:
    """Ask git once for what resolving `pending` (anchors, each with its file's text as it will be
    resolved against) may need of it, kept (`_OLD`, `_WALKS`, `_DIFFS`) for `_git_kept` to find:
    every file at its anchor's commit and at HEAD in one `git cat-file --batch`; the files' diffs
    along HEAD's first-parent history back to the oldest of those commits in one `git log`
    (`linewalk.walk`); and every diff from a file at HEAD (or, for an anchor the walk cannot reach,
    at its commit) to today's text in one `git diff --no-index` of two directories, when the texts
    differ. At most three processes, where asking per anchor started ~110 for 300 notes of a busy
    file taken at 60 commits (bench/anchors_git.py), for the same answers. Anchors found as they
    were (`_exactly`) never consult git and are left out; an anchor whose old text does not hold its
    lines is left to `_git_kept` to refuse."""
    if not GIT_LINES:
        return
    items = [(a, text) for a, text in pending if a.head and a.text and text is not None and "\n" not in a.file
             and _exactly(a, text) is None]
    if not items:
        return
    key = os.fspath(root)
    head = git_head(root) if GIT_LINES >= 2 else None
    _fetch_old(key, {(a.head, a.file) for a, _ in items if a.head} | {(head, a.file) for a, _ in items if head})
    held = [(a, text) for a, text in items if isinstance(old := _cached_old(key, a.head or "", a.file), str)
            and _holds(old, a)]  # (none there, or git could not run: left out)
    wanted: dict[str, set[str]] = {}
    for a, _ in held:
        if head is not None and a.head != head:
            wanted.setdefault(a.file, set()).add(a.head or "")
    if head is not None and wanted:
        _walk_many(key, head, wanted)
    pairs: dict[tuple[str, str, str], tuple[str, str]] = {}
    for a, text in held:
        assert a.head is not None and text is not None
        walked = head is not None and (a.head == head or _walk_reaches(key, head, a))
        commit = head if walked else a.head
        assert commit is not None
        old = _cached_old(key, commit, a.file)
        if not isinstance(old, str) or (walked and old == text):
            continue
        digest = _digest(text)
        if (commit, a.file, digest) not in pairs and _cached_diff((key, a.file, digest), commit) is _MISSING:
            pairs[(commit, a.file, digest)] = (old, text)
    if pairs:
        _diff_many(key, pairs)


def _walk_reaches(root: str, head: str, anchor: Anchor) -> bool:
    found = _cached_walk(root, head, anchor.file)
    return found is not None and anchor.head in found.order


def _anchored_text_at_commit(root: str, anchor: Anchor) -> str | None:
    """The anchor's file at the commit it was taken at, when that holds the anchored lines: git
    can tell what became of them. None otherwise (no commit recorded or known here, no such
    file, other text there)."""
    if not anchor.head:
        return None
    old = _text_at(root, anchor.head, anchor.file)
    return old if old is not None and _holds(old, anchor) else None


def _holds(old: str, anchor: Anchor) -> bool:
    """Whether the file at the anchor's commit holds its lines where it says (whitespace aside)."""
    want = split_lines(anchor.text)
    return [x.split() for x in split_lines(old)[anchor.start - 1:anchor.end]] == [x.split() for x in want]


#: Files at a commit kept for `_git_kept`, up to OLD_BYTES of text (a busy file's history of a
#: hundred commits is a few MB) and 16 × DIFF_TEXTS files, and the diffs to the last DIFF_TEXTS
#: texts (a language server's buffer is a new text at every keystroke; a resolution of many files
#: asks for one per file), the least recently used dropped first.
OLD_BYTES: Final = 32 << 20
DIFF_TEXTS: Final = 256
_MISSING: Final = object()
_LOCK = threading.Lock()
_OLD: OrderedDict[tuple[str, str, str], str | None] = OrderedDict()
_OLD_SIZE = [0]
_DIFFS: OrderedDict[tuple[str, str, str], dict[str, tuple[tuple[int, int, int, int], ...] | None]] = OrderedDict()
#: Walks of files' histories (`linewalk.Walk`) kept, by (repository, HEAD, file), up to
#: WALKS_BYTES of git's output (every file of a call's anchors is walked at once: a bench call of
#: 300 anchors in 120 files holds 1-3 MB), the least recently used dropped first.
WALKS_BYTES: Final = 64 << 20
_WALKS: OrderedDict[tuple[str, str, str], linewalk.Walk] = OrderedDict()
_WALKS_SIZE = [0]


def _cached_old(root: str, commit: str, rel: str) -> Any:
    with _LOCK:
        k = (root, commit, rel)
        if k not in _OLD:
            return _MISSING
        _OLD.move_to_end(k)
        return _OLD[k]


def _keep_old(root: str, commit: str, rel: str, text: str | None) -> None:
    with _LOCK:
        k = (root, commit, rel)
        if k in _OLD:
            return
        _OLD[k] = text
        _OLD_SIZE[0] += len(text or "")
        while (_OLD_SIZE[0] > OLD_BYTES or len(_OLD) > DIFF_TEXTS * 16) and len(_OLD) > 1:
            _, dropped = _OLD.popitem(last=False)
            _OLD_SIZE[0] -= len(dropped or "")


def _cached_diff(k: tuple[str, str, str], commit: str) -> Any:
    with _LOCK:
        found = _DIFFS.get(k)
        if found is None or commit not in found:
            return _MISSING
        _DIFFS.move_to_end(k)
        return found[commit]


def _keep_diff(k: tuple[str, str, str], commit: str, hunks: tuple[tuple[int, int, int, int], ...] | None) -> None:
    with _LOCK:
        _DIFFS.setdefault(k, {})[commit] = hunks
        _DIFFS.move_to_end(k)
        while len(_DIFFS) > DIFF_TEXTS:
            _DIFFS.popitem(last=False)


@functools.lru_cache(maxsize=8)
def _digest(text: str) -> str:
    """A short name for a text (a diff is kept under it, not under the text)."""
    import hashlib  # noqa: PLC0415

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _clear_git_caches() -> None:
    """Forget what git answered (tests: a fresh process's first resolution)."""
    with _LOCK:
        _OLD.clear()
        _OLD_SIZE[0] = 0
        _DIFFS.clear()
        _WALKS.clear()
        _WALKS_SIZE[0] = 0


def _text_at(root: str, commit: str, rel: str) -> str | None:
    """`rel`'s text at `commit` (git's object store), or None: no git, no such commit or file.
    Kept (`_OLD`): the anchors of one file were mostly taken at a few commits."""
    if "\n" not in rel:  # (`cat-file --batch` reads a name a line; it keeps a missing file's answer too)
        _fetch_old(root, {(commit, rel)})
    found = _cached_old(root, commit, rel)
    if found is not _MISSING:
        return found  # type: ignore[no-any-return]
    data = _git(root, "cat-file", "blob", f"{commit}:{rel}")
    text = _blob_text(data)
    if data is not None:  # (git failing is not kept: it may answer next time)
        _keep_old(root, commit, rel, text)
    return text


def _blob_text(data: bytes | None) -> str | None:
    return None if data is None or looks_binary(data) else data.decode("utf-8", "replace")


def _fetch_old(root: str, wanted: set[tuple[str, str]]) -> None:
    """The files at their commits not kept yet, in one `git cat-file --batch` (its answer per
    name: `<oid> blob <size>` and the bytes, or `<name> missing`)."""
    todo = sorted(w for w in wanted if _cached_old(root, *w) is _MISSING)
    if not todo:
        return
    out = _git(root, "cat-file", "--batch", stdin="".join(f"{c}:{rel}\n" for c, rel in todo).encode("utf-8"))
    if out is None:
        return
    pos = 0
    for commit, rel in todo:
        end = out.find(b"\n", pos)
        if end < 0:
            return
        head = out[pos:end].split(b" ")
        pos = end + 1
        if len(head) == 3 and head[1] == b"blob" and head[2].isdigit():
            size = int(head[2])
            _keep_old(root, commit, rel, _blob_text(out[pos:pos + size]))
            pos += size + 1
        elif len(head) == 3 and head[2].isdigit():  # a tree or a commit by that name: no file
            _keep_old(root, commit, rel, None)
            pos += int(head[2]) + 1
        else:  # missing, ambiguous
            _keep_old(root, commit, rel, None)


def _line_diff(root: str, commit: str, rel: str, old: str, new: str) -> tuple[tuple[int, int, int, int], ...] | None:
    """The hunks (old start, count, new start, count) of git's line diff from `rel` at `commit`
    (`old`) to `new` (myers, whitespace ignored, no context), or None when git cannot run. Kept
    (`_DIFFS`): every changed anchor of a file taken at that commit asks for the same diff."""
    k = (root, rel, _digest(new))
    found = _cached_diff(k, commit)
    if found is _MISSING:
        _diff_many(root, {(commit, rel, k[2]): (old, new)})
        found = _cached_diff(k, commit)
    return None if found is _MISSING else found  # type: ignore[no-any-return]


def _diff_many(root: str, pairs: Mapping[tuple[str, str, str], tuple[str, str]]) -> None:
    """Git's diffs of many (old, new) pairs in one process: `git diff --no-index` of two
    directories holding the pair's texts under the same name, each pair diffed as two files are
    (the same hunks: bench/anchors.py's verdicts are the same either way). Kept under (commit,
    file, new text's digest); nothing is kept when git cannot run."""
    import tempfile  # noqa: PLC0415

    names = list(pairs)
    with tempfile.TemporaryDirectory(prefix="engram-anchor-") as tmp:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        os.mkdir(a)
        os.mkdir(b)
        written: dict[str, str] = {}  # new text's digest -> its first file, linked for the others
        for i, (commit, rel, digest) in enumerate(names):
            old, new = pairs[(commit, rel, digest)]
            _write(os.path.join(a, str(i)), old)
            _write_once(os.path.join(b, str(i)), new, written, digest)
        args = ("diff", "--no-index", "--no-ext-diff", "--no-color", "--no-textconv", "--no-renames", "-w",
                "-U0", "--diff-algorithm=myers")
        out = _git(root, *args, *((a, b) if len(names) > 1 else (os.path.join(a, "0"), os.path.join(b, "0"))),
                   ok=(0, 1))
    if out is None:
        return
    hunks: dict[int, list[tuple[int, int, int, int]]] = {i: [] for i in range(len(names))}
    at = 0
    for line in out.split(b"\n"):
        if line.startswith(b"diff --git ") and len(names) > 1:
            m = _PAIR.search(line)
            if m is None or int(m.group(1)) >= len(names):
                log.debug("git diff --no-index: unexpected header %r", line[:200])
                return  # (nothing kept: each anchor asks git itself)
            at = int(m.group(1))
            continue
        m = _HUNK.match(line)
        if m:
            os_, oc, ns, nc = m.groups()
            hunks[at].append((int(os_), int(oc if oc is not None else 1), int(ns), int(nc if nc is not None else 1)))
    for i, (commit, rel, digest) in enumerate(names):
        _keep_diff((root, rel, digest), commit, tuple(hunks[i]))


def _write_once(path: str, body: str, written: dict[str, str], digest: str) -> None:
    """`body` at `path`: a hard link to the file already holding it when there is one (one new
    text diffed against many commits is written once), else written."""
    if digest in written:
        try:
            os.link(written[digest], path)
            return
        except OSError:  # (a file system without hard links)
            pass
    _write(path, body)
    written.setdefault(digest, path)


def _write(path: str, body: str) -> None:
    with open(path, "w", encoding="utf-8", errors="surrogatepass", newline="") as f:
        f.write(body)


_PAIR = re.compile(rb"[/\\](\d+)\"?$")  # the pair's number, the name of both its files
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _git(root: str, *args: str, ok: tuple[int, ...] = (0,), stdin: bytes | None = None) -> bytes | None:
    """`git -C root ARGS` standard output, or None when git is missing, fails or hangs."""
    return git_output(root, *args, stdin=stdin, timeout=GIT_TIMEOUT, ok=ok)


# --------------------------------------------------------------------------------------------
# Other files


def _elsewhere(tree: _Tree, anchor: Anchor, probe: _Probe, db: apsw.Connection | None) -> _Match | None:
    """The best match in files other than the anchor's own, among the candidates found cheaply;
    `ambiguous` when another of them holds the code within AMBIGUOUS_WITHIN as well."""
    found = [m for rel, text in _candidates(tree, anchor, db) if (m := probe.match(rel, text, None)) is not None]
    if not found:
        return None
    best = max(found, key=lambda m: (m.retained, m.shares.get("lines", 0.0), _kinship(anchor.file, m.file)))
    rival = max((m.retained for m in found if m.file != best.file), default=0.0)
    return replace(best, ambiguous=True) if rival >= best.retained - AMBIGUOUS_WITHIN else best


def _kinship(a: str, b: str) -> int:
    """Leading directories two paths share: a renamed file usually stays in its directory, and
    boilerplate (a licence header, an example's preamble) is in every file of a project."""
    n = 0
    for x, y in zip(a.split("/")[:-1], b.split("/")[:-1]):
        if x != y:
            break
        n += 1
    return n


def _candidates(tree: _Tree, anchor: Anchor, db: apsw.Connection | None) -> list[tuple[str, str]]:
    """(path, text) of the files worth aligning: the unsaved buffers, the files sessions wrote the
    code into (with `db`), then tracked files of the same extension holding most of the span's
    rarest identifiers, most of them first, then nearest the anchor's file; at most MAX_ALIGNED."""
    rare = _rare_identifiers(anchor.text)
    need = (len(rare) + 1) // 2
    found: list[tuple[int, str, str]] = []
    seen = {anchor.file}
    for rel in [*tree.buffers, *_written_into(db, anchor)]:
        if rel not in seen:
            seen.add(rel)
            text = tree.read(rel, MAX_FILE_BYTES)
            if text is not None:
                found.append((len(rare) + 1, rel, text))
    suffix = PurePosixPath(anchor.file).suffix
    tracked = [f for f in _tracked_with(tree, suffix) if f not in seen]
    if len(tracked) > MAX_SCAN_FILES:
        log.info("%d tracked %s files: only the first %d are searched for a moved anchor",
                 len(tracked), suffix or "extension-less", MAX_SCAN_FILES)
        tracked = tracked[:MAX_SCAN_FILES]
    raw = [r.encode("utf-8") for r in rare]
    for rel in tracked:
        if tree.scanned > MAX_SCAN_BYTES:
            log.info("moved-anchor scan stopped after %d bytes", tree.scanned)
            break
        data = tree.raw(rel)
        if data is None:
            continue
        hits = sum(r in data for r in raw)
        if hits >= need and (raw or anchor.text == ""):
            found.append((hits, rel, data.decode("utf-8", "replace")))
    found.sort(key=lambda t: (-t[0], -_kinship(anchor.file, t[1])))
    return [(rel, text) for _, rel, text in found[:MAX_ALIGNED]]


def _tracked_with(tree: _Tree, suffix: str) -> list[str]:
    """The repository's tracked files whose extension is `suffix`, in the index's order (kept in
    `tree.reads` for the call's other anchors)."""
    if tree.reads is not None and suffix in tree.reads.tracked:
        return tree.reads.tracked[suffix]
    found = [f for f in tracked_files(tree.root) or [] if PurePosixPath(f).suffix == suffix]
    if tree.reads is not None:
        tree.reads.tracked[suffix] = found
    return found


def _rare_identifiers(text: str) -> list[str]:
    """The span's longest distinct identifiers: a cheap stand-in for its rarest fingerprints
    that a byte search can test in a file without tokenizing it."""
    names = sorted(set(_IDENT.findall(text)), key=lambda s: (-len(s), s))
    return names[:RARE_IDENTIFIERS]


# --------------------------------------------------------------------------------------------
# The session behind a change (needs the evidence index)


def _written_into(db: apsw.Connection | None, anchor: Anchor) -> list[str]:
    """Files other than the anchor's own where captured sessions wrote or read this code, best
    match first: where a session moved it (the index holds transcripts, not the working tree, so
    these are candidates to read, not answers)."""
    if db is None or not anchor.text:
        return []
    from engram.index.sql import reading  # noqa: PLC0415 - only with an index
    from engram.query.direct import direct_hits  # noqa: PLC0415
    from engram.query.ranking import CODE  # noqa: PLC0415

    with reading(db):
        hits = direct_hits(db, anchor.text, file=anchor.file)
        rows = _fragments(db, list(hits))
    files = sorted(((hits[f], r.file) for f, r in rows.items() if r.file and r.file != anchor.file
                    and r.kind in CODE), key=lambda t: -t[0])
    return list(dict.fromkeys(f for _, f in files))[:MAX_ALIGNED]


@dataclass(frozen=True)
class _Frag:
    kind: int
    file: str | None
    ts: str
    tape: str
    offset: int
    session: str
    harness: str


def _fragments(db: apsw.Connection, ids: list[int]) -> dict[int, _Frag]:
    if not ids:
        return {}
    from engram.index.sql import int_array  # noqa: PLC0415

    return {r[0]: _Frag(r[1], r[2], r[3] or "", *r[4:]) for r in db.execute(
        "SELECT f.id, f.kind, files.path, f.ts, t.id, f.offset, t.session_id, t.harness FROM fragments f"
        " JOIN tapes t ON t.no = f.tape LEFT JOIN files ON files.id = f.file WHERE f.id IN carray(?)",
        (int_array(ids),))}


def _with_session(db: apsw.Connection | None, anchor: Anchor, res: Resolution, text: str | None,
                  since: str | None = None) -> Resolution:
    """`res` naming the captured session whose code.edit explains the change (see `_explaining`)."""
    if db is None or res.state == "intact" or not anchor.text:
        return res
    now = None
    if res.start is not None and text is not None:
        now = _span_text(split_lines(text)[res.start - 1:res.end])
    from engram.index.sql import reading  # noqa: PLC0415

    with reading(db):
        found = _explaining(db, anchor, res, now, since)
    if found is None:
        return res
    fid, fr = found
    return replace(res, session=fr.session, edit={"tape": fr.tape, "offset": fr.offset, "timestamp": fr.ts or None,
                                                   "harness": fr.harness, "fragment": fid})


def _explaining(db: apsw.Connection, anchor: Anchor, res: Resolution, now: str | None,
                since: str | None = None) -> tuple[int, _Frag] | None:
    """The latest code.edit that made the change `res` reports, by the index's own evidence:

    * edited: an edit holding today's text better than the anchored one (its after-text is
      the new version), preferring one whose lineage comes from a fragment holding the anchored
      text;
    * moved: an edit writing the code into its new file after a session had it in the old one,
      or, within the file, one whose lineage says the code came from elsewhere ("moved");
    * vanished: the last edit that deleted the text (a tombstone), in any file it had reached, or
      one whose lineage comes from the anchored text and that no longer holds it.

    Only an edit made after the anchor (`since`, when known) can be it: an older session's edit of
    the same code (the one that first wrote it) is history the note already saw.
    """
    from engram.query.direct import direct_hits  # noqa: PLC0415
    from engram.query.ranking import EDIT  # noqa: PLC0415

    old = direct_hits(db, anchor.text, file=anchor.file)
    new = direct_hits(db, now, file=res.file) if now is not None else {}
    seen = _fragments(db, sorted(set(old) | set(new)))
    frags = _after(seen, since)
    edits = [f for f in new if f in frags and frags[f].kind == EDIT]
    if res.state == "vanished":
        return _vanished_by(db, anchor, old, frags, since)
    sources = _sources(db, edits)
    if res.state == "edited":
        better = [f for f in edits if new[f] > old.get(f, 0.0)]
        preferred = [f for f in better if sources.get(f, set()) & set(old)] or better
        return _latest(preferred, frags)
    if res.file != anchor.file:
        had = [seen[f].ts for f in old if f in seen and seen[f].file == anchor.file]  # (before the note too)
        return _latest([f for f in edits if frags[f].file == res.file and any(t < frags[f].ts for t in had)], frags)
    moved = {d for d, in db.execute(
        "SELECT DISTINCT dst FROM lineage WHERE location_delta = 'moved' AND dst IN carray(?)",
        (_ids(edits),))} if edits else set()
    return _latest([f for f in edits if f in moved and frags[f].file == res.file], frags)


def _vanished_by(db: apsw.Connection, anchor: Anchor, old: dict[int, float],
                 frags: dict[int, _Frag], since: str | None = None) -> tuple[int, _Frag] | None:
    from engram.query.direct_np import tombstone_hits  # noqa: PLC0415

    deleting = list(tombstone_hits(db, anchor.text))
    rewrote = [d for d, srcs in _sources(db, _edits_from(db, list(old))).items()
               if srcs & set(old) and d not in old]
    cands = deleting + rewrote
    frags = {**frags, **_after(_fragments(db, [f for f in cands if f not in frags]), since)}
    return _latest([f for f in cands if f in frags], frags)  # the last place it was deleted from


def _edits_from(db: apsw.Connection, srcs: list[int]) -> list[int]:
    if not srcs:
        return []
    return [d for d, in db.execute("SELECT DISTINCT dst FROM lineage WHERE src IN carray(?)", (_ids(srcs),))]


def _sources(db: apsw.Connection, dsts: list[int]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    if dsts:
        for d, s in db.execute("SELECT dst, src FROM lineage WHERE dst IN carray(?)", (_ids(dsts),)):
            out.setdefault(d, set()).add(s)
    return out


def _ids(values: list[int]) -> Any:
    from engram.index.sql import int_array  # noqa: PLC0415

    return int_array(values)


def _after(frags: dict[int, _Frag], since: str | None) -> dict[int, _Frag]:
    """The fragments not older than `since` (one without a time is kept: it cannot be placed)."""
    if not since:
        return frags
    return {f: fr for f, fr in frags.items() if not fr.ts or fr.ts >= since}


def _latest(ids: list[int], frags: dict[int, _Frag]) -> tuple[int, _Frag] | None:
    if not ids:
        return None
    best = max(ids, key=lambda f: (frags[f].ts, f))
    return best, frags[best]

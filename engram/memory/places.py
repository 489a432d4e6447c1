"""Where a memory's anchors are now: each anchor resolved against the working tree (or an
editor's unsaved text), with the answer kept in `memory_anchors` until its file changes.

Resolving is `engram.memory.anchors.resolve`: intact, moved, edited (with the share retained) or
vanished. It reads the file and fingerprints it, a few milliseconds; a recall or a list shows
the same anchors again and again while their files stay as they were, so the answer is cached
under the file's stat (modification time and size). An unsaved editor buffer is never cached.
The cache is not part of the log: a rebuild recomputes it from the same working tree.

This is also the anchor channel of recall: the memories anchored on or near a span of a file
(`near`), then those anchored on code the evidence index's lineage connects to it (`connected`).
"""

from __future__ import annotations

import logging
import os
from collections import ChainMap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import apsw
import orjson

from engram.index.sql import immediate, int_array

log = logging.getLogger(__name__)

#: Resolution states, best first: a memory with several anchors is as drifted as its best one.
STATES = ("intact", "moved", "edited", "vanished")
#: How far (in lines) from the asked span an anchor still counts as near it, for the anchor channel.
NEAR_LINES = 40


@dataclass(frozen=True)
class Place:
    """One anchor of a memory as it is now (`file`/`start`/`end`: where its code is; for a
    vanished anchor, where it was)."""

    anchor: dict[str, Any]  # the stored anchor (Anchor.to_json())
    state: str
    file: str
    start: int
    end: int
    retained: float
    best_partial: Any = None
    session: str | None = None  # the captured session whose edit explains the change
    edit: Any = None  # that edit: {"tape", "offset"}
    # False: its file changed since it was last resolved and the anchored lines are not there as
    # they were; state and lines are the last resolution's (a `quick` answer does not fingerprint).
    checked: bool = True

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "lines": [self.start, self.end], "state": self.state,
                               "retained": round(self.retained, 3)}
        anchored = {"file": self.anchor.get("file"), "lines": [self.anchor.get("start"), self.anchor.get("end")]}
        if anchored != {"file": self.file, "lines": [self.start, self.end]}:
            out["anchored"] = anchored
        for key in ("best_partial", "session", "edit"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def best_state(places: list[Place]) -> str | None:
    """The least drifted state of a memory's anchors (None when it has none)."""
    if not places:
        return None
    return min((p.state for p in places), key=STATES.index)


def _stamp(root: str, file: str, found_in: str | None = None) -> str:
    """The stat of the anchor's file, and of the file its code was found in when that is another
    (moved there): a change to either makes the cached resolution stale."""
    try:
        st = os.lstat(os.path.join(root, file))
        own = f"{st.st_mtime_ns}-{st.st_size}"
    except OSError:
        own = "missing"
    return own if found_in is None or found_in == file else f"{own} {_stamp(root, found_in)}"


def places_of(db: apsw.Connection, root: Path, nos: list[int], buffers: Mapping[str, str] | None = None,
              attribute: bool = True, quick: bool = False) -> dict[int, list[Place]]:
    """The anchors of memories `nos` in the repository at `root`, resolved (from the cache when
    their file is unchanged). Without `attribute`, a changed anchor is resolved without naming the
    session whose edit changed it (an explain query, half the time of a resolution; what an agent's
    hook before an edit cannot wait for), and not cached, so a later answer still names it.
    `quick` (implies no `attribute`): a changed anchor is only looked for as it was
    (`anchors.resolve_exact`), else given as last resolved, `checked` False: no fingerprinting,
    no numpy (an agent's hook answering without a language server)."""
    if not nos:
        return {}
    rows = db.execute(
        "SELECT a.memory, a.n, a.file, a.anchor, a.state, a.at_file, a.at_start, a.at_end, a.retained, a.resolution,"
        " a.stamp, m.created FROM memory_anchors a JOIN memories m ON m.no = a.memory"
        " WHERE a.memory IN carray(?) ORDER BY a.memory, a.n", (int_array(nos),)).fetchall()
    out: dict[int, list[Place]] = {}
    fresh: list[tuple[Any, ...]] = []
    texts: dict[str, str] = {}  # the buffers asked for and the files read once (`_read_once`)
    stamps = {(file, at): _stamp(os.fspath(root), file, at) for file, at in {(r[2], r[5]) for r in rows}}
    reads = None  # the files the resolutions of this call read, shared (`anchors.Reads`)
    if not quick:
        stale = [r for r in rows
                 if r[4] is None or (buffers is not None and r[2] in buffers) or r[10] != stamps[(r[2], r[5])]]
        if stale:
            from engram.memory.anchors import Reads  # noqa: PLC0415

            reads = Reads()
            _expect_git(root, stale, texts, buffers)
    for no, n, file, anchor_json, state, at_file, at_start, at_end, retained, resolution, stamp, created in rows:
        anchor = orjson.loads(anchor_json)
        live = buffers is not None and file in buffers
        now = stamps[(file, at_file)]
        if state is not None and not live and stamp == now:
            extra = orjson.loads(resolution) if resolution else {}
            place = Place(anchor, state, at_file, at_start, at_end, retained, extra.get("best_partial"),
                          extra.get("session"), extra.get("edit"))
        elif quick:
            place = _quick(root, anchor, _read_once(texts, root, anchor, buffers), (state, at_file, at_start, at_end, retained))
        else:
            place = _resolve(db if attribute else None, root, anchor, _read_once(texts, root, anchor, buffers), live,
                             reads, created)
            if not live and attribute:
                fresh.append((place, now if place.file == at_file else _stamp(os.fspath(root), file, place.file), no, n))
        out.setdefault(no, []).append(place)
    if fresh:
        _keep(db, fresh)
    return out


def _expect_git(root: Path, rows: list[Any], texts: dict[str, str], buffers: Mapping[str, str] | None) -> None:
    """The anchors about to be resolved told to `anchors.expect_git`, with their files' texts: what
    git's line tracking needs of git for all of them asked in at most three processes, not some
    per commit."""
    if not rows:
        return
    from engram.memory.anchors import Anchor, expect_git  # noqa: PLC0415

    pending = []
    for row in rows:
        anchor = orjson.loads(row[3])
        pending.append((Anchor.from_json(anchor), _read_once(texts, root, anchor, buffers).get(row[2])))
    expect_git(root, pending)


def _read_once(texts: dict[str, str], root: Path, anchor: dict[str, Any],
               buffers: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """`texts` with the anchor's file added — its unsaved buffer, else as it is on disk — read
    once for all the anchors of the call in it: 500 anchors of a 5,000-line file read and decoded
    it 500 times, ~0.3 s of a hook's answer (bench/hooks.py). `buffers` may be a lookup that
    cannot list its keys (the MCP endpoint's editor buffers), so it is asked per file. Resolution
    reads a buffer as it would read the file; a file over anchors.MAX_FILE_BYTES is left to it
    (its scan for moved code skips such files)."""
    file = anchor.get("file")
    if isinstance(file, str) and file not in texts:
        from engram.memory.anchors import MAX_FILE_BYTES, working_text  # noqa: PLC0415

        text = working_text(root, file, buffers)
        if text is not None and len(text) <= MAX_FILE_BYTES // 4:  # (bytes: up to 4 a character)
            texts[file] = text
    # (the other buffers too: code moved into another file that is not saved yet is found there)
    return texts if not buffers else ChainMap(texts, buffers)  # type: ignore[arg-type]


def _resolve(db: apsw.Connection | None, root: Path, anchor_json: dict[str, Any], buffers: Mapping[str, str] | None,
             live: bool = False, reads: Any = None, since: str | None = None) -> Place:
    """`live`: the anchor's file is a buffer being edited (looked for near its place first);
    `reads`: the files the call's other resolutions read (`anchors.Reads`); `since`: when the
    memory was made (no older edit is named as what changed its code)."""
    from engram.memory.anchors import Anchor, resolve  # noqa: PLC0415 - fingerprints load numpy

    res = resolve(root, Anchor.from_json(anchor_json), buffers=buffers, db=db, nearby=live, reads=reads, since=since)
    if res.start is None or res.end is None:  # vanished: shown where it was
        return Place(anchor_json, res.state, str(anchor_json["file"]), int(anchor_json["start"]),
                     int(anchor_json["end"]), float(res.retained), res.best_partial, res.session, res.edit)
    return Place(anchor_json, res.state, res.file, res.start, res.end, float(res.retained), res.best_partial,
                 res.session, res.edit)


def _quick(root: Path, anchor_json: dict[str, Any], buffers: Mapping[str, str] | None,
           last: tuple[Any, ...]) -> Place:
    """An anchor whose file changed, found only if its lines are there as they were; else its
    last resolution (the anchored place when there was none), `checked` False."""
    from engram.memory.anchors import Anchor, resolve_exact  # noqa: PLC0415 - (no numpy)

    res = resolve_exact(root, Anchor.from_json(anchor_json), buffers=buffers)
    if res is not None and res.start is not None and res.end is not None:
        return Place(anchor_json, res.state, res.file, res.start, res.end, 1.0)
    state, at_file, at_start, at_end, retained = last
    if state is not None and at_file is not None:
        return Place(anchor_json, state, at_file, at_start, at_end, retained or 0.0, checked=False)
    return Place(anchor_json, "intact", str(anchor_json["file"]), int(anchor_json["start"]),
                 int(anchor_json["end"]), 1.0, checked=False)


def _keep(db: apsw.Connection, fresh: list[tuple[Place, str, int, int]]) -> None:
    """Keep resolutions for the next call; a row replaced meanwhile (a re-anchor) is left alone."""
    with immediate(db):
        for place, stamp, no, n in fresh:
            extra = {"best_partial": place.best_partial, "session": place.session, "edit": place.edit}
            db.execute(
                "UPDATE memory_anchors SET state = ?, at_file = ?, at_start = ?, at_end = ?, retained = ?,"
                " resolution = ?, stamp = ? WHERE memory = ? AND n = ? AND anchor = ?",
                (place.state, place.file, place.start, place.end, place.retained, orjson.dumps(extra).decode(),
                 stamp, no, n, orjson.dumps(place.anchor).decode()))


def near(db: apsw.Connection, root: Path, file: str, start: int | None, end: int | None,
         buffers: Mapping[str, str] | None = None) -> list[tuple[int, int]]:
    """Memories anchored on `file` (near lines start..end when given), nearest first, as
    (memory no, distance in lines: 0 when the anchor overlaps the span). A vanished anchor has no
    lines to be near, but it is still about the file: asked for the whole file, it is listed (a
    "there is no X here any more" note is what a reader of the file needs)."""
    nos = [r[0] for r in db.execute(
        "SELECT DISTINCT memory FROM memory_anchors WHERE file = ? OR at_file = ?", (file, file))]
    found: list[tuple[int, int]] = []
    for no, places in places_of(db, root, nos, buffers).items():
        gaps = [_gap(p, start, end) for p in places
                if p.file == file and (p.state != "vanished" or start is None)]
        gaps = [g for g in gaps if g is not None]
        if gaps:
            found.append((no, min(gaps)))
    found.sort(key=lambda x: (x[1], x[0]))
    return found


def _gap(place: Place, start: int | None, end: int | None) -> int | None:
    if start is None or end is None:
        return 0
    if place.end < start:
        gap = start - place.end
    elif place.start > end:
        gap = place.start - end
    else:
        return 0
    return gap if gap <= NEAR_LINES else None


#: Fragments holding the asked span whose lineage is followed (the best matches first), and how
#: many of the connected fragments' places are looked at: recall stays a few milliseconds.
LINEAGE_FROM = 20
LINEAGE_PLACES = 20


def connected(db: apsw.Connection, root: Path, file: str, start: int | None, end: int | None,
              buffers: Mapping[str, str] | None = None, exclude: set[int] | frozenset[int] = frozenset()
              ) -> list[tuple[int, int]]:
    """Memories anchored on code the evidence index's lineage connects to lines start..end of
    `file`, as (memory no, distance in lines from that code), nearest first, without `exclude`.

    A session that edits code whose before-text came from another place (copied, moved, or the
    same function in another file) leaves a lineage edge from that place to its edit. A memory
    about the source is about this code too; `near` cannot see it, since its anchor is elsewhere.
    The fragments holding the span's text today are found as `engram explain` finds them, each
    edge out of or into them is followed one step, and memories anchored near the other end (at
    the lines the session saw) are the answer. A whole file (no lines) is not followed."""
    if start is None or end is None:
        return []
    from engram.index.sql import reading  # noqa: PLC0415 - numpy and the query layer: only with `at`
    from engram.memory.anchors import split_lines, working_text  # noqa: PLC0415
    from engram.query.direct import direct_hits  # noqa: PLC0415
    from engram.query.ranking import CODE  # noqa: PLC0415

    text = working_text(root, file, buffers)
    span = "".join(line + "\n" for line in split_lines(text or "")[start - 1:end])
    if not span.strip():
        return []
    with reading(db):
        hits = direct_hits(db, span, file=file)
        held = sorted(hits, key=lambda f: -hits[f])[:LINEAGE_FROM]
        if not held:
            return []
        ids = int_array(held)
        other = {r[0] for r in db.execute(
            "SELECT src FROM lineage WHERE dst IN carray(?) UNION SELECT dst FROM lineage WHERE src IN carray(?)",
            (ids, ids))} - set(held)
        places = db.execute(
            "SELECT DISTINCT files.path, f.line0, f.line1 FROM fragments f JOIN files ON files.id = f.file"
            " WHERE f.id IN carray(?) AND f.kind IN carray(?) AND f.line0 IS NOT NULL ORDER BY f.id DESC LIMIT ?",
            (int_array(sorted(other)), int_array(sorted(CODE)), LINEAGE_PLACES)).fetchall() if other else []
    best: dict[int, int] = {}
    for path, l0, l1 in places:
        if path == file and l0 <= end and (l1 or l0) >= start:
            continue  # the span itself, as an earlier session saw it
        for no, gap in near(db, root, path, l0, l1 or l0, buffers):
            if no not in exclude:
                best[no] = min(gap, best.get(no, gap))
    return sorted(best.items(), key=lambda x: (x[1], x[0]))

"""Line-level edits from structured patch hunks ({oldStart, oldLines, newStart, newLines, lines}).

Claude Code records every successful Edit/Write with such hunks (jsdiff's `structuredPatch`),
together with the original file. From them we derive the exact changed line ranges on both
sides and the file after the edit.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from engram.tape import events as E

_TAGS = (" ", "-", "+")  # a hunk line's first character
_FIRST = itemgetter(0)
_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, slots=True)
class Change:
    """A contiguous run of removed/added lines. Ranges are 1-based; an empty range is [s, s-1]."""

    old_start: int
    old_end: int
    new_start: int
    new_end: int
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]


def split_lines(text: str) -> list[str]:
    """Lines without terminators; a final newline does not make an extra empty line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def count_lines(text: str) -> int:
    """`len(split_lines(text))`, without making the lines (a read's whole file)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def join_lines(lines: list[str] | tuple[str, ...]) -> str:
    """Each line followed by a newline. Why one `join` and not a newline added to each line:
    every edit's texts pass here (whole files for a Write), and a string made per line was 2% of
    parsing a Claude Code session."""
    if isinstance(lines, (list, tuple)):
        return "\n".join(lines) + "\n" if lines else ""
    return "".join(line + "\n" for line in lines)


def hunk_lines(h: dict[str, Any]) -> list[tuple[str, str]] | None:
    """A hunk's lines as (tag, text), tag ' ', '-' or '+' ("" is an empty context line).

    A line that lost its tag (Entire's checkpoints replace a redacted line whole with
    `REDACTED`, tag included) gets the one the hunk's oldLines/newLines leave for it: the
    counts of the other lines fall short by one on the old side ('-'), the new side ('+') or
    both (' '). None when the counts do not say: taken as context, such a line shifted every
    line below it."""
    raw = [ln for ln in h.get("lines") or [] if isinstance(ln, str) and not ln.startswith("\\")]
    tagged = [(ln[0], ln[1:]) if ln[:1] in _TAGS else (" ", "") if not ln else ("?", ln) for ln in raw]
    if "?" not in map(_FIRST, tagged):  # (nearly every hunk; looked for in C, not a generator per line)
        return tagged
    lost = sum(tag == "?" for tag, _ in tagged)
    try:
        old_short = int(h["oldLines"]) - sum(tag in (" ", "-") for tag, _ in tagged)
        new_short = int(h["newLines"]) - sum(tag in (" ", "+") for tag, _ in tagged)
    except (KeyError, TypeError, ValueError):
        return None
    tag = {(0, lost): "+", (lost, 0): "-", (lost, lost): " "}.get((old_short, new_short))
    return None if tag is None else [(tag if t == "?" else t, text) for t, text in tagged]


Tagged = list[tuple[str, str]] | None  # a hunk's `hunk_lines`


def tag_hunks(hunks: list[dict[str, Any]]) -> list[Tagged]:
    """`hunk_lines` of each hunk: computed once by a caller that passes the same hunks to several
    of `changes_from_hunks`, `apply_hunks` and `hunk_extents` (a Claude Code edit: all three)."""
    return [hunk_lines(h) for h in hunks]


def changes_from_hunks(hunks: list[dict[str, Any]], tagged: list[Tagged] | None = None) -> list[Change]:
    """Every run of '-'/'+' lines in the hunks, with its position on each side (`tagged`: their
    `tag_hunks`, when the caller has it)."""
    out: list[Change] = []
    for i, h in enumerate(hunks):
        old = int(h.get("oldStart") or 0)
        new = int(h.get("newStart") or 0)
        # jsdiff keeps oldStart at the insertion point for empty old sides; a formatted
        # unified diff uses the line before it. Both arrive here; normalise to jsdiff's.
        if int(h.get("oldLines") or 0) == 0 and old == 0:
            old = 1
        if int(h.get("newLines") or 0) == 0 and new == 0:
            new = 1
        lines = hunk_lines(h) if tagged is None else tagged[i]
        if lines is not None:  # (a hunk whose lines cannot be placed adds no change)
            out += changes_from_tagged(lines, old, new)
    return out


def hunks_from_diff(diff: str) -> list[dict[str, Any]]:
    """A unified diff's hunks (`@@ -a,b +c,d @@` and their lines) in structuredPatch's shape."""
    hunks: list[dict[str, Any]] = []
    for line in diff.split("\n"):
        m = _HUNK_HEADER.match(line)
        if m:
            hunks.append({"oldStart": int(m[1]), "oldLines": int(m[2] if m[2] is not None else 1),
                          "newStart": int(m[3]), "newLines": int(m[4] if m[4] is not None else 1), "lines": []})
        elif hunks and line[:1] in (" ", "+", "-", "\\"):
            hunks[-1]["lines"].append(line)
    return hunks


def edit_ranges(changes: list[Change], old_lines: list[str] | None = None,
                new_lines: list[str] | None = None) -> dict[str, Any]:
    """A code.edit's before/after ranges and texts from its placed changes (at least one). With
    both whole files, several changes take the file's lines over their range (what lies between
    them too); without, their own lines only, since nothing else of the file is known."""
    first, last = changes[0], changes[-1]
    b_range = [first.old_start, last.old_end if last.old_lines else last.old_start - 1]
    a_range = [first.new_start, last.new_end if last.new_lines else last.new_start - 1]
    out: dict[str, Any] = {"before_range": b_range, "after_range": a_range}
    if len(changes) == 1:
        out.update(before_text=join_lines(first.old_lines), after_text=join_lines(first.new_lines))
        return out
    if old_lines is not None and new_lines is not None:
        out.update(before_text=join_lines(old_lines[b_range[0] - 1:b_range[1]]),
                   after_text=join_lines(new_lines[a_range[0] - 1:a_range[1]]))
    else:
        out.update(before_text="".join(join_lines(c.old_lines) for c in changes),
                   after_text="".join(join_lines(c.new_lines) for c in changes))
    out["hunks"] = [[c.old_start, c.old_end, c.new_start, c.new_end] for c in changes]
    return out


def changes_from_tagged(tagged: list[tuple[str, str]], old: int, new: int) -> list[Change]:
    """The runs of '-'/'+' lines among diff lines tagged ' ', '-' or '+', numbered from line
    `old` of the old side and `new` of the new (1-based): unified hunks and Codex patches alike."""
    out: list[Change] = []
    run_old: list[str] = []
    run_new: list[str] = []
    run_o = run_n = 0
    for tag, body in [*tagged, (" ", "")]:
        if tag in ("-", "+"):
            if not run_old and not run_new:
                run_o, run_n = old, new
            if tag == "-":
                run_old.append(body)
                old += 1
            else:
                run_new.append(body)
                new += 1
            continue
        if run_old or run_new:
            out += _minimal(run_old, run_new, run_o, run_n)
            run_old, run_new = [], []
        old += 1
        new += 1
    return out


def _minimal(removed: list[str], added: list[str], old: int, new: int) -> list[Change]:
    """A run of removed then added lines as the changes a line diff finds in it: the lines it
    removed and wrote back unchanged are not its writing. Codex patches often replace a block
    whole (`-` every line, `+` every line, most of them the same); counted as written, the
    session that only rewrote a block around one new line came first as the writer of all of it
    (savekirk/session-bridge, bench/provenance.py --multi)."""
    if not removed or not added or set(removed).isdisjoint(added):
        # (no line in common: what the diff finds is the run itself, without building one — most
        # runs of an agent's edit, where each line it touched changed)
        return [Change(old, old + len(removed) - 1, new, new + len(added) - 1, tuple(removed), tuple(added))]
    ops = difflib.SequenceMatcher(None, removed, added, autojunk=False).get_opcodes()
    return [Change(old + i1, old + i2 - 1, new + j1, new + j2 - 1, tuple(removed[i1:i2]), tuple(added[j1:j2]))
            for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def context_fields(extents: list[tuple[int, list[str]]]) -> dict[str, Any]:
    """A code.edit's `context` and `context_text` from where its hunks lie in the file after the
    edit: each extent is (first line, the hunk's lines there: context and new lines alike).

    The lines a tool held besides those it changed (a patch's context, a whole-file Write's
    unchanged lines) are what the edit *carried*: the index keeps them as evidence of reading
    strength, apart from the changed lines it keeps as the edit (engram.index.kinds). Adjacent
    extents are merged; an extent without lines (a deletion's new side) holds nothing."""
    ranges: list[list[int]] = []
    text: list[str] = []
    for first, lines in sorted(((f, ls) for f, ls in extents if ls), key=lambda e: e[0]):
        last = first + len(lines) - 1
        if ranges and first <= ranges[-1][1]:
            return {}  # overlapping hunks: not a placement anything can trust
        if ranges and first == ranges[-1][1] + 1:
            ranges[-1][1] = last
        else:
            ranges.append([first, last])
        text.append(join_lines(lines))
    return {"context": ranges, "context_text": "".join(text)} if ranges else {}


def hunk_extents(hunks: list[dict[str, Any]], tagged: list[Tagged] | None = None) -> list[tuple[int, list[str]]]:
    """Each hunk's new side (its context and added lines) and where it starts in the new file
    (`tagged`: as for `changes_from_hunks`)."""
    out: list[tuple[int, list[str]]] = []
    for i, h in enumerate(hunks):
        lines = hunk_lines(h) if tagged is None else tagged[i]
        if lines is None:
            continue
        new = [text for tag, text in lines if tag != "-"]
        start = int(h.get("newStart") or 0)
        if new and start > 0:
            out.append((start, new))
    return out


def whole_file_context(new_lines: list[str]) -> dict[str, Any]:
    """The `context` of an edit whose tool held the whole new file (a Claude Code Write)."""
    return context_fields([(1, new_lines)])


def reverse_hunks(hunks: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Hunks that turn the new file back into the old one (None when a hunk's lines cannot be
    read): a Write whose result kept its patch but not `originalFile` still gives the file before."""
    out: list[dict[str, Any]] = []
    flip = {"-": "+", "+": "-", " ": " "}
    for h in hunks:
        tagged = hunk_lines(h)
        if tagged is None:
            return None
        out.append({"oldStart": h.get("newStart"), "oldLines": h.get("newLines"), "newStart": h.get("oldStart"),
                    "newLines": h.get("oldLines"), "lines": [flip[tag] + text for tag, text in tagged]})
    return out


def common_ends(old: list[str] | tuple[str, ...], new: list[str] | tuple[str, ...]) -> tuple[int, int]:
    """How many lines `old` and `new` start with alike, and end with alike after those: a diff
    need only look between them (an edit changes a few lines of a long file)."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, tail


def diff_hunks(old: list[str], new: list[str], context: int = 3) -> list[dict[str, Any]]:
    """The hunks (structuredPatch's shape, `context` lines around each change) that turn `old`
    into `new`: for a Write known only by its new content and the file the session last saw."""
    import difflib  # noqa: PLC0415 - only Writes without their patch need it

    hunks: list[dict[str, Any]] = []
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(context):
        i1, j1 = group[0][1], group[0][3]
        i2, j2 = group[-1][2], group[-1][4]
        lines: list[str] = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += [" " + x for x in old[a1:a2]]
                continue
            lines += ["-" + x for x in old[a1:a2]]
            lines += ["+" + x for x in new[b1:b2]]
        hunks.append({"oldStart": i1 + 1, "oldLines": i2 - i1, "newStart": j1 + 1, "newLines": j2 - j1,
                      "lines": lines})
    return hunks


def apply_hunks(original: list[str], hunks: list[dict[str, Any]], tagged: list[Tagged] | None = None
                ) -> list[str] | None:
    """The file after the hunks, or None when their context does not match `original` (`tagged`:
    as for `changes_from_hunks`)."""
    traced = trace_hunks(original, hunks, tagged, origins=False)
    return None if traced is None else traced[0]


def apply_hunks_text(original: str, hunks: list[dict[str, Any]], tagged: list[Tagged] | None = None) -> str | None:
    """The file after the hunks as text: `apply_hunks` of `original`'s lines, joined, ending with a
    newline when `original` does (as a Claude Code edit's file after is rebuilt); None when
    `apply_hunks` gives None.

    Why: an edit of a long file changes a few lines of it; its lines split, copied and joined
    again took ~0.03 s of the 1.8 s of CPU a one-process capture of the 100 MB benchmark corpus
    takes (1,537 edits). Each hunk's old side is looked for in the text (`find`, its
    line told by `count`), and the text between hunks is copied whole. Anything that search does
    not settle (a hunk without old lines, one that does not match where it says, overlapping
    hunks) is left to `apply_hunks`, so the answer is always its answer."""
    fast = _spliced(original, hunks, tagged) if original else None
    if fast is not None:
        return fast
    new_lines = apply_hunks(split_lines(original), hunks, tagged)
    if new_lines is None:
        return None
    trailing = original.endswith("\n") if original else True
    return "\n".join(new_lines) + ("\n" if trailing and new_lines else "")


_SEARCHES = 8  # occurrences of a hunk's old side looked at before `apply_hunks_text` leaves it to `apply_hunks`


def _spliced(original: str, hunks: list[dict[str, Any]], tagged: list[Tagged] | None) -> str | None:
    """`apply_hunks_text` of a non-empty `original` where each hunk's old side is found at the
    line it says, else None (the caller then applies the hunks to the lines)."""
    out: list[str] = []  # the result's lines, each with its newline (the last: as `original` ends), none empty
    pos, pos_at = 0, 0  # the next line of `original` not taken yet, and where it starts
    for i, h in enumerate(hunks):
        start = int(h.get("oldStart") or 0) - 1
        if int(h.get("oldLines") or 0) == 0 and start < 0:
            start = 0
        body = hunk_lines(h) if tagged is None else tagged[i]
        if body is None or start < pos:
            return None
        expect = [text for tag, text in body if tag != "+"]
        old = "\n".join(expect)
        if not expect or old.count("\n") != len(expect) - 1:
            return None
        at, line = _line_found(original, old, pos, pos_at, start)
        end = at + len(old)
        if at < 0 or (original[end] != "\n" if end < len(original) else not expect[-1]):
            return None  # (at the end, an empty last line is what `split_lines` drops: not a line)
        if at > pos_at:
            out.append(original[pos_at:at])
        new = [text for tag, text in body if tag != "-"]
        if new:
            out.append("\n".join(new) + "\n")
        pos, pos_at = line + len(expect), end + 1
    tail = original[pos_at:]
    if tail or original.endswith("\n"):
        out.append(tail)
    elif out:
        out[-1] = out[-1][:-1]  # (the file ended in a hunk's new lines: without its final newline)
    return "".join(out)


def _line_found(original: str, old: str, pos: int, pos_at: int, start: int) -> tuple[int, int]:
    """Where `old` begins a line of `original` at line `start` or, as `apply_hunks` accepts it
    for a formatted diff, `start` + 1 (with no match at `start`): (offset, line); (-1, -1) when
    the first such place from line `pos` (at offset `pos_at`) is elsewhere."""
    at, line = pos_at, pos
    for _ in range(_SEARCHES):
        found = original.find(old, at)
        if found < 0:
            return -1, -1
        line += original.count("\n", at, found)
        at = found
        if found == 0 or original[found - 1] == "\n":  # (it begins a line)
            if line == start or line == start + 1:
                return found, line
            if line > start:
                return -1, -1
        if found >= len(original):  # (an empty line looked for at the end)
            return -1, -1
        at = found + 1
        line += original[found] == "\n"
    return -1, -1


def trace_hunks(original: list[str], hunks: list[dict[str, Any]], tagged: list[Tagged] | None = None,
                origins: bool = True) -> tuple[list[str], list[int]] | None:
    """`apply_hunks`, also giving each resulting line's index in `original` (-1 for a line the
    hunks add): the accuracy benchmark follows which lines of a file an agent wrote through
    later edits with it. `origins` False leaves that list empty: `apply_hunks`, for every
    Claude Code edit, needs only the lines (the indexes were a list of ints as long as the file)."""
    result: list[str] = []
    origin: list[int] = []
    pos = 0  # next unconsumed line of original (0-based)
    for i, h in enumerate(hunks):
        start = int(h.get("oldStart") or 0) - 1
        if int(h.get("oldLines") or 0) == 0 and start < 0:
            start = 0
        body = hunk_lines(h) if tagged is None else tagged[i]
        if body is None:
            return None
        expect = [text for tag, text in body if tag != "+"]
        if original[start:start + len(expect)] != expect:
            # A formatted diff puts an empty old side one line earlier.
            if original[start + 1:start + 1 + len(expect)] == expect:
                start += 1
            else:
                return None
        if start < pos:
            return None
        result.extend(original[pos:start])
        if not origins:
            result += [text for tag, text in body if tag != "-"]
            pos = start + len(expect)
            continue
        origin.extend(range(pos, start))
        pos = start
        for tag, text in body:
            if tag == "+":
                result.append(text)
                origin.append(-1)
            elif tag == "-":
                pos += 1
            else:
                result.append(text)
                origin.append(pos)
                pos += 1
    result.extend(original[pos:])
    if origins:
        origin.extend(range(pos, len(original)))
    return result, origin


def edit_from_texts(before: str | None, after: str) -> dict[str, Any] | None:
    """A code.edit's fields (op, ranges, texts, hashes, context) from the whole file before and
    after a tool's change, as Gemini CLI, Qwen Code and OpenCode record it for each successful
    edit (`originalContent`/`newContent`, `filediff.before`/`after`); None when nothing changed.

    `before` None (or the tool said the file was new) is a creation: every line is written. The
    ranges come from a line diff of the two texts, so they are the file's real lines, not a
    placement of the tool's search string."""
    new_lines = split_lines(after)
    if before is None:
        out: dict[str, Any] = {"op": "create", "before_range": [1, 0], "after_range": [1, len(new_lines)],
                               "before_text": "", "after_text": join_lines(new_lines), "file_before_sha": None,
                               "file_after_sha": E.git_blob_sha(after)}
    else:
        old_lines = split_lines(before)
        hunks = diff_hunks(old_lines, new_lines)
        changes = changes_from_hunks(hunks)
        if not changes:
            return None
        out = {"op": "update", **edit_ranges(changes, old_lines, new_lines),
               "file_before_sha": E.git_blob_sha(before), "file_after_sha": E.git_blob_sha(after),
               **context_fields(hunk_extents(hunks))}
    out["before_sha"] = E.sha256_text(out.get("before_text") or "")
    out["after_sha"] = E.sha256_text(out.get("after_text") or "")
    return out

"""Text for people: the tapes table, the compact view of events, and explain's views.

One module for every rendering a person reads (`engram tapes`, `engram show`, `explain --pretty`,
the language server's hover markdown), so a change of wording happens in one place."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from engram.index.catalog import TapeRow
from engram.tape.objects import is_ref
from engram.words import anchor_state, line_range, plural


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def tapes_table(rows: list[TapeRow], private: Collection[str] = ()) -> str:
    """The catalog for people; a subagent's harness reads `codex/guardian`, so a reviewer is not
    taken for a session someone started; a session marked private (`engram tapes --private`: push
    leaves it here) says so in PRIVATE, so the mark can be checked before a push."""
    head = ("TAPE", "HARNESS", "SESSION", "MODEL", "STARTED", "EVENTS", "EDITS", "READS", "SIZE", "PRIVATE")
    body = [(r.id[:12], f"{r.harness}/{r.subagent}" if r.subagent else r.harness, r.session_id[:36],
             r.model or "-", (r.started or "-")[:16].replace("T", " "),
             str(r.events), str(r.edits), str(r.reads), human_size(r.size),
             "yes" if r.session_id in private else "-") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(c.ljust(w) if i < 5 or i == 9 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [head, *body]]
    return "\n".join(line.rstrip() for line in lines)


def _short(text: Any, limit: int) -> str:
    if is_ref(text):
        return f"<{text['len']} characters in object {text['$obj'][:12]}>"
    s = str(text or "").strip().replace("\r", "")
    first = " ⏎ ".join(line.strip() for line in s.split("\n")[:3] if line.strip())
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _call_argument(inp: Any) -> str:
    """What a tool call acts on, in a word: Claude Code's command, file or pattern; Codex's `cmd`
    (exec_command) or `command` (a shell argv); for a patch, its file headers; for another
    free-form input (a Codex code-mode `exec` script), the input itself."""
    if not isinstance(inp, dict):
        return ""
    arg = inp.get("command") or inp.get("cmd") or inp.get("file_path") or inp.get("pattern") or inp.get("description")
    if isinstance(arg, list):
        arg = " ".join(str(x) for x in arg)
    if arg:
        return str(arg)
    patch = inp.get("input") if isinstance(inp.get("input"), str) else inp.get("patch")
    if isinstance(patch, str):
        from engram.adapters.apply_patch import ADD_FILE, DELETE_FILE, UPDATE_FILE  # noqa: PLC0415 - ~20 ms

        heads = (ADD_FILE, UPDATE_FILE, DELETE_FILE)
        return ", ".join(line[4:].strip() for line in patch.split("\n") if line.startswith(heads)) or patch
    return ""


def _agent_payload(ev: dict[str, Any]) -> Any:
    """A message between agents, shown as sender → recipient and its payload, without Codex's header."""
    text = ev.get("text")
    if not ev.get("sender") or not isinstance(text, str):
        return text
    _, marker, payload = text.partition("Payload:\n")
    return f"{ev['sender']} → {ev.get('recipient') or '?'}: " + (payload if marker else text)


def event_line(offset: int, ev: dict[str, Any], width: int = 100) -> str:
    kind = ev.get("kind", "?")
    ts = (ev.get("ts") or "")[:19].replace("T", " ")
    who = f"[{ev['agent']}] " if ev.get("agent") else ""
    if kind == "meta":
        srcs = ", ".join(f"{s['name']} {s['start']}-{s['end']}" for s in ev.get("sources") or [])
        detail = (f"{ev.get('harness')} {ev.get('harness_version') or ''} session {ev.get('session_id')} "
                  f"model {ev.get('model') or '-'} cwd {ev.get('cwd') or '-'} ({srcs})")
        if ev.get("subagent"):
            detail += f" · {ev['subagent']} subagent of {ev.get('parent_session') or 'an unknown session'}"
        if ev.get("unkept"):
            detail += " · not kept by this harness: " + "; ".join(map(str, ev["unkept"]))
    elif kind in ("msg.in", "msg.out"):
        tag = " (thinking)" if ev.get("block") == "thinking" else ""
        tag += " (compaction summary)" if ev.get("compact_summary") else ""
        tag += " (rest encrypted)" if ev.get("encrypted") else ""
        detail = _short(_agent_payload(ev), width) + tag
    elif kind == "tool.call":
        detail = f"{ev.get('name')} {_short(_call_argument(ev.get('input')), width)}"
    elif kind == "tool.result":
        status = "error" if ev.get("is_error") else "ok"
        code = f" exit {ev['exit_code']}" if ev.get("exit_code") is not None else ""
        out = ev.get("stdout")
        detail = f"{ev.get('name') or ''} {status}{code}" + (f": {_short(out, width)}" if out else "")
    elif kind == "code.read":
        r = ev.get("range") or ["?", "?"]
        detail = f"{ev.get('file')}:{r[0]}-{r[1]}"
    elif kind == "code.edit":
        b, a = ev.get("before_range"), ev.get("after_range")
        fmt = lambda r: "?" if not r else (f"{r[0]}-{r[1]}" if r[1] >= r[0] else f"∅@{r[0]}")  # noqa: E731
        detail = f"{ev.get('op')} {ev.get('file')} {fmt(b)} → {fmt(a)}"
        if ev.get("from_file"):
            detail += f" (moved from {ev['from_file']})"
        elif ev.get("to_file") or ev.get("moved_to"):
            detail += f" (moved to {ev.get('to_file') or ev['moved_to']})"
    elif kind == "compact":
        detail = f"compaction ({ev.get('trigger') or '?'}, {ev.get('pre_tokens') or '?'} tokens before)"
    else:
        detail = _short({k: v for k, v in ev.items() if k not in ("kind", "ts")}, width)
    return f"#{offset:<5} {ts:19}  {kind:11} {who}{detail}"


def events_view(items: Iterable[tuple[int, dict[str, Any]]], width: int = 100, full: bool = False) -> str:
    """One line per event; with `full`, each followed by its texts whole (`engram view --full --pretty`)."""
    if not full:
        return "\n".join(event_line(off, ev, width) for off, ev in items)
    out = []
    for off, ev in items:
        out.append(event_line(off, ev, width))
        out += [f"  {line}" for text in _texts(ev) for line in text.split("\n")]
    return "\n".join(out)


def _texts(ev: dict[str, Any]) -> list[str]:
    """An event's texts, for showing it whole: messages, tool input and output, code."""
    found: list[str] = []
    for key in ("text", "message", "input", "stdout", "stderr", "before_text", "after_text"):
        value = ev.get(key)
        if isinstance(value, str) and value.strip():
            found.append(f"[{key}]\n{value}" if key not in ("text", "message") else value)
        elif isinstance(value, dict):
            found += [f"[{k}]\n{v}" for k, v in value.items() if isinstance(v, str) and v.strip()]
    return found


_WHY_WIDER = {
    "few-tokens": "too few tokens to fingerprint",
    "no-evidence": "no session matched those lines themselves",
    "weak-evidence": "those lines themselves matched only weakly",
    "no-writer": "no edit matched those lines as well as the file's reads did",
    "expand-until": "--expand-until",
}


def widened_note(doc: dict[str, Any]) -> str | None:
    """Why the span answered is wider than the one asked for, in words; None when it is not."""
    w = doc.get("widened")
    if not w:
        return None
    return (f"{line_range(w['asked']['start'], w['asked']['end'])} widened to {doc['span']['start']}-{doc['span']['end']}: "
            + _WHY_WIDER.get(w.get("why"), str(w.get("why"))))


# --------------------------------------------------------------------------- explain, for people
#
# `explain_pretty` (the terminal) and `explain_markdown` (the language server's hover and the
# editors' explain document) render the same `session_view` of each session: who (harness, model,
# when, short session id) and what it did to the lines, the person's request that led to it, the
# agent's words before and after, the edit as a diff, the next run, then every other touch on one
# line. One set of words for both, no internal terms (a fragment's "via" or confidence).

HARNESS_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "editor": "editor", "raw": "text",
                 "record": "recorded command"}


def harness_name(h: str | None) -> str:
    return HARNESS_NAMES.get(h or "", h or "unknown harness")


def when(ts: str | None) -> str:
    """`2026-02-11 20:44 UTC` from an ISO timestamp; `at an unknown time` without one."""
    if not ts:
        return "at an unknown time"
    return ts[:16].replace("T", " ") + (" UTC" if ts.endswith("Z") or "+00:00" in ts else "")


# What a session did to the lines, by the kind of its telling touch (a writer: "wrote these lines").
_ROLE = {"code.edit": "changed these lines", "code.carried": "kept these lines in an edit",
         "code.read": "read these lines", "tool.call": "held these lines in a tool call",
         "tool.result": "saw these lines in a tool's output", "msg.out": "discussed these lines",
         "msg.in": "the person quoted these lines", "span.link": "linked these lines"}
# A touch on one line (the session's other touches).
_TOUCH = {"code.edit": "changed {where}", "code.carried": "kept {where} unchanged in an edit",
          "code.read": "read {where}", "tool.call": "held these lines in a tool call",
          "tool.result": "saw these lines in a tool's output", "msg.out": "discussed these lines",
          "msg.in": "the person quoted these lines", "span.link": "linked {where}"}
_EARLIER = {"lineage": " (an earlier version)", "continuation": " (an earlier version, before a compaction)",
            "tombstone": " (deleted code)", "location_only": " (where the code was, by location only)"}


@dataclass
class Touch:
    """A session's touches of one kind and file, on one line."""

    text: str
    tape: str
    offset: int  # the latest of them
    offsets: list[int]


@dataclass
class SessionView:
    rank: int
    role: str
    who: str  # harness · model · when · session 1234abcd
    who_full: str  # harness · model · when (markdown gives the whole session id on a line of its own)
    session_id: str
    tape: str
    offset: int | None  # the touch the story tells
    earlier_request: str | None = None
    request: str | None = None
    said_before: str | None = None
    edit_where: str | None = None
    edit_file: str | None = None
    diff: list[str] = field(default_factory=list)
    said_after: str | None = None
    next_run: str | None = None
    next_failed: bool = False
    touches: list[Touch] = field(default_factory=list)


def _where(f: dict[str, Any]) -> str:
    lines = f.get("lines")
    name = f.get("file") or "a file"
    if lines and lines[0] is not None:
        a, b = lines
        return f"{name} line {a}" if a == b else (f"{name} lines {a}-{b}" if b >= a else f"{name} (before line {a})")
    return name


def session_view(rank: int, s: dict[str, Any]) -> SessionView:
    """What a person is told about one session of an explain answer."""
    story = s.get("story") or {}
    told = (story.get("tape"), story.get("offset"))
    kind = story.get("kind") or (s["fragments"][0]["kind"] if s.get("fragments") else "")
    role = "wrote these lines" if s.get("wrote") else _ROLE.get(kind, "touched these lines")
    if not s.get("wrote") and kind == "code.edit" and any(f.get("via") in _EARLIER for f in s.get("fragments", [])
                                                           if (f["tape"], f["offset"]) == told):
        role = "wrote an earlier version of these lines"
    ts = story.get("ts") or s.get("last_touch")
    parts = [harness_name(s.get("harness")), s.get("model"), when(ts)]
    who = " · ".join(x for x in (*parts, f"session {str(s.get('session_id'))[:8]}") if x)
    who_full = " · ".join(x for x in parts if x)
    v = SessionView(rank, role, who, who_full, str(s.get("session_id")), str(story.get("tape") or s.get("tape")),
                    story.get("offset"))
    for key in ("earlier_request", "request", "said_before", "said_after"):
        part = story.get(key)
        if part:
            setattr(v, key, part["text"])
    run = story.get("next_run")
    if run:
        out = _one_line(run.get("output") or "", 200)
        v.next_run = f"{run.get('tool') or 'a tool'} {'failed' if run.get('failed') else 'ran'}" + (f": {out}" if out else "")
        v.next_failed = bool(run.get("failed"))
    edit = story.get("edit")
    if edit:
        v.edit_file = str(edit.get("file") or "a file")
        v.edit_where = f"{v.edit_file}, event #{story.get('offset')}"
        v.diff = str(edit.get("diff") or "").split("\n")
    v.touches = _touch_lines(s, told)
    return v


def _touch_lines(s: dict[str, Any], told: tuple[Any, Any]) -> list[Touch]:
    """The session's other touches, one line per kind and file (reads of a file are one line)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for f in s.get("fragments", []):
        if (f["tape"], f["offset"]) == told:
            continue
        key = (f["kind"], f.get("file") or "", _EARLIER.get(f.get("via"), ""))
        groups.setdefault(key, []).append(f)
    out = []
    for (kind, _, earlier), fs in groups.items():
        offsets = sorted({f["offset"] for f in fs})
        text = _TOUCH.get(kind, kind + " {where}").format(where=_where(fs[-1])) + earlier
        if len(offsets) > 1:
            text += f", {plural(len(offsets), 'time')}"
        out.append(Touch(text, fs[-1]["tape"], offsets[-1], offsets))
    return out


def _one_line(text: str, limit: int) -> str:
    s = " ⏎ ".join(line.strip() for line in text.replace("\r", "").split("\n") if line.strip())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _head(doc: dict[str, Any]) -> tuple[str, str]:
    span = doc["span"]
    where = f"{span['file']}:{span['start']}-{span['end']}"
    if span["file"] == "-":  # (`explain --text -`: the text has no file; "Why -:1-13?" read as a glitch)
        where = f"the given text ({plural(span['end'] - span['start'] + 1, 'line')})"
    n = len(doc["sessions"])
    if n == 0:
        return where, "no recorded session wrote, read or discussed these lines"
    writers = sum(1 for s in doc["sessions"] if s.get("wrote"))
    count = plural(n, "session") + (f", {writers} of which wrote them" if writers and n > 1 else "")
    return where, count


def _left(doc: dict[str, Any]) -> str | None:
    t = doc.get("truncated")
    if not isinstance(t, dict):
        return "some sessions or touches were left out" if t else None
    parts = [plural(n, w[:-1], w) for w, n in (t.get("left_out") or {}).items()]
    text = ("left out: " + ", ".join(parts)) if parts else ""
    if t.get("next"):
        text += f" (next page: {t['next']})"
    if t.get("lineage"):
        text += ("; " if text else "") + t["lineage"]
    return text or None


class _Ansi:
    """Colour for a terminal: nothing when off (NO_COLOR, --no-color, not a terminal)."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on and text else text


def _wrap(label: str, text: str, width: int, paint: _Ansi) -> list[str]:
    """A labelled paragraph: the label in a column, the text's lines after it (long lines cut)."""
    lines = [x for x in text.replace("\r", "").split("\n") if x.strip()] or [""]
    pad = " " * 14
    out = []
    for i, line in enumerate(lines[:12]):
        line = line if len(line) <= width else line[: width - 1] + "…"
        out.append(("   " + paint(f"{label:<11}", "2") if i == 0 else pad) + line)
    if len(lines) > 12:
        out.append(pad + paint(f"⋯ {plural(len(lines) - 12, 'more line')}", "2"))
    return out


def explain_pretty(doc: dict[str, Any], width: int = 100, color: bool = False) -> str:
    """The explain answer for a terminal: per session in rank order (the writers first) who it
    was, the request, the words before and after its edit, the edit as a diff, its other touches
    on one line each. `color`: ANSI colours (the caller decides: a terminal, and no NO_COLOR)."""
    paint = _Ansi(color)
    where, count = _head(doc)
    out = [paint(f"Why {where}?", "1") + f"  {count}"]
    for note in (doc.get("read_as"), widened_note(doc)):
        if note:
            out.append(paint(f"({note})", "2"))
    out += _notes(doc, paint)
    for rank, s in enumerate(doc["sessions"], 1):
        v = session_view(rank, s)
        out.append("")
        role = paint(v.role, "1;32" if s.get("wrote") else "1")
        out.append(f"{paint(str(rank) + '.', '1')} {role} {paint('— ' + v.who, '2')}")
        if v.earlier_request:
            out += _wrap("asked", v.earlier_request, width, paint)
        if v.request:
            out += _wrap("then asked" if v.earlier_request else "asked", v.request, width, paint)
        if v.said_before:
            out += _wrap("before", v.said_before, width, paint)
        if v.diff:
            out.append("   " + paint(f"{'edit':<11}", "2") + paint(v.edit_where or "", "2"))
            for line in v.diff:
                line = line if len(line) <= width else line[: width - 1] + "…"
                code = {"+": "32", "-": "31", "@": "36", "⋯": "2"}.get(line[:1], "")
                out.append(" " * 14 + (paint(line, code) if code else line))
        if v.said_after:
            out += _wrap("after", v.said_after, width, paint)
        if v.next_run:
            out += _wrap("then", paint(v.next_run, "31") if v.next_failed else v.next_run, width + 20, paint)
        for t in v.touches:
            out.append("   " + paint(f"{'also':<11}", "2") + t.text + paint(f"  #{t.offset}", "2"))
        if v.offset is not None:
            out.append("   " + paint(f"{'see':<11}engram view {v.tape[:12]}@{v.offset} --full", "2"))
    if left := _left(doc):
        out += ["", paint(left, "2")]
    return "\n".join(out)


def _notes(doc: dict[str, Any], paint: _Ansi) -> list[str]:
    """What is known about the lines (the memories anchored to them) before why they exist: a
    note someone left is the shortest answer."""
    notes = doc.get("notes") or []
    if not notes:
        return []
    out = ["", paint("Notes on these lines", "1")]
    for n in notes:
        out.append(f"   {paint(n['id'][:12], '2')}  {n['kind']:<10} {n['summary']}  "
                   f"{paint('(' + _note_where(n) + ')', '2')}")
    if left := doc.get("notes_left_out"):
        out.append("   " + paint(f"{left['count']} more: {left['next']}", "2"))
    return out


def _notes_markdown(doc: dict[str, Any]) -> list[str]:
    """The explain document's notes (see `_notes`) as markdown."""
    notes = doc.get("notes") or []
    if not notes:
        return []
    out = ["", "**Notes on these lines:**", ""]
    for n in notes:
        out.append(f"- `{n['id'][:12]}` {n['kind']}: {_md_escape(n['summary'])} "
                   f"_({_note_where(n)})_")
    if left := doc.get("notes_left_out"):
        out.append(f"- _{left['count']} more: {_md_escape(left['next'])}_")
    return out


def _note_where(note: dict[str, Any]) -> str:
    return f"{anchor_state(note['state'], note['retained'])}, lines {note['lines'][0]}-{note['lines'][1]}"


def _md_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_markdown(text: str) -> str:
    """Transcript text shown as markdown: no HTML (`<task-notification>` would vanish) and no
    accidental emphasis or links."""
    out = _md_escape(text)
    for ch in "\\`*_[]":
        out = out.replace(ch, "\\" + ch)
    return out


def md_quote(text: str) -> list[str]:
    return ["> " + escape_markdown(line) if line.strip() else ">" for line in text.replace("\r", "").split("\n")]


Link = Callable[[str, str, int], str]  # (label, tape, offset) -> a markdown link


def explain_markdown_lines(doc: dict[str, Any], link: Link | None = None, sessions: int | None = None,
                           heading: bool = True, diff_lines: int | None = None
                           ) -> tuple[list[str], dict[int, tuple[str, int]]]:
    """The explain answer as markdown lines, and for the lines that name an event the (tape,
    offset) they point at (an editor opens the transcript there). `link` makes a link to an
    event (the editors' commands); `sessions` shows only the first N and `diff_lines` of each
    edit's diff (the hover)."""
    out: list[str] = []
    targets: dict[int, tuple[str, int]] = {}

    def add(line: str, target: tuple[str, int] | None = None) -> None:
        if target is not None:
            targets[len(out)] = target
        out.append(line)

    if heading:
        where, count = _head(doc)
        add(f"# Why {where}?" if doc["span"]["file"] == "-" else f"# Why `{where}`?")
        add("")
        add(count[:1].upper() + count[1:] + ".")
        for note in (doc.get("read_as"), widened_note(doc)):
            if note:
                add("")
                add(f"_{_md_escape(note)}_")
        for line in _notes_markdown(doc):
            add(line)
    shown = doc["sessions"] if sessions is None else doc["sessions"][:sessions]
    for rank, s in enumerate(shown, 1):
        v = session_view(rank, s)
        told = (v.tape, v.offset) if v.offset is not None else (v.tape, 0)
        if out:
            add("")
            add("---")
            add("")
        opened = f" · {link(f'open transcript at #{told[1]}', *told)}" if link else ""
        add(f"**{rank}. {v.role[:1].upper() + v.role[1:]}** · {_md_escape(v.who_full)}{opened}", told)
        add("")
        add(f"session `{v.session_id}`", told)  # whole, to resume it (`claude --resume ID`)
        for label, text in (("Asked", v.earlier_request), ("Then asked" if v.earlier_request else "Asked", v.request),
                            ("Before the edit" if v.diff else "Before", v.said_before)):
            if text:
                add("")
                add(f"**{label}:**")
                for line in md_quote(text):
                    add(line)
        if v.diff:
            add("")
            add(f"**The edit** (`{v.edit_file}`, event #{v.offset}):", told)
            tick = "~~~~" if any(line.startswith("```") for line in v.diff) else "```"
            add(tick + "diff")
            shown = v.diff if diff_lines is None or len(v.diff) <= diff_lines else v.diff[:diff_lines]
            for line in shown:
                add(line)
            if len(shown) < len(v.diff):
                add(f"⋯ {plural(len(v.diff) - len(shown), 'more diff line')}")
            add(tick)
        if v.said_after:
            add("")
            add("**After:**")
            for line in md_quote(v.said_after):
                add(line)
        if v.next_run:
            add("")
            add(f"**Then:** {_md_escape(v.next_run)}")
        if v.touches:
            add("")
            for t in v.touches:
                more = f" · {link(f'open transcript at #{t.offset}', t.tape, t.offset)}" if link else ""
                add(f"- {_md_escape(t.text)} (#{t.offset}){more}", (t.tape, t.offset))
        if link:
            add("")
            add(link("whole transcript", v.tape, -1), (v.tape, 0))
    if heading and (left := _left(doc)):
        add("")
        add(f"_{_md_escape(left)}_")
    return out, targets


def explain_markdown(doc: dict[str, Any], link: Link | None = None, sessions: int | None = None,
                     heading: bool = True, diff_lines: int | None = None) -> str:
    """The explain answer as markdown (the language server's hover and explain document)."""
    return "\n".join(explain_markdown_lines(doc, link, sessions, heading, diff_lines)[0])


# --------------------------------------------------------------------------- blame, for people


def _blame_head(r: dict[str, Any]) -> str:
    if r.get("session_id") is None:
        return "no recorded session"
    req = f' · "{r["request"]}"' if r.get("request") else ""
    return (f"{str(r['session_id'])[:8]} · {harness_name(r.get('harness'))} · {when(r.get('when'))}{req}")


def blame_pretty(doc: dict[str, Any], lines: list[str], width: int = 120, color: bool = False) -> str:
    """`engram blame` for a terminal: each region's writer (short session id, harness, when, the
    first line of its request), then its lines, numbered."""
    paint = _Ansi(color)
    digits = len(str(max((r["lines"][1] for r in doc["regions"]), default=1)))
    out: list[str] = []
    for r in doc["regions"]:
        a, b = r["lines"]
        head = _blame_head(r)
        head = head if len(head) <= width else head[: width - 1] + "…"
        out.append(paint(head, "1;32" if r.get("session_id") else "2"))
        for n in range(a, b + 1):
            text = lines[n - 1] if n - 1 < len(lines) else ""
            out.append(paint(f"{n:>{digits}} │ ", "2") + (text if len(text) <= width else text[: width - 1] + "…"))
    return "\n".join(out)


def explain_file_pretty(doc: dict[str, Any], width: int = 100, color: bool = False) -> str:
    """`engram explain FILE` for a terminal: each region's writer, then its explain answer."""
    paint = _Ansi(color)
    out = [paint(f"Why {doc['file']}?", "1") + f"  {plural(len(doc['regions']), 'region')}"]
    for r in doc["regions"]:
        a, b = r["lines"]
        told = bool((r.get("explain") or {}).get("sessions"))
        head = _blame_head(r) if r.get("session_id") or not told else "no edit found line by line; the sessions that match"
        out += ["", paint(f"── {line_range(a, b)}: {head}", "1")]
        if r.get("explain"):
            body = explain_pretty({**r["explain"], "truncated": False}, width, color).split("\n")[1:]
            out += [line for line in body if line.strip()]
    if left := _left(doc):
        out += ["", paint(left, "2")]
    return "\n".join(out)

"""Text for people: the tapes table, the compact view of events, and explain's views.

One module for every rendering a person reads (`engram tapes`, `engram show`, `explain --pretty`,
the language server's hover markdown), so a change of wording happens in one place."""

from __future__ import annotations

from typing import Any, Iterable

from engram.index.catalog import TapeRow
from engram.tape.objects import is_ref


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def tapes_table(rows: list[TapeRow]) -> str:
    """The catalog for people; a subagent's harness reads `codex/guardian`, so a reviewer is not
    taken for a session someone started."""
    head = ("TAPE", "HARNESS", "SESSION", "MODEL", "STARTED", "EVENTS", "EDITS", "READS", "SIZE")
    body = [(r.id[:12], f"{r.harness}/{r.subagent}" if r.subagent else r.harness, r.session_id[:36],
             r.model or "-", (r.started or "-")[:16].replace("T", " "),
             str(r.events), str(r.edits), str(r.reads), human_size(r.size)) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(c.ljust(w) if i < 5 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [head, *body]]
    return "\n".join(lines)


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


def events_view(items: Iterable[tuple[int, dict[str, Any]]], width: int = 100) -> str:
    return "\n".join(event_line(off, ev, width) for off, ev in items)


_WHY_WIDER = {
    "few-tokens": "too few tokens to fingerprint",
    "no-evidence": "no session matched those lines themselves",
    "weak-evidence": "those lines themselves matched only weakly",
    "expand-until": "--expand-until",
}


def widened_note(doc: dict[str, Any]) -> str | None:
    """Why the span answered is wider than the one asked for, in words; None when it is not."""
    w = doc.get("widened")
    if not w:
        return None
    return (f"lines {w['asked']['start']}-{w['asked']['end']} widened to {doc['span']['start']}-{doc['span']['end']}: "
            + _WHY_WIDER.get(w.get("why"), str(w.get("why"))))


def explain_pretty(doc: dict[str, Any], width: int = 110) -> str:
    span = doc["span"]
    out = [f"why {span['file']}:{span['start']}-{span['end']}? {len(doc['sessions'])} session(s)"
           + (" (truncated)" if doc.get("truncated") else "")]
    if note := widened_note(doc):
        out.append(f"({note})")
    for rank, s in enumerate(doc["sessions"], 1):
        out.append("")
        out.append(f"{rank}. {s['harness']} session {s['session_id']} · {s.get('model') or '?'} · "
                   f"{s['touches']} touch(es) · last {(s['last_touch'] or '?')[:16].replace('T', ' ')}")
        for f in s["fragments"]:
            lines = f"{f['file']}:{f['lines'][0]}-{f['lines'][1]}" if f.get("lines") and f.get("file") else ""
            out.append(f"   - {f['kind']} {lines} confidence {f['confidence']:.2f} via {f['via']} "
                       f"(tape {f['tape'][:12]} #{f['offset']})")
            for ev in f.get("window") or []:
                marker = "▶" if ev["offset"] == f["offset"] else " "
                out.append(f"     {marker} " + event_line(ev["offset"], ev, width)[:width + 30])
    return "\n".join(out)


def _md_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def explain_markdown(doc: dict[str, Any], width: int = 160) -> str:
    """The explain document as markdown: sessions in rank order, each touch with its window."""
    span = doc["span"]
    n = len(doc["sessions"])
    out = [f"# Why `{span['file']}:{span['start']}-{span['end']}`?", "",
           f"{n} session{'s' if n != 1 else ''}" + (" (truncated)" if doc.get("truncated") else "")]
    if note := widened_note(doc):
        out += ["", f"_{note}_"]
    for rank, s in enumerate(doc["sessions"], 1):
        out += ["", f"## {rank}. {s['harness']} · `{s['session_id']}`", "",
                f"- model: {s.get('model') or 'unknown'}",
                f"- touches: {s['touches']}, last {(s.get('last_touch') or '?')[:16].replace('T', ' ')}"]
        for f in s["fragments"]:
            where = f"`{f['file']}:{f['lines'][0]}-{f['lines'][1]}` " if f.get("lines") and f.get("file") else ""
            out += ["", f"### {f['kind']} {where}· confidence {f['confidence']:.2f} · via {f['via']} · "
                        f"tape `{f['tape'][:12]}` #{f['offset']}"]
            if f.get("window"):
                out += ["", "```text"]
                for ev in f["window"]:
                    marker = ">" if ev["offset"] == f["offset"] else " "
                    out.append(f"{marker} " + event_line(ev["offset"], ev, width))
                out.append("```")
    return "\n".join(out)

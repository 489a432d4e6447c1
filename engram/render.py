"""Text for people: the tapes table and the compact view of events."""

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
        if ev.get("to_file"):
            detail += f" (moved to {ev['to_file']})"
    elif kind == "compact":
        detail = f"compaction ({ev.get('trigger') or '?'}, {ev.get('pre_tokens') or '?'} tokens before)"
    else:
        detail = _short({k: v for k, v in ev.items() if k not in ("kind", "ts")}, width)
    return f"#{offset:<5} {ts:19}  {kind:11} {who}{detail}"


def events_view(items: Iterable[tuple[int, dict[str, Any]]], width: int = 100) -> str:
    return "\n".join(event_line(off, ev, width) for off, ev in items)

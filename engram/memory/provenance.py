"""Where an agent's memory was written: the tool call in its session's transcript.

An agent writes a memory through the MCP `remember` tool or by running `engram remember` in its
shell. Neither Claude Code nor Codex tells the tool which session it is in, so the memory is
written knowing only that an agent wrote it. The session's transcript, once ingested, holds the
call itself: Claude Code's `mcp__<server>__remember` tool_use (Codex: the `<server>__remember` or
`mcp__<server>__remember` function call) with the memory's content, or the shell command
`engram remember …`, and the call's result names the memory's id. `link_calls` finds those calls
in the tapes captured since it last looked and appends a `written_at` event for each memory it
identifies: the memory gains the call as evidence (tape id + offset: `engram view TAPE --at N`)
and, when the source did not know it, its session. The log stays append-only (nothing written is
edited), and the link is idempotent: a memory already linked to its call is skipped, and the
projection ignores a repeat.

Which memory a call wrote: the id its result gives (`{"id": …}` of the MCP tool, the id
`engram remember` prints), when it names a memory held here; else, for an MCP call whose result
was not captured, the agent's unlinked memory whose content is the call's `content`. A result
that says `merged_into` (the memory reinforced an existing one) adds the call as evidence to that
memory only. A call whose memory was written after the tape holding it was ingested (an ingest
racing the call) is not linked.

Cost: nothing is read unless the store has an agent's memory not linked yet; then only the tapes
indexed since the last look (`memory_state.calls_through`, their catalog numbers) that end after
the oldest such memory was written, and of those only lines that mention `remember`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from engram.memory import projection
from engram.memory.events import Pending
from engram.memory.model import TRUST, check_content, moment_of

if TYPE_CHECKING:
    from engram.memory.memories import Memories
    from engram.store.repo import Store

log = logging.getLogger(__name__)

#: How far apart a call's time in the transcript and its memory's written time may be (the
#: transcript's clock is the harness's; a memory is written during its call).
SLACK_S = 600.0
#: Tool names of a shell command, by harness (Claude Code `Bash`, Codex `shell` and `exec_command`).
SHELLS = frozenset({"Bash", "shell", "local_shell", "exec_command", "container.exec", "shell_command"})
_REMEMBER_CLI = re.compile(r"\bengram\b[^|;&\n]*?\bremember\b")
_ID_LINE = re.compile(r"^\s*([0-9a-f]{12})\b", re.MULTILINE)
_STATE_KEY = "calls_through"


@dataclass(frozen=True)
class Call:
    """A `remember` call found in a tape: where it is, and what it says of the memory."""

    tape: str
    offset: int
    session: str
    harness: str
    ts: str | None
    content: str | None  # the MCP call's content (None: a shell command)
    memory: str | None  # the id its result names
    merged: bool  # the result says it reinforced that memory


def is_remember_tool(name: str) -> bool:
    """The MCP `remember` tool as a harness names it: `remember`, `engram__remember` (Codex),
    `mcp__engram__remember` (Claude Code, newer Codex), whatever the server was called."""
    return name == "remember" or name.endswith("__remember")


def _command(inp: Any) -> str:
    """A shell call's command as one string (Codex gives an argv list)."""
    cmd = inp.get("command", inp.get("cmd")) if isinstance(inp, dict) else None
    if isinstance(cmd, list):
        return " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) else ""


def _result_memory(text: Any) -> tuple[str | None, bool]:
    """(the memory id a remember call's result names, whether it was merged into it)."""
    if not isinstance(text, str) or not text.strip():
        return None, False
    start = text.find("{")
    if start >= 0:
        try:
            doc = orjson.loads(text[start:text.rfind("}") + 1])
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("id"), str):
            return doc["id"], bool(doc.get("merged_into"))
    m = _ID_LINE.search(text)
    if m:
        return m.group(1), "reinforced it instead" in text
    return None, False


def calls_in(store: Store, tape: str, session: str, harness: str) -> list[Call]:
    """The remember calls (MCP tool or `engram remember` in a shell) of one tape, with their results."""
    from engram.index.catalog import tape_file  # noqa: PLC0415
    from engram.tape.reader import TapeReader  # noqa: PLC0415

    found: dict[str, tuple[int, dict[str, Any]]] = {}
    results: dict[str, dict[str, Any]] = {}
    with TapeReader(tape_file(store, tape), store.objects_dir) as reader:
        for offset, line in enumerate(reader.raw_lines()):
            if b"remember" not in line and not (found and b'"tool.result"' in line):
                continue
            ev = orjson.loads(line)
            kind, call_id = ev.get("kind"), str(ev.get("call_id") or "")
            if kind == "tool.call" and call_id:
                name, inp = str(ev.get("name") or ""), ev.get("input")
                mcp = is_remember_tool(name) and isinstance(inp, dict) and isinstance(inp.get("content"), str)
                if mcp or (name in SHELLS and _REMEMBER_CLI.search(_command(inp))):
                    found[call_id] = (offset, ev)
            elif kind == "tool.result" and call_id in found and not ev.get("is_error"):
                results[call_id] = ev
    calls = []
    for call_id, (offset, ev) in found.items():
        res = results.get(call_id)
        memory, merged = _result_memory(res.get("stdout") if res else None)
        inp = ev.get("input")
        content = inp.get("content") if is_remember_tool(str(ev.get("name"))) and isinstance(inp, dict) else None
        if memory is None and content is None:
            continue  # a shell `engram remember` whose id was not captured: nothing names its memory
        calls.append(Call(tape, offset, session, harness, ev.get("ts") if isinstance(ev.get("ts"), str) else None,
                          content if isinstance(content, str) else None, memory, merged))
    return calls


def _near(call: Call, written: str) -> bool:
    """Was a memory written at `written` plausibly written by this call (its time, when known)?"""
    if call.ts is None:
        return True
    try:
        apart = (moment_of(written) - moment_of(call.ts.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return True
    return -SLACK_S <= apart <= SLACK_S


def _memory_of(mem: Memories, call: Call) -> tuple[dict[str, Any], bool] | None:
    """(the memory's row, whether the call wrote it rather than reinforcing it), or None."""
    cols = "no, id, hash, source, created, evidence"
    if call.memory is not None:
        rows = mem.db.execute(f"SELECT {cols} FROM memories WHERE id = ?", (call.memory,)).fetchall()
        if not rows:
            return None
        row = dict(zip(cols.split(", "), rows[0]))
        if call.merged:
            return row, False
        if call.content is not None and row["hash"] != _hash(call.content):
            return None  # the result names another memory than the content says: trust neither
        return row, True
    if call.content is None:
        return None
    rows = mem.db.execute(f"SELECT {cols} FROM memories WHERE hash = ? AND json_extract(source, '$.type') = 'agent'"
                          " AND json_extract(source, '$.written_at') IS NULL ORDER BY no", (_hash(call.content),))
    for r in rows:
        row = dict(zip(cols.split(", "), r))
        if _near(call, row["created"]):
            return row, True
    return None


def _hash(content: str) -> str:
    try:
        return projection.content_hash(check_content(content))
    except Exception:  # noqa: BLE001 - empty content: no memory has it
        return ""


def _pending(mem: Memories, call: Call) -> Pending | None:
    """The `written_at` event linking `call` to its memory; None when there is nothing to add."""
    found = _memory_of(mem, call)
    if found is None:
        return None
    row, wrote = found
    source = orjson.loads(row["source"])
    here = {"tape": call.tape, "offset": call.offset}
    if here in orjson.loads(row["evidence"]) and (not wrote or source.get("written_at")):
        return None
    if wrote and (source.get("type") != "agent" or source.get("written_at") or not _near(call, row["created"])):
        wrote = False  # a person's memory, one linked already, or one written at another time: evidence only
        if here in orjson.loads(row["evidence"]):
            return None
    data: dict[str, Any] = {**here, "session": call.session, "harness": call.harness}
    if not wrote:
        data["reinforced"] = True
    return Pending("written_at", row["id"], {"type": "agent", "harness": call.harness, "session": call.session}, data)


def _waiting_since(mem: Memories) -> str | None:
    """When the oldest agent memory not linked to its call yet was written (None: there is none)."""
    rows = mem.db.execute(f"SELECT min(created) FROM memories WHERE trust = {TRUST['agent']}"  # (no JSON read for the rest)
                          " AND json_extract(source, '$.type') = 'agent' AND json_extract(source, '$.written_at') IS NULL"
                          ).fetchall()
    return rows[0][0] if rows and rows[0][0] else None


def link_calls(mem: Memories) -> int:
    """Link the agents' memories to the remember calls in the tapes indexed since the last look;
    returns how many events were written (see the module docstring)."""
    mem.sync()
    through = int(projection.state(mem.db, _STATE_KEY, 0) or 0)
    newest = mem.db.execute("SELECT coalesce(max(no), 0) FROM tapes").fetchall()[0][0]
    if newest <= through:
        return 0
    since = _waiting_since(mem)
    tapes = [] if since is None else mem.db.execute(
        "SELECT id, session_id, harness FROM tapes WHERE no > ? AND no <= ? AND (ended IS NULL OR ended >= ?)"
        " ORDER BY no", (through, newest, _minus_slack(since))).fetchall()
    calls = []
    for tape, session, harness in tapes:
        try:
            calls += calls_in(mem.store, tape, session, harness)
        except Exception:  # noqa: BLE001 - a damaged tape: reindex reports it; the others still link
            log.warning("reading remember calls of tape %s", tape[:12], exc_info=True)

    def decide() -> list[Pending]:
        pending: list[Pending] = []
        seen: set[tuple[str | None, Any]] = set()
        for call in calls:
            p = _pending(mem, call)
            # one call writes a memory; evidence of the same event is added once
            key = (p.memory, (p.data["tape"], p.data["offset"]) if p.data.get("reinforced") else None) if p else None
            if p is not None and key not in seen:
                seen.add(key)
                pending.append(p)
        return pending

    written = len(mem.record(decide))
    with mem.db:
        mem.db.execute("INSERT OR REPLACE INTO memory_state(key, value) VALUES(?, ?)", (_STATE_KEY, newest))
    if written:
        log.info("linked %d memories to the remember calls that wrote them", written)
    return written


def _minus_slack(ts: str) -> str:
    import datetime as dt  # noqa: PLC0415

    from engram.memory.model import iso  # noqa: PLC0415

    return iso(moment_of(ts) - dt.timedelta(seconds=SLACK_S))


def link_waiting(store: Store) -> int:
    """After an ingest: link the memories agents wrote to their calls in the new tapes. Nothing is
    opened when the store has no memory log."""
    from engram.memory import has_log  # noqa: PLC0415
    from engram.memory.memories import open_memories  # noqa: PLC0415

    if not has_log(store):
        return 0
    try:
        return link_calls(open_memories(store))
    except Exception:  # noqa: BLE001 - a link is provenance: the ingest it follows succeeded regardless
        log.exception("linking memories to the calls that wrote them")
        return 0

"""Qwen Code sessions: `~/.qwen/projects/<sanitised cwd>/chats/<session id>.jsonl` (QwenLM/qwen-code,
packages/core/src/services/chatRecordingService.ts; `QWEN_RUNTIME_DIR` moves `~/.qwen`).

Qwen Code is a fork of Gemini CLI whose recording is append-only JSONL in Claude Code's manner:
every record has `uuid`, `parentUuid`, `sessionId`, `timestamp`, `cwd`, `version`, `gitBranch` and
a `type`: `user` and `assistant` hold a Gemini `Content` (`{role, parts}`: text, thought text,
functionCall), `tool_result` holds the functionResponse parts and, in `toolCallResult`, the call's
status and display, and `system` records mark a chat compression (`subtype: chat_compression`,
the continuation signal), slash commands and titles. Tools and displays are Gemini CLI's, so a
successful `edit` / `write_file` keeps the whole file before and after and is read by
`engram.adapters.gemini.call_outcome`.
"""

from __future__ import annotations

from typing import Any, Callable, Final

from engram.adapters.base import Capture, PathMapper, SourceSpan, read_source
from engram.adapters.sniff import QWEN_RECORD_TYPES, looks_like_qwen  # noqa: F401 - (its home before sniff)
from engram.adapters.gemini import State, call_outcome, parts_text, response_text
from engram.tape import events as E

HARNESS: Final = "qwen-code"
RECORD_TYPES: Final = QWEN_RECORD_TYPES
_FAILED: Final = frozenset({"error", "cancelled", "canceled"})


def parse_qwen(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
               max_line_bytes: int) -> Capture:
    src = sources[0]
    if src.path.suffix.lower() == ".md":  # `/export md` (qwen_export.py)
        from engram.adapters.qwen_export import parse_export  # noqa: PLC0415

        return parse_export(sources, mapper_for)
    cap = Capture(HARNESS, src.path.stem, sources)
    lines = read_source(src, max_line_bytes=max_line_bytes, skipped=cap.skipped)
    records = [(line.offset, line.record) for line in lines if line.record is not None]
    first = next((r for _, r in records if r.get("sessionId")), {})
    cap.session_id = str(first.get("sessionId") or src.path.stem)
    cwd = first.get("cwd") if isinstance(first.get("cwd"), str) else None
    mapper = mapper_for(cwd)
    cap.meta = {"harness_version": first.get("version"), "cwd": cwd, "git_branch": first.get("gitBranch"),
                "git_head": None, "model": None, "started": first.get("timestamp")}
    st = State()
    seen: set[str] = set()
    for offset, rec in records:
        cap.cursor = (0, offset)
        uuid = rec.get("uuid")
        if isinstance(uuid, str):
            if uuid in seen:
                cap.ignored["duplicate record (same uuid)"] += 1
                continue
            seen.add(uuid)
        _record(cap, st, mapper, rec)
    return cap


def _base(rec: dict[str, Any], kind: str) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": kind, "ts": rec.get("timestamp")}
    if isinstance(rec.get("uuid"), str):
        ev["id"] = rec["uuid"]
    return ev


def _record(cap: Capture, st: State, mapper: PathMapper, rec: dict[str, Any]) -> None:
    typ = rec.get("type")
    parts = (rec.get("message") or {}).get("parts") if isinstance(rec.get("message"), dict) else None
    parts = [p for p in parts or [] if isinstance(p, dict)]
    if typ == "user":
        text = parts_text(parts)
        if text.strip():
            cap.add({**_base(rec, E.MSG_IN), "text": text})
    elif typ == "assistant":
        if cap.meta.get("model") is None and isinstance(rec.get("model"), str):
            cap.meta["model"] = rec["model"]
        for p in parts:
            if isinstance(p.get("text"), str) and p["text"].strip():
                cap.add({**_base(rec, E.MSG_OUT), "text": p["text"], "block": "thinking" if p.get("thought") else "text"})
            elif isinstance(p.get("functionCall"), dict):
                fc = p["functionCall"]
                args = fc.get("args") if isinstance(fc.get("args"), dict) else {}
                st.calls[str(fc.get("id") or fc.get("name") or "")] = (str(fc.get("name") or ""), args)
    elif typ == "tool_result":
        _tool_result(cap, st, mapper, rec, parts)
    elif typ == "system" and rec.get("subtype") == "chat_compression":
        payload = rec.get("systemPayload") if isinstance(rec.get("systemPayload"), dict) else {}
        info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
        cap.add({**_base(rec, E.COMPACT), "trigger": payload.get("trigger"),
                 "pre_tokens": info.get("originalTokenCount"), "message": None})
    elif typ in RECORD_TYPES:
        cap.ignored[f"{typ}/{rec.get('subtype')}"] += 1
    else:
        cap.skipped[f"unknown Qwen Code record type {typ!r}"] += 1


def _tool_result(cap: Capture, st: State, mapper: PathMapper, rec: dict[str, Any], parts: list[dict[str, Any]]) -> None:
    tcr = rec.get("toolCallResult") if isinstance(rec.get("toolCallResult"), dict) else {}
    responses = [p for p in parts if isinstance(p.get("functionResponse"), dict)]
    for i, part in enumerate(responses or [{}]):
        fr = part.get("functionResponse") or {}
        key = str(fr.get("id") or tcr.get("callId") or fr.get("name") or tcr.get("name") or "")
        name, args = st.calls.pop(key, (str(fr.get("name") or tcr.get("name") or ""),
                                        tcr.get("args") if isinstance(tcr.get("args"), dict) else {}))
        output, error = response_text([part]) if fr else ("", "")
        if not output and isinstance(tcr.get("result"), str):
            output = tcr["result"]
        failed = bool(error) or bool(tcr.get("error")) or tcr.get("status") in _FAILED
        display = tcr.get("resultDisplay") if i == 0 else None
        base = {k: v for k, v in _base(rec, E.TOOL_CALL).items() if k != "kind"}
        call_outcome(cap, st, mapper, {**base, "call_id": key}, name, args,
                     ok=not failed, output=output or error or str(tcr.get("error") or ""), display=display)

"""The `--pretty` explain view: sessions in rank order, each touch with its window."""

from __future__ import annotations

from typing import Any

from engram.render import event_line

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

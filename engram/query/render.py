"""The `--pretty` explain view: sessions in rank order, each touch with its window."""

from __future__ import annotations

from typing import Any

from engram.render import event_line


def explain_pretty(doc: dict[str, Any], width: int = 110) -> str:
    span = doc["span"]
    out = [f"why {span['file']}:{span['start']}-{span['end']}? {len(doc['sessions'])} session(s)"
           + (" (truncated)" if doc.get("truncated") else "")]
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

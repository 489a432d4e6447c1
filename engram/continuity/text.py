"""The resume package as text: for a person at a terminal, or (`--for claude|codex`) as the first
prompt of a new session in either harness. The same items in the same order as the JSON; every
item keeps its `tape@offset`, which `engram view` opens."""

from __future__ import annotations

from typing import Any, Final

from engram.words import plural

_FOR: Final = {"claude": "Claude Code", "codex": "Codex"}


def _one_line(command: str) -> str:
    """A command on one line: its first line, and `…` when it goes on (a heredoc, a script)."""
    first, _, rest = command.strip().partition("\n")
    return first + (" …" if rest.strip() else "")


def _quote(text: str, indent: str = "    ") -> str:
    return "\n".join(indent + line for line in text.splitlines() or [""])


def _heading(doc: dict[str, Any]) -> list[str]:
    s = doc["session"]
    out = [f"Session {s['session_id']} ({s['harness']}), {s.get('started') or '?'} → {s.get('ended') or '?'}, "
           f"{plural(s['events'], 'event')} in {s['tapes']} tape{'s' if s['tapes'] != 1 else ''}"
           + (f", {s['compactions']} compaction{'s' if s['compactions'] != 1 else ''}" if s.get("compactions") else "")
           + (f", branch {s['branch']}" if s.get("branch") else "")]
    if s.get("task") and "sessions" not in s["task"]:  # one session of a task
        t = s["task"]
        out.append(f"Part of task {t['id']} ({t['status']}): {t['title']}"
                   + (f" — kept as its checkpoint {t['checkpoint']}" if t.get("checkpoint") else "")
                   + f"; the whole task: engram resume --task {t['id']}")
    elif s.get("task"):
        t = s["task"]
        out.insert(0, f"Task {t['id']} ({t['status']}): {t['title']} — {t['sessions']} session"
                      f"{'s' if t['sessions'] != 1 else ''}" + (f", checkpoint {t['checkpoint']}" if t.get("checkpoint") else ""))
        if t.get("goal"):
            out.insert(1, f"Goal: {t['goal']}")
    if s.get("chain"):
        out.append(("Sessions: " if (s.get("task") or {}).get("sessions") else "Continues: ") + " → ".join(f"{c['session_id'][:8]} ({c['harness']}"
                                               + (f", via {c['via']}" if c.get("via") else "") + ")"
                                               for c in s["chain"]))
    if s.get("continued_by"):
        out.append("Continued later by: " + ", ".join(x[:8] for x in s["continued_by"]))
    return out


def _plan(plan: dict[str, Any] | None) -> list[str]:
    if not plan:
        return []
    out = [f"## Plan ({plan.get('tool') or 'accepted plan'}, {plan.get('done', 0)} done, {len(plan['open'])} open shown)"]
    if plan.get("explanation"):
        out.append(_quote(plan["explanation"]))
    mark = {"in_progress": "[~]", "pending": "[ ]"}
    out += [f"- {mark.get(i['status'], '[?]')} {i['text']}  ({i['at']})" for i in plan["open"]]
    if plan.get("accepted"):
        out += [f"Accepted plan ({plan['accepted']['at']}):", _quote(plan["accepted"]["text"])]
    return out


_NOTE_TITLES: Final = {"goal": "Goal", "done": "Done", "in_progress": "In progress", "blocked": "Blocked",
                       "next": "Next steps", "must_not_redo": "Must not redo", "must_preserve": "Must preserve"}


def _handoff(h: dict[str, Any] | None) -> list[str]:
    if not h:
        return []
    out: list[str] = []
    if h.get("disagreements"):
        out += ["", "## The hand-off note disagrees with the transcript"]
        out += [f"- note: {d['note']}\n  transcript: {d['transcript']} ({d['at']})" for d in h["disagreements"]]
    if h.get("note"):
        by = h.get("by") or {}
        who = " ".join(str(x) for x in (by.get("type"), by.get("harness"), (by.get("session") or "")[:8]) if x)
        out += ["", f"## Hand-off note ({h['id']}, {h.get('created')}, by {who or '?'})"]
        for key, title in _NOTE_TITLES.items():
            value = h["note"].get(key)
            if isinstance(value, str):
                out.append(f"{title}: {value}")
            elif value:
                out += [f"{title}:", *(f"- {v}" for v in value)]
    return out


def _sections(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    reqs = doc["requests"]
    if reqs:
        out += ["", "## Requests (latest first)"]
        for r in reqs:
            out += [f"- {r['at']}  {r.get('ts') or ''}", _quote(r["text"])]
    if doc.get("last_message"):
        m = doc["last_message"]
        out += ["", f"## The agent's last message ({m['at']})", _quote(m["text"])]
    out += _handoff(doc.get("handoff"))
    plan = _plan(doc.get("plan"))
    if plan:
        out += ["", *plan]
    if doc["failing"]:
        out += ["", "## Checks still failing (no later run passed)"]
        for r in doc["failing"]:
            out.append(f"- {r['kind']}: `{_one_line(r['command'])}` exit {r.get('exit_code')} ({r['runs']} runs; last {r['at']}"
                       + (f", failing since {r['failing_since']}" if r.get("failing_since") not in (None, r['at']) else "")
                       + ")")
            if r.get("output"):
                out.append(_quote(r["output"], "      "))
    if doc["must_not_redo"]:
        out += ["", "## Must not redo (side effects already run)"]
        out += [f"- {e['category']}: `{_one_line(e['command'])}` — {e['outcome']} ({e['at']})" for e in doc["must_not_redo"]]
    if doc["working_set"]:
        out += ["", "## Working set (latest first; state of the file now)"]
        out += [_touched(w) if "file" in w else _group(w) for w in doc["working_set"]]
    if doc.get("likely_next"):
        out += ["", "## Not touched yet: named, or related by the repository (where the next edits often go)"]
        out += [f"- {m['file']}  [{m['state']}]" + (" (" + "; ".join(
                    ([f"in: {', '.join(m['named_in'])}; latest {m['at']}"] if m.get("named_in") else [])
                    + m.get("why", [])) + ")" if m.get("named_in") or m.get("why") else "")
                for m in doc["likely_next"] if "file" in m]
        out += [_group(g) for g in doc["likely_next"] if "file" not in g]
    if doc["errors"]:
        out += ["", "## Tool errors no later call fixed"]
        for e in doc["errors"]:
            out.append(f"- {e['tool']} {e['target']} ({e['at']})")
            if e.get("output"):
                out.append(_quote(e["output"], "      "))
    if doc["commands"]:
        out += ["", "## Other commands (latest first, last outcome)"]
        out += [f"- `{_one_line(c['command'])}` {c['last']}" + (f" (exit {c['exit_code']})" if c.get("exit_code") else "")
                + (f" ×{c['runs']}" if c["runs"] > 1 else "") + f" ({c['at']})" for c in doc["commands"]]
    return out


def _touched(w: dict[str, Any]) -> str:
    """A file of the working set given in full: its ranges, state, edits and reads, pointer."""
    lines = ", ".join(f"{a}-{b}" for a, b in w["lines"][:3])
    what = ", ".join(x for x in (plural(w["edits"], "edit") if w["edits"] else "",
                                 plural(w["reads"], "read") if w["reads"] else "") if x)
    by = f" by {', '.join(w['changed_by'])}" if w.get("changed_by") else ""
    return f"- {w['file']}" + (f":{lines}" if lines else "") + f"  [{w['state']}{by}] {what} ({w['at']})"


def _group(g: dict[str, Any]) -> str:
    """Files listed short (past the first few, under a budget), a group on a line: the tape of their
    pointers and their state once, then each file with its pointer's offset (`@12`: `TAPE@12`),
    a folder's files after it (`src/a/ {x.go @12, y.go @40}`); files the repository alone relates
    have no pointer."""
    by = f" by {', '.join(g['changed_by'])}" if g.get("changed_by") else ""
    if isinstance(g["files"], list):
        return f"- related by the repository [{g['state']}]: " + ", ".join(g["files"])
    names = [f"{k} {{{', '.join(f'{n} @{o}' for n, o in v.items())}}}" if isinstance(v, dict) else f"{k} @{v}"
             for k, v in g["files"].items()]
    return f"- tape {g['tape']} [{g['state']}{by}]: " + ", ".join(names)


# What a left-out count counts, singular and plural ("1 tool error", "2 tool errors").
_LEFT: Final = {"last_message": ("last message", "last messages"), "plan": ("plan item", "plan items"),
                "failing": ("failing check", "failing checks"), "must_not_redo": ("side effect", "side effects"),
                "working_set": ("file", "files"), "likely_next": ("file named or related", "files named or related"),
                "errors": ("tool error", "tool errors"), "accepted_plan": ("accepted plan", "accepted plans"),
                "commands": ("command", "commands"), "requests": ("request", "requests")}


def _footer(doc: dict[str, Any]) -> list[str]:
    b = doc.get("budget")
    out = [""]
    if b:
        out.append(f"Budget: {b['used']} of {b['tokens']} tokens ({b['counted']}).")
    if doc.get("left_out"):
        left = ", ".join(_left(k, n) for k, n in doc["left_out"].items())
        out.append(f"Left out: {left}. More: {doc['more']}")
    if any("file" not in w for w in doc["working_set"] + (doc.get("likely_next") or [])):
        out.append("Past the first three of a list, files by tape and state (`tape T: x.py @12`: `engram view T@12`); "
                   "`--budget 0`: each in full.")
    out.append("Any item: `engram view TAPE@OFFSET` shows the transcript there.")
    return out


def render(doc: dict[str, Any]) -> str:
    """The package for a person at a terminal."""
    return "\n".join([*_heading(doc), *_sections(doc), *_footer(doc)]) + "\n"


def first_prompt(doc: dict[str, Any], harness: str) -> str:
    """The package as the first prompt of a new session in `harness` (claude or codex): what the
    new agent is asked to do, then the facts, neutral as to which harness recorded them."""
    s = doc["session"]
    intro = [
        (f"You are continuing work that session {s['session_id']} ({s['harness']}) left unfinished; you are in "
         f"{_FOR.get(harness, harness)}. Below is what its transcript records (derived by `engram resume`, no "
         "summary by a model): the person's requests, the agent's last message, its plan, the checks still failing, "
         "side effects already done (do NOT run them again), and the files it worked on with their state now."),
        ("Check the working set before editing: a file marked `changed since` was edited after that session. "
         "Run `engram view TAPE@OFFSET` to read any item's context in the transcript."),
        "",
    ]
    return "\n".join([*intro, *_heading(doc), *_sections(doc), *_footer(doc)]) + "\n"


def _left(key: str, n: int) -> str:
    one, many = _LEFT.get(key, (key.removesuffix("s"), key))
    return plural(n, one, many)

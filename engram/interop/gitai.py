"""git-ai authorship notes (`refs/notes/ai`, schema `authorship/3.0.0`, the Git AI Standard
v3.0.0 of git-ai-project/git-ai, specs/git_ai_standard_v3.0.0.md) as evidence.

A note on commit C is an attestation section, a line holding exactly `---`, and a JSON metadata
section. The attestation section lists files (a path at the start of a line, double-quoted when
it holds spaces) and under each, indented by two spaces, `KEY RANGES`: KEY is `s_<hex>::t_<hex>`
(a session and one of its checkpoints: metadata `sessions`), `h_<hex>` (a known human:
`humans`) or bare hex (a legacy prompt: `prompts`); RANGES is `1-4,9,12-20`, lines of the file
as C has it. A session or prompt record names the agent: `agent_id` {tool, id, model}.

Each AI session of a note becomes a tape (harness `git-ai`, session id the agent's own
conversation id `agent_id.id`, so a transcript of that conversation captured from elsewhere
carries the same id): a `code.edit` per range with the lines as C has them, read from git. Lines
a known human wrote are not a session's and are left out; so are ranges past the file's end."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from engram.errors import BadInput
from engram.interop import git, tapes
from engram.words import plural

log = logging.getLogger(__name__)

NOTES_REF: Final = "refs/notes/ai"
SCHEMA: Final = "authorship/3.0.0"
HARNESS: Final = "git-ai"


@dataclass
class Attestation:
    """Lines of one file a key wrote: (first, last) ranges, 1-based inclusive."""

    file: str
    key: str
    ranges: list[tuple[int, int]]


@dataclass
class Note:
    commit: str
    attestations: list[Attestation]
    metadata: dict[str, Any]

    def agent(self, key: str) -> dict[str, Any] | None:
        """The session or prompt record an attestation key names (None for a human, or a key the
        metadata lacks)."""
        if key.startswith("h_"):
            return None
        if key.startswith("s_"):
            rec = (self.metadata.get("sessions") or {}).get(key.split("::", 1)[0])
        else:
            rec = (self.metadata.get("prompts") or {}).get(key)
        return rec if isinstance(rec, dict) else None


def parse_note(text: str, commit: str) -> Note:
    """A note's sections; a BadInput saying what is wrong with a note that is not authorship/3.0.0."""
    at = f"git-ai note on {commit[:12]}"
    lines = text.split("\n")
    try:
        cut = lines.index("---")
    except ValueError:
        raise BadInput(f"{at}: no `---` line between the attestations and the metadata (not a git-ai "
                       "authorship log)") from None
    try:
        metadata = orjson.loads("\n".join(lines[cut + 1:]))
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{at}: the metadata after `---` is not JSON ({exc})") from None
    if not isinstance(metadata, dict):
        raise BadInput(f"{at}: the metadata after `---` is not a JSON object")
    version = metadata.get("schema_version")
    if version != SCHEMA:
        raise BadInput(f"{at}: schema_version {version!r} is not {SCHEMA}, the version this engram reads")
    return Note(commit, _attestations(lines[:cut], at), metadata)


def _attestations(lines: list[str], at: str) -> list[Attestation]:
    out: list[Attestation] = []
    file: str | None = None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if not line.startswith(" "):
            file = line[1:-1] if len(line) > 1 and line.startswith('"') and line.endswith('"') else line
            continue
        if file is None or not line.startswith("  "):
            raise BadInput(f"{at}, line {n}: an attestation {line.strip()!r} outside a file")
        key, _, spec = line.strip().partition(" ")
        out.append(Attestation(file, key, _ranges(spec, f"{at}, line {n}")))
    return out


def _ranges(spec: str, at: str) -> list[tuple[int, int]]:
    out = []
    for part in spec.split(","):
        a, dash, b = part.partition("-")
        if not a.isdigit() or (dash and not b.isdigit()):
            raise BadInput(f"{at}: {spec!r} is not a line range list like 1-4,9,12-20")
        first, last = int(a), int(b) if dash else int(a)
        if first < 1 or last < first:
            raise BadInput(f"{at}: the range {part} is not 1-based and ascending")
        out.append((first, last))
    return out


@dataclass
class NotesReport:
    notes: int = 0
    sessions: int = 0
    ranges: int = 0
    tapes_new: int = 0
    tapes_known: int = 0
    problems: list[str] = field(default_factory=list)
    unchanged: bool = False  # the notes ref has not moved since the last ingest read it

    def as_dict(self) -> dict[str, Any]:
        return {"unchanged": self.unchanged, "notes": self.notes, "sessions": self.sessions, "ranges": self.ranges, "tapes_new": self.tapes_new,
                "tapes_known": self.tapes_known, "problems": self.problems}

    def line(self) -> str:
        if self.unchanged:
            return f"git-ai notes ({NOTES_REF}): unchanged since the last ingest"
        return (f"git-ai notes ({NOTES_REF}): {plural(self.notes, 'note')}, {plural(self.sessions, 'session')}' lines "
                f"({plural(self.ranges, 'range')}), {plural(self.tapes_new, 'new tape')}")


def note_tapes(repo: Path, notes: list[tuple[str, str]], report: NotesReport) -> list[list[dict[str, Any]]]:
    """The tapes of `notes` ((note blob, commit) pairs); a note that is no authorship log is
    reported in `report.problems` and skipped."""
    texts = git.read_blobs(repo, [blob for blob, _ in notes])
    out = []
    for blob, commit in notes:
        data = texts.get(blob)
        if data is None:
            report.problems.append(f"git-ai note {blob[:12]} on {commit[:12]}: the note object is missing")
            continue
        try:
            note = parse_note(data.decode("utf-8", "replace"), commit)
        except BadInput as exc:
            report.problems.append(str(exc))
            continue
        report.notes += 1
        out += _tapes_of(repo, note, blob, report)
    return out


def _tapes_of(repo: Path, note: Note, blob: str, report: NotesReport) -> list[list[dict[str, Any]]]:
    by_session: dict[str, list[Attestation]] = {}
    for a in note.attestations:
        if note.agent(a.key) is not None:
            by_session.setdefault(a.key.split("::", 1)[0], []).append(a)
    if not by_session:
        return []
    files = {a.file for atts in by_session.values() for a in atts}
    texts = git.read_blobs(repo, [f"{note.commit}:{f}" for f in files])
    when = git.commit_time(repo, note.commit)
    out = []
    for session_key, atts in sorted(by_session.items()):
        agent = note.agent(atts[0].key) or {}
        agent_id = agent.get("agent_id") if isinstance(agent.get("agent_id"), dict) else {}
        sid = str(agent_id.get("id") or session_key)
        model = agent_id.get("model") if isinstance(agent_id.get("model"), str) else None
        events = [tapes.meta(HARNESS, sid, model=model, started=when, agent=agent_id.get("tool"),
                             git_head=note.commit,
                             origin={"git_ai": {"ref": NOTES_REF, "note": blob, "commit": note.commit,
                                                "key": session_key, "human_author": agent.get("human_author")}})]
        for a in atts:
            data = texts.get(f"{note.commit}:{a.file}")
            text = data.decode("utf-8", "replace") if data is not None else None
            for first, last in a.ranges:
                attested = {"by": HARNESS, "commit": note.commit, "key": a.key, "lines": [first, last]}
                body = tapes.line_slice(text, first, last) if text is not None else None
                if body is None:
                    why = (f"{a.file} is not in commit {note.commit[:12]} here" if text is None else
                           f"{a.file} has fewer than {last} lines in commit {note.commit[:12]}")
                    events.append(tapes.unread_lines(a.file, first, last, when, f"git-ai note on {note.commit[:12]}: "
                                                     f"lines {first}-{last} of {a.file} by {sid}; {why}", attested))
                    continue
                report.ranges += 1
                events.append(tapes.written_lines(a.file, first, last, body, when,
                                                  {**attested, "text_from": f"commit {note.commit[:12]}"}))
        report.sessions += 1
        out.append(events)
    return out

"""What one ingest did, summed over its sessions: the line `engram ingest` prints."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from engram.adapters.base import OUTSIDE
from engram.words import agree, plural


@dataclass
class IngestStats:
    sessions: int = 0
    tapes: int = 0
    events: int = 0
    edits: int = 0
    reads: int = 0
    raw_bytes: int = 0
    tape_bytes: int = 0
    unchanged: int = 0
    as_text: int = 0  # sessions with no record a harness adapter reads (adapters/raw.py)
    unplaced: int = 0  # code.edits written without line ranges (a patch no known state of its file places)
    by_context: int = 0  # code.edits placed by their context in a nearby state of the file (`placed`)
    skipped: Counter[str] = field(default_factory=Counter)
    failed: int = 0  # of `skipped`, sessions lost to a fault of the run (a worker killed, a tape not written)
    ignored: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)  # edits no code.edit holds, by reason (Capture.dropped)
    redactions: Counter[str] = field(default_factory=Counter)
    copied: Counter[str] = field(default_factory=Counter)  # session -> its records other sessions' files repeat
    copying: int = 0  # sessions whose file starts with another session's records (resumed, plan hand-over)
    inferred_cwd: Counter[str] = field(default_factory=Counter)  # cwd ("" for none) of rollouts that record none
    copied_uncaptured: list[str] = field(default_factory=list)  # of `copied`, those the store has no tape of
    written: list[str] = field(default_factory=list)
    out_of_order: int = 0  # new tapes older than tapes indexed before them (see Indexer.out_of_order)
    older_text: str | None = None  # the note when the index reads events an older way (build.older_text_note)
    unkept: Counter[str] = field(default_factory=Counter)  # "harness: what its record never holds" -> sessions

    def merge(self, other: "IngestStats") -> None:
        for name in ("sessions", "tapes", "events", "edits", "reads", "raw_bytes", "tape_bytes", "unchanged", "as_text",
                     "unplaced", "by_context", "copying", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped.update(other.skipped)
        self.ignored.update(other.ignored)
        self.dropped.update(other.dropped)
        self.redactions.update(other.redactions)
        self.copied.update(other.copied)
        self.inferred_cwd.update(other.inferred_cwd)
        self.unkept.update(other.unkept)
        self.written.extend(other.written)

    def as_dict(self) -> dict[str, Any]:
        """The counts `summary` reports, for a program (`engram ingest --json`), with the summary itself."""
        doc: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            doc[f.name] = dict(value) if isinstance(value, Counter) else value
        return {**doc, "summary": self.summary()}

    def summary(self) -> str:
        skipped = sum(self.skipped.values())
        parts = [
            plural(self.sessions, "session"),
            plural(self.tapes, "new tape"),
            plural(self.events, "event"),
            plural(self.edits, "edit"),
            plural(self.reads, "read"),
            f"{plural(sum(self.redactions.values()), 'secret')} redacted",
            f"{skipped} skipped",
        ]
        line = "ingest: " + ", ".join(parts)
        if self.unchanged:
            line += f" ({plural(self.unchanged, 'session')} unchanged)"
        if self.as_text:
            files = f"{plural(self.as_text, 'file')} {agree(self.as_text, 'holds', 'hold')}"
            line += (f"\n  note: {files} no Claude Code or Codex records: read as plain text (JSON as the strings "
                     "it holds), so their sessions have no edits, reads or times and are named raw-…")
        if self.copying:
            n = sum(self.copied.values())
            line += (f"\n  note: {plural(self.copying, 'session file')} {agree(self.copying, 'repeats', 'repeat')} "
                     f"{plural(n, 'record')} of {plural(len(self.copied), 'other session')} (a resumed conversation, "
                     "a plan handed over): they count once, for the sessions that made them")
            if self.copied_uncaptured:
                k = len(self.copied_uncaptured)
                line += (f"; {k} of those {agree(k, 'is')} not captured here (their own files were not "
                         f"ingested; Claude Code deletes old ones): {', '.join(self.copied_uncaptured[:3])}"
                         f"{', …' if k > 3 else ''}")
        line += self._inferred_note()
        for what, n in sorted(self.unkept.items()):
            harness, _, lacks = what.partition(": ")
            line += f"\n  note: {plural(n, harness + ' session')}: not kept by the harness: {lacks}"
        if self.out_of_order:
            from engram.index.build import out_of_order_note  # noqa: PLC0415

            line += "\n  " + out_of_order_note(self.out_of_order)
        if self.older_text:
            line += "\n  " + self.older_text
        if skipped:
            line += "\n  skipped: " + "; ".join(f"{n} × {reason}" for reason, n in self.skipped.most_common())
        return line + self.edits_note()

    def edits_note(self) -> str:
        """What became of the edits the sessions made, where not every one is a code.edit with
        line ranges: edits placed only approximately, without ranges, or not recorded at all,
        each counted by reason. Never left out: a summary saying nothing of them read as if
        every edit had been indexed (dozens of redacted patches in one real set)."""
        notes: list[str] = []
        if self.by_context:
            notes.append(f"{self.by_context} placed by their context in a nearby state of their file (the file "
                         "they changed is unknown: a commit not in this repository's history, or a command rewrote it)")
        if self.unplaced:
            notes.append(f"{self.unplaced} without line ranges (no known state of their file holds their context): "
                         "matched by their text only")
        out = "".join(f"\n  edits: {n}" for n in notes)
        if self.dropped:
            reasons = "; ".join(f"{n} × {reason}" for reason, n in self.dropped.most_common())
            out += "\n  edits not recorded: " + reasons
            if any(reason.startswith(OUTSIDE) for reason in self.dropped):
                out += ("\n  note: edits outside the repository are left as tool calls; if some are the repository's "
                        "under another path (recorded on another machine), run the ingest again with "
                        "`--map FROM=TO` (FROM: that path, TO: this repository's)")
        return out

    def _inferred_note(self) -> str:
        """What the summary says of rollouts that record no working directory (exported ones)."""
        found = {cwd: n for cwd, n in self.inferred_cwd.items() if cwd}
        out = ""
        if found:
            n = sum(found.values())
            out += (f"\n  note: {plural(n, 'Codex rollout')} {agree(n, 'records', 'record')} no working directory: "
                    "inferred from the paths edited, " + ", ".join(f"{cwd} ({k})" for cwd, k in sorted(found.items())))
        if self.inferred_cwd[""]:
            n = self.inferred_cwd[""]
            out += (f"\n  note: {plural(n, 'Codex rollout')} {agree(n, 'records', 'record')} no working directory and "
                    "no path that names one: their relative paths are taken from the repository root")
        return out

"""What a memory is: its fields, kinds, statuses, sources and trust, and the values they may take.

A memory is a note about the code (a fact, a decision, "there is no X"), written by a person, an
agent or an import, optionally anchored to spans of code and tied to the transcript moment it
came from. Everything here is plain data: the event log (`events`) records changes to it, the
projection (`projection`) holds its current state, and the operations (`service`) check input
against these definitions before anything is written.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from engram.errors import BadInput
from engram.memory.vocabulary import KINDS, RELATIONS, SOURCE_TYPES, STATUSES

VISIBLE = frozenset({"active"})
#: Trust follows the source: a person's note outweighs an agent's, an agent's an import's.
TRUST = {"person": 3, "agent": 2, "import": 1}
DEFAULT_IMPORTANCE = 0.5
ID_CHARS = 12  # hex: 48 random bits, unique among millions of memories of many clones


@dataclass(frozen=True)
class Source:
    """Who wrote a memory or made a change: a person, an agent (its harness and session when
    known) or an import (what it was imported from)."""

    type: str = "person"
    harness: str | None = None
    session: str | None = None
    origin: str | None = None  # for an import: the file or format it came from

    def __post_init__(self) -> None:
        if self.type not in SOURCE_TYPES:
            raise BadInput(f"unknown source {self.type!r}: one of {', '.join(SOURCE_TYPES)}")

    @property
    def trust(self) -> int:
        return TRUST[self.type]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for key in ("harness", "session", "origin"):
            if (value := getattr(self, key)) is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, data: Any) -> Source:
        if isinstance(data, str):
            return cls(type=data)
        if not isinstance(data, Mapping):
            raise BadInput(f"source must be an object like {{\"type\": \"person\"}}, not {data!r}")
        return cls(type=str(data.get("type", "person")), harness=_opt_str(data.get("harness")),
                   session=_opt_str(data.get("session")), origin=_opt_str(data.get("origin")))


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def calling_agent(env: Mapping[str, str] | None = None) -> Source:
    """The source of a memory written from this process: an agent when a harness started it (its
    environment says which, and the session when the harness exports it), else a person.

    Claude Code sets CLAUDECODE=1 in the commands its tools run; Codex sets CODEX_SANDBOX or
    CODEX_SANDBOX_NETWORK_DISABLED. Neither exports its session id today: CLAUDE_SESSION_ID /
    CLAUDE_CODE_SESSION_ID / CODEX_SESSION_ID / CODEX_THREAD_ID are read when present, and
    ENGRAM_SESSION_ID (a wrapper's or a hook's) before them."""
    env = os.environ if env is None else env
    session = next((env[k] for k in ("ENGRAM_SESSION_ID", "CLAUDE_SESSION_ID", "CLAUDE_CODE_SESSION_ID",
                                     "CODEX_SESSION_ID", "CODEX_THREAD_ID") if env.get(k)), None)
    harness = env.get("ENGRAM_HARNESS") or None
    if harness is None:
        if env.get("CLAUDECODE") or env.get("CLAUDE_CODE_ENTRYPOINT"):
            harness = "claude-code"
        elif any(k.startswith("CODEX_SANDBOX") for k in env) or env.get("CODEX_THREAD_ID"):
            harness = "codex"
    if harness is None and session is None:
        return Source("person")
    return Source("agent", harness=harness, session=session)


@dataclass(frozen=True)
class Evidence:
    """A tape fragment a memory came from: the tape and the event's offset in it."""

    tape: str
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {"tape": self.tape, "offset": self.offset}

    @classmethod
    def from_json(cls, data: Any) -> Evidence:
        if isinstance(data, str):
            return parse_evidence(data)
        try:
            return cls(str(data["tape"]), int(data["offset"]))
        except (KeyError, TypeError, ValueError):
            raise BadInput(f"evidence must be {{\"tape\": ID, \"offset\": N}} or \"TAPE@OFFSET\", not {data!r}") from None


def parse_evidence(text: str) -> Evidence:
    """`TAPE@OFFSET` (a tape id, a unique prefix of one, or a session id; the event's offset)."""
    tape, sep, offset = text.rpartition("@")
    if not sep or not tape:
        raise BadInput(f"{text!r}: evidence is TAPE@OFFSET, e.g. 3f2a9c@120 (`engram explain` prints both)")
    try:
        value = int(offset)
    except ValueError:
        raise BadInput(f"{text!r}: the offset after @ must be a number") from None
    if value < 0:
        raise BadInput(f"{text!r}: the offset must be 0 or more")
    return Evidence(tape, value)


@dataclass(frozen=True)
class Transition:
    """One status change: when, from what to what, by whom and why."""

    ts: str
    status_from: str | None
    status: str
    by: dict[str, Any]
    why: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "from": self.status_from, "to": self.status, "by": self.by, "why": self.why}


@dataclass
class Memory:
    """A memory's current state, as the projection holds it."""

    id: str
    content: str
    kind: str
    tags: list[str]
    importance: float
    pinned: bool
    source: dict[str, Any]
    status: str
    created: str
    updated: str
    last_recalled: str | None = None
    recall_count: int = 0
    anchors: list[dict[str, Any]] = field(default_factory=list)  # Anchor.to_json() each
    evidence: list[dict[str, Any]] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    context: str = ""  # what it was said in reply to or written during: searched, not shown as the memory

    @property
    def summary(self) -> str:
        """The first line of the content: what a list shows."""
        return self.content.strip().splitlines()[0] if self.content.strip() else ""

    @property
    def trust(self) -> int:
        return TRUST.get(str(self.source.get("type")), 1)


# ---------------------------------------------------------------- checking input


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise BadInput(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    return kind


def check_status(status: str) -> str:
    if status not in STATUSES:
        raise BadInput(f"unknown status {status!r}: one of {', '.join(STATUSES)}")
    return status


def check_relation(relation: str) -> str:
    if relation not in RELATIONS:
        raise BadInput(f"unknown relation {relation!r}: one of {', '.join(RELATIONS)}")
    return relation


def check_importance(value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"importance {value!r}: a number from 0 to 1") from None
    if not 0.0 <= x <= 1.0:
        raise BadInput(f"importance {value!r}: must be between 0 and 1")
    return x


def check_content(content: Any) -> str:
    if content is not None and not isinstance(content, str):  # (`{"content": 5}` was "the text is empty")
        raise BadInput(f"a memory's content is text, not {type(content).__name__} {str(content)[:40]!r}")
    if not content or not content.strip():
        raise BadInput("a memory needs content: the text is empty")
    return content.strip("\n")


def check_context(context: Any) -> str:
    """A memory's context (see `Memory.context`): any text, "" for none."""
    if context is None:
        return ""
    if not isinstance(context, str):
        raise BadInput(f"context must be text, not {context!r}")
    return context.strip()


def check_tags(tags: Any) -> list[str]:
    """Tags as given, without blanks or repeats, in first-seen order."""
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, (list, tuple)):
        raise BadInput(f"tags must be a list of words, not {tags!r}")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip():
            raise BadInput(f"tag {tag!r}: a tag is a non-empty word")
        if tag.strip() not in out:
            out.append(tag.strip())
    return out


# ---------------------------------------------------------------- ids and times


def new_id() -> str:
    """A memory's id: random, so two clones never mint the same one (see ID_CHARS)."""
    import secrets  # noqa: PLC0415 - (hmac, random: only when writing)

    return secrets.token_hex(ID_CHARS // 2)


def now_iso() -> str:
    """UTC with microseconds and a Z: every stored time has this form, so strings sort by time."""
    return iso(dt.datetime.now(dt.UTC))


def iso(moment: dt.datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: Any) -> str:
    """An ISO 8601 date or time (any offset; a date alone is its midnight UTC) in the stored form."""
    if not isinstance(text, str) or not text.strip():
        raise BadInput(f"time {text!r}: expected ISO 8601, e.g. 2026-11-28 or 2026-11-28T10:00:00Z")
    s = text.strip()
    try:
        moment = dt.datetime.fromisoformat(s[:-1] + "Z" if s.endswith("z") else s)
    except ValueError:
        raise BadInput(f"time {text!r}: expected ISO 8601, e.g. 2026-11-28 or 2026-11-28T10:00:00Z") from None
    return iso(moment)


def seconds_between(earlier: str, later: str) -> float:
    return (moment_of(later) - moment_of(earlier)).total_seconds()


def moment_of(stored: str) -> dt.datetime:
    """A stored time (`iso`'s form) as an aware datetime."""
    return dt.datetime.fromisoformat(stored)

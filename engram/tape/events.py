"""The event vocabulary of a tape and its canonical serialisation.

A tape is one JSON object per line. The first is `meta`; the rest are raw facts from the
transcript, in source order. Canonical form (sorted keys, compact separators, UTF-8) makes the
tape id — a hash of those bytes — independent of how an adapter built its dicts.

Kinds and their fields (beyond `kind` and `ts`, the source timestamp, and `id`, the source
record id when the harness has one):

- `meta`       harness, harness_version, model, session_id, cwd, git_head, git_branch, started,
               sources [{name, path, start, end, sha256, prefix_sha256}], prev (previous segment);
               `subagent` (its kind) and `parent_session` for a session another agent started;
               `unkept`: what the harness's record never holds (message times, file texts), in words
- `msg.in`     text (the user's words; `compact_summary`, `is_meta` flags copied from the source;
               `injected` for harness-injected context such as Codex's environment_context or AGENTS.md;
               `sender`, `recipient`, `encrypted` for a message between Codex agents of one team)
- `msg.out`    text, block ("text" | "thinking")
- `tool.call`  call_id, name, input
- `tool.result` call_id, name, is_error, exit_code, stdout, stderr
- `code.read`  file (repository-relative), range [first, last] (1-based inclusive), text, call_id
- `code.edit`  file, op (create | update | delete | move), before_range, after_range,
               before_text, after_text, before_sha, after_sha, file_before_sha, file_after_sha,
               hunks (when the edit changed separate regions), context and context_text (the
               lines of the file after the edit its tool held, changed ones included: [first,
               last] ranges and their text), call_id; a move is filed under its destination with
               `from_file` (older tapes: `file` the source, `to_file` the destination) and
               followed by a delete of the source with `moved_to`; `placed` (earlier in the
               session | git history | working tree) when a patch was placed by its context in a
               state of the file other than the one it was applied to; `commit` the commit the
               harness made of the edit (aider), when this repository has it
- `compact`    trigger, pre_tokens, message (a harness compaction boundary; Codex's summary in message)
- `span.link`  file, range, target {file, range} or {tape, offset}, note

A range [s, s-1] is empty: an insertion before line s (or a deleted region that ended before s).
Events from a subagent carry `agent` (its id); they belong to the parent session.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final, Iterable

import orjson

TAPE_FORMAT: Final = 1

META: Final = "meta"
MSG_IN: Final = "msg.in"
MSG_OUT: Final = "msg.out"
TOOL_CALL: Final = "tool.call"
TOOL_RESULT: Final = "tool.result"
CODE_READ: Final = "code.read"
CODE_EDIT: Final = "code.edit"
COMPACT: Final = "compact"
SPAN_LINK: Final = "span.link"

KINDS: Final = frozenset({META, MSG_IN, MSG_OUT, TOOL_CALL, TOOL_RESULT, CODE_READ, CODE_EDIT, COMPACT, SPAN_LINK})
CODE_KINDS: Final = frozenset({CODE_READ, CODE_EDIT})

Event = dict[str, Any]


def dumps(event: Event) -> bytes:
    """Canonical bytes of one event, without the newline."""
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


_DUMPS: Final = partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)


def dumps_each(events: Iterable[Event]) -> list[bytes]:
    """`dumps` of each event (a tape's lines), called from C: no Python call per event."""
    return list(map(_DUMPS, events))


def loads(line: bytes | str) -> Event:
    return orjson.loads(line)


def sha256_text(text: str) -> str:
    import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def git_blob_sha(text: str) -> str:
    """The git blob id of a file with this content: matches `git hash-object`."""
    import hashlib  # noqa: PLC0415 - OpenSSL's start-up (~3.5 ms) only where hashes are taken

    data = text.encode("utf-8", "surrogatepass")
    h = hashlib.sha1(b"blob %d\0" % len(data))
    h.update(data)  # (not the header and the file joined: a copy of every edited file, twice an edit)
    return h.hexdigest()

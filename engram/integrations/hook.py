"""`engram hook`: called by Claude Code hooks and Codex's hooks and `notify` around agent activity.

It must never block or break the agent, and it exits 0 whatever happens. Two kinds of payload:

* `PreToolUse` (an edit) and `SessionStart`: the notes the model should see are printed as the
  hook's additional context (`engram.integrations.context`), or nothing, within a deadline;
* the others (`PostToolUse`, `PreCompact`, `SessionEnd`, `Stop`, Gemini CLI's `AfterAgent`, Codex's
  notify, Engram's OpenCode plugin): if the payload names a session of a repository with a store, a detached `engram ingest` of that transcript starts and
  the hook returns at once. Failures are logged to `.engram/run/hook.log` (or swallowed).

The process's imports are kept to `os`, `sys` and `json` until a payload needs more: the agent
waits for a `PreToolUse` hook on every edit (bench/hooks.py measures it).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # (not typing's: see the module docstring)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from engram.integrations.context import Ask

MAX_PAYLOAD = 8 << 20  # a Write of a large file carries the whole file
#: A context hook that has not answered by then prints nothing (ENGRAM_HOOK_DEADLINE_MS overrides).
DEADLINE_S = 1.0


def parse_payload(raw: str) -> dict[str, Any] | None:
    """The payload's object, or None. A lone surrogate (`"\\ud800"`, or a non-UTF-8 byte of an
    argument) becomes U+FFFD: a path holding one names no file, and was an encoding error the
    agent showed as the hook's message."""
    import json  # noqa: PLC0415

    from engram.words import whole_text  # noqa: PLC0415 - (a leaf module: no import of its own)

    try:
        data = json.loads(raw)
    except (ValueError, TypeError, RecursionError):  # (RecursionError: arrays nested thousands deep)
        return None
    return whole_text(data) if isinstance(data, dict) else None  # type: ignore[return-value]


def ingest_command(payload: dict[str, Any]) -> tuple[Path, list[str]] | None:
    """(repository root, arguments for `engram`) for a payload, or None when there is nothing to do."""
    from pathlib import Path  # noqa: PLC0415

    from engram.errors import StoreNotFound  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        return None
    try:
        store = Store.discover(Path(cwd))
    except StoreNotFound:
        return None
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript.endswith((".jsonl", ".json")) and os.path.isfile(transcript):
        return store.root, ["ingest", transcript]
    if payload.get("type") == "agent-turn-complete" or "thread-id" in payload:  # Codex notify
        return store.root, ["ingest"]
    if payload.get("harness") == "opencode":  # Engram's OpenCode plugin: its store holds the session
        return store.root, ["ingest"]
    return None


# A session starting with these (Claude Code's SessionStart `source`; Codex has no compact) gets
# the resume package as well as the notes' brief: it lost or never had the work's context.
RESUME_SOURCES = ("compact", "resume", "clear")


def run_hook(stdin_text: str | None, argv_payload: str | None, ask: Ask | None = None,
             resume: Callable[[str], str | None] | None = None) -> int:
    """Carry out one hook call (`ask`: how to reach a running language server, for the context
    hooks; `resume`: the resume package's hook output for a payload, `engram.cli.resume.resume_hook`);
    the exit status is always 0."""
    try:
        raw = argv_payload if argv_payload is not None else (stdin_text or "")
        payload = parse_payload(raw[:MAX_PAYLOAD])
        if payload is None:
            return 0
        from engram.integrations import context  # noqa: PLC0415

        if context.wants_context(payload):
            package = None
            if resume is not None and payload.get("hook_event_name") == "SessionStart" \
                    and payload.get("source") in RESUME_SOURCES:
                _stop_deadline()  # worth the wait (it ingests the session first); the harness's timeout bounds it
                package = resume(raw)
            out = _joined(package, context.respond(payload, ask))
            _stop_deadline()
            if out:
                sys.stdout.write(out)
                sys.stdout.flush()
            return 0
        _stop_deadline()  # capture must start whatever the time: the agent is not waiting for it
        _start_ingest(payload)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent's turn
        _stop_deadline()
        try:
            sys.stderr.write(f"engram hook: {exc}\n")
        except Exception:  # noqa: BLE001
            pass
    return 0


def _joined(*outputs: str | None) -> str | None:
    """One hook answer from several: their additionalContext texts, in order, one after another."""
    import json  # noqa: PLC0415

    texts, event = [], None
    for out in outputs:
        if not out:
            continue
        spec = json.loads(out).get("hookSpecificOutput", {})
        event = event or spec.get("hookEventName")
        texts.append(spec.get("additionalContext", ""))
    if not texts:
        return None
    if len(texts) == 1:
        return next(o for o in outputs if o)
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": "\n\n".join(texts)}})


def _start_ingest(payload: dict[str, Any]) -> None:
    found = ingest_command(payload)
    if found is None:
        return
    import subprocess  # noqa: PLC0415

    from engram.store.lock import COALESCE_ENV  # noqa: PLC0415 - (ingest_command has loaded the store modules)

    root, args = found
    logfile = root / ".engram" / "run" / "hook.log"
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with open(logfile, "ab") as out:
        subprocess.Popen([sys.executable, "-m", "engram_server.entry", *args], cwd=root,
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                         env={**os.environ, COALESCE_ENV: "1"},
                         preexec_fn=_background_priority if hasattr(os, "nice") else None)  # noqa: PLW1509 - one thread


#: Niceness of a hook-started ingest: it may embed thousands of memories for a minute, and must
#: not take the cores from the agent's next hook, which it waits for (bench/hooks.py).
INGEST_NICENESS = 10


def _background_priority() -> None:
    """(In the forked child, before exec; the hook process has one thread.)"""
    try:
        os.nice(INGEST_NICENESS)
    except OSError:
        pass


def hook_process(argv_payload: str | None, ask: Ask | None = None,
                 resume: Callable[[str], str | None] | None = None) -> int:
    """`engram hook [PAYLOAD]` as a process: the payload from the argument or stdin, and, for the
    context hooks, a deadline after which the process ends with nothing printed (a hook the agent
    waits for must not hold it up; an edit goes ahead without the notes). A capture payload
    cancels it: starting the ingest is quick, and must not be cut short."""
    previous = _start_deadline()
    try:
        stdin_text = None
        if argv_payload is None:
            try:
                stdin_text = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read(MAX_PAYLOAD)
            except (OSError, ValueError):  # no stdin, or not text
                stdin_text = None
        return run_hook(stdin_text, argv_payload, ask, resume)
    finally:
        _stop_deadline(previous)


def _deadline() -> float:
    try:
        return max(0.05, int(os.environ["ENGRAM_HOOK_DEADLINE_MS"]) / 1000)
    except (KeyError, ValueError):
        return DEADLINE_S


def _start_deadline() -> Any:
    """SIGALRM after the deadline ends the process at once, exit status 0, nothing printed (the
    answer is written in one piece after `_stop_deadline`); returns the handler it replaced. Not
    on Windows (no setitimer), nor off the main thread (a test calling `main`)."""
    import signal  # noqa: PLC0415

    if not hasattr(signal, "setitimer"):
        return None
    try:
        previous = signal.signal(signal.SIGALRM, lambda *_: os._exit(0))
    except ValueError:  # not the main thread
        return None
    signal.setitimer(signal.ITIMER_REAL, _deadline())
    return previous


def _stop_deadline(previous: Any = None) -> None:
    """Cancel the deadline (and give SIGALRM back its handler, when `previous` names it)."""
    signal = sys.modules.get("signal")
    if signal is None or not hasattr(signal, "setitimer"):
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    if previous is not None:
        signal.signal(signal.SIGALRM, previous)

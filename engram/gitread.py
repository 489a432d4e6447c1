"""Asking git about a repository where its answer is a help, never a requirement.

Adapters (a file's text at a commit), resume (files that change together), capture (the HEAD a
recording starts at) and anchors read git this way: no git, no repository, a timeout or an error
all mean "git cannot tell", and the caller goes on without it. One place, so each of them handles
a missing git, a hung one and a failing one alike. (`engram.interop.git` is the strict reader,
for the commands whose whole job is git's data: there a failure is the user's to see.)"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0


def git_output(root: Path | str, *args: str, stdin: bytes | None = None, timeout: float = TIMEOUT_S,
               ok: Collection[int] = (0,)) -> bytes | None:
    """`git -C root ARGS...`'s standard output, or None when git cannot answer (logged at debug:
    the caller's fallback is the answer the user sees)."""
    import subprocess  # noqa: PLC0415 - ~4 ms at start-up of every command; only some run git

    try:
        out = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, timeout=timeout,
                             check=False, stdin=None if stdin is not None else subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("git %s in %s: %s", args[0] if args else "", root, exc)
        return None
    if out.returncode not in ok:
        log.debug("git %s in %s: %s", args[0] if args else "", root, out.stderr.decode("utf-8", "replace").strip()[-200:])
        return None
    return out.stdout

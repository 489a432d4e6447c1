"""`engram --version`: the version line, with nothing of the command line imported.

setup and doctor run a configured engram's `--version` to check that it is there and which one
it is; the answer needs no parser, no logging and no package metadata. The number is the
package's `engram.__version__`, which a test holds equal to pyproject.toml's (the distribution's
metadata): reading it back through importlib.metadata took ~90 ms of CPU here (its imports —
email, zipfile, csv — and a search of sys.path for the distribution), the whole answer without it
~20 ms, the interpreter's start (bench/hooks.py's `engram --version` rows)."""

from __future__ import annotations

import os
import sys


def version_line() -> str:
    """The version, and which Python and files run it, so that a configured command's
    `--version` says which engram it is."""
    import engram  # noqa: PLC0415

    return f"engram {engram.__version__} (Python {sys.version.split()[0]}, {os.path.dirname(engram.__file__)})"


def answer_version(argv: list[str]) -> bool:
    """Print the version line when `argv` is exactly `--version` (what setup and doctor run);
    whether it did. The console script asks first, before the command line is imported."""
    if argv != ["--version"]:
        return False
    print(version_line())
    return True

"""`engram --version`: the version line, with nothing of the command line imported.

setup and doctor run a configured engram's `--version` to check that it is there and which one
it is; the answer needs no parser, no logging and no package metadata. The number is the
package's `engram.__version__`, which a test holds equal to pyproject.toml's (the distribution's
metadata): reading it back through importlib.metadata cost ~45 ms of a ~60 ms answer here
(email, zipfile and csv parsing the installed files), bench/hooks.py's `engram --version` row."""

from __future__ import annotations

import os
import sys


def version_line() -> str:
    """The version, and which Python and files run it, so that a configured command's
    `--version` says which engram it is."""
    import engram  # noqa: PLC0415

    return f"engram {engram.__version__} (Python {sys.version.split()[0]}, {os.path.dirname(engram.__file__)})"

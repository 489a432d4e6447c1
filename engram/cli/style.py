"""Colour on a terminal, never elsewhere: ANSI styles for the command line's own output.

Colour is on when the stream is a terminal, `NO_COLOR` is unset or empty (https://no-color.org),
`TERM` is not `dumb` and `--no-color` was not given. `--no-color` also sets `NO_COLOR` in the
environment, so whatever else renders for this process (and any engram it starts) leaves colour
off too. No dependency: six escape codes."""

from __future__ import annotations

import os
from typing import TextIO

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def disable() -> None:
    """`--no-color`: no colour from here on, in this process and the ones it starts."""
    os.environ["NO_COLOR"] = "1"


def enabled(stream: TextIO) -> bool:
    """Whether text written to `stream` may be coloured."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def paint(text: str, style: str, stream: TextIO) -> str:
    """`text` in `style` ("bold", "red", "green bold", ...) when `stream` takes colour, else as is."""
    if not enabled(stream):
        return text
    codes = ";".join(_CODES[name] for name in style.split())
    return f"\033[{codes}m{text}\033[0m"


STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "red bold"}


def status(word: str, stream: TextIO) -> str:
    """A check's status (ok, warn, fail) padded to one width and coloured by what it means."""
    return paint(f"{word:<4}", STATUS_STYLE.get(word, "bold"), stream)

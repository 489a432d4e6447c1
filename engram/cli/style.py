"""Colour on a terminal, never elsewhere: ANSI styles for the command line's own output.

Colour is on when the stream is a terminal, `NO_COLOR` is unset or empty (https://no-color.org),
`TERM` is not `dumb` and `--no-color` was not given. `--no-color` also sets `NO_COLOR` in the
environment, so whatever else renders for this process (and any engram it starts) leaves colour
off too. No dependency: six escape codes."""

from __future__ import annotations

import os
import re
import sys
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


# What a terminal would obey in text engram prints from elsewhere (a transcript, a teammate's pulled
# session, a file's lines, a note): escape sequences other than colour (a window title, the
# clipboard by OSC 52, clearing the screen, moving the cursor), the other C0 and C1 controls, and a
# carriage return not ending a line (which writes over what came before it on the line).
_OBEYED = re.compile("\x1b(?!\\[[0-9;]*m)|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\x80-\x9f]|\r(?!\n)")


#: A colour (SGR) sequence, or a control a terminal would obey.
_SGR_OR_OBEYED = re.compile("(\x1b\\[([0-9;]*)m)|" + _OBEYED.pattern)
#: SGR 8, conceal: the text after it is invisible on the terminal (and copied blank), so a transcript
#: could hide part of a line it prints; written out like any other sequence engram does not pass on.
_CONCEAL = 8
#: The colour parameters followed by a colour's own numbers (38;5;N, 38;2;R;G;B): N is not an SGR.
_EXTENDED = {38, 48, 58}


def hides_text(params: str) -> bool:
    """Whether the SGR parameters `params` ("1;31", "8", "38;5;8") turn concealment on."""
    numbers = [int(p) if p else 0 for p in params.split(";")]
    i = 0
    while i < len(numbers):
        if numbers[i] in _EXTENDED and i + 1 < len(numbers):
            i += {5: 3, 2: 5}.get(numbers[i + 1], 1)
            continue
        if numbers[i] == _CONCEAL:
            return True
        i += 1
    return False


def _shown(match: re.Match[str]) -> str:
    c = match.group()
    if match.group(1) is not None:  # a colour: passed on, unless it conceals what follows
        return "^[" + c[1:] if hides_text(match.group(2)) else c
    return f"^{chr(ord(c) ^ 0x40)}" if ord(c) < 0x80 else f"\\x{ord(c):02x}"


def shown(text: str) -> str:
    """`text` with the controls a terminal would obey written out (`^[`, `^G`, `\\x9b`), and a
    colour sequence that conceals text (SGR 8); colour kept."""
    return _SGR_OR_OBEYED.sub(_shown, text)


_COLOUR_OR_LINE_END = re.compile("\x1b\\[([0-9;]*)m|\r?\n")
RESET = "\x1b[0m"


def colour_closed(text: str) -> str:
    """`text` (through `shown`: its only escapes are colours) with a colour still on at the end of
    a line, or of the text, ended there. Engram closes its own colours where it opens them; one a
    transcript opens and never closes (a build's red error cut short, black on black) tinted every
    line after it, and the shell's prompt once engram had exited."""
    if "\x1b[" not in text:
        return text
    out, at, on = [], 0, False
    for m in _COLOUR_OR_LINE_END.finditer(text):
        if m.group(1) is not None:
            on = m.group(1) not in ("", "0")
        elif on:
            out += [text[at:m.start()], RESET]
            at, on = m.start(), False
    out.append(text[at:])
    if on:
        out.append(RESET)
    return "".join(out)


class TerminalGuard:
    """A terminal's text stream whose writes go through `shown` and `colour_closed`: what engram
    prints for people quotes transcripts and files it did not write, and a terminal obeyed their
    escape sequences (`engram show` of a pulled session could set the window title or the
    clipboard) and kept the colours they left on. A colour never outlasts its line or its write."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(colour_closed(shown(text)))
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def guard_terminals() -> None:
    """Put `TerminalGuard` on stdout and stderr where they are terminals (a pipe or a file gets the
    text as it is: data for a program)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty and not isinstance(stream, TerminalGuard):
            setattr(sys, name, TerminalGuard(stream))

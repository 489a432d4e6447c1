"""Counts in sentences: `1 session`, `2 sessions`, never `session(s)` or `1 sessions`; and the
few states every surface names the same way (an edited anchor's share retained); and text made
whole (`whole_text`: no lone surrogate left to fail an encoder).

A module of its own at the bottom of the layers so that every message, from capture's summary to
the command line's, says a count the same way."""

from __future__ import annotations

IRREGULAR = {"is": "are", "was": "were", "has": "have", "does": "do", "this": "these", "that": "those",
             "its": "their", "it": "they"}


def plural(n: int, one: str, many: str | None = None) -> str:
    """`n` and the noun `one` in the number `n` asks for: "1 tape", "3 tapes", "0 tapes";
    `many` for a plural that is not `one` + "s" ("1 match", "2 matches")."""
    return f"{n} {one if n == 1 else many or _plural_of(one)}"


def agree(n: int, one: str, many: str | None = None) -> str:
    """The word `one` (a verb or pronoun) agreeing with a count of `n`, without the number:
    f"{plural(n, 'tape')} {agree(n, 'is')} older" gives "1 tape is older", "2 tapes are older"."""
    return one if n == 1 else many or IRREGULAR.get(one) or _plural_of(one)


def _plural_of(word: str) -> str:
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def anchor_state(state: str, retained: float) -> str:
    """A memory anchor's state as people read it, in the memory commands and explain's notes:
    `edited` says how much of the code is retained ("edited, 80% retained")."""
    return f"edited, {retained:.0%} retained" if state == "edited" else state


def line_range(a: int, b: int) -> str:
    """`line 7` or `lines 3-9`, as a person writes them (`lines 194-194` read as a slip)."""
    return f"line {a}" if a == b else f"lines {a}-{b}"


def whole_text(value: object) -> object:
    """`value` (what `json.loads` returns: dicts, lists, strings, numbers) with each lone surrogate
    in its strings replaced with U+FFFD. JSON may escape half a character (`"\\ud83d"`: Claude
    Code cuts strings by UTF-16 units; a payload may carry anything); such a string cannot be
    encoded as UTF-8, so a path of it names no file and a tape cannot hold it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return value
    if isinstance(value, list):
        return [whole_text(v) for v in value]
    if isinstance(value, dict):
        return {whole_text(k): whole_text(v) for k, v in value.items()}
    return value

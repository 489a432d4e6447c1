"""Value types for command-line options: a bad number is refused by argparse with a one-line
message naming the option, before any work, instead of being used as given (a negative
`--before` shifted a transcript window past the event it was centred on)."""

from __future__ import annotations

import argparse
from typing import Callable

from engram.store.config import LARGEST


def count(text: str) -> int:
    """An integer ≥ 0: events before or after, an offset."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 0 or more")
    return value


def positive(text: str) -> int:
    """An integer ≥ 1: a limit, a number of sessions."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 1 or more")
    return value


def within(low: int, high: int) -> Callable[[str], int]:
    """An integer from `low` to `high`: a depth the code behind it refuses past its bound (checked
    here, the refusal is argparse's usage error, status 2, like every other bad option value)."""

    def parse(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: must be from {low} to {high}")
        return value

    return parse


def share(text: str) -> float:
    """A number from 0 to 1: a confidence."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be between 0 and 1")
    return value


def path_map(text: str) -> tuple[str, str]:
    """`FROM=TO` of `ingest --map`: the path prefix sessions recorded, and this repository's."""
    from engram.cli.running_server import path_map as pair_of  # (the rule the quick path applies too)

    pair = pair_of(text)
    if pair is None and "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r}: expected FROM=TO")
    if pair is None:
        raise argparse.ArgumentTypeError(f"{text!r}: FROM is empty; give the path prefix the sessions recorded")
    return pair


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
    if value > LARGEST:
        raise argparse.ArgumentTypeError(f"{text!r}: too large (at most {LARGEST:,})")
    return value

"""What every command takes from the global options (`-C DIR`): the store it works on."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engram.store.repo import Store


def store_of(args: argparse.Namespace) -> Store:
    """The store of the repository the command runs in (`-C DIR`: as if started there)."""
    from engram.store.repo import Store  # noqa: PLC0415 - lazy: `engram --help` must be instant

    return Store.discover(Path(args.repo) if getattr(args, "repo", None) else None)

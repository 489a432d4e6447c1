"""Reading a span of the working tree safely: inside the repository, inside the file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engram.errors import BadInput


@dataclass(frozen=True)
class Span:
    file: str  # repository-relative, POSIX
    start: int  # 1-based inclusive
    end: int
    text: str


def parse_span(arg: str) -> tuple[str, int, int]:
    """`FILE:START-END` (or `FILE:LINE`) → parts; a usage error otherwise."""
    path, sep, rng = arg.rpartition(":")
    if not sep or not path:
        raise BadInput(f"{arg!r}: expected FILE:START-END, e.g. src/app.py:10-24")
    a, dash, b = rng.partition("-")
    try:
        start = int(a)
        end = int(b) if dash else start
    except ValueError as exc:
        raise BadInput(f"{arg!r}: lines must be numbers, e.g. src/app.py:10-24") from exc
    return path, start, end


def repo_relative(root: Path, path: str, cwd: Path | None = None) -> str:
    """The repository-relative form of `path`; refuses anything that resolves outside."""
    p = Path(path)
    if not p.is_absolute():
        p = (cwd or Path.cwd()) / p
    real = Path(os.path.realpath(p))
    root_real = Path(os.path.realpath(root))
    try:
        rel = real.relative_to(root_real)
    except ValueError as exc:
        raise BadInput(f"{path}: outside the repository {root}") from exc
    return rel.as_posix()


def read_span(root: Path, path: str, start: int, end: int, cwd: Path | None = None) -> Span:
    rel = repo_relative(root, path, cwd)
    full = root / rel
    if not full.is_file():
        raise BadInput(f"{path}: no such file in the working tree")
    text = full.read_bytes().decode("utf-8", "replace")
    lines = text.splitlines()
    if start < 1 or end < start:
        raise BadInput(f"{path}:{start}-{end}: lines are 1-based and START must not exceed END")
    if end > len(lines):
        raise BadInput(f"{path}:{start}-{end}: past the end of the file ({len(lines)} lines)")
    return Span(rel, start, end, "\n".join(lines[start - 1:end]) + "\n")


def text_span(text: str, name: str = "-") -> Span:
    n = max(1, len(text.splitlines()))
    return Span(name, 1, n, text if text.endswith("\n") else text + "\n")
